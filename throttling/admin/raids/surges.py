"""The admin of surges: started with a reason, ended early with one, never edited or deleted; a policy's trigger."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ...models import Surge, SurgeTrigger
from ...raids.surge_mode import begin, end_surge
from ..filters import InForceFilter
from ..moderation import ModeratedAdmin
from .forms import EndSurgeForm, SurgeForm, SurgeTriggerForm


class SurgeStatusFilter(InForceFilter):
    parameter_name = "on"
    labels = (_("on"), _("ended"))


class StartedByFilter(admin.SimpleListFilter):
    title = _("started by")
    parameter_name = "by"

    def lookups(self, request, model_admin):
        return [("moderator", _("a moderator")), ("trigger", _("a trigger"))]

    def queryset(self, request, queryset):
        if self.value() == "moderator":
            return queryset.filter(started_by__isnull=False)
        if self.value() == "trigger":
            return queryset.filter(trigger__isnull=False)
        return queryset


@admin.register(SurgeTrigger)
class SurgeTriggerAdmin(ModeratedAdmin, admin.ModelAdmin):
    """A policy's own surge: started when the whole site does its action too often."""

    form = SurgeTriggerForm
    list_display = ("policy", "threshold", "period", "multiplier", "minutes", "this_action_only", "enabled")
    list_editable = ("enabled",)
    list_select_related = ("policy",)
    fieldsets = (
        (
            None,
            {
                "fields": ("policy", "threshold", "period", "multiplier", "minutes", "this_action_only", "enabled"),
                "description": _(
                    "Each process counts the policy’s action as it decides it and adds its count up in Redis "
                    "once a second: when the site-wide count within the period passes the number, surge "
                    "mode starts for the minutes given, once, and moderators are told. The count is an "
                    "estimate that may run a second late."
                ),
            },
        ),
    )


@admin.register(Surge)
class SurgeAdmin(ModeratedAdmin, admin.ModelAdmin):
    """Surge mode: every limit tightened for a while, started with a reason, ended early with one."""

    form = SurgeForm
    list_display = ("what", "status", "started_at", "finished", "started_by_display", "reason")
    list_filter = (SurgeStatusFilter, StartedByFilter)
    search_fields = ("reason", "actions", "end_reason")
    actions = ["end_surges"]
    add_fieldsets = (
        (
            None,
            {
                "fields": ("multiplier", "lasts", "actions", "reason"),
                "description": _(
                    "Every limit (or those of the actions named) is multiplied at once in every process, "
                    "members’ and visitors’ alike, until the surge ends; a banner says so on every page "
                    "of this admin meanwhile. Example: 0.5 for 2 hours, “raid on the announcements board”."
                ),
            },
        ),
    )
    readonly = (
        "multiplier",
        "actions",
        "reason",
        "started_at",
        "ends_at",
        "started_by",
        "trigger",
        "ended_at",
        "ended_by",
        "end_reason",
    )

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return self.add_fieldsets
        return ((None, {"fields": self.readonly}),)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly

    def get_urls(self):
        name = f"{self.opts.app_label}_{self.opts.model_name}_end"
        # Before the default URLs: their "<path:object_id>/" would swallow "end/".
        return [path("end/", self.admin_site.admin_view(self.end_view), name=name), *super().get_urls()]

    def has_delete_permission(self, request, obj=None):
        return False  # the record: end a surge instead

    def add_view(self, request, form_url="", extra_context=None):
        # Started, then kept as a record: nothing to continue editing.
        extra_context = {"show_save_and_continue": False, "show_save_and_add_another": False, **(extra_context or {})}
        return super().add_view(request, form_url, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # A surge is never edited: its page is the record, and ends from the list or the banner.
        extra_context = {
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description=_("surge"))
    def what(self, obj):
        return str(obj)

    @admin.display(description=_("status"))
    def status(self, obj):
        if obj.in_force:
            return gettext("on")
        return gettext("ended early") if obj.ended_at else gettext("ended")

    @admin.display(description=_("ends or ended"), ordering="ends_at")
    def finished(self, obj):
        return obj.finished_at

    @admin.display(description=_("started by"), ordering="started_by")
    def started_by_display(self, obj):
        if obj.started_by is not None:
            return obj.started_by
        if obj.trigger_id is not None:
            return gettext("its trigger (%(trigger)s)") % {"trigger": obj.trigger}
        return gettext("code")

    def save_model(self, request, obj, form, change):
        if change:
            raise PermissionDenied  # the record: never edited
        obj.started_by = request.user
        begin(obj)

    def end_view(self, request):
        """End every surge in force now, with a reason (the banner's button)."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        in_force = list(Surge.objects.in_force())
        return self._end(request, in_force, request.POST if request.method == "POST" else None)

    @admin.action(description=_("End selected surges now"), permissions=["change"])
    def end_surges(self, request, queryset):
        chosen = [s for s in queryset if s.in_force]
        if not chosen:
            self.message_user(request, gettext("The selected surges have already ended."), messages.WARNING)
            return None
        return self._end(request, chosen, request.POST if "confirm" in request.POST else None, action=True)

    def changelist_view(self, request, extra_context=None):
        # Without the permission the action is not offered; a hand-made POST is refused, not ignored.
        ending = request.method == "POST" and request.POST.get("action") == "end_surges"
        if ending and not self.has_change_permission(request):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

    def _end(self, request, surges, data, action=False):
        changelist = reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_changelist")
        if not surges:
            self.message_user(request, gettext("No surge is on."), messages.WARNING)
            return HttpResponseRedirect(changelist)
        form = EndSurgeForm(data)
        if form.is_bound and form.is_valid():
            ended = []
            for surge in surges:
                ended += end_surge(surge, by=request.user, reason=form.cleaned_data["reason"], now=timezone.now())
            for surge in ended:
                self.log_change(request, surge, gettext("Ended early: %(reason)s") % {"reason": surge.end_reason})
            self.message_user(
                request,
                ngettext(
                    "Ended %(count)d surge: the limits are back in every process within a second.",
                    "Ended %(count)d surges: the limits are back in every process within a second.",
                    len(ended),
                )
                % {"count": len(ended)},
                messages.SUCCESS,
            )
            return None if action else HttpResponseRedirect(changelist)
        context = {
            **self.admin_site.each_context(request),
            "title": ngettext("End the surge now", "End %(count)d surges now", len(surges)) % {"count": len(surges)},
            "opts": self.opts,
            "surges": surges,
            "form": form,
            "from_action": action,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/throttling/surge/end_confirmation.html", context)
