"""What a member sees when a view refuses them: the 429 page (or its JSON), with what they wrote, editable."""

import math
from dataclasses import dataclass, field

from django import forms
from django.http import JsonResponse
from django.template.response import TemplateResponse
from django.utils.module_loading import import_string
from django.utils.text import capfirst
from django.utils.translation import gettext
from django.views.debug import SafeExceptionReporterFilter

from .choices import Reason
from .conf import settings
from .notices import mark_shown
from .text import local_time, wait_in_words

# A text longer than this, or on several lines, comes back in a text area rather than a one-line input.
LONG_TEXT = 80


def _label(name, field):
    if field is not None and field.label:
        return str(field.label)
    return capfirst(name.replace("_", " ").replace("-", " "))


def _is_password(field):
    return field is not None and isinstance(field.widget, forms.PasswordInput)


def is_sensitive(name):
    """True for a field name Django hides in error reports (API, AUTH, TOKEN, KEY, SECRET, PASS, ...)."""
    return bool(SafeExceptionReporterFilter.hidden_settings.search(name))


def form_class(form):
    """A form class given as a class or as a dotted path ("forum.forms.ReplyForm"), or None."""
    if isinstance(form, str):
        return import_string(form)
    return form


def wants_json(request):
    """True when the client asked for JSON: an XMLHttpRequest, or an Accept that prefers JSON to HTML.

    A browser's "text/html,...,*/*;q=0.8" and a bare "*/*" still get the page.
    """
    if request.headers.get("X-Requested-With") == "XMLHttpRequest":
        return True
    if "json" not in request.headers.get("Accept", ""):
        return False
    return request.get_preferred_type(["text/html", "application/json"]) == "application/json"


@dataclass
class RefusalField:
    """One field of the editable form on the 429 page, as the template draws it."""

    name: str
    label: str
    kind: str  # "textarea", "input", "checkbox", "select", "hidden"
    values: list = field(default_factory=list)
    input_type: str = "text"
    choices: list = field(default_factory=list)  # (value, label, selected) of a select
    multiple: bool = False
    checked: bool = False
    help_text: str = ""

    @property
    def value(self):
        return self.values[0] if self.values else ""

    @property
    def id(self):
        return f"throttling-{self.name}"


def _choices(field, chosen):
    """(value, label, selected) of a choice field, groups flattened; its queryset is read as declared."""
    found = []
    for value, label in field.choices:
        if isinstance(label, (list, tuple)):
            found += [(str(v), str(lbl), str(v) in chosen) for v, lbl in label]
        else:
            found.append(
                (str(getattr(value, "value", value)), str(label), str(getattr(value, "value", value)) in chosen)
            )
    return found


def _declared_field(name, field, values):
    """How a field of the view's form comes back, or None when it must not (files)."""
    widget, label = field.widget, _label(name, field)
    help_text = str(field.help_text or "")
    if isinstance(widget, (forms.HiddenInput, forms.MultipleHiddenInput)):
        return RefusalField(name, label, "hidden", values)
    if isinstance(widget, forms.FileInput):
        return None  # a browser never lets a page fill a file input
    if isinstance(field, forms.BooleanField) or isinstance(widget, forms.CheckboxInput):
        checked = bool(values) and values[-1].lower() not in ("", "false", "0", "off")
        return RefusalField(name, label, "checkbox", values[-1:] or ["on"], checked=checked, help_text=help_text)
    if isinstance(field, forms.ChoiceField | forms.ModelChoiceField):
        multiple = isinstance(field, forms.MultipleChoiceField | forms.ModelMultipleChoiceField)
        choices = _choices(field, set(values))
        if set(values) - {c[0] for c in choices} - {""}:
            # A choice the declared field does not list (the view narrows it per member): kept as
            # it was sent, never shown as a bare id.
            return RefusalField(name, label, "hidden", values)
        return RefusalField(name, label, "select", values, choices=choices, multiple=multiple, help_text=help_text)
    if isinstance(widget, forms.Textarea):
        return RefusalField(name, label, "textarea", values[:1], help_text=help_text)
    return _text_field(name, label, values, getattr(widget, "input_type", "text"), help_text)


def _text_field(name, label, values, input_type="text", help_text=""):
    value = values[0] if values else ""
    if len(value) > LONG_TEXT or "\n" in value:
        return RefusalField(name, label, "textarea", [value], help_text=help_text)
    return RefusalField(name, label, "input", [value], input_type=input_type, help_text=help_text)


def editable_fields(request, form=None):
    """The fields of the 429 page's form: the view's form's fields first, in its order, then what
    else was posted. Passwords and names Django hides in error reports never come back.

    The form class is never instantiated (its __init__ may need arguments): its `base_fields` are read.
    """
    declared = getattr(form_class(form), "base_fields", {})
    posted = request.POST
    fields = []
    for name, declared_field in declared.items():
        if is_sensitive(name) or _is_password(declared_field):
            continue
        made = _declared_field(name, declared_field, posted.getlist(name))
        if made is not None:
            fields.append(made)
    for name, values in posted.lists():
        if name in declared or name == "csrfmiddlewaretoken" or is_sensitive(name):
            continue
        fields += [_text_field(name, _label(name, None), [value]) for value in values]
    return fields


def when_again(decision):
    """When sending again will work, in words: "You can send it again in 42 seconds."."""
    if decision.reason == Reason.TOO_COSTLY:
        return gettext("This cannot be sent as it is: it is more than your limit allows at once.")
    if decision.penalty is not None:
        return gettext("You can send it again after %(until)s.") % {"until": local_time(decision.penalty.ends_at)}
    return gettext("You can send it again in %(wait)s.") % {"wait": wait_in_words(decision.retry_after)}


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
    member back what they wrote in a form they can edit and send again (see `editable_fields`)."""
    if decision.penalty is not None:
        mark_shown(decision.penalty)
    if wants_json(request):
        return json_refusal(decision)
    fields = editable_fields(request, form) if request.method == "POST" else []
    shown = [f for f in fields if f.kind != "hidden" and f.value.strip()]
    context = {
        "decision": decision,
        "message": decision.message,
        "fields": fields,  # RefusalField: the editable form
        "when_again": when_again(decision),
        "retry_after": retry_after(decision),
        "submitted": [(f.name, f.value) for f in shown],  # (field name, text), for templates of your own
        "submitted_labelled": [(f.label, f.value) for f in shown],
        "throttling_base_template": settings.BASE_TEMPLATE,
        # The site's own banner about a penalty would say the same thing again.
        "throttling_refusal": True,
    }
    response = TemplateResponse(request, template_name, context, status=429)
    response["Retry-After"] = str(context["retry_after"])
    return response
