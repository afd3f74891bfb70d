"""The moderators' admin: action policies, counter resets, penalties (apply, lift, history) and the ladder."""

import ipaddress
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import OuterRef, Subquery
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from . import core, penalties, report
from .conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES, settings
from .exceptions import BackendError
from . import guide
from .forms import (
    ALL_ACTIONS,
    ActionPolicyForm,
    ActionWindowForm,
    ActionWindowFormSet,
    LiftPenaltiesForm,
    RevokeOverridesForm,
    PenaltyAddForm,
    PenaltyStepForm,
    ResetCountersForm,
    duration_in_words,
)
from .identity import identify
from .models import (
    ActionPolicy,
    ActionWindow,
    MemberOverride,
    Penalty,
    PenaltyEvent,
    PenaltyStep,
    PolicyTier,
    active_q,
)


class _AnonymousVisitor:
    """Just what identify() reads of a request: an anonymous visitor at one address.

    Resetting by IP must delete the keys a real request from that address was
    counted under, so the address goes through the same identify() (IPv6 /64
    grouping included) rather than being formatted here.
    """

    def __init__(self, address):
        self.META = {"REMOTE_ADDR": address}
        self.user = AnonymousUser()


def member_to_reset(text):
    """Return (who for core.reset, description for people, whether it is a known username)."""
    User = get_user_model()
    try:
        user = User._default_manager.get_by_natural_key(text)
    except User.DoesNotExist:
        pass
    else:
        return user, gettext("member “%(username)s”") % {"username": user.get_username()}, True
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return text, gettext("identity “%(identity)s”") % {"identity": text}, False
    visitor = _AnonymousVisitor(text)
    address = identify(visitor)[0].removeprefix("ip:")
    return visitor, gettext("anonymous visitors from %(address)s") % {"address": address}, False


