"""Where each action's history lives: THROTTLING_HISTORY, or a declared policy's "history", read and checked.

    THROTTLING_HISTORY = {"reply": {"model": "forum.Comment", "member": "user", "time": "created",
                                    "target": "topic", "filter": {"is_removed": False}}}

The rows of `model` (narrowed by `filter`) are the action's history: `member` is a foreign key to
the user model, `time` a DateTimeField, and `target`, when given, the field a policy counts per
(a thread, a recipient), as a view passes it to the engine.
"""

from dataclasses import dataclass, field

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist, FieldError, ImproperlyConfigured, ValidationError
from django.db import models
from django.utils.translation import gettext

from ..conf import settings

SETTING = "THROTTLING_HISTORY"
KEYS = ("model", "member", "time", "target", "filter")
REQUIRED = ("model", "member", "time")
EXAMPLE = '{"reply": {"model": "forum.Comment", "member": "user", "time": "created"}}'


class HistoryNotConfigured(ImproperlyConfigured):
    """The action has no history source: nothing to replay."""


@dataclass(frozen=True)
class HistorySource:
    action: str
    model: type
    member: str  # field names, as configured
    time: str
    target: str | None = None
    filter: dict = field(default_factory=dict)

    @property
    def label(self):
        return self.model._meta.label

    def column(self, name):
        """What values_list() reads for a field: a foreign key's id (no join), else the field."""
        return self.model._meta.get_field(name).attname

    def queryset(self, since=None, until=None):
        rows = self.model._default_manager.filter(**self.filter)
        if since is not None:
            rows = rows.filter(**{f"{self.time}__gte": since})
        if until is not None:
            rows = rows.filter(**{f"{self.time}__lt": until})
        return rows

    def rows(self, since=None, until=None, *, by_time=False):
        """(member id, time, target) of every action in [since, until), ordered by member then time
        (or by target then time, for a site-wide count, when `by_time`), streamed from the database."""
        member, when = self.column(self.member), self.time
        target = self.column(self.target) if self.target else None
        if by_time:
            order = (target, when) if target else (when,)
        else:
            order = (member, when)
        fields = (member, when, target) if target else (member, when)
        return self.queryset(since, until).order_by(*order).values_list(*fields)

    def count(self, since=None, until=None):
        return self.queryset(since, until).count()


def configured():
    """{action: raw source} of THROTTLING_HISTORY and of declared policies that carry a "history"
    (the setting wins for an action both name)."""
    found = {}
    declared = settings.DEFAULT_POLICIES
    if isinstance(declared, dict):
        for action, value in declared.items():
            if isinstance(value, dict) and "history" in value:
                found[action] = value["history"]
    history = settings.HISTORY
    if isinstance(history, dict):
        found.update(history)
    return found


def source_for(action):
    """The HistorySource of `action`; HistoryNotConfigured when it has none, ImproperlyConfigured
    when its source cannot be read (system check throttling.E013 says the same)."""
    raw = configured().get(action)
    if raw is None:
        raise HistoryNotConfigured(
            gettext(
                "No history is configured for the action “%(action)s”: name the model whose rows are that "
                "action in THROTTLING_HISTORY, e.g. %(example)s."
            )
            % {"action": action, "example": EXAMPLE}
        )
    source, found = read(action, raw)
    if found:
        raise ImproperlyConfigured(" ".join(found))
    return source


def read(action, raw):
    """(HistorySource or None, [problems in words]) of one action's raw source. Needs no database."""
    where = gettext("The history of “%(action)s”") % {"action": action}
    if not isinstance(raw, dict):
        return None, [
            gettext("%(where)s is %(value)r; it must be a dict such as %(example)s.")
            % {"where": where, "value": raw, "example": EXAMPLE}
        ]
    found = [
        gettext("%(where)s says %(key)r, which a history source does not have; use %(keys)s.")
        % {"where": where, "key": key, "keys": ", ".join(KEYS)}
        for key in raw
        if key not in KEYS
    ]
    found += [gettext("%(where)s has no %(key)r.") % {"where": where, "key": key} for key in REQUIRED if key not in raw]
    if found:
        return None, found
    try:
        model = apps.get_model(raw["model"])
    except (LookupError, ValueError, TypeError):
        return None, [
            gettext("%(where)s names the model %(model)r, which is not installed (give it as “app_label.Model”).")
            % {"where": where, "model": raw["model"]}
        ]
    found += _field_problems(where, model, raw)
    lookups = raw.get("filter") or {}
    if not isinstance(lookups, dict):
        found.append(
            gettext("%(where)s has the filter %(value)r; it must be a dict of lookups such as {“is_removed”: False}.")
            % {"where": where, "value": lookups}
        )
    elif not found:
        try:
            str(model._default_manager.filter(**lookups).query)
        except (FieldError, ValueError, TypeError, ValidationError) as exc:
            found.append(
                gettext("%(where)s has a filter the model refuses: %(error)s") % {"where": where, "error": exc}
            )
    if found:
        return None, found
    source = HistorySource(action, model, raw["member"], raw["time"], raw.get("target") or None, dict(lookups))
    return source, []


def _field_problems(where, model, raw):
    label = model._meta.label
    found = []

    def get(key):
        name = raw.get(key)
        try:
            value = model._meta.get_field(name) if isinstance(name, str) else None
        except FieldDoesNotExist:
            value = None
        if value is None or not value.concrete:
            found.append(
                gettext("%(where)s: %(model)s has no field %(name)r (its %(key)s).")
                % {"where": where, "model": label, "name": name, "key": key}
            )
            return None
        return value

    member, when = get("member"), get("time")
    if raw.get("target"):
        get("target")
    user = get_user_model()
    if member is not None and not ((member.many_to_one or member.one_to_one) and member.related_model is user):
        found.append(
            gettext("%(where)s: %(model)s.%(name)s is not a foreign key to the user model.")
            % {"where": where, "model": label, "name": member.name}
        )
    if when is not None and not isinstance(when, models.DateTimeField):
        found.append(
            gettext("%(where)s: %(model)s.%(name)s is not a DateTimeField; the replay needs the time of each action.")
            % {"where": where, "model": label, "name": when.name}
        )
    return found
