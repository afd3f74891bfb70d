--[[ Move a change marker and tell every process at once (see Architecture › Policies in every
process): the move and its PUBLISH in one call, so no process can read the new value without the
message having been sent.

KEYS[1]  the change marker (policies, cached refusals, members' groups): a whole number
ARGV[1]  the change channel (THROTTLING_KEY_PREFIX:changes)

Reply    the marker after the call

The new value is the old one plus one, or Redis's time in microseconds when that is more: a Redis
that restarted empty (or from an older snapshot) never gives a marker a value a process read before
the restart, so a change made just after it is seen as one by the safety read (an INCR would count
up from 1 again, to the very value the processes last read, while their subscribers are still
reconnecting and miss the message).

The message is "<new value> <marker key>": each process applies it as if its background thread had
read that value (its once-a-second MGET stays the safety net for a message it missed). On a cluster
a classic PUBLISH reaches the subscribers of every node.
]]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local version = math.max((tonumber(redis.call('GET', KEYS[1]) or '0') or 0) + 1, now)
local text = string.format('%.0f', version)
redis.call('SET', KEYS[1], text)
redis.call('PUBLISH', ARGV[1], text .. ' ' .. KEYS[1])
return version
