"""Who may use the moderation pages (penalties, overrides, the report): THROTTLING_MODERATORS, or Django's permissions."""

from ..engine.moderators import custom, is_moderator


def may(user, codename):
    """May `user` do what the permission throttling.<codename> allows on the moderation pages?

    By default, Django's model permissions decide. With THROTTLING_MODERATORS set, the site's
    moderators may, and nobody else: the setting names them. The admin site itself still lets in only
    active staff (Django's rule): give moderators is_staff, with no other permissions if you like.
    """
    if not custom():
        return user.has_perm(f"throttling.{codename}")
    return moderates(user)


def moderates(user):
    """True when THROTTLING_MODERATORS names `user` (an active account)."""
    return user.is_active and is_moderator(user)


class ModeratedAdmin:
    """A moderation page: with THROTTLING_MODERATORS set, its moderators may view, add and change here."""

    def has_module_permission(self, request):
        return moderates(request.user) if custom() else super().has_module_permission(request)

    def has_view_permission(self, request, obj=None):
        return moderates(request.user) if custom() else super().has_view_permission(request, obj)

    def has_add_permission(self, request, obj=None):
        return moderates(request.user) if custom() else super().has_add_permission(request)

    def has_change_permission(self, request, obj=None):
        return moderates(request.user) if custom() else super().has_change_permission(request, obj)
