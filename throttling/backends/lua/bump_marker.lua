--[[ Move a change marker and tell every process at once (see Architecture › Policies in every
process): the INCR and its PUBLISH in one call, so no process can read the new value without the
message having been sent.

KEYS[1]  integer: the change marker (policies, or cached refusals)
ARGV[1]  the change channel (THROTTLING_KEY_PREFIX:changes)

Reply    the marker after the call

The message is "<new value> <marker key>": each process applies it as if its background thread had
read that value (its once-a-second MGET stays the safety net for a message it missed). On a cluster
a classic PUBLISH reaches the subscribers of every node.
]]

local version = redis.call('INCR', KEYS[1])
redis.call('PUBLISH', ARGV[1], version .. ' ' .. KEYS[1])
return version
