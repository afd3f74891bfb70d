"""The settings of alerts, checked by throttling.E003 like every setting."""

import pytest

from throttling.checks.settings import check_settings


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("ALERT_EMAILS", "mods@example.org", "None or a list of email addresses"),
        ("ALERT_EMAILS", ["mods@example.org", "nobody"], "None or a list of email addresses"),
        ("ALERT_DIGEST", 0, "a number of seconds ≥ 1"),
        ("ALERT_DIGEST", True, "a number of seconds ≥ 1"),
        ("ALERT_RUNG", 0, "None or a ladder level ≥ 1"),
        ("ALERT_RUNG", "4", "None or a ladder level ≥ 1"),
    ],
)
def test_e003_refuses_alert_settings_out_of_range(settings, name, value, expected):
    setattr(settings, f"THROTTLING_{name}", value)
    (error,) = check_settings()
    assert error.id == "throttling.E003"
    assert f"THROTTLING_{name} is {value!r}" in error.msg and expected in error.msg


@pytest.mark.parametrize(
    "name, value",
    [("ALERT_EMAILS", []), ("ALERT_EMAILS", ("a@example.org",)), ("ALERT_DIGEST", 60.5), ("ALERT_RUNG", None)],
)
def test_alert_settings_in_range_pass(settings, name, value):
    setattr(settings, f"THROTTLING_{name}", value)
    assert check_settings() == []
