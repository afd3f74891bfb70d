"""The member is told once, on their next page, that their post awaits a moderator (messages framework)."""

from django.apps import apps
from django.contrib import messages

from ..common.words import held_message

# The messages-framework tags of the notice: the level's own, then these for styling.
EXTRA_TAGS = "throttling-notice throttling-held"
# On the request: told already (a request that saves two held rows tells once).
_TOLD = "_throttling_held_told"


def tell(request):
    """Add the notice to the request's messages, once per request; nothing without the framework."""
    request = getattr(request, "_request", request)  # a DRF Request wraps the HttpRequest
    if getattr(request, _TOLD, False):
        return
    if not (hasattr(request, "_messages") and apps.is_installed("django.contrib.messages")):
        return
    setattr(request, _TOLD, True)
    messages.add_message(request, messages.INFO, held_message(), extra_tags=EXTRA_TAGS)
