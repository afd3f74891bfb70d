"""The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers) of a decision.

    RateLimit-Policy: "reply-60";q=5;w=60, "reply-3600";q=20;w=3600
    RateLimit: "reply-60";r=3;t=42

One policy item per window (the limits that applied to this member, a trust
tier's or an override's multiplier included); `RateLimit` describes the
binding window: what is left (r) and the seconds until it is whole again (t),
or, when nothing is left, until the next action is allowed. Shadow policies
send none: telling clients about a limit that is not enforced would enforce it.
A member under a shadow block gets the same fields as anyone: their absence
would tell them about the block.
A site-wide policy's count is everyone's activity: its fields go to signed-in
members only, unless THROTTLING_SITE_HEADERS sends them to everyone.
"""

import math
import re

from ..conf import settings
from ..engine.decision import ADMITTED, PENALISED, THROTTLED
from ..engine.decision import SHADOW as SHADOWED
from ..engine.identity import MEMBER_PREFIX
from ..engine.policies.cache import SHADOW, SITE, policies

POLICY = "RateLimit-Policy"
RATELIMIT = "RateLimit"


def _name(action, period):
    return f'"{action}-{period}"'


def ratelimit_headers(decision, given_back=0):
    """{header: value} for `decision`, or {} when it was not decided by a policy's windows.

    `given_back` is what the response returned to the quota (a failed form's refund): the
    headers describe the quota after it.
    """
    if (
        not settings.HEADERS
        or not decision.windows
        or decision.reason not in (ADMITTED, THROTTLED, PENALISED, SHADOWED)
    ):
        return {}
    policy = policies.get_cached(decision.action)
    if policy is not None and policy.mode == SHADOW:
        return {}
    if decision.reason == SHADOWED and policy is None:
        return {}  # a shadow policy's, or a shadow block's that cannot be told from one: none
    if (
        policy is not None
        and policy.scope == SITE
        and not settings.SITE_HEADERS
        and not decision.identity.startswith(MEMBER_PREFIX)
    ):
        return {}
    windows = decision.windows
    policy = ", ".join(f"{_name(decision.action, p)};q={m};w={p}" for p, m in windows)
    if decision.reason == PENALISED:
        binding = windows[0]
        remaining, seconds = 0, decision.retry_after
    else:
        binding = next((w for w in windows if w[1] == decision.limit), windows[0])
        remaining = max(0, decision.remaining or 0)
        if given_back and decision.reason in (ADMITTED, SHADOWED):
            remaining = min(binding[1], remaining + given_back)
        # reset_after is when every window is whole again; the binding one is whole within its period.
        seconds = decision.retry_after if remaining == 0 and decision.retry_after > 0 else decision.reset_after
        seconds = min(seconds, binding[0])
    return {
        POLICY: policy,
        RATELIMIT: f"{_name(decision.action, binding[0])};r={remaining};t={max(0, math.ceil(seconds))}",
    }


def _remaining(value):
    match = re.search(r";r=(\d+)", value or "")
    return int(match.group(1)) if match else None


def add_headers(response, decision, given_back=0):
    """Set the headers of `decision` on `response` (after `given_back` was returned to the quota);
    with two limits on one view (stacked throttles or decorators) the policies are listed
    together and RateLimit names the one with the least left."""
    headers = ratelimit_headers(decision, given_back)
    if not headers:
        return response
    before_policy, before_limit = response.get(POLICY), response.get(RATELIMIT)
    if before_policy and before_limit and headers[POLICY] not in before_policy:
        headers[POLICY] = f"{before_policy}, {headers[POLICY]}"
        if _remaining(before_limit) is not None and _remaining(before_limit) <= _remaining(headers[RATELIMIT]):
            headers[RATELIMIT] = before_limit
    for name, value in headers.items():
        response[name] = value
    return response
