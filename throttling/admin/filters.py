"""The filters of the admin's lists: the penalty list's, and what is in force among blocks and surges."""

from datetime import timedelta

from django.contrib import admin
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from ..models import Penalty, PenaltyStep, active_q
from .forms import ALL_ACTIONS


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
        return [(str(level), f"{level}. {names[level]}" if level in names else str(level)) for level in levels]

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


class InForceFilter(admin.SimpleListFilter):
    """Rows in force now ("yes"), or the others ("no"), as the model's queryset tells them apart
    (in_force()); a subclass names its parameter and the labels of its two choices."""

    title = _("status")
    labels = ()

    def lookups(self, request, model_admin):
        return list(zip(("yes", "no"), self.labels))

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.in_force()
        if self.value() == "no":
            return queryset.exclude(pk__in=queryset.model.objects.in_force().values("pk"))
        return queryset
