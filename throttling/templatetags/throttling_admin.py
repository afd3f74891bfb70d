"""Template tags of the app's own admin pages: {% breadcrumbs %} in the markup of the running Django's
admin, and {% surge_banner %}, shown on every one of them while a surge is on."""

import django
from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from ..common.words import local_time
from ..engine.moderators import custom, is_moderator
from ..models import Held, Surge

register = template.Library()

# Django 6.1's admin draws a trail as a list (`ol.breadcrumbs`, the separators from its CSS, the
# current page marked aria-current); 5.2 and 6.0 draw `div.breadcrumbs` with "›" between the crumbs,
# and style nothing else. A page of the app's own must write the markup its Django styles.
LISTED = django.VERSION >= (6, 1)

_CRUMBS = "throttling_crumbs"


class BreadcrumbsNode(template.Node):
    def __init__(self, nodelist):
        self.nodelist = nodelist

    def render(self, context):
        crumbs = []
        with context.push({_CRUMBS: crumbs}):
            self.nodelist.render(context)  # each {% crumb %} adds itself; the text between them is dropped
        if not crumbs:
            return ""
        if LISTED:
            *trail, current = crumbs
            items = format_html_join("\n", "<li>{}</li>", ((crumb,) for crumb in trail))
            return format_html('<ol class="breadcrumbs">\n{}\n<li aria-current="page">{}</li>\n</ol>', items, current)
        return format_html('<div class="breadcrumbs">\n{}\n</div>', mark_safe("\n&rsaquo; ".join(crumbs)))


class CrumbNode(template.Node):
    def __init__(self, nodelist):
        self.nodelist = nodelist

    def render(self, context):
        crumbs = context.get(_CRUMBS)
        if crumbs is None:
            raise template.TemplateSyntaxError("{% crumb %} belongs inside {% breadcrumbs %}")
        crumbs.append(mark_safe(self.nodelist.render(context).strip()))
        return ""


@register.tag
def breadcrumbs(parser, token):
    """{% breadcrumbs %}{% crumb %}<a href="…">Home</a>{% endcrumb %} … {% crumb %}{{ title }}{% endcrumb %}{% endbreadcrumbs %}

    The crumbs in order, the current page last; a crumb may sit inside {% if %}. Rendered as the
    running Django's admin renders its own trail, inside its `breadcrumbs` block.
    """
    nodelist = parser.parse(("endbreadcrumbs",))
    parser.delete_first_token()
    return BreadcrumbsNode(nodelist)


@register.tag
def crumb(parser, token):
    nodelist = parser.parse(("endcrumb",))
    parser.delete_first_token()
    return CrumbNode(nodelist)


@register.inclusion_tag("admin/throttling/includes/surge_banner.html", takes_context=True)
def surge_banner(context):
    """The surges in force, and where to end them when the moderator may (one query per page)."""
    surges = list(Surge.objects.in_force().order_by("ends_at", "pk"))
    request = context.get("request")
    end_url = None
    if surges and request is not None and _may_end(request.user):
        try:
            end_url = reverse("admin:throttling_surge_end", current_app=getattr(request, "current_app", None))
        except NoReverseMatch:
            end_url = None
    for surge in surges:
        surge.until = local_time(surge.ends_at)
    return {"surges": surges, "end_url": end_url}


def _may_end(user):
    # As the admin decides (throttling.admin.moderation.may), from below it.
    if custom():
        return user.is_active and is_moderator(user)
    return user.has_perm("throttling.change_surge")


@register.inclusion_tag("admin/throttling/includes/held_count.html", takes_context=True)
def held_count(context):
    """How many posts wait in Held for review, for a moderator who may see them (one query per page)."""
    request = context.get("request")
    if request is None or not _may_see_held(request.user):
        return {"pending": 0}
    pending = Held.objects.pending().count()
    try:
        url = reverse("admin:throttling_held_changelist", current_app=getattr(request, "current_app", None))
    except NoReverseMatch:
        url = None
    return {"pending": pending, "url": url and f"{url}?status__exact=pending"}


def _may_see_held(user):
    if custom():
        return user.is_active and is_moderator(user)
    return user.has_perm("throttling.view_held") or user.has_perm("throttling.change_held")
