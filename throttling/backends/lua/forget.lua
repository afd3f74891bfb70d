--[[ Undo what a decision that timed out may have written after all.

A decision whose reply never came may still run once Redis reads it (a stalled
server, a slow network). The caller failed it open or closed without knowing;
once Redis answers again it sends this, so nothing it wrote counts twice.

KEYS[1]  the decision's state key (sliding log or token bucket)
KEYS[2]  the decision's pending escalation mark

ARGV[1]  "log" or "bucket"
ARGV[2]  the decision's token (its log member, and the name of a run it started)
ARGV[3]  its cost

Reply    { entries removed, 1 if the pending mark was this decision's and is gone }

Guarantees
- Idempotent, and a no-op when the decision never ran: log members are unique
  per decision (Architecture › Colliding members), and a mark is deleted only when it names this run.
- A bucket keeps no record per decision, so its tokens cannot be told apart:
  nothing is given back there (the caller's fail-open or fail-closed stands).
- Both keys carry the identity's hash tag (Redis Cluster safe).
]]

local removed = 0
if ARGV[1] == 'log' then
  local members = { ARGV[2] }
  for j = 2, tonumber(ARGV[3]) do
    members[#members + 1] = ARGV[2] .. '.' .. j
  end
  removed = redis.call('ZREM', KEYS[1], unpack(members))
end
local mark = 0
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('DEL', KEYS[2])
  mark = 1
end
return { removed, mark }
