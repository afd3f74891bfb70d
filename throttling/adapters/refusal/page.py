"""What a member sees when a view refuses them: the 429 page (or its JSON), with what they wrote, editable."""

import math

from django.http import JsonResponse
from django.template.response import TemplateResponse
from django.utils.cache import patch_cache_control
from django.utils.http import escape_leading_slashes
from django.utils.translation import gettext

from ...common.choices import Reason
from ...common.words import local_time, refusal_heading, wait_in_words
from ...conf import settings
from ..penalty_notices import mark_shown
from .resend_fields import resent_fields


def wants_json(request):
    """True when the client asked for JSON: an XMLHttpRequest, a JSON body, or an Accept that prefers
    JSON to HTML.

    A browser's "text/html,...,*/*;q=0.8" and a bare "*/*" still get the page, unless what was sent
    is JSON (application/json, or a +json type): the page could not give a JSON body back in a form,
    and a script that sent it reads the JSON answer as it reads an XMLHttpRequest's.
    """
    if request.headers.get("X-Requested-With") == "XMLHttpRequest":
        return True
    sent = request.content_type or ""
    if sent == "application/json" or (sent.startswith("application/") and sent.endswith("+json")):
        return True
    if "json" not in request.headers.get("Accept", ""):
        return False
    return request.get_preferred_type(["text/html", "application/json"]) == "application/json"


def post_back_to(request):
    """Where the page's form posts: the path that was requested, with its query, never another
    host (a path starting "//" would name one: its second slash is escaped)."""
    return escape_leading_slashes(request.get_full_path())


def when_again(decision):
    """When sending again will work, in words: "You can send it again in 42 seconds."."""
    if decision.reason == Reason.TOO_COSTLY:
        return gettext("This cannot be sent as it is: it is more than your limit allows at once.")
    if decision.penalty is not None:
        return gettext("You can send it again after %(until)s.") % {"until": local_time(decision.penalty.ends_at)}
    if decision.reason == Reason.BLOCKED and not decision.reset_after:
        return gettext("It cannot be sent from here for now; keep a copy of what you wrote.")
    return gettext("You can send it again in %(wait)s.") % {"wait": wait_in_words(decision.retry_after)}


def intro(decision):
    """The sentence above what the member wrote: send it again after the wait, or keep a copy when
    no wait will do (a block without an end)."""
    if decision.reason == Reason.BLOCKED and not decision.reset_after:
        return gettext("Nothing was saved. What you wrote is below, so that you can keep a copy of it.")
    return gettext(
        "Nothing was saved. What you wrote is below: edit it if you like, and send it again when the wait is over."
    )


def retry_after(decision):
    """The Retry-After of a refusal: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(decision.retry_after))


def penalty_json(info):
    """A penalty in force as the JSON refusal describes it."""
    return {
        "level": info.level,
        "action": info.action or None,
        "all_actions": info.all_actions,
        "ends_at": info.ends_at.isoformat() if info.ends_at else None,
        "reason": info.reason_text,
        "kind": "restriction",
    }


def json_refusal(decision):
    """The 429 of a client that asked for JSON: detail, action, retry_after and the penalty, if any."""
    body = {"detail": decision.message, "action": decision.action, "retry_after": retry_after(decision)}
    if decision.penalty is not None:
        body["penalty"] = penalty_json(decision.penalty)
    response = JsonResponse(body, status=429, json_dumps_params={"ensure_ascii": False})
    response["Retry-After"] = str(body["retry_after"])
    return response


def throttled_response(request, decision, template_name="throttling/throttled.html", form=None):
    """The 429 for a refused request: JSON when the client asked for it, else the page that gives the
    member back what they sent, the typed text editable (see resend.resent_fields). Nothing here
    touches the database or the app's form: it is safe on an async view's event loop."""
    if decision.penalty is not None:
        mark_shown(decision.penalty)
    if wants_json(request):
        return json_refusal(decision)
    fields = resent_fields(request, form) if request.method == "POST" else []
    shown = [f for f in fields if f.editable]
    context = {
        "decision": decision,
        "heading": refusal_heading(decision),  # "Slow down", "Already posted", ...
        "message": decision.message,
        "fields": fields,  # resend.ResentField: the form that sends the request again
        "refill": [f.label for f in fields if f.refill],  # not kept: to fill in again
        "multipart": any(f.kind == "file" for f in fields),
        "post_back_to": post_back_to(request),
        "when_again": when_again(decision),
        "intro": intro(decision),
        "retry_after": retry_after(decision),
        "submitted": [(f.name, f.value) for f in shown],  # (field name, text), for templates of your own
        "submitted_labelled": [(f.label, f.value) for f in shown],
        "throttling_base_template": settings.BASE_TEMPLATE,
        # The site's own banner about a penalty would say the same thing again.
        "throttling_refusal": True,
    }
    response = TemplateResponse(request, template_name, context, status=429)
    response["Retry-After"] = str(context["retry_after"])
    # The page holds what the member typed: no cache, shared or the browser's own, keeps a copy.
    patch_cache_control(response, no_store=True, private=True)
    return response
