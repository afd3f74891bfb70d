"""The admin of blocks: ranges and members refused, watched, tightened or loosened; imported in bulk."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.text import Truncator
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ...common.choices import Severity
from ...models import Block
from ...raids.bulk_import import import_blocks
from ..filters import InForceFilter
from ..moderation import ModeratedAdmin
from .forms import BlockForm, BlockImportForm


class BlockStatusFilter(InForceFilter):
    parameter_name = "in_force"
    labels = (_("in force"), _("expired"))


class KindFilter(admin.SimpleListFilter):
    title = _("kind")
    parameter_name = "kind"

    def lookups(self, request, model_admin):
        return [("range", _("address ranges")), ("member", _("members"))]

    def queryset(self, request, queryset):
        if self.value() == "range":
            return queryset.exclude(network="")
        if self.value() == "member":
            return queryset.filter(network="")
        return queryset


@admin.register(Block)
class BlockAdmin(ModeratedAdmin, admin.ModelAdmin):
    """Blocks of address ranges and members; added one by one or imported from pasted lines."""

    form = BlockForm
    list_display = (
        "target",
        "severity_display",
        "actions_display",
        "status",
        "expires_at",
        "reason_short",
        "created_by",
        "first_refused_at",
    )
    list_filter = (BlockStatusFilter, "severity", KindFilter)
    search_fields = ("network", "user__username", "reason", "actions")
    readonly_fields = ("created_by", "created_at", "updated_at", "first_refused_at")
    fieldsets = (
        (
            None,
            {
                "fields": ("network", "user", "actions"),
                "description": _(
                    "A range is matched against each request’s client address (members who sign in from "
                    "it too); the narrowest range that holds an address decides. Refused members are "
                    "never told which range or why."
                ),
            },
        ),
        (_("What happens"), {"fields": ("severity", "multiplier", "expires_at", "reason")}),
        (_("Record"), {"fields": ("created_by", "created_at", "updated_at", "first_refused_at")}),
    )

    def get_fieldsets(self, request, obj=None):
        # The record is written by the save: nothing to show before it.
        return self.fieldsets if obj is not None else self.fieldsets[:2]

    def get_urls(self):
        name = f"{self.opts.app_label}_{self.opts.model_name}_import"
        # Before the default URLs: their "<path:object_id>/" would swallow "import/".
        return [path("import/", self.admin_site.admin_view(self.import_view), name=name), *super().get_urls()]

    def changelist_view(self, request, extra_context=None):
        extra_context = {"can_import": self.has_add_permission(request), **(extra_context or {})}
        return super().changelist_view(request, extra_context)

    @admin.display(description=_("range or member"), ordering="network")
    def target(self, obj):
        return obj.target_display()

    @admin.display(description=_("severity"), ordering="severity")
    def severity_display(self, obj):
        if obj.severity in (Severity.TIGHTEN, Severity.LOOSEN) and obj.multiplier is not None:
            return gettext("%(severity)s × %(m)s") % {"severity": obj.severity, "m": obj.multiplier.normalize()}
        return obj.severity

    @admin.display(description=_("actions"), ordering="actions")
    def actions_display(self, obj):
        return obj.actions.replace(",", ", ") if obj.actions else gettext("all actions")

    @admin.display(description=_("status"))
    def status(self, obj):
        return gettext("in force") if obj.in_force else gettext("expired")

    @admin.display(description=_("reason"))
    def reason_short(self, obj):
        return Truncator(obj.reason).chars(80)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def import_view(self, request):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = BlockImportForm(request.POST if request.method == "POST" else None)
        if form.is_bound and form.is_valid():
            data = form.cleaned_data
            try:
                created = import_blocks(
                    data["lines"],
                    severity=data["severity"],
                    multiplier=data["multiplier"],
                    actions=data["actions"],
                    expires_at=form.expires_at,
                    default_reason=data["default_reason"],
                    by=request.user,
                )
            except ValidationError as exc:
                form.add_error("lines", exc.messages)
            else:
                self.message_user(
                    request,
                    ngettext("Imported %(count)d block.", "Imported %(count)d blocks.", len(created))
                    % {"count": len(created)},
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(
                    reverse(f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_changelist")
                )
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Import blocks"),
            "opts": self.opts,
            "form": form,
            "now": timezone.now(),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/throttling/block/import.html", context)
