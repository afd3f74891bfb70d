"""Where a view's post text comes from, for every adapter alike: a field of the request's body, or a function of it."""

import json

from django.core.exceptions import ImproperlyConfigured

JSON_TYPES = ("application/json",)


def content_reader(source):
    """A function (request) -> the post's text or None, for `source`: the name of a field of the
    request's body (form data or a JSON object; on a DRF request, its parsed data), a function of
    the request, or None (no content: the rate alone is judged). ImproperlyConfigured otherwise."""
    if source is None or callable(source):
        return source
    if isinstance(source, str) and source:
        return lambda request: field_text(request, source)
    raise ImproperlyConfigured(
        f'content={source!r}: it must name the field that holds the post\'s text, e.g. "body", '
        "or be a function of the request that returns it."
    )


def field_text(request, name):
    """The text of field `name` in `request`'s body, or None: a missing field, or a value that is not text."""
    data = getattr(request, "data", None)  # a DRF Request: its parsers have read form data and JSON alike
    if data is None:
        data = _json_object(request) if request.content_type in JSON_TYPES else request.POST
    value = data.get(name) if hasattr(data, "get") else None
    return value if isinstance(value, str) else None


def _json_object(request):
    # request.body is kept on the request, so the view reads the same body afterwards. A body that
    # is not a JSON object has no field to read: the view answers it as it would anyway.
    try:
        value = json.loads(request.body or b"null")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
