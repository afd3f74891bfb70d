"""System checks of policy rows: windows above their algorithm's cap."""

from django.core.checks import Warning, register
from django.utils.translation import gettext as _

from ..common.words import describe_window
from ..conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES
from ..engine.policies.cache import capped_windows, policy_windows
from ..models import ActionPolicy


@register()
def check_capped_policies(app_configs=None, **kwargs):
    """Window rows above their algorithm's cap (written around the form and save()) are decided capped."""
    try:
        rows = list(policy_rows())
    except Exception:  # no database yet (not migrated, not reachable, not allowed here): nothing to compare
        return []
    warnings = []
    for p in rows:
        written = policy_windows(p)
        windows = capped_windows(p.algorithm, written)
        if windows != written:
            cap = MAX_BUCKET_SIZE if p.algorithm == "token_bucket" else MAX_LOG_ENTRIES
            warnings.append(
                Warning(
                    _(
                        "The policy %(name)r has a window above its algorithm’s cap of %(cap)s; it is decided as %(windows)s."
                    )
                    % {"name": p.action, "cap": f"{cap:,}", "windows": ", ".join(describe_window(*w) for w in windows)},
                    hint=_(
                        "Edit the policy in the admin: lower the window’s maximum, or choose the token bucket, "
                        "which keeps a few bytes per member whatever its maximum."
                    ),
                    obj=p.action,
                    id="throttling.W006",
                )
            )
    return warnings


def policy_rows():
    return ActionPolicy.objects.prefetch_related("windows")
