"""Admin forms: policy and window forms that let the models explain bad values, and the reset form."""

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.forms.models import BaseInlineFormSet
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from .models import ActionPolicy, ActionWindow

# A value no action can take (actions are [a-z0-9_-]+), so it can never shadow a policy.
ALL_ACTIONS = "*"

RANGE_FIELDS = ("period", "max_count")


def _leave_ranges_to_the_model(form):
    # PositiveIntegerField gives its form field a bare ">= 0" check, which would
    # answer "-1" with a message that explains nothing and hide the model's own
    # messages (range in days, the memory cap). The model validates the range.
    for name in RANGE_FIELDS:
        field = form.fields.get(name)
        if field is not None:
            field.validators = [
                v for v in field.validators if not isinstance(v, (MinValueValidator, MaxValueValidator))
            ]


class ActionPolicyForm(forms.ModelForm):
    class Meta:
        model = ActionPolicy
        fields = [
            "action",
            "description",
            "verb",
            "period",
            "max_count",
            "enabled",
            "exempt_staff",
            "on_backend_failure",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _leave_ranges_to_the_model(self)


class ActionWindowForm(forms.ModelForm):
    class Meta:
        model = ActionWindow
        fields = ["period", "max_count"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _leave_ranges_to_the_model(self)


class ActionWindowFormSet(BaseInlineFormSet):
    def get_unique_error_message(self, unique_check):
        # Two new rows with one period never reach the database check; say it
        # the way the model's constraint does instead of "duplicate data".
        for constraint in ActionWindow._meta.constraints:
            if tuple(getattr(constraint, "fields", ())) == tuple(unique_check):
                return constraint.violation_error_message
        return super().get_unique_error_message(unique_check)


class ResetCountersForm(forms.Form):
    member = forms.CharField(
        label=_("Member"),
        max_length=255,
        help_text=_(
            "A member’s username. For an anonymous visitor, type their IP address "
            "(e.g. 203.0.113.7); visitors from IPv6 are counted per network (/64 by "
            "default), so any address of that network resets it. Anything else is "
            "taken as an identity string, exactly as your code passes it to throttling."
        ),
    )
    action = forms.MultipleChoiceField(
        label=_("Actions"),
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Tick “all actions”, or the actions whose counters to reset."),
        error_messages={"required": _("Choose “all actions” or at least one action.")},
    )

    def __init__(self, *args, policies=(), **kwargs):
        super().__init__(*args, **kwargs)
        choices = [(ALL_ACTIONS, _("all actions"))]
        for policy in policies:
            label = f"{policy.action} ({policy.windows_display()})"
            if not policy.enabled:
                label = gettext("%(policy)s, disabled") % {"policy": label}
            choices.append((policy.action, label))
        self.fields["action"].choices = choices

    def clean_action(self):
        chosen = self.cleaned_data["action"]
        if ALL_ACTIONS in chosen:
            if len(chosen) > 1:
                raise forms.ValidationError(
                    _("Choose either “all actions” or particular actions, not both."), code="ambiguous"
                )
            return None
        return chosen
