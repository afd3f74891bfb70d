"""What the refusal page sends again: the fields the member posted, the typed text editable, the rest as sent.

The page is a mirror, not a form: it shows only what the member sent, never what the server
knows. The app's form class is never instantiated, validated or asked for its choices (a
ModelChoiceField's queryset is a database query, and may list rows the view hides from this
member); only its declared `base_fields` are read, for the widgets and labels of text fields.
"""

import re
from dataclasses import dataclass, field

from django import forms
from django.utils.module_loading import import_string
from django.utils.text import capfirst
from django.utils.translation import gettext
from django.views.debug import SafeExceptionReporterFilter

# A text longer than this, or on several lines, comes back in a text area rather than a one-line input.
LONG_TEXT = 80

# Fields an app adds for itself, never typed by the member: carried as sent, never shown, whatever
# the form declares (a honeypot is a text input the app hides; a bot fills it, a person does not).
MACHINERY = frozenset({"next", "security_hash", "timestamp", "honeypot", "content_type", "object_pk"})
# A formset's management form ("attachments-TOTAL_FORMS").
_MANAGEMENT = re.compile(r"(^|-)(TOTAL|INITIAL|MIN_NUM|MAX_NUM)_FORMS$")
# A field of a formset's form: prefix, form number (from 0) and field ("attachment-0-file").
_FORMSET_FIELD = re.compile(r"^(.+)-(\d+)-([^-]+)$")
# The words of a field's name: split at "_", "-", "." and brackets, and where the case changes
# ("apiKey", "APIKey" and "api_key" all read "api key"); digits are not words ("password2").
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
# A name holding one of these words names a secret, or a payment or identity number ("new_password2",
# "auth_token", "credit_card", "cardNumber"); "keywords", "security_hash" and "spinner" hold none.
_SECRET_WORDS = frozenset(
    {"password", "passwd", "passphrase", "passcode", "pin", "secret", "token", "otp", "apikey", "privatekey"}
    | {"card", "cvv", "cvc", "ssn", "iban"}
)
# ... or these two words one after the other ("api_key", "privateKey").
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key")})
# The CSRF token is rendered afresh: the one sent may have rotated.
CSRF = "csrfmiddlewaretoken"
# Without a form: values a check box or a switch sends, and the usual names of a submit button.
_SWITCHES = frozenset({"on", "off", "true", "false", "yes", "no"})
_BUTTONS = frozenset({"submit", "post", "preview", "save", "send"})
# What a typed text's widget says of itself (Input.input_type).
_TEXT_INPUTS = frozenset({"text", "email", "url", "search", "tel"})


@dataclass
class ResentField:
    """One control of the refusal page's form, as the template draws it."""

    name: str
    label: str
    kind: str  # "textarea" or "input" (typed text, editable), "hidden" (as sent), "password", "file" (to fill in again)
    values: list = field(default_factory=list)
    input_type: str = "text"

    @property
    def value(self):
        return self.values[0] if self.values else ""

    @property
    def editable(self):
        return self.kind in ("textarea", "input")

    @property
    def refill(self):
        """True for a field that is not carried (a password, a file): the member fills it in again."""
        return self.kind in ("password", "file")


def form_class(form):
    """A form class given as a class or as a dotted path ("forum.forms.ReplyForm"), or None."""
    if isinstance(form, str):
        return import_string(form)
    return form


def name_words(name):
    """The words of a field's name, in lower case: "newPassword2" -> ["new", "password"]."""
    return [word.lower() for word in _WORD.findall(name)]


def is_secret(name, declared=None):
    """True for a field never written into a page: a password input in the form, or
    a name whose words name a secret or a payment or identity number (see Usage › The resend rule)."""
    if isinstance(getattr(declared, "widget", None), forms.PasswordInput):
        return True
    words = name_words(name)
    return any(word in _SECRET_WORDS for word in words) or any(pair in _SECRET_PAIRS for pair in zip(words, words[1:]))


def _label(name, declared):
    if declared is not None and declared.label:
        return str(declared.label)
    in_formset = _FORMSET_FIELD.match(name)
    if in_formset:
        # "attachment-0-file" is the file of the first attachment, not "Attachment 0 file".
        prefix, number, field_name = in_formset.groups()
        return gettext("%(field)s (%(form)s %(number)s)") % {
            "field": _words_label(field_name),
            "form": _words_label(prefix).lower(),
            "number": int(number) + 1,
        }
    return _words_label(name)


def _words_label(name):
    return capfirst(name.replace("_", " ").replace("-", " "))


def _typed_by_form(declared):
    """The input type of a field the form declares as free text (a CharField in a text box or
    area), or None: choices, booleans, numbers, dates and hidden inputs are not typed text."""
    if isinstance(declared, forms.ChoiceField) or not isinstance(declared, forms.CharField):
        return None
    widget = declared.widget
    if isinstance(widget, forms.Textarea):
        return "textarea"
    input_type = getattr(widget, "input_type", None)
    return input_type if isinstance(widget, forms.widgets.Input) and input_type in _TEXT_INPUTS else None


def _typed_by_value(name, value):
    """Without a form: a value with words in it is typed text; a number, a yes/no, a token (an id,
    a hash, a field named like the ones Django hides in error reports: key, token, secret...) or a
    button's value ("post=Post", "submit=Send") is not."""
    if SafeExceptionReporterFilter.hidden_settings.search(name):
        return None
    text = value.strip()
    if any(c.isspace() for c in text) or len(text) > LONG_TEXT:
        return "text"
    if not any(c.isalpha() for c in text) or text.lower() in _SWITCHES or name.lower() in _BUTTONS:
        return None
    if text.lower() == name.lower() or (len(text) >= 16 and any(c.isdigit() for c in text)):
        return None
    return "text"


def _field(name, values, declared, has_form):
    label = _label(name, declared)
    if name in MACHINERY or _MANAGEMENT.search(name) or len(values) != 1 or not values[0].strip():
        return ResentField(name, label, "hidden", values)
    value = values[0]
    typed = _typed_by_form(declared) if has_form else _typed_by_value(name, value)
    if typed is None:
        return ResentField(name, label, "hidden", values)
    if typed == "textarea" or len(value) > LONG_TEXT or "\n" in value:
        return ResentField(name, label, "textarea", values)
    return ResentField(name, label, "input", values, input_type=typed)


def resent_fields(request, form=None):
    """The controls of the refusal page's form, in the order the member sent the fields.

    Free text the member typed comes back editable, labelled as `form` labels it; every other
    field goes back hidden, exactly as sent (choices, check boxes, the button pressed, hidden
    inputs), so sending again repeats the request with only the text edited. Secrets (see
    is_secret) and files are not carried: they come back empty, for the member to fill in again.
    """
    declared = getattr(form_class(form), "base_fields", None) or {}
    has_form = form is not None
    fields = []
    for name, values in request.POST.lists():
        if name == CSRF:
            continue
        if is_secret(name, declared.get(name)):
            fields.append(ResentField(name, _label(name, declared.get(name)), "password", input_type="password"))
            continue
        fields.append(_field(name, values, declared.get(name), has_form))
    for name in request.FILES:
        fields.append(ResentField(name, _label(name, declared.get(name)), "file", input_type="file"))
    return fields
