"""Lifting penalties from the admin: the action, the button on a penalty, and the confirmation page."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ...models import Penalty
from ...penalties import lift
from ..forms import LiftPenaltiesForm
from .labels import STATUS_LABELS


class LiftMixin:
    """Needs the lift permission (throttling.lift_penalty), separate from changing penalties."""

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
            lift(penalty, by=request.user, reason=reason)
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
