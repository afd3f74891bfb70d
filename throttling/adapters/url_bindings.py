"""THROTTLING_VIEWS: views of apps a site does not own, bound to actions by URL name.

    THROTTLING_VIEWS = {
        "forum:comment:publish": {"action": "reply", "target": "topic_id", "counts": "redirect",
                                  "content": "comment"},
        "comments-post-comment": {"action": "comment", "target": "forum.targets.commented_object",
                                  "counts": "created:django_comments.Comment", "skip": ["preview"]},
        "forum:comment:like:create": "like",
        "forum:topic:create": {"action": "post", "counts": "created:forum.Topic", "hold": {"approved": False}},
    }

The setting is read once, into one Binding per URL name, and read again when Django reports
that it changed (as override_settings does).
"""

import functools
from dataclasses import dataclass

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.urls import get_resolver
from django.utils.module_loading import import_string
from django.utils.translation import gettext

from ..conf import settings
from ..engine.api import DEFAULT_METHODS, http_methods
from ..held.hiding import hide_spec
from . import targets
from .counting_rules import SUCCESS, counter, skip_names
from .post_text import content_reader

SETTING = "THROTTLING_VIEWS"
KEYS = ("action", "methods", "target", "counts", "anonymous", "skip", "content", "form", "template_name", "hold")
SKIP, COUNT = "skip", "count"
TEMPLATE = "throttling/throttled.html"
EXAMPLE = '{"forum:comment:publish": {"action": "reply", "counts": "redirect"}, "forum:like": "like"}'


@dataclass(slots=True, frozen=True)
class Binding:
    name: str  # the URL name, as reverse() takes it
    action: str
    methods: frozenset
    target: str | None  # a URL keyword argument to count per
    target_of: object  # or a function (request) -> what to count per, else None
    counts: object  # the predicate (request, response) -> bool
    count_anonymous: bool  # False: a logged-out request is left to the view
    skip: tuple  # POST field names whose presence means the request is not the action
    form: object
    template_name: str
    content: object = None  # a function (request) -> the post's text, judged for repeated content
    # {field: value} hiding the row a held request creates (with counts "created:..."), else None.
    hold: dict | None = None

    def target_value(self, request, view_kwargs):
        """What this request counts per (normalised, see targets.normalised), or None."""
        if self.target_of is not None:
            return targets.normalised(self.target_of(request))
        return None if self.target is None else targets.normalised(view_kwargs.get(self.target))


def parse(value):
    """({URL name: Binding}, [problem, ...]) of a THROTTLING_VIEWS value; problems in plain words."""
    if not isinstance(value, dict):
        return {}, [f"{SETTING} is {value!r}; it must be a dict from URL name to an action, e.g. {EXAMPLE}."]
    bound, problems = {}, []
    for name, spec in value.items():
        if not isinstance(name, str) or not name or name.startswith(":") or name.endswith(":"):
            problems.append(f'{SETTING} has the key {name!r}, which is not a URL name such as "forum:comment:publish".')
            continue
        try:
            bound[name] = _binding(name, {"action": spec} if isinstance(spec, str) else spec)
        except ImproperlyConfigured as exc:
            problems.append(f"{SETTING}[{name!r}]: {exc}")
    return bound, problems


def _binding(name, spec):
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f'{spec!r} is neither an action name nor a dict such as {{"action": "reply"}}.')
    unknown = sorted(map(str, set(spec) - set(KEYS)))
    if unknown:
        raise ImproperlyConfigured(f"unknown key {', '.join(map(repr, unknown))}; the keys are {', '.join(KEYS)}.")
    action = spec.get("action")
    if not isinstance(action, str) or not action.strip():
        raise ImproperlyConfigured(f'"action" is {action!r}; it must name an action, e.g. "reply".')
    methods = spec.get("methods", DEFAULT_METHODS)
    if isinstance(methods, str) or not all(isinstance(m, str) and m for m in methods) or not methods:
        raise ImproperlyConfigured(f'"methods" is {methods!r}; it must be a list of HTTP methods, e.g. ["POST"].')
    target, target_of = spec.get("target"), None
    if callable(target) or targets.is_dotted_path(target):
        target, target_of = None, targets.function(target, '"target"')
    elif target is not None and (not isinstance(target, str) or not target.isidentifier()):
        raise ImproperlyConfigured(
            f'"target" is {target!r}; it must name a keyword argument of the URL, e.g. "pk", or a function '
            '(request) -> value, or its dotted path, e.g. "forum.targets.commented_object".'
        )
    anonymous = spec.get("anonymous", COUNT)
    if anonymous not in (SKIP, COUNT):
        raise ImproperlyConfigured(
            f'"anonymous" is {anonymous!r}; it must be "skip" (a logged-out request is left to the view) '
            'or "count" (counted per address).'
        )
    template_name = spec.get("template_name", TEMPLATE)
    if not isinstance(template_name, str) or not template_name:
        raise ImproperlyConfigured(f'"template_name" is {template_name!r}; it must name a template.')
    counts = counter(spec.get("counts", SUCCESS))
    return Binding(
        name=name,
        action=action,
        methods=http_methods(methods),
        target=target,
        target_of=target_of,
        counts=counts,
        count_anonymous=anonymous == COUNT,
        skip=skip_names(spec.get("skip"), '"skip"'),
        form=_form(spec.get("form")),
        template_name=template_name,
        content=_content(spec.get("content")),
        hold=hide_spec(spec.get("hold"), getattr(counts, "label", None), '"hold"'),
    )


