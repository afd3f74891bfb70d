"""Hiding what a held request creates, as it is first written: `hold={...}` beside `counts="created:…"`.

While a held request runs, the first save of each new row of the counted model gets the hide fields
set in `pre_save`, before the INSERT, so no reader ever sees the held post, not even for a moment
(see Guide › Held for review); `post_save` then queues it. What a request holds lives in a ContextVar,
as the rows created.py watches do: other threads, tasks and later requests never see it.
"""

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db.models.signals import post_save, pre_save

from . import service

_holding = ContextVar("throttling_holding", default=None)
# On a row between its pre_save and its post_save: what its hide fields were.
_REMEMBERED = "_throttling_hidden"


@dataclass
class Holding:
    """What one held request hides: rows of the model `label` get `hide`."""

    decision: object
    label: str
    hide: dict
    request: object = None
    text: str | None = None
    held: list = field(default_factory=list)  # the Held rows made


def hide_spec(hide, label, what="hold"):
    """`hide` checked: a non-empty dict of field names, with `counts="created:…"` (`label`) beside it."""
    if hide is None:
        return None
    if not isinstance(hide, dict) or not hide or not all(isinstance(k, str) and k for k in hide):
        raise ImproperlyConfigured(
            f'{what}={hide!r}: it must be a dict of the fields that hide a held post, e.g. {{"is_public": False}}.'
        )
    if label is None:
        raise ImproperlyConfigured(
            f'{what}={hide!r} needs counts="created:<app_label.ModelName>": the row the request creates is what is hidden.'
        )
    if apps.ready:
        model = apps.get_model(label)
        for name in hide:
            try:
                field = model._meta.get_field(name)
            except FieldDoesNotExist:
                field = None
            if field is None or not field.concrete:
                raise ImproperlyConfigured(
                    f"{what}={hide!r}: {model._meta.label} has no field {name!r} to hide a held post with."
                )
    return dict(hide)


def _matches(sender, label):
    return sender._meta.label_lower == label or sender._meta.concrete_model._meta.label_lower == label


def _before_insert(sender, instance, raw=False, **kwargs):
    holding = _holding.get()
    if holding is None or raw or not instance._state.adding or not _matches(sender, holding.label):
        return
    if _REMEMBERED not in instance.__dict__:
        instance.__dict__[_REMEMBERED] = service.hide_fields(instance, holding.hide)


def _after_insert(sender, instance, created=False, raw=False, **kwargs):
    holding = _holding.get()
    remembered = instance.__dict__.pop(_REMEMBERED, None)
    if holding is None or not created or remembered is None:
        return
    holding.held.append(
        service.record(holding.decision, instance, remembered, request=holding.request, text=holding.text)
    )


def _connect():
    # One receiver for every model: a save outside a held request costs one ContextVar read.
    pre_save.connect(_before_insert, dispatch_uid="throttling-held-hide")
    post_save.connect(_after_insert, dispatch_uid="throttling-held-queue")


def start(decision, label, hide, request=None, text=None):
    """Hide the rows of `label` created from now on in this context; stop() ends it."""
    _connect()
    return _holding.set(Holding(decision, label, hide, request, text))


def stop(token):
    """End what start() began (in another context, what this one holds is set aside)."""
    try:
        _holding.reset(token)
    except (ValueError, RuntimeError):
        _holding.set(None)


@contextmanager
def holding(decision, model, hide, *, request=None, text=None):
    """While it lasts, rows of `model` this context creates are written hidden (`hide`) and queued,
    when `decision` is held: for a view that saves through code it does not control (a serializer's
    save(), a form's), as `hold=` does for the decorator and THROTTLING_VIEWS. Yields the list of
    the Held rows made."""
    if not getattr(decision, "held", False):
        yield []
        return
    label = model._meta.label_lower
    token = start(decision, label, hide_spec(hide, label), request, text)
    try:
        yield _holding.get().held
    finally:
        stop(token)
