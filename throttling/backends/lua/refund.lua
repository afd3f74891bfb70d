--[[ Give back a sliding-log decision's entries (the view failed; see Architecture › Counting what
did not happen), and tell every process, in one call.

KEYS[1]  the decision's log (sliding_log.lua KEYS[1])
KEYS[2]  only when the count is per target: the identity's targets index (sliding_log.lua KEYS[5])

ARGV[1]  the change channel (THROTTLING_KEY_PREFIX:changes)
ARGV[2]  with KEYS[2] only: the target (its member in KEYS[2])
ARGV[2 or 3], ...  the decision's entries (its unique tokens)

Reply    the number of entries removed

Guarantees
- Idempotent: entries are unique per decision (Architecture › Colliding members), so a second
  refund removes nothing and publishes nothing.
- When something was given back, "refund <KEYS[1]>" is published on the change channel: every
  process forgets the refusals it remembers of this log (Architecture › Floods answered locally),
  which the room just made may now admit.
- A refund that leaves the target's log empty takes the target out of its index: nothing of it
  counts any more (a visitor sent to log in leaves nothing behind). A log that still holds an
  entry keeps its place (Architecture › Resetting every target).
]]

local first = KEYS[2] and 3 or 2
local removed = redis.call('ZREM', KEYS[1], unpack(ARGV, first))
if removed > 0 then
  if KEYS[2] and redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('ZREM', KEYS[2], ARGV[2])
  end
  redis.call('PUBLISH', ARGV[1], 'refund ' .. KEYS[1])
end
return removed
