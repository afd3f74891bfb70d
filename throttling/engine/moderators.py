"""Who moderates: THROTTLING_MODERATORS (a permission name, or a callable of the user), resolved once."""

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string
from django.utils.translation import gettext

from ..conf import settings

SETTING = "THROTTLING_MODERATORS"


def staff(user):
    """Django's own staff: the default, when THROTTLING_MODERATORS is None."""
    return user.is_staff or user.is_superuser


def resolve(value):
    """The test a THROTTLING_MODERATORS value stands for, as a function of the user.

    None: Django staff. "app.codename": user.has_perm (an active superuser has every permission).
    A callable, or the dotted path of one: called with the user. Raises ValueError or ImportError
    for anything else, with words a site owner understands (the check throttling.E010 says the same).
    """
    if value is None:
        return staff
    if callable(value):
        return value
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            gettext(
                "THROTTLING_MODERATORS is %(value)r; it must be None, a permission name such as "
                "“forum.moderate”, or a function of the user (or its dotted path) that returns True for moderators."
            )
            % {"value": value}
        )
    app_label, dot, codename = value.partition(".")
    if dot and app_label and codename and "." not in codename:
        return lambda user: user.has_perm(value)
    try:
        found = import_string(value)
    except ImportError as exc:
        raise ImportError(
            gettext(
                "THROTTLING_MODERATORS is %(value)r: neither a permission name “app_label.codename” nor the "
                "dotted path of a function that can be imported (%(error)s)."
            )
            % {"value": value, "error": exc}
        )
    if not callable(found):
        raise ValueError(
            gettext("THROTTLING_MODERATORS is %(value)r, which names %(found)r: not a function of the user.")
            % {"value": value, "found": found}
        )
    return found


_test = [None]


def is_moderator(user):
    """True when `user` moderates by THROTTLING_MODERATORS: exempt from policies that exempt staff,
    and (when the setting is given) allowed the moderation pages. Resolved once per setting."""
    test = _test[0]
    if test is None:
        test = _test[0] = resolve(settings.MODERATORS)
    return bool(test(user))


def custom():
    """True when the site names its moderators (THROTTLING_MODERATORS is not None)."""
    return settings.MODERATORS is not None


@receiver(setting_changed)
def _moderators_changed(setting, **kwargs):
    if setting == SETTING:
        _test[0] = None
