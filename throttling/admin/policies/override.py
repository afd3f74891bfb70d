"""The admin of member overrides: granted with a reason, revoked with one, never edited."""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ...models import MemberOverride
from ..forms import SELF_GRANT_MESSAGE, MemberOverrideAddForm, RevokeOverridesForm
from ..moderation import ModeratedAdmin


@admin.register(MemberOverride)
class MemberOverrideAdmin(ModeratedAdmin, admin.ModelAdmin):
    """Exemptions and scaled limits for single members; granted with a reason, revoked with one, never edited."""

    list_display = ("user", "action_display", "what", "status", "expires_at", "created_by", "created_at")
    list_filter = ("exempt", "action")
    search_fields = ("user__username", "user__email", "action", "reason")
    raw_id_fields = ("user",)
    actions = ["revoke_overrides"]
    add_fields = ("user", "action", "exempt", "multiplier", "expires_at", "reason")
    readonly = (
        "user",
        "action",
        "exempt",
        "multiplier",
        "expires_at",
        "reason",
        "created_at",
        "created_by",
        "revoked_at",
        "revoked_by",
        "revoke_reason",
    )

    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else self.readonly

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = MemberOverrideAddForm
        form = super().get_form(request, obj, **kwargs)
        # A class made for this request (modelform_factory builds a new one each
        # time), so the form can tell the moderator from the member.
        form.moderator = request.user
        return form

    def changelist_view(self, request, extra_context=None):
        # Without the permission the action is not offered; a hand-made POST is refused, not ignored.
        revoking = request.method == "POST" and request.POST.get("action") == "revoke_overrides"
        if revoking and not self.has_change_permission(request):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

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
            if obj.user_id == request.user.pk:
                raise PermissionDenied(SELF_GRANT_MESSAGE)  # whatever form came before
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    @admin.action(description=_("Revoke selected overrides"), permissions=["change"])
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
