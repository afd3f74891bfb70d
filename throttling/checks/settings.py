"""System checks of the THROTTLING_ settings: values, declared policies, moderators, metrics."""

from django.core.checks import Error, register
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from ..conf import MAX_LOG_ENTRIES, settings
from ..engine import moderators
from ..engine.policies.declared import problems
from ..metrics import available as metrics_available

_SETTING_RULES = {
    "ENABLED": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "FAIL_OPEN": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "UNKNOWN_ACTION": (lambda v: v in ("allow", "deny"), gettext_noop('"allow" or "deny"')),
    "NUM_PROXIES": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        gettext_noop("a whole number ≥ 0"),
    ),
    "IPV6_PREFIX": (lambda v: isinstance(v, int) and 1 <= v <= 128, gettext_noop("a prefix length from 1 to 128")),
    "SOCKET_TIMEOUT": (lambda v: isinstance(v, (int, float)) and v > 0, gettext_noop("a number of seconds > 0")),
    "SOCKET_CONNECT_TIMEOUT": (
        lambda v: isinstance(v, (int, float)) and v > 0,
        gettext_noop("a number of seconds > 0"),
    ),
    "POLICY_REFRESH": (lambda v: isinstance(v, (int, float)) and v >= 0, gettext_noop("a number of seconds ≥ 0")),
    "POLICY_MAX_AGE": (lambda v: isinstance(v, (int, float)) and v > 0, gettext_noop("a number of seconds > 0")),
    "FAIL_CLOSED_RETRY_AFTER": (lambda v: isinstance(v, int) and v >= 1, gettext_noop("a whole number of seconds ≥ 1")),
    "OFFENCE_WINDOW": (lambda v: isinstance(v, int) and v >= 1, gettext_noop("a whole number of seconds ≥ 1")),
    "OFFENCE_THRESHOLD": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        gettext_noop("a whole number ≥ 0 (0: never escalate)"),
    ),
    "PENALTIES": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "LOCAL_REFUSALS": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "FORGIVENESS_DAYS": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
        gettext_noop("a number of days > 0"),
    ),
    "ESCALATION_TIMEOUT": (lambda v: isinstance(v, int) and v >= 1, gettext_noop("a whole number of seconds ≥ 1")),
    "ESCALATION_RESEND_AFTER": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        gettext_noop("a whole number of seconds ≥ 1"),
    ),
    "CELERY_QUEUE": (lambda v: v is None or (isinstance(v, str) and v), gettext_noop("None or a queue name")),
    "OFFENCE_FLUSH_INTERVAL": (
        lambda v: isinstance(v, (int, float)) and v > 0,
        gettext_noop("a number of seconds > 0"),
    ),
    "OFFENCE_FLUSH_SIZE": (lambda v: isinstance(v, int) and v >= 1, gettext_noop("a whole number ≥ 1")),
    "CONTENT_WAVE_WORDS": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        gettext_noop("a whole number ≥ 1"),
    ),
    "TRUST_CACHE": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
        gettext_noop("a number of seconds ≥ 0"),
    ),
    "HEADERS": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "SITE_HEADERS": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "METRICS": (lambda v: isinstance(v, bool), gettext_noop("True or False")),
    "ALERT_EMAILS": (
        lambda v: v is None or (isinstance(v, (list, tuple)) and all(isinstance(a, str) and "@" in a for a in v)),
        gettext_noop("None or a list of email addresses"),
    ),
    "ALERT_DIGEST": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 1,
        gettext_noop("a number of seconds ≥ 1"),
    ),
    "ALERT_RUNG": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        gettext_noop("None or a ladder level ≥ 1"),
    ),
    "HELD_REJECTED": (lambda v: v in ("hide", "delete"), gettext_noop('"hide" or "delete"')),
    "HELD_ALERT_SIZE": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
        gettext_noop("None or a whole number ≥ 0"),
    ),
    "BLOCK_WIDEST": (
        lambda v: (
            isinstance(v, (list, tuple))
            and len(v) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in v)
            and 0 <= v[0] <= 32
            and 0 <= v[1] <= 128
        ),
        gettext_noop("two prefix lengths (IPv4 from 0 to 32, IPv6 from 0 to 128), e.g. (8, 16)"),
    ),
    "KEY_PREFIX": (
        lambda v: isinstance(v, str) and v and "{" not in v and "}" not in v,
        gettext_noop("a non-empty string without braces"),
    ),
}


@register()
def check_settings(app_configs=None, **kwargs):
    errors = []
    for name, (valid, expected) in _SETTING_RULES.items():
        value = getattr(settings, name)
        if not valid(value):
            errors.append(
                Error(
                    _("THROTTLING_%(name)s is %(value)r; it must be %(expected)s.")
                    % {"name": name, "value": value, "expected": _(expected)},
                    hint=_("See the documentation’s “Settings and checks” page (docs/settings.md)."),
                    id="throttling.E003",
                )
            )
    return errors


@register()
def check_default_policies(app_configs=None, **kwargs):
    """Policies declared in code must parse and pass the models' validation, or migrate could not create them."""
    return [
        Error(
            problem,
            hint=_(
                'Rates are written as in DRF with an optional count of units: "5/10s", "3/min", '
                '"20/day"; the first is the main window. A policy may also be a dict of what it says, with '
                'the admin’s field names: {"rate": "5/m", "windows": ["100/d"], "verb": "replied", '
                '"algorithm": "token_bucket", "mode", "scope", "tiers": [{"group": "trusted", "multiplier": 2}], '
                '"offence_threshold", "same_content": {"max": 1, "period": "10m", "members": 5}}. The sliding log '
                "allows at most %(cap)s per window; use the token bucket for larger limits."
            )
            % {"cap": f"{MAX_LOG_ENTRIES:,}"},
            id="throttling.E006",
        )
        for problem in problems(settings.DEFAULT_POLICIES)
    ]


@register()
def check_moderators(app_configs=None, **kwargs):
    """THROTTLING_MODERATORS must name a permission or a function of the user that can be imported."""
    try:
        moderators.resolve(settings.MODERATORS)
    except (ValueError, ImportError) as exc:
        return [
            Error(
                str(exc),
                hint=_(
                    'Give a permission name such as "forum.moderate" (app label, a dot, the codename), a '
                    "function that takes the user and returns True for moderators, or the dotted path of one; "
                    "None keeps Django staff."
                ),
                id="throttling.E010",
            )
        ]
    return []


@register()
def check_metrics(app_configs=None, **kwargs):
    """THROTTLING_METRICS needs prometheus-client, or nothing is measured."""
    if not settings.METRICS or metrics_available():
        return []
    return [
        Error(
            _("THROTTLING_METRICS is on, but prometheus-client is not installed: no metric is recorded."),
            hint=_('pip install "django-action-throttling[metrics]", or set THROTTLING_METRICS = False.'),
            id="throttling.E012",
        )
    ]
