"""`counts="created:<app_label.ModelName>"`: the action happened when the request created a row of that model.

A request's rows are seen through `post_save` (`created=True`) into a set that only this request's
context holds (a ContextVar): other threads, other tasks and later requests never see it, and a
sync view run in a thread of an async server shares it, as asgiref copies the context there.
"""

from contextvars import ContextVar

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db.models.signals import post_save

PREFIX = "created:"

# The labels (app_label.modelname, lower case) of rows created while a request that counts
# created rows runs; None outside one.
_created = ContextVar("throttling_created", default=None)
# On the HttpRequest: the same set, read when its response comes back.
_ON_REQUEST = "_throttling_created"


def _saved(sender, created=False, **kwargs):
    if created:
        seen = _created.get()
        if seen is not None:
            seen.add(sender._meta.label_lower)
            seen.add(sender._meta.concrete_model._meta.label_lower)


def _connect():
    # One receiver for every model: a save outside a counting request costs one ContextVar read.
    post_save.connect(_saved, dispatch_uid="throttling-created-rows")


def label_of(counts):
    """The model label "app_label.modelname" that a `counts="created:..."` names, or None for
    another `counts`. ImproperlyConfigured when it names no installed model."""
    if not (isinstance(counts, str) and counts.startswith(PREFIX)):
        return None
    label = counts[len(PREFIX) :].strip()
    if label.count(".") != 1:
        raise ImproperlyConfigured(
            f'counts={counts!r}: after "created:" comes a model as app_label.ModelName, e.g. '
            '"created:django_comments.Comment".'
        )
    if apps.ready:
        try:
            apps.get_model(label)
        except LookupError as exc:
            raise ImproperlyConfigured(f"counts={counts!r} names no installed model: {exc}")
    return label.lower()


class Created:
    """The predicate of `counts="created:<label>"`: True when this request created such a row,
    whatever its response (the app may fail after saving, on input the member controls)."""

    whatever_the_response = True

    def __init__(self, label):
        self.label = label
        _connect()

    def __call__(self, request, response):
        seen = getattr(request, "_request", request).__dict__.get(_ON_REQUEST)
        return seen is not None and self.label in seen

    def __repr__(self):
        return f"Created({self.label!r})"


def start(request):
    """Watch for rows created from now on in this request's context; stop() ends it."""
    seen = set()
    getattr(request, "_request", request).__dict__[_ON_REQUEST] = seen
    return _created.set(seen)


def stop(token):
    """End what start() began, in the context it began in (a thread's next request starts clean)."""
    try:
        _created.reset(token)
    except (ValueError, RuntimeError):
        # Begun in another context (a middleware's process_view copied by a thread adapter): what
        # this context holds is set aside instead.
        _created.set(None)


def counts_rows(counted):
    """True when a `counts` predicate needs the request's created rows watched."""
    return isinstance(counted, Created)
