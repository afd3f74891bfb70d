"""Admin forms against a raid: a block, blocks imported in bulk, a surge started and ended."""

from datetime import timedelta

from django import forms
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _

from ...common.choices import Severity
from ...models import Block, Surge, SurgeTrigger, canonical_actions
from ...models.blocks import check_multiplier
from ...models.surges import SURGE_MOST_MINUTES
from ...raids.bulk_import import parse_lines
from ..fields import FriendlyDurationField

LASTS_HELP = _("Type it as you would say it: “30 minutes”, “2 hours”, “3 days”.")


class LastsField(FriendlyDurationField):
    """How long something lasts, typed as people say it, at least a minute."""

    default_error_messages = {
        **FriendlyDurationField.default_error_messages,
        "invalid": _("Type a length such as “30 minutes”, “2 hours” or “3 days” (units: w, d, h, m for minutes)."),
        "short": _("It must last at least a minute."),
    }

    def validate(self, value):
        super().validate(value)
        if value is not None and value < timedelta(minutes=1):
            raise forms.ValidationError(self.error_messages["short"], code="short")


class MemberByNameField(forms.ModelChoiceField):
    """A member typed by their user name (as they sign in), never picked by a number."""

    default_error_messages = {"invalid_choice": _("No member is named “%(value)s”.")}

    def __init__(self, **kwargs):
        model = get_user_model()
        kwargs.setdefault("widget", forms.TextInput(attrs={"size": 30, "autocomplete": "off"}))
        super().__init__(queryset=model._default_manager.all(), to_field_name=model.USERNAME_FIELD, **kwargs)

    def to_python(self, value):
        try:
            return super().to_python(value.strip() if isinstance(value, str) else value)
        except ValidationError:
            raise ValidationError(self.error_messages["invalid_choice"], code="invalid_choice", params={"value": value})


class BlockForm(forms.ModelForm):
    user = MemberByNameField(
        label=capfirst(_("member")),
        required=False,
        help_text=_("Or: one member, wherever they connect from, by the name they sign in with."),
    )

    class Meta:
        model = Block
        fields = ["network", "user", "actions", "severity", "multiplier", "expires_at", "reason"]
        widgets = {"reason": forms.Textarea(attrs={"rows": 3, "cols": 60})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.user_id is not None:
            # Shown by name, as it is typed (the saved row holds its primary key).
            self.initial["user"] = self.instance.user.get_username()


class BlockImportForm(forms.Form):
    lines = forms.CharField(
        label=_("Address ranges"),
        widget=forms.Textarea(attrs={"rows": 12, "cols": 60, "spellcheck": "false"}),
        help_text=_(
            "One per line: the range, then its reason, e.g. “203.0.113.0/24 spam wave”. "
            "Empty lines and lines starting with # are skipped."
        ),
    )
    severity = forms.ChoiceField(label=capfirst(_("severity")), choices=Severity.choices, initial=Severity.REFUSE)
    multiplier = forms.DecimalField(
        label=capfirst(_("multiplier")),
        required=False,
        max_digits=6,
        decimal_places=2,
        help_text=_("For tightening (below 1, e.g. 0.5) or loosening (above 1, e.g. 3) only."),
    )
    actions = forms.CharField(
        label=capfirst(_("actions")),
        required=False,
        help_text=_("Leave empty for every action, or name actions separated by commas."),
    )
    lasts = LastsField(
        label=capfirst(_("for how long")),
        required=False,
        help_text=_("Leave empty to keep them until they are deleted. %(how)s") % {"how": LASTS_HELP},
    )
    default_reason = forms.CharField(
        label=capfirst(_("reason for lines without one")),
        required=False,
        widget=forms.TextInput(attrs={"size": 60}),
    )

    def clean_actions(self):
        try:
            return canonical_actions(self.cleaned_data["actions"])
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages)

    def clean(self):
        data = super().clean()
        for field, message in check_multiplier(data.get("severity"), data.get("multiplier")).items():
            self.add_error(field, message)
        if "lines" in data:
            entries, errors = parse_lines(data["lines"], data.get("default_reason") or "")
            if errors:
                # One message per line that does not parse; nothing is imported until all do.
                self.add_error("lines", errors)
            data["entries"] = entries
        return data

    @property
    def expires_at(self):
        lasts = self.cleaned_data.get("lasts")
        return timezone.now() + lasts if lasts else None


class SurgeForm(forms.ModelForm):
    """Starting a surge: every limit (or some actions') multiplied, for how long, and why."""

    lasts = LastsField(label=capfirst(_("for how long")), help_text=LASTS_HELP)

    class Meta:
        model = Surge
        fields = ["multiplier", "lasts", "actions", "reason"]
        widgets = {"reason": forms.Textarea(attrs={"rows": 3, "cols": 60})}

    def clean_lasts(self):
        lasts = self.cleaned_data["lasts"]
        if lasts is not None and lasts > timedelta(minutes=SURGE_MOST_MINUTES):
            raise forms.ValidationError(_("A surge lasts at most 7 days: a longer tightening is a policy edit."))
        return lasts

    def clean(self):
        data = super().clean()
        lasts = data.get("lasts")
        if lasts is not None:
            self.instance.started_at = timezone.now()
            self.instance.ends_at = self.instance.started_at + lasts
        return data


class SurgeTriggerForm(forms.ModelForm):
    class Meta:
        model = SurgeTrigger
        fields = ["policy", "threshold", "period", "multiplier", "minutes", "this_action_only", "enabled"]


class EndSurgeForm(forms.Form):
    reason = forms.CharField(
        label=_("Reason for ending it now"),
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text=_("Required. It is kept with the surge and your name."),
        error_messages={"required": _("Say why the surge ends early; it is kept with the surge.")},
    )