# Interpolated when rendered, so it is translated into the moderator's language.
MAIN_LIMIT_HELP = lazy(
    lambda: gettext(
        "At most this many actions per period of this length. With the sliding log (exact: never "
        "more in any period) each allowed action is remembered for the whole period, so a window "
        "is capped at %(cap)s. With the token bucket a member may use the maximum at once and then "
        "one more every period ÷ maximum, in a few bytes whatever the maximum (up to %(bucket)s). "
        "To combine limits, e.g. 1 per 5 seconds and 20 per hour, add extra windows below: a "
        "request must pass all of them."
    )
    % {"cap": f"{MAX_LOG_ENTRIES:,}", "bucket": f"{MAX_BUCKET_SIZE:,}"},
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
class ActionPolicyAdmin(admin.ModelAdmin):
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
        "updated_at",
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

    # The list shows each choice in a word or two; the form explains them in full.
    @admin.display(description=_("algorithm"), ordering="algorithm")
    def algorithm_short(self, obj):
        return gettext("sliding log") if obj.algorithm == "sliding_log" else gettext("token bucket")

    @admin.display(description=_("mode"), ordering="mode")
    def mode_short(self, obj):
        return gettext("shadow") if obj.mode == "shadow" else gettext("enforce")

    @admin.display(description=_("scope"), ordering="scope")
    def scope_short(self, obj):
        return gettext("site-wide") if obj.scope == "site" else gettext("per member")

    @admin.display(description=_("when Redis is unavailable"), ordering="on_backend_failure")
    def failure_short(self, obj):
        return {"open": gettext("allow"), "closed": gettext("refuse")}.get(obj.on_backend_failure, gettext("site setting"))

    @admin.display(description=_("what the algorithm means here"))
    def algorithm_guide(self, obj):
        """Worst case, refill and memory of both algorithms for the saved windows, and a recommendation."""
        from django.template.loader import render_to_string

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

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            "can_reset_counters": self.has_change_permission(request),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        name = f"{self.opts.app_label}_{self.opts.model_name}_reset"
        # Before the default URLs: their "<path:object_id>/" would swallow "reset/".
        return [
            path("reset/", self.admin_site.admin_view(self.reset_view), name=name),
            *super().get_urls(),
        ]

    def reset_url(self):
        return reverse(
            f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_reset",
            current_app=self.admin_site.name,
        )

    @admin.action(description=_("Reset a member’s counters for the selected actions"), permissions=["change"])
    def reset_counters(self, request, queryset):
        query = urlencode([("action", action) for action in queryset.values_list("action", flat=True)])
        return HttpResponseRedirect(f"{self.reset_url()}?{query}")

    def reset_view(self, request):
        if not self.has_change_permission(request):
            raise PermissionDenied
        policies = list(ActionPolicy.objects.prefetch_related("windows"))
        if request.method == "POST":
            form = ResetCountersForm(request.POST, policies=policies)
            if form.is_valid() and self._reset(request, form.cleaned_data):
                return HttpResponseRedirect(request.path)
        else:
            form = ResetCountersForm(
                initial={"member": request.GET.get("member", ""), "action": request.GET.getlist("action")},
                policies=policies,
            )
        adminform = helpers.AdminForm(form, [(None, {"fields": ["member", "action"]})], {})
        context = {
            **self.admin_site.each_context(request),
            "title": _("Reset a member’s counters"),
            "opts": self.opts,
            "has_view_permission": self.has_view_permission(request),
            "form": form,
            "adminform": adminform,
            "errors": helpers.AdminErrorList(form, []),
            "media": self.media + adminform.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/throttling/actionpolicy/reset_counters.html", context)

    def _reset(self, request, data):
        """Reset, log and tell the moderator; False when Redis could not do it."""
        who, member, known_username = member_to_reset(data["member"])
        actions = data["action"]  # None means every action
        try:
            for action in actions or [None]:
                core.reset(who, action)
        except BackendError as exc:
            self.message_user(
                request,
                gettext(
                    "The counters of %(member)s could not be reset because Redis is "
                    "unavailable (%(error)s). Try again when it is back."
                )
                % {"member": member, "error": exc},
                messages.ERROR,
            )
            return False
        if actions is None:
            message = gettext("The counters of %(member)s were reset for all actions.") % {"member": member}
            changed = ActionPolicy.objects.all()
        else:
            message = ngettext(
                "The counters of %(member)s were reset for %(count)d action: %(actions)s.",
                "The counters of %(member)s were reset for %(count)d actions: %(actions)s.",
                len(actions),
            ) % {"member": member, "count": len(actions), "actions": ", ".join(actions)}
            changed = ActionPolicy.objects.filter(action__in=actions)
        LogEntry.objects.log_actions(
            user_id=request.user.pk, queryset=list(changed), action_flag=CHANGE, change_message=message
        )
        self.message_user(request, message, messages.SUCCESS)
        if not known_username and isinstance(who, str):
            self.message_user(
                request,
                gettext("No member has the username “%(name)s”, so it was reset as an identity string.")
                % {"name": who},
                messages.WARNING,
            )
        return True


# --- Penalties ------------------------------------------------------------------

STATUS_LABELS = {
    "active": _("active"),
    "scheduled": _("scheduled"),
    "warning": _("warning"),
    "expired": _("expired"),
    "lifted": _("lifted"),
}

def level_words(penalty, rung_name, rung_duration):
    """ "2. 15 minutes"; the rung's name only when the penalty has the rung's length.

    A moderator's custom-length penalty is recorded at the member's next level,
    and naming that rung ("1. Warning" on a two-hour block) would mislead.
    """
    if rung_name and rung_duration == penalty.ends_at - penalty.starts_at:
        return f"{penalty.level}. {rung_name}"
    if rung_name:
        return gettext("%(level)d (custom length)") % {"level": penalty.level}
    return str(penalty.level)


class ActiveNowFilter(admin.SimpleListFilter):
    title = _("active now")
    parameter_name = "active"

    def lookups(self, request, model_admin):
        return [("yes", _("Yes")), ("no", _("No"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.active()
        if self.value() == "no":
            return queryset.exclude(active_q(timezone.now()))
        return queryset


class EndingSoonFilter(admin.SimpleListFilter):
    title = _("end time")
    parameter_name = "ending"
    spans = {"24h": timedelta(hours=24), "7d": timedelta(days=7)}

    def lookups(self, request, model_admin):
        return [("24h", _("within 24 hours")), ("7d", _("within 7 days"))]

    def queryset(self, request, queryset):
        span = self.spans.get(self.value())
        if span is None:
            return queryset
        now = timezone.now()
        return queryset.active(now).filter(ends_at__lte=now + span)


class LevelFilter(admin.SimpleListFilter):
    title = _("level")
    parameter_name = "level"

    def lookups(self, request, model_admin):
        names = dict(PenaltyStep.objects.values_list("level", "name"))
        levels = Penalty.objects.order_by("level").values_list("level", flat=True).distinct()
        return [
            (str(level), f"{level}. {names[level]}" if level in names else str(level)) for level in levels
        ]

    def queryset(self, request, queryset):
        if self.value() and self.value().isdigit():
            return queryset.filter(level=int(self.value()))
        return queryset


class ScopeFilter(admin.SimpleListFilter):
    title = _("scope")
    parameter_name = "scope"

    def lookups(self, request, model_admin):
        actions = Penalty.objects.order_by("action").values_list("action", flat=True).distinct()
        return [(action or ALL_ACTIONS, action or _("all actions")) for action in actions]

    def queryset(self, request, queryset):
        if self.value() == ALL_ACTIONS:
            return queryset.filter(action="")
        if self.value():
            return queryset.filter(action=self.value())
        return queryset


class OriginFilter(admin.SimpleListFilter):
    title = _("origin")
    parameter_name = "origin"

    def lookups(self, request, model_admin):
        return [("automatic", _("the ladder (automatic)")), ("manual", _("a moderator (manual)"))]

    def queryset(self, request, queryset):
        if self.value() in ("automatic", "manual"):
            return queryset.filter(automatic=self.value() == "automatic")
        return queryset


class LiftedFilter(admin.SimpleListFilter):
    title = _("lifted")
    parameter_name = "lifted"

    def lookups(self, request, model_admin):
        return [("yes", _("Yes")), ("no", _("No"))]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(lifted_at__isnull=self.value() == "no")
        return queryset


class PenaltyEventInline(admin.TabularInline):
    """The penalty's audit trail: shown, never edited (the events are append-only)."""

    model = PenaltyEvent
    fields = ("kind", "at", "by", "details")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name = _("event")
    verbose_name_plural = _("what happened to this penalty")

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("actor")

    @admin.display(description=_("by"))
    def by(self, obj):
        return obj.actor_display

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        # Whoever may see the penalty may see its history, without a separate
        # permission on the events.
        return self.admin_site.get_model_admin(self.parent_model).has_view_or_change_permission(request, obj)


@admin.register(Penalty)
class PenaltyAdmin(admin.ModelAdmin):
    list_display = (
        "member",
        "scope",
        "level_display",
        "status_display",
        "starts_at",
        "ends_at",
        "time_left",
        "origin",
    )
    list_display_links = ("scope", "level_display")
    list_filter = (ActiveNowFilter, EndingSoonFilter, LevelFilter, ScopeFilter, OriginFilter, LiftedFilter)
    list_select_related = ("user",)
    date_hierarchy = "starts_at"
    search_help_text = _("Search by the member’s username or email address.")
    raw_id_fields = ("user",)
    inlines = [PenaltyEventInline]
    actions = ["lift_penalties"]
    add_fieldsets = (
        (
            None,
            {
                "fields": ("user", "action"),
                "description": _(
                    "The penalty starts now, is recorded in the member’s history and counts as a "
                    "strike. It is enforced at once."
                ),
            },
        ),
        (_("How long"), {"fields": ("rung", "duration")}),
        (None, {"fields": ("reason",)}),
    )
    fieldsets = (
        (None, {"fields": ("member_history_link", "scope", "level_display", "status_display", "time_left")}),
        (_("When"), {"fields": ("starts_at", "ends_at", "expired_at")}),
        (_("Why"), {"fields": ("reason_text", "origin")}),
        (_("Lifted"), {"fields": ("lifted_at", "lifted_by", "lift_reason")}),
    )

    def get_queryset(self, request):
        # The rung name of every row in one query, not one per row.
        rungs = PenaltyStep.objects.filter(level=OuterRef("level"))
        return (
            super()
            .get_queryset(request)
            .annotate(
                rung_name=Subquery(rungs.values("name")[:1]),
                rung_duration=Subquery(rungs.values("duration")[:1]),
            )
        )

    def get_search_fields(self, request):
        User = get_user_model()
        fields = [f"user__{User.USERNAME_FIELD}"]
        email = User.get_email_field_name()
        if email != User.USERNAME_FIELD and any(f.name == email for f in User._meta.get_fields()):
            fields.append(f"user__{email}")
        return fields

    # Penalties are changed only through apply_penalty and lift, which audit
    # and mirror to Redis; an edited row would silently disagree with both.

    def get_fieldsets(self, request, obj=None):
        return self.add_fieldsets if obj is None else self.fieldsets

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = PenaltyAddForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else flatten_fieldsets(self.fieldsets)

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request, obj=None):
        return False  # the audit trail: lift a penalty instead

    def has_lift_permission(self, request, obj=None):
        return request.user.has_perm(f"{self.opts.app_label}.lift_penalty")

    # The columns

    @admin.display(description=_("member"), ordering="user")
    def member(self, obj):
        return format_html(
            '<a href="{}" title="{}">{}</a>',
            self.member_url(obj.user_id),
            gettext("Penalty history of %(member)s") % {"member": obj.user},
            obj.user,
        )

    @admin.display(description=_("member"))
    def member_history_link(self, obj):
        return format_html(
            '{} (<a href="{}">{}</a>)', obj.user, self.member_url(obj.user_id), gettext("penalty history")
        )

    @admin.display(description=_("scope"), ordering="action")
    def scope(self, obj):
        return obj.action or gettext("all actions")

    @admin.display(description=_("level"), ordering="level")
    def level_display(self, obj):
        return level_words(obj, getattr(obj, "rung_name", None), getattr(obj, "rung_duration", None))

    @admin.display(description=_("status"))
    def status_display(self, obj):
        return STATUS_LABELS[obj.status]

    @admin.display(description=_("time left"))
    def time_left(self, obj):
        if not obj.is_active:
            return "—"
        return core.wait_in_words((obj.ends_at - timezone.now()).total_seconds())

    @admin.display(description=_("applied by"), ordering="automatic")
    def origin(self, obj):
        return gettext("the ladder (automatic)") if obj.automatic else gettext("a moderator (manual)")

    # URLs

    def get_urls(self):
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        # Before the default URLs: their "<path:object_id>/" would swallow these.
        return [
            *report.urls(self),
            path(
                "member/<str:user_id>/",
                self.admin_site.admin_view(self.member_view),
                name=f"{prefix}_member",
            ),
            path(
                "<path:object_id>/lift/",
                self.admin_site.admin_view(self.lift_view),
                name=f"{prefix}_lift",
            ),
            *super().get_urls(),
        ]

    def _url(self, name, *args):
        return reverse(
            f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_{name}",
            args=args,
            current_app=self.admin_site.name,
        )

    def member_url(self, user_id):
        return self._url("member", user_id)

    # Adding a manual penalty

    def save_model(self, request, obj, form, change):
        if change:  # unreachable: the change form is read-only
            raise PermissionDenied
        data = form.cleaned_data
        penalty = penalties.apply_penalty(
            data["user"],
            level=data["level"],
            duration=data["duration"],
            action=data["action"],
            reason=data["reason"],
            by=request.user,
        )
        # The admin goes on with `obj` (log entry, redirect, message): make it the saved row.
        for field in Penalty._meta.concrete_fields:
            setattr(obj, field.attname, getattr(penalty, field.attname))
        obj._state.adding, obj._state.db = False, penalty._state.db
        if penalty.mirror_error is not None:
            self.message_user(
                request,
                gettext(
                    "The penalty was saved, but Redis could not be updated (%(error)s); it takes "
                    "effect after `manage.py throttling_resync` or when Redis is back."
                )
                % {"error": penalty.mirror_error},
                messages.WARNING,
            )
        user = data["user"]
        if user.is_staff or user.is_superuser:
            self.message_user(
                request,
                gettext(
                    "%(member)s is staff: actions whose policy exempts staff are not restricted for them."
                )
                % {"member": user},
                messages.WARNING,
            )

    # Lifting

    @admin.action(description=_("Lift selected penalties"), permissions=["lift"])
    def lift_penalties(self, request, queryset):
        return self._lift(request, queryset, single=None)

    def changelist_view(self, request, extra_context=None):
        # Without the permission the action is not offered; a hand-made POST is refused, not ignored.
        lifting = request.method == "POST" and request.POST.get("action") == "lift_penalties"
        if lifting and not self.has_lift_permission(request):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

    def lift_view(self, request, object_id):
        if not (self.has_lift_permission(request) and self.has_view_or_change_permission(request)):
            raise PermissionDenied
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        return self._lift(request, Penalty.objects.filter(pk=obj.pk), single=obj)

    def _lift(self, request, queryset, single):
        if not self.has_lift_permission(request):
            raise PermissionDenied
        chosen = list(queryset.select_related("user").order_by("-starts_at", "-pk"))
        to_lift = [p for p in chosen if p.lifted_at is None]
        skipped = len(chosen) - len(to_lift)
        done_url = self._url("change", single.pk) if single else None
        if not to_lift:
            self._skipped_message(request, skipped)
            return HttpResponseRedirect(done_url) if single else None
        form = LiftPenaltiesForm(request.POST if "confirm" in request.POST else None)
        if form.is_bound and form.is_valid():
            self._lift_all(request, to_lift, form.cleaned_data["reason"])
            self._skipped_message(request, skipped)
            return HttpResponseRedirect(done_url) if single else None
        context = {
            **self.admin_site.each_context(request),
            "title": ngettext("Lift a penalty", "Lift %(count)d penalties", len(to_lift)) % {"count": len(to_lift)},
            "opts": self.opts,
            "has_view_permission": self.has_view_permission(request),
            "penalties": [(p, STATUS_LABELS[p.status], self.member_url(p.user_id)) for p in to_lift],
            "skipped": skipped,
            "single": single,
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/throttling/penalty/lift_confirmation.html", context)

    def _lift_all(self, request, to_lift, reason):
        failed = []
        for penalty in to_lift:
            penalties.lift(penalty, by=request.user, reason=reason)
            self.log_change(request, penalty, gettext("Lifted: %(reason)s") % {"reason": reason})
            if penalty.mirror_error is not None:
                failed.append(penalty.mirror_error)
        self.message_user(
            request,
            ngettext("Lifted %(count)d penalty.", "Lifted %(count)d penalties.", len(to_lift))
            % {"count": len(to_lift)},
            messages.SUCCESS,
        )
        if failed:
            self.message_user(
                request,
                ngettext(
                    "%(count)d lift was saved, but Redis could not be updated (%(error)s); it takes "
                    "effect after `manage.py throttling_resync` or when Redis is back.",
                    "%(count)d lifts were saved, but Redis could not be updated (%(error)s); they take "
                    "effect after `manage.py throttling_resync` or when Redis is back.",
                    len(failed),
                )
                % {"count": len(failed), "error": failed[0]},
                messages.WARNING,
            )

    def _skipped_message(self, request, skipped):
        if skipped:
            self.message_user(
                request,
                ngettext(
                    "%(count)d penalty was already lifted and was left as it was.",
                    "%(count)d penalties were already lifted and were left as they were.",
                    skipped,
                )
                % {"count": skipped},
                messages.WARNING,
            )

    # The change page and the member's history

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        extra_context = extra_context or {}
        if obj is not None:
            extra_context.update(
                member_history=self._member_history(obj.user, highlight=obj),
                can_lift=obj.lifted_at is None and self.has_lift_permission(request),
                lift_url=self._url("lift", obj.pk),
                history_url=self.member_url(obj.user_id),
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def member_view(self, request, user_id):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        User = get_user_model()
        try:
            user = User._default_manager.filter(pk=user_id).first()
        except (ValueError, ValidationError):
            user = None
        if user is None:
            raise Http404(gettext("No member with the id “%(id)s”.") % {"id": user_id})
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Penalty history of %(member)s") % {"member": user},
            "opts": self.opts,
            "has_view_permission": self.has_view_permission(request),
            "member_history": self._member_history(user),
            "add_url": None,
        }
        if self.has_add_permission(request):
            context["add_url"] = f"{self._url('add')}?{urlencode({'user': user.pk})}"
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/throttling/penalty/member_history.html", context)

    # A member's page lists this many penalties, newest first.
    history_rows = 200

    def _member_history(self, user, highlight=None):
        now = timezone.now()
        days = settings.FORGIVENESS_DAYS
        horizon = now - timedelta(days=days)
        strike_count, next_rung = penalties.standing(user, now)
        ladder = penalties.current_ladder()
        rungs = {rung.level: rung for rung in ladder}
        current_rung = ladder[min(strike_count, len(ladder)) - 1] if strike_count and ladder else None
        history = Penalty.objects.filter(user=user)
        oldest_counted = Penalty.objects.strikes(user, now).order_by("starts_at").values_list("starts_at", flat=True)
        rows = []
        for p in history.select_related("lifted_by").order_by("-starts_at", "-pk")[: self.history_rows]:
            rung = rungs.get(p.level)
            rows.append(
                {
                    "penalty": p,
                    "url": self._url("change", p.pk),
                    "scope": p.action or gettext("all actions"),
                    "level": level_words(p, rung and rung.name, rung and rung.duration),
                    "status": STATUS_LABELS[p.status],
                    "time_left": self.time_left(p),
                    "counted": p.lifted_at is None and p.starts_at > horizon,
                    "highlight": highlight is not None and p.pk == highlight.pk,
                }
            )
        oldest_counted = oldest_counted.first()
        return {
            "member": user,
            "url": self.member_url(user.pk),
            "rows": rows,
            "total": history.count(),
            "in_force": history.active(now).count(),
            "strike_count": strike_count,
            "current_rung": current_rung and self._rung_words(current_rung),
            "next_rung": next_rung and self._rung_words(next_rung),
            "forgiveness_days": days,
            "next_forgiven": oldest_counted + timedelta(days=days) if oldest_counted else None,
        }

    @staticmethod
    def _rung_words(rung):
        """ "level 2 (15 minutes), on the abused action only": a rung named after its length says it once."""
        length = duration_in_words(rung.duration)
        name = (rung.name or "").strip()
        if not name or name.lower() in length.lower():
            label = length
        elif length.lower() in name.lower():
            label = name
        else:
            label = f"{name}, {length}"
        return gettext("level %(level)d (%(label)s), %(scope)s") % {
            "level": rung.level,
            "label": label,
            "scope": gettext("on all actions") if rung.all_actions else gettext("on the abused action only"),
        }


# --- The penalty ladder ----------------------------------------------------------


@admin.register(PenaltyStep)
class PenaltyStepAdmin(admin.ModelAdmin):
    form = PenaltyStepForm
    list_display = ("level", "name", "duration_words", "all_actions")
    list_display_links = ("level", "name")
    ordering = ("level",)
    fieldsets = ((None, {"fields": ("level", "name", "duration", "all_actions")}),)

    @admin.display(description=_("duration"), ordering="duration")
    def duration_words(self, obj):
        return duration_in_words(obj.duration)

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            "ladder_problems": penalties.ladder_problems(penalties.current_ladder()),
            "forgiveness_days": settings.FORGIVENESS_DAYS,
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context)


@admin.register(MemberOverride)
class MemberOverrideAdmin(admin.ModelAdmin):
    """Exemptions and scaled limits for single members; granted with a reason, revoked with one, never edited."""

    list_display = ("user", "action_display", "what", "status", "expires_at", "created_by", "created_at")
    list_filter = ("exempt", "action")
    search_fields = ("user__username", "user__email", "action", "reason")
    raw_id_fields = ("user",)
    actions = ["revoke_overrides"]
    add_fields = ("user", "action", "exempt", "multiplier", "expires_at", "reason")
    readonly = (
        "user", "action", "exempt", "multiplier", "expires_at", "reason",
        "created_at", "created_by", "revoked_at", "revoked_by", "revoke_reason",
    )

    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else self.readonly

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly

    def has_delete_permission(self, request, obj=None):
        return False  # the record: revoke an override instead

    @admin.display(description=_("action"))
    def action_display(self, obj):
        return obj.action or gettext("all actions")

    @admin.display(description=_("override"))
    def what(self, obj):
        return gettext("exempt") if obj.exempt else gettext("limits × %(m)s") % {"m": obj.multiplier.normalize()}

    @admin.display(description=_("status"))
    def status(self, obj):
        if obj.revoked_at:
            return gettext("revoked")
        if obj.expires_at and obj.expires_at <= timezone.now():
            return gettext("expired")
        return gettext("in force")

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    @admin.action(description=_("Revoke selected overrides"))
    def revoke_overrides(self, request, queryset):
        chosen = [o for o in queryset.select_related("user") if o.revoked_at is None]
        if not chosen:
            self.message_user(request, gettext("The selected overrides were already revoked."), messages.WARNING)
            return None
        form = RevokeOverridesForm(request.POST if "confirm" in request.POST else None)
        if form.is_bound and form.is_valid():
            now = timezone.now()
            for o in chosen:
                o.revoked_at, o.revoked_by, o.revoke_reason = now, request.user, form.cleaned_data["reason"]
                o.save(update_fields=["revoked_at", "revoked_by", "revoke_reason"])
                self.log_change(request, o, gettext("Revoked: %(reason)s") % {"reason": o.revoke_reason})
            self.message_user(
                request,
                ngettext("Revoked %(count)d override.", "Revoked %(count)d overrides.", len(chosen))
                % {"count": len(chosen)},
                messages.SUCCESS,
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": ngettext("Revoke an override", "Revoke %(count)d overrides", len(chosen)) % {"count": len(chosen)},
            "opts": self.opts,
            "overrides": chosen,
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/throttling/memberoverride/revoke_confirmation.html", context)
