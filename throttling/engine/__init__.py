"""The engine: who is acting, which policy applies, and the decision itself (one Redis script call).

Read it top down (see Architecture › The engine, in reading order):

1. api.py, asyncapi.py: check / peek / acquire / reset / refund and their async twins, each a flow
   driven by effects.run() or awaited by effects.arun().
2. flow.py: the decision, written once as a generator of effects (see Architecture › One flow, two
   drivers); reset.py: what a reset deletes, as a flow.
3. content/: what a post says, made comparable, and decisions that judge it in the same call.
4. deciding/: what a decision sends (plan.py, a Plan) and what the reply means (replies.py).
5. countermeasures/: the blocks and surges in force, asked in the process before Redis.
6. offences/: a refused attempt (or a rejected held post) recorded, counted for the report, escalated
   by task name; then policies/: the policy cache and its change marker, trust tiers, overrides and
   trust earned by approval, declared policies.
7. refusal_memory.py: refusals answered from the process's memory.
8. background/: the background thread's parts (poller, eviction watch, undo of timed-out writes,
   the task sender).
9. keys.py, decision.py, identity.py, moderators.py, effects.py: the foundations every part shares.

No part imports one above it (pyproject.toml's import-linter contracts).
"""
