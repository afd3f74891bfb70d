"""The admin of the penalty ladder's rungs."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from ...common.words import duration_in_words
from ...conf import settings
from ...models import PenaltyStep
from ...penalties import current_ladder, ladder_problems
from ..forms import PenaltyStepForm


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
            "ladder_problems": ladder_problems(current_ladder()),
            "forgiveness_days": settings.FORGIVENESS_DAYS,
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context)
