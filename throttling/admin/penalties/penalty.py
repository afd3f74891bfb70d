"""The penalty admin: the list, a penalty's page with its audit trail, and adding one by hand."""

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ...common.words import wait_in_words
from ...engine.moderators import is_moderator
from ...models import Penalty, PenaltyEvent, PenaltyStep
from ...penalties import apply_penalty
from .. import report
from ..filters import ActiveNowFilter, EndingSoonFilter, LevelFilter, LiftedFilter, OriginFilter, ScopeFilter
from ..forms import PenaltyAddForm
from ..moderation import ModeratedAdmin, may
from .labels import STATUS_LABELS, level_words
from .lifting import LiftMixin
from .member import MemberHistoryMixin


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
class PenaltyAdmin(LiftMixin, MemberHistoryMixin, ModeratedAdmin, admin.ModelAdmin):
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
        return may(request.user, "lift_penalty")

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
        return wait_in_words((obj.ends_at - timezone.now()).total_seconds())

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
        penalty = apply_penalty(
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
        if is_moderator(user):
            self.message_user(
                request,
                gettext("%(member)s is a moderator: actions whose policy exempts staff are not restricted for them.")
                % {"member": user},
                messages.WARNING,
            )

    # Lifting

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
