"""manage.py throttling_replay: what a policy, or a draft of one, would have done to an action's history."""

import json
import re
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from ...common.words import describe_window, duration_in_words
from ...replayer.replays import MOST_DAYS, last_days
from ...replayer.whatif import what_if
from ...replayer.windows import rate_text


def _moment(text, *, end=False):
    """A --since/--until value: a date (its midnight in the site's time zone; for `end`, the next
    midnight, so the day is included) or a date and time."""
    text = text.strip()
    day = parse_date(text) if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) else None
    if day is not None:
        parsed = datetime.combine(day + timedelta(days=1) if end else day, datetime.min.time())
    else:
        try:
            parsed = parse_datetime(text)
        except ValueError:
            parsed = None
        if parsed is None:
            raise CommandError(f"{text!r} is not a date (2026-01-31) or a date and time (2026-01-31 18:00).")
    if timezone.is_naive(parsed) and timezone.is_aware(timezone.now()):
        parsed = timezone.make_aware(parsed)
    return parsed


def _limits(replay):
    algorithm = "sliding log" if replay.algorithm == "sliding_log" else "token bucket"
    return f"{', '.join(describe_window(p, m) for p, m in replay.windows)} ({algorithm})"


def _share(part, whole):
    return f" ({100 * part / whole:.1f} %)" if whole else ""


