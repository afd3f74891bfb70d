--[[ The wave half of a decision with content, on a Redis Cluster where the action's wave index
and the member's keys hash to different slots: judged and reserved here first, then the member's
own decision (the rate and the member's repeats) in its slot, told this call's verdict; a post the
member's decision refuses has its reservation undone (content_forget.lua).

KEYS[1], KEYS[2]  the action's wave index (see _index.lua)

ARGV[1]  "<members> <period s> <mode>": mode "c" reserves a place in the wave when it admits,
         "p" only judges
ARGV[2]  who posts it (the member's identity)
ARGV[3]  the decision's token
ARGV[4]  the post's content keys, 12 bytes each

Reply    { 1 } when `who` may post it (reserved with "c"), { 0, wait_us } when a wave refuses it

Guarantees
- Judged and reserved in one atomic call, so no more than `members` different members are ever
  admitted within the period, however many decide at once on however many processes.
- A reservation is an entry under its token: undone by content_forget.lua, or gone with the period.
]]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- @index

local members, period, mode = string.match(ARGV[1], '^(%d+) (%d+) (%a)$')
members, period = tonumber(members), tonumber(period) * 1000000
local who, keys = ARGV[2], ARGV[4]
local fields = {}
for i = 1, #keys, 12 do fields[#fields + 1] = string.sub(keys, i, i + 11) end

local index_judge, index_write = index_functions()
local head, cur, other, start = index_open(KEYS[1], KEYS[2], period)
local rows = redis.call('HMGET', cur, '#', '~', unpack(fields))
local old = index_other(head, rows[1], rows[2], start, period) and redis.call('HMGET', other, unpack(fields))
local _, _, wait = index_judge(cur, old and other, rows, 3, old, who, 0, members, period, false)
if wait then return { 0, wait } end
if mode == 'c' then
  local entry = who .. '@' .. t[1] .. string.rep('0', 6 - #t[2]) .. t[2] .. ',' .. ARGV[3] .. ';'
  index_write(head, start, cur, other, rows, fields, entry, who, 2, members, period)
end
return { 1 }
