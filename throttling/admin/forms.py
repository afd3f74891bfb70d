"""Admin forms: policies and windows (the models explain bad values), counter reset, penalties and the ladder."""

from django import forms
from django.forms.models import BaseInlineFormSet
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.translation import gettext, ngettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from ..common.choices import ContentAnswer, Scope
from ..common.words import duration_in_words
from ..conf import settings
from ..models import ActionPolicy, ActionWindow, MemberOverride, Penalty, PenaltyStep
from ..penalties import standing
from .fields import FriendlyDurationField, PeriodField, leave_ranges_to_the_model

# A value no action can take (actions are [a-z0-9_-]+), so it can never shadow a policy.
ALL_ACTIONS = "*"

# Capitalised as Django capitalises the model's own labels beside it ("Maximum in the period").
PERIOD_LABEL = pgettext_lazy("length of a policy window", "Period")
PERIOD_HELP = _("Type it as you would write it: “90s”, “10m”, “1h”, “7d” (or a number of seconds).")


class ActionPolicyForm(forms.ModelForm):
    period = PeriodField(label=PERIOD_LABEL, help_text=PERIOD_HELP)
    same_content_period = PeriodField(
        label=_("Period of repeated content"),
        required=False,
        help_text=_(
            "How long a post is remembered, typed as for the main limit (“10m”, “1h”), at most a day. "
            "Its text is never kept, only hashes of it."
        ),
    )

    class Meta:
        model = ActionPolicy
        fields = [
            "action",
            "description",
            "verb",
            "period",
            "max_count",
            "algorithm",
            "enabled",
            "exempt_staff",
            "on_backend_failure",
            "offence_threshold",
            "offence_window",
            "same_content_max",
            "same_content_members",
            "same_content_period",
            "same_content_answer",
            "hold_until_approved",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        leave_ranges_to_the_model(self)
        if "same_content_members" in self.fields:
            self.fields["same_content_members"].help_text = wave_help()

        # A form posted without it (a script, an older page) keeps the default: repeats are refused.
        if "same_content_answer" in self.fields:  # a viewer's form has none
            self.fields["same_content_answer"].required = False

    def clean_same_content_answer(self):
        return self.cleaned_data.get("same_content_answer") or ContentAnswer.REFUSE


def wave_help():
    """What makes a wave, in words, with the site's THROTTLING_CONTENT_WAVE_WORDS."""
    words = settings.CONTENT_WAVE_WORDS
    return ngettext(
        "A wave: once this many different members posted the same content within the period, anyone else "
        "posting it is refused as spam. A post with a link, an address or a mention makes a wave however "
        "short it is; a post without one only from %(words)s word (Chinese and Japanese: 1.5 characters a "
        "word), so “Happy birthday!” from many members is never a wave. A surge multiplies this limit too. "
        "Blank: no limit across members.",
        "A wave: once this many different members posted the same content within the period, anyone else "
        "posting it is refused as spam. A post with a link, an address or a mention makes a wave however "
        "short it is; a post without one only from %(words)s words (Chinese and Japanese: 1.5 characters a "
        "word), so “Happy birthday!” from many members is never a wave. A surge multiplies this limit too. "
        "Blank: no limit across members.",
        words,
    ) % {"words": words}


class ActionWindowForm(forms.ModelForm):
    period = PeriodField(label=PERIOD_LABEL)

    class Meta:
        model = ActionWindow
        fields = ["period", "max_count"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        leave_ranges_to_the_model(self)


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
        required=False,
        help_text=_(
            "A member’s username. For an anonymous visitor, type their IP address "
            "(e.g. 203.0.113.7); visitors from IPv6 are counted per network (/64 by "
            "default), so any address of that network resets it. Anything else is "
            "taken as an identity string, exactly as your code passes it to throttling."
        ),
    )
    site_wide = forms.BooleanField(
        label=_("The site-wide count"),
        required=False,
        help_text=_(
            "Site-wide policies keep one count shared by everyone, not one per member: tick this to "
            "reset it (a lockout of the whole site, say)."
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
        self.site_actions = [p.action for p in policies if p.scope == Scope.SITE]
        for policy in policies:
            label = f"{policy.action} ({policy.windows_display()})"
            if policy.scope == Scope.SITE:
                label = gettext("%(policy)s, site-wide") % {"policy": label}
            if not policy.enabled:
                label = gettext("%(policy)s, disabled") % {"policy": label}
            choices.append((policy.action, label))
        self.fields["action"].choices = choices

    def clean(self):
        data = super().clean()
        member, site_wide = data.get("member", "").strip(), data.get("site_wide")
        data["member"] = member
        if "action" not in data:
            return data
        chosen = data["action"]  # None: every action
        site = [a for a in self.site_actions if chosen is None or a in chosen]
        if not member and not site_wide:
            self.add_error("member", _("Type a member, or tick the site-wide count."))
        elif site_wide and not site:
            self.add_error("site_wide", _("None of the chosen actions is counted site-wide."))
        elif member and chosen is not None and len(site) == len(chosen):
            # Resetting the member would report success and change nothing.
            self.add_error(
                "member",
                _("The chosen actions are counted site-wide, not per member: tick the site-wide count to reset them."),
            )
        data["site_actions"] = site
        return data

    def clean_action(self):
        chosen = self.cleaned_data["action"]
        if ALL_ACTIONS in chosen:
            if len(chosen) > 1:
                raise forms.ValidationError(
                    _("Choose either “all actions” or particular actions, not both."), code="ambiguous"
                )
            return None
        return chosen


# --- Penalties ----------------------------------------------------------------

DURATION_HELP = _(
    "Type it as you would say it: “15 minutes”, “1 hour”, “7 days”, “1h 30m” "
    "(w = weeks, d = days, h = hours, m = minutes, s = seconds). 0 is a warning: "
    "it counts as a strike but blocks nothing."
)


class PenaltyStepForm(forms.ModelForm):
    duration = FriendlyDurationField(label=_("Duration"), help_text=DURATION_HELP)

    class Meta:
        model = PenaltyStep
        fields = ["level", "name", "duration", "all_actions"]
        error_messages = {
            "level": {
                "unique": _("The ladder already has a rung at this level. Edit that rung, or choose another level."),
            },
        }


def rung_label(step):
    return gettext("Level %(level)d: %(name)s (%(duration)s%(scope)s)") % {
        "level": step.level,
        "name": step.name,
        "duration": duration_in_words(step.duration),
        "scope": gettext(", all actions") if step.all_actions else "",
    }


class RungChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj):
        return rung_label(obj)


class PenaltyAddForm(forms.ModelForm):
    """A moderator's penalty. The admin saves it through penalties.apply_penalty, never form.save()."""

    action = forms.ChoiceField(
        label=_("Scope"),
        required=False,
        help_text=_(
            "The action the member may no longer perform, or “all actions” to restrict everything that is limited."
        ),
        error_messages={
            "invalid_choice": _(
                "“%(value)s” is not an action with a policy. Choose one from the list, or “all actions”."
            )
        },
    )
    rung = RungChoiceField(
        label=_("Ladder rung"),
        queryset=PenaltyStep.objects.order_by("level"),
        required=False,
        empty_label=_("— none: use the custom duration below —"),
        help_text=_(
            "The rung gives the length and the level; the scope above still decides what is "
            "restricted. Leave it empty to type a custom duration instead."
        ),
    )
    duration = FriendlyDurationField(
        label=_("Custom duration"),
        required=False,
        help_text=lazy(
            lambda: (
                gettext(
                    "%(help)s With a custom duration the penalty is recorded at the level the "
                    "ladder would give this member’s next strike."
                )
                % {"help": DURATION_HELP}
            ),
            str,
        )(),
    )
    reason = forms.CharField(
        label=_("Reason"),
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text=_("Required. The member reads it when they are refused, and it stays in their history."),
        error_messages={"required": _("Say why: the member reads the reason, and it stays in their history.")},
    )

    class Meta:
        model = Penalty
        fields = ["user", "action", "reason"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        choices = [("", _("all actions"))]
        for action, enabled in ActionPolicy.objects.order_by("action").values_list("action", "enabled"):
            if not enabled:
                action_label = gettext("%(action)s (policy disabled: not enforced until it is enabled)")
                choices.append((action, action_label % {"action": action}))
            else:
                choices.append((action, action))
        self.fields["action"].choices = choices
        if "user" in self.fields:
            self.fields["user"].help_text = _("The member to restrict: their id, or look them up with the magnifier.")
            self.fields["user"].error_messages["invalid_choice"] = _(
                "No member has the id “%(value)s”. Look the member up with the magnifier."
            )

    def clean(self):
        data = super().clean()
        rung, duration = data.get("rung"), data.get("duration")
        if "duration" in self.errors:
            return data
        if rung is None and duration is None:
            raise forms.ValidationError(_("Choose a ladder rung or type a custom duration."), code="no_length")
        if rung is not None and duration is not None:
            raise forms.ValidationError(
                _("Choose a ladder rung or type a custom duration, not both."), code="two_lengths"
            )
        if rung is not None:
            data["level"], data["duration"] = rung.level, rung.duration
        else:
            data["level"] = self.next_level(data.get("user"))
        # The instance gets provisional times so the model's own checks run on
        # the form; apply_penalty sets the real ones when it saves.
        self.instance.level = data["level"]
        self.instance.starts_at = timezone.now()
        self.instance.ends_at = self.instance.starts_at + data["duration"]
        return data

    @staticmethod
    def next_level(user):
        if user is None:
            return 1
        _count, rung = standing(user)
        return rung.level if rung is not None else 1


# --- Overrides -------------------------------------------------------------------

SELF_GRANT_MESSAGE = _(
    "You cannot grant yourself an override. Ask another moderator: an exemption or higher limits "
    "are granted by someone other than the member who gets them."
)


class MemberOverrideAddForm(forms.ModelForm):
    """Granting an override. The admin sets `moderator` on the class it makes for each request."""

    moderator = None

    class Meta:
        model = MemberOverride
        fields = ["user", "action", "exempt", "multiplier", "expires_at", "reason"]

    def clean_user(self):
        user = self.cleaned_data["user"]
        if self.moderator is not None and user is not None and user.pk == self.moderator.pk:
            raise forms.ValidationError(SELF_GRANT_MESSAGE, code="self_grant")
        return user


def _reason_field(label, help_text, required):
    """The required reason a moderator gives for ending something early (kept on the record)."""
    return forms.CharField(
        label=label,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text=help_text,
        error_messages={"required": required},
    )


class RevokeOverridesForm(forms.Form):
    reason = _reason_field(
        _("Reason for revoking"),
        _("Required. It is kept with the override and your name."),
        _("Say why the override ends; it is kept with the override."),
    )


class LiftPenaltiesForm(forms.Form):
    reason = _reason_field(
        _("Reason for lifting"),
        _("Required. It is kept in the penalty’s history with your name."),
        _("Say why the penalty is lifted; it is kept in the penalty’s history."),
    )


class RejectHeldForm(forms.Form):
    reason = _reason_field(
        _("Why rejected"),
        _("Required. It is kept with the held post and your name; each rejection counts as a refused attempt."),
        _("Say why these posts are rejected; it is kept with them."),
    )
