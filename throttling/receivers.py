"""The app's own receivers: what keeps the policy cache, the penalty mirror and escalations honest."""

from django.contrib.auth import get_user_model
from django.core.signals import request_finished, setting_changed
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save

from . import metrics
from .engine.countermeasures.in_force import measures
from .engine.offences import escalations
from .engine.policies import declared, trust
from .engine.policies.cache import invalidate_policies
from .models import ActionPolicy, ActionWindow, Block, MemberOverride, PolicyTier, Surge, SurgeTrigger
from .raids.alerts import mail_soon
from .signals import alert, redis_keys_lost


def policy_changed(sender, **kwargs):
    # This process forgets at once (even inside the transaction that edits);
    # the others are told only once the change is committed and readable.
    invalidate_policies(broadcast=False)
    transaction.on_commit(invalidate_policies, robust=True)


def measures_changed(sender, **kwargs):
    # As for policies: this process at once, the others once the change is committed.
    measures.changed(broadcast=False)
    transaction.on_commit(measures.changed, robust=True)


def connect(app_config):
    """Connect every receiver of the app (AppConfig.ready)."""
    for model in (ActionPolicy, ActionWindow, PolicyTier, MemberOverride):
        post_save.connect(policy_changed, sender=model, dispatch_uid=f"throttling-save-{model.__name__}")
        post_delete.connect(policy_changed, sender=model, dispatch_uid=f"throttling-del-{model.__name__}")
    # A member who joins or leaves a group a trust tier names is decided afresh in every process
    # (a group deleted takes its tiers with it: a policy change).
    member_groups = getattr(get_user_model(), "groups", None)
    if member_groups is not None:
        m2m_changed.connect(
            trust.membership_changed, sender=member_groups.through, dispatch_uid="throttling-member-groups"
        )
    for model in (Block, Surge, SurgeTrigger):
        post_save.connect(measures_changed, sender=model, dispatch_uid=f"throttling-save-{model.__name__}")
        post_delete.connect(measures_changed, sender=model, dispatch_uid=f"throttling-del-{model.__name__}")
    # Alerts are mailed to the moderators in digests, by a Celery task.
    alert.connect(mail_soon, dispatch_uid="throttling-alert-mail")
    # An evicted penalty mirror admits a penalised member: one process queues a resync.
    redis_keys_lost.connect(escalations.resync_soon, dispatch_uid="throttling-resync-after-loss")
    # Escalations whose transaction was rolled back with the request still go.
    request_finished.connect(escalations.send_deferred, dispatch_uid="throttling-deferred-escalations")
    # After every migrate and flush: rows for THROTTLING_DEFAULT_POLICIES that have none.
    post_migrate.connect(
        declared.create_declared_policies, sender=app_config, dispatch_uid="throttling-declared-policies"
    )
    # THROTTLING_METRICS: the engine's hooks count now, and follow the setting when it changes.
    setting_changed.connect(metrics.setting_changed, dispatch_uid="throttling-metrics-setting")
    metrics.configure()
