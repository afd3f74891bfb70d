"""Read-only template tags: {% throttle_status "reply" [for user] as st %}."""

from django import template

from .. import core

register = template.Library()


class ThrottleStatusNode(template.Node):
    def __init__(self, action, who, target):
        self.action, self.who, self.target = action, who, target

    def render(self, context):
        action = self.action.resolve(context)
        request = context.get("request")
        who = self.who.resolve(context) if self.who is not None else request
        if who in (None, "") or getattr(who, "is_authenticated", True) is False:
            # An anonymous user, or a member the context does not have (a
            # missing variable resolves to ""), is identified by the request's address.
            who = request
        if who is None:
            raise template.TemplateSyntaxError(
                "throttle_status needs `request` in the context "
                "(django.template.context_processors.request) or an explicit `for <user>`."
            )
        # peek() never records, and already turns Redis failures into a Decision.
        context[self.target] = core.peek(who, action)
        return ""


@register.tag
def throttle_status(parser, token):
    """{% throttle_status "reply" as st %} or {% throttle_status "reply" for some_user as st %}."""
    bits = token.split_contents()
    usage = f'Usage: {{% {bits[0]} "action" [for user] as name %}}'
    if len(bits) == 4 and bits[2] == "as":
        return ThrottleStatusNode(parser.compile_filter(bits[1]), None, bits[3])
    if len(bits) == 6 and bits[2] == "for" and bits[4] == "as":
        return ThrottleStatusNode(parser.compile_filter(bits[1]), parser.compile_filter(bits[3]), bits[5])
    raise template.TemplateSyntaxError(usage)
