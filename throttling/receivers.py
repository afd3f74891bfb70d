"""The app's own receivers: what keeps the policy cache, the penalty mirror and escalations honest."""

from django.core.signals import request_finished, setting_changed
from django.db import transaction
from django.db.models.signals import post_delete, post_migrate, post_save

from . import metrics
from .engine import declared, escalations
from .engine.policies import invalidate_policies
from .models import ActionPolicy, ActionWindow, MemberOverride, PolicyTier
from .signals import redis_keys_lost


def policy_changed(sender, **kwargs):
    # This process forgets at once (even inside the transaction that edits);
    # the others are told only once the change is committed and readable.
    invalidate_policies(broadcast=False)
    transaction.on_commit(invalidate_policies, robust=True)


def connect(app_config):
    """Connect every receiver of the app (AppConfig.ready)."""
    for model in (ActionPolicy, ActionWindow, PolicyTier, MemberOverride):
        post_save.connect(policy_changed, sender=model, dispatch_uid=f"throttling-save-{model.__name__}")
        post_delete.connect(policy_changed, sender=model, dispatch_uid=f"throttling-del-{model.__name__}")
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
