"""Members as the engine would judge each of them today: left out (moderators, exempt overrides) or their
limits scaled (member overrides, trust tiers); and the members penalised in a period.

The engine decides one member at a time (engine/deciding/plan.py's plan() and engine/policies/trust.py's standing());
a replay judges thousands, so what those read per member (groups, join date, staff flags) is read
here for all members at once, and the rules applied are the engine's own (trust.judged()).
"""

from datetime import timedelta

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from ..conf import settings
from ..engine import moderators
from ..engine.policies import trust
from ..engine.policies.cache import load_overrides
from ..models import Penalty

EXEMPT = trust.EXEMPT
MODEL_BACKEND = ["django.contrib.auth.backends.ModelBackend"]
_FETCHED = 500  # users read at once when moderators are judged one by one


class Standing:
    """EXEMPT or the multiplier of `spec`'s limits for each member id, as plan() and standing() decide now."""

    def __init__(self, spec, *, overrides=None, now=None):
        self.spec = spec
        self.now = now or timezone.now()
        self.overrides = load_overrides() if overrides is None else overrides
        self.user_model = get_user_model()
        self.moderators = _moderator_ids(self.user_model) if spec.exempt_staff else frozenset()
        self._moderator_of = {}  # member id -> bool, when moderators are judged one by one
        self.groups = _tier_groups(self.user_model, spec.tiers)
        self.joined = _new_members(self.user_model, spec.tiers, self.now)

    def of(self, pk):
        spec = self.spec
        if spec.exempt_staff and self.is_moderator(pk):
            return EXEMPT
        return trust.judged(
            spec,
            self.overrides.get(pk) if self.overrides else None,
            lambda: {group for group, members in self.groups.items() if pk in members},
            self.joined.get(pk),
            self.now,
        )

    def is_moderator(self, pk):
        if self.moderators is not None:
            return pk in self.moderators
        known = self._moderator_of.get(pk)
        if known is None:
            # Moderators named by a function: each member is asked as the engine asks, with their user
            # row. Members come in id order, so the next rows are read with this one.
            self._moderator_of.clear()
            users = self.user_model._default_manager.filter(pk__gte=pk).order_by("pk")[:_FETCHED]
            self._moderator_of.update((user.pk, moderators.is_moderator(user)) for user in users)
            known = self._moderator_of.setdefault(pk, False)
        return known


def _moderator_ids(user_model):
    """The ids of every moderator, read at once when the setting allows it; None: ask one by one."""
    value = settings.MODERATORS
    names = {f.name for f in user_model._meta.get_fields()}
    users = user_model._default_manager
    if value is None and {"is_staff", "is_superuser"} <= names:
        return frozenset(users.filter(Q(is_staff=True) | Q(is_superuser=True)).values_list("pk", flat=True))
    app_label, dot, codename = value.partition(".") if isinstance(value, str) else ("", "", "")
    is_permission = dot and app_label and codename and "." not in codename
    # with_perm() answers as has_perm() does only for Django's own backend, alone.
    if is_permission and hasattr(users, "with_perm") and list(django_settings.AUTHENTICATION_BACKENDS) == MODEL_BACKEND:
        return frozenset(users.with_perm(value).values_list("pk", flat=True))
    return None


def _tier_groups(user_model, tiers):
    ids = {t.group_id for t in tiers if t.group_id is not None}
    if not ids or not hasattr(user_model, "groups"):
        return {}
    through = user_model.groups.through
    found = {gid: set() for gid in ids}
    for user_id, group_id in through.objects.filter(group_id__in=ids).values_list(
        f"{user_model._meta.model_name}_id", "group_id"
    ):
        found[group_id].add(user_id)
    return found


def _new_members(user_model, tiers, now):
    days = [t.new_member_days for t in tiers if t.new_member_days is not None]
    if not days or not any(f.name == "date_joined" for f in user_model._meta.get_fields()):
        return {}
    since = now - timedelta(days=max(days))
    return dict(user_model._default_manager.filter(date_joined__gte=since).values_list("pk", "date_joined"))


def penalised(action, since=None, until=None):
    """Ids of members with a penalty on `action` (or on all actions) in force or given in [since, until),
    warnings included; a penalty a moderator lifted is not counted (as it is no strike)."""
    rows = Penalty.objects.filter(Q(action=action) | Q(action=""), lifted_at__isnull=True)
    if until is not None:
        rows = rows.filter(starts_at__lt=until)
    if since is not None:
        rows = rows.filter(ends_at__gte=since)
    return set(rows.values_list("user_id", flat=True))