class Command(BaseCommand):
    help = (
        "Replay an action's history (THROTTLING_HISTORY) under its policy, or under the draft limits "
        "given with --rate and --algorithm, and print what they would have refused; --suggest adds the "
        "limits the history suggests."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", help="the action whose history is replayed, e.g. reply")
        parser.add_argument(
            "--rate",
            action="append",
            dest="rates",
            metavar="RATE",
            help='a window of the draft, as a rate such as "3/min" (repeat for several; the first is the main one)',
        )
        parser.add_argument("--algorithm", choices=["sliding_log", "token_bucket"], help="the draft's algorithm")
        when = parser.add_mutually_exclusive_group()
        when.add_argument(
            "--days",
            type=int,
            default=None,
            help="the last N days: today (or the day of --until) and the N - 1 days before it, from midnight "
            "in the site's time zone, as the admin reads them (default 30)",
        )
        when.add_argument("--since", help="from this date or date and time on (in the site's time zone)")
        parser.add_argument("--until", help="up to this date (the whole day) or date and time; default now")
        parser.add_argument("--suggest", action="store_true", help="also suggest limits from the history")
        parser.add_argument(
            "--members",
            type=float,
            default=0.01,
            help="the share of members a suggested window may refuse (default 0.01, one in a hundred)",
        )
        parser.add_argument(
            "--hold-until-approved",
            type=int,
            metavar="N",
            help="the draft holds each member's actions for review until N were approved (see Guide › Held for review)",
        )
        parser.add_argument("--json", action="store_true", help="print the figures as JSON")

    def handle(self, *args, action, rates, algorithm, days, since, until, suggest, members, **options):
        if days is not None and not 1 <= days <= MOST_DAYS:
            raise CommandError(
                f"--days must be at least 1 and at most {MOST_DAYS:,} (a hundred years of history), not {days:,}."
            )
        now = timezone.now()
        until_at = _moment(until, end=True) if until else now
        if since:
            since_at = _moment(since)
        else:
            try:
                since_at, until_at = last_days(days or 30, until_at)
            except (ValueError, OverflowError):
                raise CommandError(f"--days {days or 30:,} reaches back before the first day a calendar has.")
        if since_at > now:
            raise CommandError(
                f"--since {since_at:%Y-%m-%d %H:%M} is in the future: there is no history to replay yet."
            )
        if since_at >= until_at:
            raise CommandError(
                f"--since {since_at:%Y-%m-%d %H:%M} is not before --until {until_at:%Y-%m-%d %H:%M}: "
                "the period is empty."
            )
        held = (
            {}
            if options.get("hold_until_approved") is None
            else {"hold_until_approved": options["hold_until_approved"]}
        )
        try:
            result = what_if(
                action,
                rates,
                algorithm=algorithm,
                since=since_at,
                until=until_at,
                members=members,
                suggest=suggest,
                **held,
            )
        except (ValueError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from exc
        except DatabaseError as exc:
            raise CommandError(
                f"The history of “{action}” could not be read from the database ({exc}): is the model "
                "THROTTLING_HISTORY names migrated, and its table there?"
            ) from exc
        if options["json"]:
            self.stdout.write(json.dumps(result.as_dict(), indent=2, default=str))
            return
        self._print(result, suggest)

    def _print(self, result, suggest):
        draft, current = result.draft, result.current
        out = self.stdout.write
        out(
            f"{result.action}: {draft.actions:,} actions by {draft.members:,} members, "
            f"{result.since:%Y-%m-%d %H:%M} to {result.until:%Y-%m-%d %H:%M}, from {result.source}."
        )
        columns = [("draft" if current else "policy", draft)] + ([("as it stands", current)] if current else [])
        rows = [
            ("limits", [_limits(r) for _, r in columns]),
            ("actions refused", [f"{r.refused:,}{_share(r.refused, r.actions)}" for _, r in columns]),
            ("members refused", [f"{r.members_refused:,}{_share(r.members_refused, r.members)}" for _, r in columns]),
            ("of them penalised", [f"{r.members_refused_penalised:,}" for _, r in columns]),
        ]
        if any(r.held for _, r in columns):
            rows.append(("would have held", [f"{r.held:,}{_share(r.held, r.actions)}" for _, r in columns]))
        width = max(len(label) for label, _ in rows) + 2
        wide = [max(len(values[i]) for _, values in rows) + 2 for i in range(len(columns))]
        out(" " * width + "".join(name.ljust(w) for (name, _), w in zip(columns, wide)).rstrip())
        for label, values in rows:
            out(label.ljust(width) + "".join(v.ljust(w) for v, w in zip(values, wide)).rstrip())
        if draft.exempt_members:
            out(f"Left out (moderators, exempt overrides): {draft.exempt_members:,} members.")
        users = get_user_model()._default_manager.in_bulk([pk for pk, _, _ in draft.busiest])
        if draft.busiest:
            out("\nBusiest members:")
            for pk, actions, refused in draft.busiest:
                name = users[pk].get_username() if pk in users else str(pk)
                also = f", {current.by_member.get(pk, 0):,} as it stands" if current else ""
                out(f"  {name}: {actions:,} actions, {refused:,} refused{also}")
        if draft.by_day:
            out("\nRefused per day:")
            for day, n in sorted(draft.by_day.items()):
                out(f"  {day.isoformat()}  {n:,}")
        if suggest:
            self._print_suggestion(result)

    def _print_suggestion(self, result):
        out = self.stdout.write
        suggestion = result.suggestion
        if suggestion is None:
            out(f"\n{result.suggestion_error}")
            return
        out(
            f"\nSuggested, each window alone refusing at most {float(100 * suggestion.share):g} % of the "
            f"{suggestion.members:,} members counted: {suggestion.describe()}"
        )
        for period, most in suggestion:
            refused = suggestion.refused.get(period, 0)
            note = " (the algorithm's cap)" if period in suggestion.capped else ""
            out(f"  {describe_window(period, most)}: refuses {refused:,} member{'s' if refused != 1 else ''}{note}")
        if suggestion.penalised:
            out(f"  {suggestion.penalised:,} member(s) penalised in the period counted apart; their busiest:")
            for period, peaks in suggestion.penalised_peaks.items():
                out(f"    in {duration_in_words(timedelta(seconds=period))}: {', '.join(f'{p:,}' for p in peaks)}")
        rates = " ".join(f"--rate {rate_text(p, m)}" for p, m in suggestion)
        out(f"  To replay it: manage.py throttling_replay {result.action} {rates}")
