--[[ The targets a reset must forget: what each targets index holds, and when it was read.

KEYS[1], KEYS[2], ...  targets indexes of one identity (a decision's KEYS[5]: member = a target,
                       score = its last admission, Redis time in microseconds)

Reply    { Redis time now in microseconds (a string), the members of KEYS[1], of KEYS[2], ... }

Guarantees
- Writes nothing. Every key carries the identity's hash tag (one Redis Cluster slot).
- reset.lua takes the time back: a target admitted after this read keeps its place in its index.
]]

local t = redis.call('TIME')
local out = { t[1] .. string.format('%06d', tonumber(t[2])) }
for i = 1, #KEYS do
  out[i + 1] = redis.call('ZRANGE', KEYS[i], 0, -1)
end
return out
