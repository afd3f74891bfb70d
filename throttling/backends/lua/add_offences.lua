--[[ Add the offences of refusals a process answered from memory (see Architecture › Floods
answered locally) to an identity's offence counter, in one call per identity and action.

KEYS[1]  integer: the identity's offences for the action (sliding_log.lua KEYS[2])
KEYS[2]  string: the pending escalation mark (KEYS[4] there)

ARGV[1]  how many refused attempts were answered locally
ARGV[2]  "<offence window s> <threshold> <pending s>", as ARGV[4] of a decision

Reply    the counter after the call, or -1 when nothing was added

Guarantees
- This call never starts an escalation: a crossing is always a decision's, on
  the request that made it (it reports it, records and sends the task). A
  refusal of an identity that can be escalated is answered locally only once
  its run has crossed (its escalation pending), so no crossing can happen
  here. When no escalation is pending any more (its rung applied, the run
  closed), the offences belonged to the closed run and are dropped: a closed
  run's counter starts afresh, as close_run.lua promises, and the next run
  is counted by Redis.
- The counter's window starts with its first offence, as in a decision.
- Both keys carry the identity's hash tag (Redis Cluster safe).
]]

local window, threshold = string.match(ARGV[2], '^(%d+) (%d+) %d+$')
if tonumber(threshold) > 0 and redis.call('EXISTS', KEYS[2]) == 0 then
  return -1
end
local offences = redis.call('INCRBY', KEYS[1], ARGV[1])
if offences == tonumber(ARGV[1]) then
  redis.call('EXPIRE', KEYS[1], window)
end
return offences
