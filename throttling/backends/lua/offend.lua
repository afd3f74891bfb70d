--[[ One offence of an identity for an action, outside a decision: a held post a moderator rejected
(see Guide › Held for review). The same bookkeeping as a decision's refused attempt (offend() in the
prelude), so rejections climb the penalty ladder as refusals do.

KEYS[1]  integer: the identity's offences for the action (sliding_log.lua KEYS[2])
KEYS[2]  string: the pending escalation mark (KEYS[4] there)

ARGV[1]  a unique token: the name of the offence run this call starts when it crosses
ARGV[2]  "<offence window s> <threshold> <pending s>", as ARGV[4] of a decision

Reply    { offences, crossing }: crossing 1 when this offence made the identity a repeat offender and
         no escalation was pending (SET NX with a TTL), so the caller enqueues exactly one.
]]

local offences = redis.call('INCR', KEYS[1])
local window, threshold, pending = string.match(ARGV[2], '^(%d+) (%d+) (%d+)$')
if offences == 1 then
  redis.call('EXPIRE', KEYS[1], window)
end
threshold = tonumber(threshold)
if threshold > 0 and offences >= threshold and redis.call('SET', KEYS[2], ARGV[1], 'NX', 'EX', pending) then
  return { offences, 1 }
end
return { offences, 0 }
