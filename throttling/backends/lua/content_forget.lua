--[[ Forget a post's content: a refund (the view failed), the undo of a wave reservation the
member's decision refused on a cluster, or a decision that timed out (see Architecture › Backend
failure is not a 500).

KEYS     content indexes (see _index.lua): the member's two hashes and/or the wave's two, all in
         one slot (on a cluster, one call per slot)
ARGV[1]  the decision's token
ARGV[2], ARGV[3], ...  the post's content keys (the indexes' fields, 12 bytes each)

Reply    the entries removed

Guarantees
- Idempotent, and a no-op when the decision wrote nothing: entries are removed only under this
  decision's token, which no other decision uses (Architecture › Colliding members).
- TTLs are kept: a forgotten post never lengthens what is remembered.
]]

local suffix = ',' .. ARGV[1] .. ';'
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end

local removed = 0
for _, key in ipairs(KEYS) do
  local rows = redis.call('HMGET', key, unpack(fields))
  for i, field in ipairs(fields) do
    local value = rows[i]
    if value and string.find(value, suffix, 1, true) then
      local kept = {}
      for entry in string.gmatch(value, '[^;]*;') do
        if string.sub(entry, -#suffix) == suffix then
          removed = removed + 1
        else
          kept[#kept + 1] = entry
        end
      end
      if #kept == 0 then
        redis.call('HDEL', key, field)
      else
        redis.call('HSET', key, field, table.concat(kept))
      end
    end
  end
end
return removed
