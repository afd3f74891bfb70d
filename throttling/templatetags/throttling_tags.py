"""Template tags: {% throttle_status "reply" [for user] [in target] as st %} and {% throttling_notices %}."""

import logging

from django import template

from ..adapters.penalty_notices import claim
from ..adapters.targets import normalised
from ..engine.api import peek

logger = logging.getLogger("throttling")

register = template.Library()

MISSING_MEMBER = (
    "throttle_status needs `request` in the context "
    "(django.template.context_processors.request) or an explicit `for <user>`."
)


class ThrottleStatusNode(template.Node):
    def __init__(self, action, who, target, counted_in=None):
        self.action, self.who, self.target, self.counted_in = action, who, target, counted_in

    def render(self, context):
        action = self.action.resolve(context)
        request = context.get("request")
        who = self.who.resolve(context) if self.who is not None else request
        if who in (None, "") or getattr(who, "is_authenticated", True) is False:
            # An anonymous user, or a member the context does not have (a
            # missing variable resolves to ""), is identified by the request's address.
            who = request
        if who is None:
            # Django's rule for tags: fail quietly at render time, loudly only
            # when the engine debugs. The variable is emptied, not left as an
            # outer value of the same name that would describe someone else.
            if context.template is not None and context.template.engine.debug:
                raise template.TemplateSyntaxError(MISSING_MEMBER)
            logger.warning("%s The variable %r was left empty.", MISSING_MEMBER, self.target)
            context[self.target] = None
            return ""
        # peek() never records, and already turns Redis failures into a Decision.
        # The same target text the views count under ("01" is 1; empty is the member's own count).
        counted_in = normalised(self.counted_in.resolve(context)) if self.counted_in is not None else None
        context[self.target] = peek(who, action, target=counted_in)
        return ""


@register.tag
def throttle_status(parser, token):
    """{% throttle_status "reply" [for some_user] [in thread.pk] as st %}: peek, recording nothing."""
    bits = token.split_contents()
    usage = f'Usage: {{% {bits[0]} "action" [for user] [in target] as name %}}'
    if len(bits) < 4 or bits[-2] != "as":
        raise template.TemplateSyntaxError(usage)
    options, rest = {}, bits[2:-2]
    while rest:
        if len(rest) < 2 or rest[0] not in ("for", "in") or rest[0] in options:
            raise template.TemplateSyntaxError(usage)
        options[rest[0]] = parser.compile_filter(rest[1])
        rest = rest[2:]
    return ThrottleStatusNode(parser.compile_filter(bits[1]), options.get("for"), bits[-1], options.get("in"))


@register.inclusion_tag("throttling/notices.html", takes_context=True)
def throttling_notices(context):
    """The member's penalties not shown yet, each once (for sites that render notices themselves).

    A notice rendered here counts as shown. Needs `request` in the context; nothing for visitors.
    """
    request = context.get("request")
    return {"notices": claim(request)}
