--[[ Replace the Redis mirror of one identity's penalties in force, atomically.

KEYS[1]  hash: field = action name or "*" (all actions),
         value = "<ends_at_us>|<details>" (read by sliding_log.lua)

ARGV[1]  expire-at, Unix time in milliseconds: the end of the longest penalty;
         0 removes the mirror (no penalty in force)
ARGV[2], ARGV[3], ...  pairs of (field, value)

Reply    the number of fields written

Guarantees
- A decision never sees a half-written mirror: delete, write and expiry are one
  script, so it sees the old penalties or the new ones.
- The hash expires with its longest penalty (expiry is data, never a task).
- Every key is in KEYS, so the call is Redis Cluster safe.
]]

redis.call('DEL', KEYS[1])
local expire_at = tonumber(ARGV[1])
if expire_at == 0 or #ARGV < 3 then
  return 0
end
local t = redis.call('TIME')
if expire_at <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
  return 0  -- everything in it has already ended
end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return (#ARGV - 1) / 2
