-- Repeated content, spliced into the content variants of the decision scripts (sliding_log_content,
-- token_bucket_content): the same decision, and in the same call the post's content judged against
-- the member's own recent posts and against the wave of other members'. Three parts: "layout" in the
-- prelude (where "-- @content-layout" is), "judge" once every window is counted ("-- @content-judge"),
-- "record" with the decision's entry ("-- @content-record").
--
-- KEYS[#KEYS - 1], KEYS[#KEYS]  the content index this call reads and writes (see _index.lua),
--          after the decision's own keys (KEYS[5], the targets index, when the count is per
--          target): on one server or behind Sentinel the action's wave index, which also holds
--          each member's own posts; the member's own index when the wave is judged elsewhere (a
--          cluster's content slot), when the policy has no wave limit, or for a post that
--          makes no wave (no link, address or mention, and too few words)
--
-- ARGV[#ARGV], after the windows (and the target): the content's spec, packed (struct
--          '<BHHIdB'): the wave (0: none, a post that makes no wave or no limit; 1: judged here, from the
--          index; 2: admitted by the wave elsewhere; 3: refused by it), max (0 = no limit per
--          member), members, period (s), the wave's wait (µs, with 3), the length of `who`; then
--          `who` and the post's content keys, 12 bytes each (its band keys, or its exact digest;
--          never its text)
--
-- A post refused for its content replies { 0, limit, 0, wait_us, wait_us, offences, crossing, 0,
-- kind } (kind 1: the member's own repeat, 2: a wave), counts an offence like a throttled attempt
-- and writes nothing else. Under the answer "hold" (16 added to the wave's byte) a match is admitted
-- and recorded like any post, and said by a longer reply: the admission's six fields, 0, 0, kind, 1
-- (see Guide › Held for review). Over the rate is refused whatever the answer. Content is judged only once every window admits, and recorded only
-- with the entry: the rate and the content are all-or-nothing.
--
-- Every command and allocation here is paid by every decision with content, so a post that meets
-- nothing (most posts) takes the shortest road: its fields read in one HMGET of the generation's
-- hash (and of the other one in the first period of a generation), written in one HSET, no entry
-- parsed, none of _index.lua's functions made but index_open.

-- @@ layout
local c_spec = ARGV[#ARGV]
local c_wave, c_max, c_members, c_period, c_wait, c_who, c_at = struct.unpack('<BHHIdBc0', c_spec)
local c_hold = c_wave >= 16
if c_hold then c_wave = c_wave - 16 end
local c_n = (#c_spec - c_at + 1) / 12
local c_fields = { string.sub(c_spec, c_at, c_at + 11) }
for i = 2, c_n do
  c_fields[i] = string.sub(c_spec, c_at + 12 * i - 12, c_at + 12 * i - 1)
end
nwin = (#ARGV - #KEYS + 1) / 2
tindex, at = #KEYS == 7 and KEYS[5] or nil, #ARGV - 1

-- @@ judge
-- Where every window admitted, the content is judged; a refusal writes nothing but its offence.
local c_head, c_cur, c_other, c_start, c_rows, c_hit
if allowed == 1 then
  local kind, limit, wait
  if c_max > 0 or c_wave == 1 then
    c_period = c_period * 1000000
    c_head, c_cur, c_other, c_start = index_open(KEYS[#KEYS - 1], KEYS[#KEYS], c_period)
    c_rows = redis.call('HMGET', c_cur, '#', '~', unpack(c_fields))
    local old = index_other(c_head, c_rows[1], c_rows[2], c_start, c_period)
                and redis.call('HMGET', c_other, unpack(c_fields))
    for i = 1, c_n do
      if c_rows[i + 2] or old and old[i] then
        c_hit = true
        break
      end
    end
    if c_hit then
      local index_judge = index_functions()
      kind, limit, wait = index_judge(c_cur, old and c_other, c_rows, 3, old, c_who, c_max,
                                      c_wave == 1 and c_members or 0, c_period, c_wave == 1)
    end
  end
  if not kind and c_wave == 3 then kind, limit, wait = 2, c_members, c_wait end
  if kind and c_hold then
    c_held = kind
  elseif kind then
    if mode == 'c' then
      local offences, crossing = offend()
      return { 0, limit, 0, wait, wait, offences, crossing, 0, kind }
    end
    return { 0, limit, 0, wait, wait, tonumber(redis.call('GET', KEYS[2]) or '0'), 0, 0, kind }
  end
end

-- @@ record
-- Recorded with the decision's entry: in a member's own index their newest `max` posts under a key
-- are all their judgement reads; in a wave's, two at least (undoing the newest leaves the one
-- before), of the newest `members` members.
if c_cur then
  local entry = c_who .. '@' .. t[1] .. string.rep('0', 6 - #t[2]) .. t[2] .. ',' .. ARGV[2] .. ';'
  if c_hit or c_n ~= 4 or c_rows[1] ~= c_head then
    local per_who, whos = c_max, 1
    if c_wave == 1 then per_who, whos = math.max(2, c_max), c_members end
    local _, index_write = index_functions()
    index_write(c_head, c_start, c_cur, c_other, c_rows, c_fields, entry, c_who, per_who, whos, c_period)
  else
    redis.call('HSET', c_cur, c_fields[1], entry, c_fields[2], entry, c_fields[3], entry, c_fields[4], entry)
  end
end
