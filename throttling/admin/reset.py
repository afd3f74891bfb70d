"""Resetting counters from the admin (a member's, a visitor's, or a site-wide policy's): who the moderator means, and the reset page."""

import ipaddress
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from ..engine.api import reset
from ..engine.identity import identify
from ..exceptions import BackendError
from ..models import ActionPolicy
from .forms import ResetCountersForm


class _AnonymousVisitor:
    """Just what identify() reads of a request: an anonymous visitor at one address.

    Resetting by IP must delete the keys a real request from that address was
    counted under, so the address goes through the same identify() (IPv6 /64
    grouping included) rather than being formatted here.
    """

    def __init__(self, address):
        self.META = {"REMOTE_ADDR": address}
        self.user = AnonymousUser()


def member_to_reset(text):
    """Return (who for reset(), description for people, whether it is a known username)."""
    User = get_user_model()
    try:
        user = User._default_manager.get_by_natural_key(text)
    except User.DoesNotExist:
        pass
    else:
        return user, gettext("member “%(username)s”") % {"username": user.get_username()}, True
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return text, gettext("identity “%(identity)s”") % {"identity": text}, False
    visitor = _AnonymousVisitor(text)
    address = identify(visitor)[0].removeprefix("ip:")
    return visitor, gettext("anonymous visitors from %(address)s") % {"address": address}, False


class ResetCountersMixin:
    """The policy admin's "reset a member's counters" action and page."""

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            "can_reset_counters": self.has_change_permission(request),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context)

    def get_urls(self):
        name = f"{self.opts.app_label}_{self.opts.model_name}_reset"
        # Before the default URLs: their "<path:object_id>/" would swallow "reset/".
        return [
            path("reset/", self.admin_site.admin_view(self.reset_view), name=name),
            *super().get_urls(),
        ]

    def reset_url(self):
        return reverse(
            f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_reset",
            current_app=self.admin_site.name,
        )

    @admin.action(description=_("Reset a member’s counters for the selected actions"), permissions=["change"])
    def reset_counters(self, request, queryset):
        query = urlencode([("action", action) for action in queryset.values_list("action", flat=True)])
        return HttpResponseRedirect(f"{self.reset_url()}?{query}")

    def reset_view(self, request):
        if not self.has_change_permission(request):
            raise PermissionDenied
        policies = list(ActionPolicy.objects.prefetch_related("windows"))
        if request.method == "POST":
            form = ResetCountersForm(request.POST, policies=policies)
            if form.is_valid() and self._reset(request, form.cleaned_data):
                return HttpResponseRedirect(request.path)
        else:
            form = ResetCountersForm(
                initial={"member": request.GET.get("member", ""), "action": request.GET.getlist("action")},
                policies=policies,
            )
        adminform = helpers.AdminForm(form, [(None, {"fields": ["member", "site_wide", "action"]})], {})
        context = {
            **self.admin_site.each_context(request),
            "title": _("Reset a member’s counters"),
            "opts": self.opts,
            "has_view_permission": self.has_view_permission(request),
            "form": form,
            "adminform": adminform,
            "errors": helpers.AdminErrorList(form, []),
            "media": self.media + adminform.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/throttling/actionpolicy/reset_counters.html", context)

    def _reset(self, request, data):
        """Reset, log and tell the moderator; False when Redis could not do it."""
        if data["site_wide"] and not self._reset_site(request, data["site_actions"]):
            return False
        return not data["member"] or self._reset_member(request, data)

    def _reset_site(self, request, actions):
        """Reset the one count everyone shares of each site-wide action chosen."""
        try:
            for action in actions:
                reset(None, action)
        except BackendError as exc:
            self._unavailable(request, gettext("the site-wide count"), exc)
            return False
        message = ngettext(
            "The site-wide count was reset for %(count)d action: %(actions)s.",
            "The site-wide counts were reset for %(count)d actions: %(actions)s.",
            len(actions),
        ) % {"count": len(actions), "actions": ", ".join(actions)}
        LogEntry.objects.log_actions(
            user_id=request.user.pk,
            queryset=list(ActionPolicy.objects.filter(action__in=actions)),
            action_flag=CHANGE,
            change_message=message,
        )
        self.message_user(request, message, messages.SUCCESS)
        return True

    def _unavailable(self, request, member, exc):
        self.message_user(
            request,
            gettext(
                "The counters of %(member)s could not be reset because Redis is "
                "unavailable (%(error)s). Try again when it is back."
            )
            % {"member": member, "error": exc},
            messages.ERROR,
        )

    def _reset_member(self, request, data):
        who, member, known_username = member_to_reset(data["member"])
        actions = data["action"]  # None means every action
        try:
            for action in actions or [None]:
                reset(who, action)
        except BackendError as exc:
            self._unavailable(request, member, exc)
            return False
        if actions is None:
            message = gettext("The counters of %(member)s were reset for all actions.") % {"member": member}
            changed = ActionPolicy.objects.all()
        else:
            message = ngettext(
                "The counters of %(member)s were reset for %(count)d action: %(actions)s.",
                "The counters of %(member)s were reset for %(count)d actions: %(actions)s.",
                len(actions),
            ) % {"member": member, "count": len(actions), "actions": ", ".join(actions)}
            changed = ActionPolicy.objects.filter(action__in=actions)
        LogEntry.objects.log_actions(
            user_id=request.user.pk, queryset=list(changed), action_flag=CHANGE, change_message=message
        )
        self.message_user(request, message, messages.SUCCESS)
        if not known_username and isinstance(who, str):
            self.message_user(
                request,
                gettext("No member has the username “%(name)s”, so it was reset as an identity string.")
                % {"name": who},
                messages.WARNING,
            )
        return True
