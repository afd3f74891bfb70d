"""Members see their penalties: each one (a warning included) shown once, on their next page."""

import asyncio
from dataclasses import dataclass

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.apps import apps
from django.contrib import messages
from django.db import connection
from django.utils import timezone

from ..common.words import notice_message
from ..models import Penalty

# Where a request keeps the notices it claimed, so the middleware, the context processor and the
# template tag share one query and never show a penalty twice.
_CLAIMED = "_throttling_notices"
# Penalties whose refusal this process already counted as shown (a spammer is refused again and again).
_SHOWN_LIMIT = 4096
_shown = set()
# The messages-framework tags of a notice: the level's own, then this one for styling.
EXTRA_TAGS = "throttling-notice"


@dataclass(frozen=True)
class Notice:
    """One penalty, as the member reads it once."""

    penalty: Penalty
    text: str

    @property
    def kind(self):
        """ "warning" or "restricted", for a template's classes."""
        return "warning" if self.penalty.is_warning else "restricted"

    def __str__(self):
        return self.text


def _member(request):
    user = getattr(request, "user", None)
    return user if user is not None and user.is_authenticated else None


def claim(request):
    """The notices of penalties the request's member has not been shown yet, marked shown now.

    One indexed query for a signed-in member (none for a visitor), once per request; a penalty is
    claimed by one request only, so two pages open at once do not both show it. A penalty lifted
    before it was shown is marked, not shown. No request (a template rendered without one): none.
    """
    if request is None:
        return []
    if hasattr(request, _CLAIMED):
        return getattr(request, _CLAIMED)
    notices = []
    user = _member(request)
    if user is not None:
        now = timezone.now()
        for penalty in Penalty.objects.filter(user_id=user.pk, noticed_at__isnull=True).order_by("starts_at", "pk"):
            if penalty.starts_at > now:
                continue  # scheduled: shown once it starts
            won = Penalty.objects.filter(pk=penalty.pk, noticed_at__isnull=True).update(noticed_at=now)
            if won and penalty.lifted_at is None:
                notices.append(Notice(penalty, notice_message(penalty, now)))
    setattr(request, _CLAIMED, notices)
    return notices


def mark_shown(info):
    """A penalty the member was refused with (the 429 said it; `info` is its PenaltyInfo) counts as
    shown: no notice follows.

    Once per penalty and process; from an async view, in a worker thread (the ORM is synchronous).
    """
    if info in _shown:
        return
    if len(_shown) >= _SHOWN_LIMIT:
        _shown.clear()
    _shown.add(info)
    penalty_id = info.penalty_id
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _record_shown(penalty_id)
    else:
        loop.run_in_executor(None, _record_shown_in_thread, penalty_id)


def _record_shown(penalty_id):
    Penalty.objects.filter(pk=penalty_id, noticed_at__isnull=True).update(noticed_at=timezone.now())


def _record_shown_in_thread(penalty_id):
    try:
        _record_shown(penalty_id)
    finally:
        connection.close()


def _handed_to_messages(request):
    """Claim the member's notices into Django's messages, when the site uses the messages framework."""
    if not (hasattr(request, "_messages") and apps.is_installed("django.contrib.messages")):
        return
    for notice in claim(request):
        messages.add_message(request, messages.WARNING, notice.text, extra_tags=EXTRA_TAGS)
    # Delivered: the tag and the context variable have nothing left to show on this request.
    setattr(request, _CLAIMED, [])


class PenaltyNoticeMiddleware:
    """Adds a message (Django's messages framework) for each penalty the member has not been shown.

    Place it after AuthenticationMiddleware and MessageMiddleware. Without the messages framework it
    does nothing: render `{% throttling_notices %}` or the `throttling_notices` context variable instead.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        _handed_to_messages(request)
        return self.get_response(request)

    async def __acall__(self, request):
        await sync_to_async(_handed_to_messages)(request)
        return await self.get_response(request)


class _LazyNotices:
    """The context variable: claims the notices only when a template reads it."""

    def __init__(self, request):
        self.request = request

    def _notices(self):
        return claim(self.request)

    def __iter__(self):
        return iter(self._notices())

    def __len__(self):
        return len(self._notices())

    def __bool__(self):
        return bool(self._notices())


def context_processor(request):
    """`throttling_notices`: the member's notices not shown yet, claimed when a template reads them."""
    return {"throttling_notices": _LazyNotices(request)}