def _content(content):
    """The function (request) -> the post's text: a field's name, a function, or a function's dotted path."""
    if targets.is_dotted_path(content):
        content = targets.function(content, '"content"')
    return content_reader(content)


def _form(form):
    if form is None or isinstance(form, type):
        return form
    if not isinstance(form, str):
        raise ImproperlyConfigured(f'"form" is {form!r}; it must be a form class or its dotted path.')
    try:
        return import_string(form)
    except ImportError as exc:
        raise ImproperlyConfigured(f'"form" {form!r} cannot be imported: {exc}')


@functools.cache
def parsed():
    """(bindings, problems) of the setting, read once."""
    return parse(settings.VIEWS)


def bindings():
    """{URL name: Binding}; ImproperlyConfigured when the setting has problems (check throttling.E008)."""
    bound, problems = parsed()
    if problems:
        raise ImproperlyConfigured(" ".join(problems))
    return bound


def url_named(name):
    """(the resolver that holds URL `name`'s last part, its namespace prefixes) as reverse() would
    find it, without calling it (reverse() needs the URL's arguments); None when there is no such URL."""
    resolver = get_resolver()
    *namespaces, url_name = name.split(":")
    prefixes = []
    for namespace in namespaces:
        instances = resolver.app_dict.get(namespace)
        if instances and namespace not in instances:
            namespace = instances[0]  # an application namespace names its default instance
        try:
            prefix, resolver = resolver.namespace_dict[namespace]
        except KeyError:
            return None
        prefixes.append(prefix)
    if not resolver.reverse_dict.getlist(url_name):
        return None
    return resolver, url_name, prefixes


def takes(found, kwarg):
    """True when the URL `found` (from url_named) has the keyword argument `kwarg`."""
    resolver, url_name, prefixes = found
    for entry in resolver.reverse_dict.getlist(url_name):
        if any(kwarg in params for _result, params in entry[0]):  # entry: (possibilities, pattern, ...)
            return True
    return any(f"(?P<{kwarg}>" in prefix for prefix in prefixes)


def target_problem(name, target):
    """The words of check throttling.E008 for a binding that counts per `target`, which its URL lacks."""
    return gettext("THROTTLING_VIEWS[%(name)r] counts per %(target)r, which is not a keyword argument of that URL.") % {
        "name": name,
        "target": target,
    }


def check_targets(bound):
    """ImproperlyConfigured when a binding of `bound` counts per a keyword argument its URL does not
    have (check throttling.E008): it would count per member on every URL, never per target. A URL
    name no URL has is check E007's, and a site without a URLconf (a worker) has nothing to check."""
    if not bound or not getattr(django_settings, "ROOT_URLCONF", None):
        return
    try:
        get_resolver().url_patterns  # noqa: B018  (loads the URLconf)
    except (ImportError, ImproperlyConfigured):
        return  # a URLconf that cannot be loaded is Django's to report, at every request
    problems = []
    for name, binding in bound.items():
        if binding.target is None:
            continue
        found = url_named(name)
        if found is not None and not takes(found, binding.target):
            problems.append(target_problem(name, binding.target))
    if problems:
        raise ImproperlyConfigured(" ".join(problems))


@receiver(setting_changed)
def _views_changed(setting, **kwargs):
    if setting == SETTING:
        parsed.cache_clear()
