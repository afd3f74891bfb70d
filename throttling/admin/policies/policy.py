"""The admin of action policies: windows, trust tiers, and what the algorithm means for them."""

from django.contrib import admin, messages
from django.template.loader import render_to_string
from django.utils.functional import lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ...common.choices import Algorithm, Mode, OnBackendFailure, Scope
from ...common.words import describe_window
from ...conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES
from ...engine.policies.cache import capped_windows, policy_windows
from ...models import ActionPolicy, ActionWindow, PolicyTier
from ..forms import ActionPolicyForm, ActionWindowForm, ActionWindowFormSet
from ..reset import ResetCountersMixin
from ..whatif.views import WhatIfMixin
from . import guide

# Interpolated when rendered, so it is translated into the moderator's language.
MAIN_LIMIT_HELP = lazy(
    lambda: (
        gettext(
            "At most this many actions per period of this length. With the sliding log (exact: never "
            "more in any period) each allowed action is remembered for the whole period, so a window "
            "is capped at %(cap)s. With the token bucket a member may use the maximum at once and then "
            "one more every period ÷ maximum, in a few bytes whatever the maximum (up to %(bucket)s). "
            "To combine limits, e.g. 1 per 5 seconds and 20 per hour, add extra windows below: a "
            "request must pass all of them."
        )
        % {"cap": f"{MAX_LOG_ENTRIES:,}", "bucket": f"{MAX_BUCKET_SIZE:,}"}
    ),
    str,
)()


class ActionWindowInline(admin.TabularInline):
    model = ActionWindow
    form = ActionWindowForm
    formset = ActionWindowFormSet
    extra = 0
    verbose_name = _("extra window")
    verbose_name_plural = _("extra windows (a request must pass every window)")


class PolicyTierInline(admin.TabularInline):
    model = PolicyTier
    extra = 0
    fields = ("position", "group", "new_member_days", "multiplier")
    verbose_name = _("trust tier")
    verbose_name_plural = _(
        "trust tiers (the first that matches a member scales every window’s maximum; "
        "members who match none get the limits above)"
    )


@admin.register(ActionPolicy)
class ActionPolicyAdmin(WhatIfMixin, ResetCountersMixin, admin.ModelAdmin):
    form = ActionPolicyForm
    inlines = [ActionWindowInline, PolicyTierInline]
    list_display = (
        "action",
        "windows_display",
        "algorithm_short",
        "mode_short",
        "scope_short",
        "enabled",
        "exempt_staff",
        "failure_short",
    )
    list_editable = ("enabled",)
    list_filter = ("enabled", "mode", "scope", "algorithm", "exempt_staff", "on_backend_failure")
    search_fields = ("action", "description", "verb")
    readonly_fields = ("updated_at", "algorithm_guide")
    actions = ["reset_counters"]
    fieldsets = (
        (
            None,
            {
                "fields": ("action", "verb", "description"),
                "description": _(
                    "Views name the action they perform; members who do it too often are "
                    "refused with a message that uses the verb."
                ),
            },
        ),
        (
            _("Main limit"),
            {
                "fields": ("period", "max_count", "algorithm", "algorithm_guide"),
                "description": MAIN_LIMIT_HELP,
            },
        ),
        (
            _("Behaviour"),
            {"fields": ("enabled", "mode", "scope", "exempt_staff", "on_backend_failure", "updated_at")},
        ),
        (
            _("Repeated content"),
            {
                "fields": ("same_content_max", "same_content_members", "same_content_period"),
                "description": _(
                    "Spam is mostly the same text: one account posting its link again and again, or a wave "
                    "of accounts posting it at once. Views that pass the post’s text are refused when it "
                    "was posted too often within the period, by the member or by several members; a word "
                    "changed, an emoji or a link’s tracking parameters added still count as the same. "
                    "Refusals count as refused attempts, so repeat offenders get the penalty ladder. "
                    "Only hashes of the text are kept, never the text. Leave all three blank to compare nothing."
                ),
            },
        ),
        (
            _("Held for review"),
            {
                "fields": ("same_content_answer", "hold_until_approved"),
                "description": _(
                    "A held post is saved but hidden, and waits in Throttling › Held for review until a "
                    "moderator approves or rejects it; a rejection counts as a refused attempt. Holding a new "
                    "member’s posts until some were approved lets them prove themselves once."
                ),
            },
        ),
        (
            _("Repeat offenders"),
            {
                "fields": ("offence_threshold", "offence_window"),
                "description": _(
                    "A member who keeps trying after being refused becomes a repeat offender and "
                    "gets the next rung of the penalty ladder. Leave both blank to use the site settings."
                ),
            },
        ),
    )

    @admin.display(description=_("limits"))
    def windows_display(self, obj):
        capped = _capped(obj)
        if capped is None:
            return obj.windows_display()
        return gettext("%(limits)s (decided as %(capped)s)") % {"limits": obj.windows_display(), "capped": capped}

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, admin.utils.unquote(object_id)) if request.method == "GET" else None
        capped = None if obj is None else _capped(obj)
        if capped is not None:
            self.message_user(request, _capped_message(obj, capped), messages.WARNING)
        return super().change_view(request, object_id, form_url, extra_context)

    # The list shows each choice in a word or two; the form explains them in full.
    @admin.display(description=_("algorithm"), ordering="algorithm")
    def algorithm_short(self, obj):
        return gettext("sliding log") if obj.algorithm == Algorithm.SLIDING_LOG else gettext("token bucket")

    @admin.display(description=_("mode"), ordering="mode")
    def mode_short(self, obj):
        return gettext("shadow") if obj.mode == Mode.SHADOW else gettext("enforce")

    @admin.display(description=_("scope"), ordering="scope")
    def scope_short(self, obj):
        return gettext("site-wide") if obj.scope == Scope.SITE else gettext("per member")

    @admin.display(description=_("when Redis is unavailable"), ordering="on_backend_failure")
    def failure_short(self, obj):
        words = {OnBackendFailure.OPEN: gettext("allow"), OnBackendFailure.CLOSED: gettext("refuse")}
        return words.get(obj.on_backend_failure, gettext("site setting"))

    @admin.display(description=_("what the algorithm means here"))
    def algorithm_guide(self, obj):
        """Worst case, refill and memory of both algorithms for the saved windows, and a recommendation."""
        if obj is None or obj.pk is None:
            return gettext(
                "Save the policy to see, for each window, the most either algorithm admits in any "
                "period, how fast a bucket refills and the memory per active member."
            )
        windows = [(obj.period, obj.max_count), *((w.period, w.max_count) for w in obj.windows.all())]
        return render_to_string(
            "admin/throttling/actionpolicy/algorithm_guide.html",
            {"guide": guide.explain(windows, obj.algorithm)},
        )

    def get_queryset(self, request):
        # windows_display reads every policy's windows: one query for all, not one per row.
        return super().get_queryset(request).prefetch_related("windows")


def _capped(policy):
    """The windows a policy is decided with, in words, when a row is above its algorithm's cap; else None."""
    written = policy_windows(policy)
    windows = capped_windows(policy.algorithm, written)
    if windows == written:
        return None
    return ", ".join(describe_window(p, m) for p, m in sorted(windows))


def _capped_message(policy, capped):
    cap = MAX_LOG_ENTRIES if policy.algorithm == Algorithm.SLIDING_LOG else MAX_BUCKET_SIZE
    return gettext(
        "A window of this policy is above its algorithm’s cap of %(cap)s, so it is decided as %(capped)s. "
        "Lower that window’s maximum, or choose the token bucket."
    ) % {"cap": f"{cap:,}", "capped": capped}
