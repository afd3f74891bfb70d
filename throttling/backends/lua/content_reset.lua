--[[ A reset of a member, in the action's wave index: on one server (and behind Sentinel) the
wave index also holds each member's own posts, under their identity among every other member's,
so a reset cannot delete them; it marks when it forgot them instead (see _index.lua).

KEYS[1], KEYS[2]  the action's wave index (see _index.lua)

ARGV[1]  the member's identity
ARGV[2]  the policy's period of repeated content, in seconds

Reply    1

Guarantees
- From the mark on, the member's own posts made before it are not their repeats: they may post
  again what they posted. A wave still counts them among the members who posted it (a reset never
  makes a member more limited), and other members' entries are left as they were.
- The mark is a field of the generation's hash, written as a post would be (the generation's first
  write sets the hash's TTL): it lasts at least a period, as long as any post it forgets, and is
  gone with the hash (Architecture › Bounded memory). A decision that can meet a post made before
  the mark reads the hash that holds it.
]]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- @index

local period = tonumber(ARGV[2]) * 1000000
local head, cur, other, start = index_open(KEYS[1], KEYS[2], period)
local _, _, index_set = index_functions()
local stamp = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]
index_set(head, start, cur, other, redis.call('HGET', cur, '#'), period, { '!' .. ARGV[1], stamp })
return 1
