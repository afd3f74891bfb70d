"""Blocks: an address range or a member refused, watched, tightened or loosened, until they expire."""

import ipaddress
import re
from decimal import Decimal

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ..common.choices import Severity
from ..conf import settings
from .fields import ACTION_RE, moderator_field, multiplier_field
from .policies import ActionPolicy

# The longest CIDR text: eight groups of four hex digits, seven colons and "/128".
NETWORK_MAX = 43
ACTIONS_MAX = 255
_ACTION = re.compile(ACTION_RE)

BLOCK_REASON_MESSAGE = _("Say why, for the record (members never see it).")
TIGHTEN_MESSAGE = _("Tightening multiplies every limit by a number below 1, e.g. 0.5 halves it.")
LOOSEN_MESSAGE = _("Loosening multiplies every limit by a number above 1, e.g. 3 for a school behind one address.")
NO_MULTIPLIER_MESSAGE = _("Only blocks that tighten or loosen take a multiplier; leave it empty.")
ONE_TARGET_MESSAGE = _("Give an address range or a member, not both.")


def parse_network(text):
    """The ip_network a moderator's text means ("203.0.113.0/24", "2001:db8::/32", "198.51.100.7"), or
    ValidationError saying what is wrong. Host bits are cleared: "203.0.113.9/24" is the /24."""
    text = (text or "").strip()
    if not text:
        raise ValidationError(_("Give an address range, e.g. 203.0.113.0/24 or 2001:db8::/48."))
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise ValidationError(
            _("“%(value)s” is not an IPv4 or IPv6 address or range (write it as 203.0.113.0/24 or 2001:db8::/48)."),
            params={"value": text},
        )
    if network.version == 6 and network.prefixlen >= 96 and network.network_address.ipv4_mapped is not None:
        # Client addresses in this form are read as IPv4 (see Architecture › Spoofable identity).
        raise ValidationError(
            _("“%(value)s” is an IPv4 range written as IPv6: write it as IPv4, e.g. %(ipv4)s."),
            params={"value": text, "ipv4": f"{network.network_address.ipv4_mapped}/{network.prefixlen - 96}"},
        )
    return network


def check_network(text):
    """The ip_network a moderator's text means, or ValidationError when it is not what a moderator
    means: host bits set ("10.1.2.3/8": did they mean 10.0.0.0/8, or the address 10.1.2.3?), or a range
    wider than THROTTLING_BLOCK_WIDEST allows ("0.0.0.0/0" refuses every visitor everywhere)."""
    network = parse_network(text)
    written = (text or "").strip()
    if "/" in written:
        try:
            ipaddress.ip_network(written, strict=True)
        except ValueError:
            raise ValidationError(
                _("“%(value)s” has bits set after its prefix: did you mean %(network)s?"),
                params={"value": written, "network": str(network)},
            )
    widest_v4, widest_v6 = settings.BLOCK_WIDEST
    widest = widest_v4 if network.version == 4 else widest_v6
    if network.prefixlen < widest:
        raise ValidationError(
            _(
                "“%(value)s” is wider than a block may be (an IPv%(version)s /%(widest)s at most, "
                "THROTTLING_BLOCK_WIDEST): it would hold far more visitors than a raid's."
            ),
            params={"value": str(network), "version": network.version, "widest": widest},
        )
    return network


def unknown_actions(names):
    """ValidationError naming the first of `names` no action policy has, with the actions there
    are (a block of a misspelt action never applies); None when every name has a policy."""
    if not names:
        return None
    known = sorted(ActionPolicy.objects.values_list("action", flat=True))
    missing = [name for name in names if name not in known]
    if not missing:
        return None
    return ValidationError(
        _("No policy has the action “%(value)s”; the actions are: %(known)s."),
        params={"value": missing[0], "known": ", ".join(known) or "—"},
    )


def parse_actions(text):
    """The action names of a comma-separated list, in order, without repeats; ValidationError for a bad name."""
    names = []
    for part in (text or "").split(","):
        name = part.strip()
        if not name:
            continue
        if not _ACTION.match(name):
            raise ValidationError(
                _("“%(value)s” is not an action name: use lowercase letters, digits, hyphens and underscores."),
                params={"value": name},
            )
        if name not in names:
            names.append(name)
    return names


def canonical_actions(text):
    """A comma-separated list of actions as it is kept ("post,like": in order, no spaces, no repeats);
    ValidationError for a bad name."""
    return ",".join(parse_actions(text))


def check_multiplier(severity, multiplier):
    """{field: message} of what is wrong with a severity's multiplier (empty when it is right)."""
    if severity == Severity.TIGHTEN and (multiplier is None or multiplier >= 1):
        return {"multiplier": TIGHTEN_MESSAGE}
    if severity == Severity.LOOSEN and (multiplier is None or multiplier <= 1):
        return {"multiplier": LOOSEN_MESSAGE}
    if severity in (Severity.REFUSE, Severity.SHADOW, Severity.HOLD) and multiplier is not None:
        return {"multiplier": NO_MULTIPLIER_MESSAGE}
    return {}


class BlockQuerySet(models.QuerySet):
    def in_force(self, now=None):
        now = now or timezone.now()
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


