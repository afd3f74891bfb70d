--[[ Forget an identity's counts: delete its keys, and take out of its targets indexes the targets
that targets.lua read, in one call.

KEYS[1] .. KEYS[#KEYS - m]  keys to delete: state (log and bucket), offences, pending marks, per
                            target too
KEYS[#KEYS - m + 1] ..      the m targets indexes targets.lua read

ARGV[1]  the Redis time of that read, in microseconds (targets.lua's first reply)
ARGV[2]  m

Reply    the number of keys deleted

Guarantees
- A target admitted after the read keeps its place in its index (a later score), so a reset
  never leaves a target that still counts out of its index; one admitted before it is deleted.
- Every key carries the identity's hash tag (one Redis Cluster slot).
]]

local m = tonumber(ARGV[2])
local last = #KEYS - m
local deleted = 0
-- unpack() has a limit on how many values it returns: keys go by the thousand.
for first = 1, last, 1000 do
  deleted = deleted + redis.call('DEL', unpack(KEYS, first, math.min(first + 999, last)))
end
for i = last + 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ARGV[1])
end
return deleted
