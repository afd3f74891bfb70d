"""The admin of alerts: what moderators were told, and when it was mailed; read only."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from ...models import Alert
from ..moderation import ModeratedAdmin


@admin.register(Alert)
class AlertAdmin(ModeratedAdmin, admin.ModelAdmin):
    """Every event moderators were told about, newest first: the record of raids and how they went."""

    list_display = ("created_at", "kind", "sentence_display", "mailed_at")
    list_filter = ("kind",)
    date_hierarchy = "created_at"
    fields = ("created_at", "kind", "sentence_display", "mailed_at")
    readonly_fields = fields

    @admin.display(description=_("what happened"))
    def sentence_display(self, obj):
        return obj.sentence

    def has_add_permission(self, request, obj=None):
        return False  # alerts come from events

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