class Block(models.Model):
    """An address range (CIDR) or a member, and what happens to their requests: refused, recorded as
    would-be refusals, or every limit multiplied. Decided in every process from memory, no Redis call;
    expired blocks stop applying on time and are kept for the record."""

    network = models.CharField(
        _("address range"),
        max_length=NETWORK_MAX,
        blank=True,
        help_text=_(
            "An IPv4 or IPv6 range in CIDR form, e.g. 203.0.113.0/24 or 2001:db8::/48; a single address "
            "is a /32 or a /128. Members who sign in from it are matched too."
        ),
    )
    user = models.ForeignKey(
        django_settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="throttling_blocks",
        verbose_name=_("member"),
        help_text=_("Or: one member, wherever they connect from."),
    )
    actions = models.CharField(
        _("actions"),
        max_length=ACTIONS_MAX,
        blank=True,
        help_text=_("Leave empty for every action, or name actions separated by commas, e.g. “post, reply”."),
    )
    severity = models.CharField(_("severity"), max_length=8, choices=Severity.choices, default=Severity.REFUSE)
    multiplier = multiplier_field(
        null=True,
        blank=True,
        help_text=_("For tightening (below 1, e.g. 0.5) or loosening (above 1, e.g. 3) only."),
    )
    reason = models.TextField(_("reason"), help_text=BLOCK_REASON_MESSAGE)
    expires_at = models.DateTimeField(
        _("expires"), null=True, blank=True, help_text=_("Leave empty to keep it until it is deleted.")
    )
    created_by = moderator_field(_("created by"), editable=False)
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    first_refused_at = models.DateTimeField(
        _("first refusal"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("When this block first refused a request (moderators are told once)."),
    )

    objects = BlockQuerySet.as_manager()

    class Meta:
        verbose_name = _("block")
        verbose_name_plural = _("blocks")
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(network="") & Q(user__isnull=False)) | (~Q(network="") & Q(user__isnull=True)),
                name="throttling_block_network_or_user",
                violation_error_message=ONE_TARGET_MESSAGE,
            ),
            models.CheckConstraint(
                condition=Q(reason__regex=r"\S"),
                name="throttling_block_reason",
                violation_error_message=BLOCK_REASON_MESSAGE,
            ),
            models.CheckConstraint(
                condition=Q(severity__in=Severity.values),
                name="throttling_block_severity",
                violation_error_message=_("Choose refuse, hold, shadow, tighten or loosen."),
            ),
            models.CheckConstraint(
                condition=(Q(severity=Severity.TIGHTEN) & Q(multiplier__gte=Decimal("0.01"), multiplier__lt=1))
                | (Q(severity=Severity.LOOSEN) & Q(multiplier__gt=1, multiplier__lte=Decimal("100")))
                | (Q(severity__in=[Severity.REFUSE, Severity.SHADOW, Severity.HOLD]) & Q(multiplier__isnull=True)),
                name="throttling_block_multiplier",
                violation_error_message=_("Tighten takes a multiplier below 1, loosen one above 1, the others none."),
            ),
        ]
        indexes = [models.Index(fields=["expires_at"], name="throttling_block_expires")]

    def __str__(self):
        return gettext("%(target)s: %(what)s") % {"target": self.target_display(), "what": self.get_severity_display()}

    def target_display(self):
        return self.network if self.network else str(self.user)

    def action_names(self):
        return parse_actions(self.actions)

    @property
    def in_force(self):
        return self.expires_at is None or self.expires_at > timezone.now()

    def save(self, *args, **kwargs):
        # Rows written in code are kept in the form the admin writes (a canonical range, "post,like"):
        # what does not parse is left as it is, and skipped with a warning when blocks are loaded.
        if self.network:
            try:
                self.network = str(parse_network(self.network))
            except ValidationError:
                pass
        try:
            self.actions = canonical_actions(self.actions)
        except ValidationError:
            pass
        super().save(*args, **kwargs)

    def _expiry_changed(self):
        """True for a new block, or one whose expiry differs from the saved one (a block that ran out
        keeps its expiry: its record stays editable)."""
        if self.pk is None:
            return True
        saved = type(self).objects.filter(pk=self.pk).values_list("expires_at", flat=True).first()
        return saved != self.expires_at

    def clean(self):
        super().clean()
        errors = {}
        if self.network and self.user_id:
            errors["network"] = ONE_TARGET_MESSAGE
        elif not self.network and not self.user_id:
            errors["network"] = _("Give an address range or a member.")
        elif self.network:
            try:
                self.network = str(check_network(self.network))
            except ValidationError as exc:
                errors["network"] = exc.messages
        try:
            self.actions = canonical_actions(self.actions)
        except ValidationError as exc:
            errors["actions"] = exc.messages
        else:
            unknown = unknown_actions(parse_actions(self.actions))
            if unknown is not None:
                errors["actions"] = unknown.messages
        if len(self.actions) > ACTIONS_MAX:
            errors["actions"] = _("Name fewer actions, or leave it empty for every action.")
        if self.expires_at is not None and self.expires_at <= timezone.now() and self._expiry_changed():
            errors["expires_at"] = _("That time has passed: give a time to come, or leave it empty.")
        errors.update(check_multiplier(self.severity, self.multiplier))
        if not (self.reason or "").strip():
            errors["reason"] = BLOCK_REASON_MESSAGE
        if errors:
            raise ValidationError(errors)
