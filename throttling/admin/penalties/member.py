"""A member's penalty history: their penalties, strikes still counted and the rung the next strike gets."""

from datetime import timedelta
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext

from ...common.words import duration_in_words
from ...conf import settings
from ...models import Penalty
from ...penalties import current_ladder, standing
from .labels import STATUS_LABELS, level_words


class MemberHistoryMixin:
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
        strike_count, next_rung = standing(user, now)
        ladder = current_ladder()
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
