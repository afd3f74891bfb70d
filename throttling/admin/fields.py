"""Form fields that read lengths typed the way people write them: "90s", "15 minutes", "1h 30m"."""

import re
from datetime import timedelta

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.translation import gettext_lazy as _

from ..common.durations import duration_input, parse_duration_text

RANGE_FIELDS = ("period", "max_count", "same_content_max", "same_content_members", "same_content_period")


def leave_ranges_to_the_model(form):
    # PositiveIntegerField gives its form field a bare ">= 0" check, which would
    # answer "-1" with a message that explains nothing and hide the model's own
    # messages (range in days, the memory cap). The model validates the range.
    for name in RANGE_FIELDS:
        field = form.fields.get(name)
        if field is not None:
            field.validators = [
                v for v in field.validators if not isinstance(v, (MinValueValidator, MaxValueValidator))
            ]


def refuse_a_fraction_of_a_second(parsed, typed, message):
    # Windows and penalties are kept in whole seconds. Rounding "1.5s" to 2 would
    # save a length nobody typed, so the moderator is asked instead ("1.5m" is
    # a whole 90 seconds and passes).
    if parsed.microseconds:
        raise forms.ValidationError(message, code="fraction", params={"value": str(typed).strip()})


# Longer than any sensible restriction, short enough that an end time never
# overflows a datetime.
MAX_PENALTY_DURATION = timedelta(days=3650)


class FriendlyDurationField(forms.Field):
    """A duration typed the way people say it: "15 minutes", "1 day", "1h 30m", "0"."""

    default_error_messages = {
        "invalid": _(
            "Type a length such as “15 minutes”, “1 hour”, “7 days” or “1h 30m” "
            "(units: w, d, h, m for minutes, s), or 0 for a warning."
        ),
        "negative": _("A duration cannot be negative."),
        "too_long": _("A duration can be at most 3650 days (about 10 years)."),
        "fraction": _(
            "A duration is counted in whole seconds, and “%(value)s” has a fraction of a second. "
            "Type whole seconds, such as “90s”."
        ),
    }

    def prepare_value(self, value):
        if isinstance(value, timedelta):
            return duration_input(value)
        return value

    def to_python(self, value):
        if value in self.empty_values:
            return None
        if isinstance(value, timedelta):
            return value
        try:
            parsed = parse_duration_text(str(value))
        except OverflowError:
            raise forms.ValidationError(self.error_messages["too_long"], code="too_long") from None
        if parsed is None:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        refuse_a_fraction_of_a_second(parsed, value, self.error_messages["fraction"])
        return parsed

    def validate(self, value):
        super().validate(value)
        if value is None:
            return
        if value < timedelta(0):
            raise forms.ValidationError(self.error_messages["negative"], code="negative")
        if value > MAX_PENALTY_DURATION:
            raise forms.ValidationError(self.error_messages["too_long"], code="too_long")


class PeriodField(forms.Field):
    """A window's period typed as people write it ("90s", "10m", "1h", "7d", "1h 30m", or plain
    seconds as before) and shown the same way; stored as whole seconds. The model checks the range."""

    default_error_messages = {
        "invalid": _(
            "Type a period such as “90s”, “10m”, “1h”, “7d” or “1h 30m” "
            "(w, d, h, m for minutes, s), or a number of seconds."
        ),
        "fraction": _(
            "A period is counted in whole seconds, and “%(value)s” has a fraction of a second. "
            "Type whole seconds, such as “90s”, or a larger unit, such as “2m”."
        ),
    }

    def prepare_value(self, value):
        if isinstance(value, int) and value > 0:
            return duration_input(timedelta(seconds=value))
        return value

    def to_python(self, value):
        if value in self.empty_values:
            return None
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)  # seconds, as the field always took them
        try:
            parsed = parse_duration_text(text)
        except OverflowError:
            parsed = None
        if parsed is None:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        refuse_a_fraction_of_a_second(parsed, text, self.error_messages["fraction"])
        return int(parsed.total_seconds())
