--[[ Close an offence run once its rung is applied (or its task could not be sent).

KEYS[1]  integer: the identity's offences for the action (sliding_log.lua KEYS[2])
KEYS[2]  string: the pending escalation mark, whose value names the run (KEYS[4] there)

ARGV[1]  the run being closed

Reply    1 if the counter and mark were deleted, 0 if another run owns them

Guarantees
- A late or repeated delivery of an old run never wipes a newer run that is
  pending: the keys are deleted only when the mark names this run, or when no
  run is pending at all (the mark timed out), so the counter starts afresh.
- Both keys carry the identity's hash tag (Redis Cluster safe).
]]

local pending = redis.call('GET', KEYS[2])
if pending and pending ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
