"""The review queue: Throttling › Held for review, pending first, approved or rejected in bulk."""

from django.contrib import admin
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import Case, IntegerField, Value, When
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ..common.choices import HeldStatus
from ..held import approve, reject
from ..models import Held
from .forms import RejectHeldForm
from .moderation import ModeratedAdmin

REJECT_ACTION = "reject_held"
# How much of the excerpt a row of the queue shows.
EXCERPT_ROW = 90


@admin.register(Held)
class HeldAdmin(ModeratedAdmin, admin.ModelAdmin):
    """Deciding takes the change permission on held posts; seeing the queue, the view permission."""

    # The action is a filter, and on the post's own page: the row keeps room for what a moderator reads.
    list_display = ("excerpt_short", "status", "reason", "member", "held_object", "created_at")
    list_display_links = ("excerpt_short",)
    list_filter = ("status", "reason", "action")
    search_fields = ("excerpt", "action")
    list_select_related = ("user", "content_type")
    actions = ("approve_held", REJECT_ACTION)
    fields = (
        "status",
        "reason",
        "action",
        "member",
        "held_object",
        "excerpt",
        "created_at",
        "decided_by",
        "decided_at",
        "note",
    )
    readonly_fields = fields

    def get_ordering(self, request):
        # Pending first, then the newest: what waits for a moderator is what they came for.
        first = Case(When(status=HeldStatus.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField())
        return (first.asc(), "-created_at", "-pk")

    def has_add_permission(self, request, obj=None):
        return False  # held posts come from decisions

    def has_delete_permission(self, request, obj=None):
        return False  # decided, never deleted: the record of what moderators judged

    # The columns

    @admin.display(description=_("excerpt"), ordering="excerpt")
    def excerpt_short(self, obj):
        """The start of what the member sent, short enough for a row (the whole excerpt on hover)."""
        text = obj.excerpt or "—"
        short = text if len(text) <= EXCERPT_ROW else text[: EXCERPT_ROW - 1].rstrip() + "…"
        return format_html('<span title="{}">{}</span>', text, short)

    @admin.display(description=_("member"), ordering="user")
    def member(self, obj):
        if obj.user_id is None:
            return gettext("a visitor (%(identity)s)") % {"identity": obj.identity}
        try:
            url = reverse(f"{self.admin_site.name}:throttling_penalty_member", args=[obj.user_id])
        except NoReverseMatch:
            return str(obj.user)
        return format_html(
            '<a href="{}" title="{}">{}</a>',
            url,
            gettext("Penalty history of %(member)s") % {"member": obj.user},
            obj.user,
        )

    @admin.display(description=_("held post"))
    def held_object(self, obj):
        target = obj.content_object
        if target is None:
            return gettext("(deleted)") if obj.object_id else "—"
        model = type(target)
        if self.admin_site.is_registered(model):
            try:
                url = reverse(
                    f"{self.admin_site.name}:{model._meta.app_label}_{model._meta.model_name}_change",
                    args=[target.pk],
                )
            except NoReverseMatch:
                url = None
            if url:
                return format_html('<a href="{}">{}</a>', url, target)
        return str(target)

    # Deciding

    @admin.action(description=_("Approve selected posts (show them)"), permissions=["change"])
    def approve_held(self, request, queryset):
        done = sum(approve(held, by=request.user) for held in queryset.filter(status=HeldStatus.PENDING))
        for held in queryset.filter(status=HeldStatus.APPROVED, decided_by=request.user):
            self.log_change(request, held, gettext("Approved"))
        self._decided_message(
            request,
            ngettext("Approved %(count)d post: it is shown.", "Approved %(count)d posts: they are shown.", done),
            done,
            queryset.count() - done,
        )

    @admin.action(description=_("Reject selected posts (keep them hidden)…"), permissions=["change"])
    def reject_held(self, request, queryset):
        if not self.has_change_permission(request):
            raise PermissionDenied
        pending = list(queryset.filter(status=HeldStatus.PENDING).select_related("user"))
        skipped = queryset.count() - len(pending)
        if not pending:
            self._decided_message(request, "", 0, skipped)
            return None
        form = RejectHeldForm(request.POST if "confirm" in request.POST else None)
        if form.is_bound and form.is_valid():
            reason = form.cleaned_data["reason"]
            done = 0
            for held in pending:
                if reject(held, by=request.user, reason=reason):
                    done += 1
                    self.log_change(request, held, gettext("Rejected: %(reason)s") % {"reason": reason})
            self._decided_message(
                request,
                ngettext(
                    "Rejected %(count)d post: it stays hidden, and counts as a refused attempt.",
                    "Rejected %(count)d posts: they stay hidden, and count as refused attempts.",
                    done,
                ),
                done,
                skipped,
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": ngettext("Reject a held post", "Reject %(count)d held posts", len(pending))
            % {"count": len(pending)},
            "opts": self.opts,
            "has_view_permission": self.has_view_permission(request),
            "held": pending,
            "skipped": skipped,
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "action_name": REJECT_ACTION,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/throttling/held/reject_confirmation.html", context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        context = {
            "can_decide": obj is not None and obj.is_pending and self.has_change_permission(request, obj),
            "changelist_url": reverse(f"{self.admin_site.name}:throttling_held_changelist"),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            # Nothing here is edited: a held post is decided, never changed.
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, context)

    def changelist_view(self, request, extra_context=None):
        # Without the change permission the actions are not offered; a hand-made POST is refused, not ignored.
        deciding = request.method == "POST" and request.POST.get("action") in self.actions
        if deciding and not self.has_change_permission(request):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

    def _decided_message(self, request, text, done, skipped):
        if done:
            self.message_user(request, text % {"count": done})
        if skipped:
            self.message_user(
                request,
                ngettext(
                    "%(count)d of the selected posts was decided already and is left as it is.",
                    "%(count)d of the selected posts were decided already and are left as they are.",
                    skipped,
                )
                % {"count": skipped},
            )
