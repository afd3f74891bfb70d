-- A content index (spliced in where a script says "-- @index"): who posted which content lately, by
-- content key, in the member's slot (their own posts) or in the action's (every member's posts).
-- Scripts that splice it define `now` (Redis time, µs) first.
--
-- Two hashes, one per parity of the generation (Redis time divided by twice the period), so that no
-- field outlives three periods: each expires a period after the end of its own generation, set by
-- the generation's first write, which also writes its header: field "#", "<generation>/<period>",
-- and field "~", until when the other hash can hold posts of the period. A call reads the other hash
-- only until then, which with an unchanged period is the end of the generation's first period:
-- after it, every post of the period was made in this generation, and a read of the other hash (a
-- large one on a busy site, and a read costs about a third of a decision there) would find nothing
-- that counts. A field per content key (12 bytes) holds "<who>@<t_us>,<token>;" entries, oldest
-- first: only the newest few that a judgement needs (see index_merge). Entries are read by their
-- time, whichever hash holds them. A policy's period edited numbers the generations anew: the
-- header, which names the period, no longer matches, so both hashes are read until the first write
-- of the new numbering, which keeps the other hash (and reads it) for a period more, its TTL
-- lengthened if it must be: the edit forgets nothing still in its period. Field "!<who>" of the
-- action's index is when a reset forgot that member's own posts there (see content_reset.lua).
--
-- The functions but index_open are made by index_functions() when a call needs them: a post that
-- meets nothing (most posts) reads its fields and writes them without them, and a Lua function is an
-- allocation on every call that makes it.

-- The index (`k0`, `k1`) at `now` for a period of `period` µs: (the generation's header, its hash,
-- the other hash, the generation's start).
local function index_open(k0, k1, period)
  local gen = math.floor(now / (2 * period))
  local head = gen .. '/' .. period
  if gen % 2 == 0 then return head, k0, k1, gen * 2 * period end
  return head, k1, k0, gen * 2 * period
end

-- Whether the other hash can hold posts of the period, from the current hash's header as HMGET read
-- it (`number`: field "#", `till`: field "~"); `start`, `period` as index_open() gave them.
local function index_other(head, number, till, start, period)
  return number ~= head or now < start + period or now < (tonumber(till) or 0)
end

-- (index_judge, index_write, index_set), made for this call.
local function index_functions()
  -- Reads the entries of the period in the field values `rows` (from `from` on) into `mine` (the
  -- times of `who`'s own posts, as keys: a post is under each of its keys) and `latest` (every
  -- member's newest post).
  local function index_read(rows, from, since, who, mine, latest)
    for i = from, #rows do
      local v = rows[i]
      if v then
        for w, t in string.gmatch(v, '([^@;]+)@(%d+),[^;]*;') do
          t = tonumber(t)
          if t > since then
            if w == who then mine[t] = true end
            if (latest[w] or 0) < t then latest[w] = t end
          end
        end
      end
    end
  end

  -- The wait until the `n`-th newest of `times` leaves the period, or nil when there are fewer.
  local function index_wait(times, n, period)
    if #times < n then return nil end
    table.sort(times, function(x, y) return x > y end)
    return times[n] + period - now
  end

  -- The refusal (kind, limit, wait) the entries under a post's keys make, or nil: kind 1 the
  -- member's own repeat (with `max` > 0), 2 a wave (with `members` > 0; a member already among the
  -- wave's members is not its next one). `cur` and `other`: the index as index_open() gave it;
  -- `rows` and `old` what HMGET read of them (rows from `from` on; old nil without `other`).
  -- `marked`: the index holds every member's posts, where a reset leaves its mark rather than
  -- deleting them; the member's own posts made before the mark are not their repeats.
  local function index_judge(cur, other, rows, from, old, who, max, members, period, marked)
    local since = now - period
    local mine, latest = {}, {}
    index_read(rows, from, since, who, mine, latest)
    if old then index_read(old, 1, since, who, mine, latest) end
    if max > 0 and next(mine) then
      local forgot = 0
      if marked then
        forgot = tonumber(redis.call('HGET', cur, '!' .. who)) or 0
        if other then forgot = math.max(forgot, tonumber(redis.call('HGET', other, '!' .. who)) or 0) end
      end
      local times = {}
      for t in pairs(mine) do
        if t > forgot then times[#times + 1] = t end
      end
      local wait = index_wait(times, max, period)
      if wait then return 1, max, wait end
    end
    if members > 0 and not latest[who] then
      local times = {}
      for _, t in pairs(latest) do times[#times + 1] = t end
      local wait = index_wait(times, members, period)
      if wait then return 2, members, wait end
    end
    return nil
  end

  -- A field's entries with `entry` (`who`'s post) added: the newest `per_who` of each of the newest
  -- `whos` members (the post's own member first), all a judgement of at most that many needs.
  local function index_merge(old, entry, who, per_who, whos, since)
    local entries = {}
    for e, w, t in string.gmatch(old, '(([^@;]+)@(%d+),[^;]*;)') do
      if tonumber(t) > since then entries[#entries + 1] = { e, w } end
    end
    local kept, per, distinct = { entry }, { [who] = 1 }, 1
    for i = #entries, 1, -1 do
      local w = entries[i][2]
      local n = per[w]
      if n == nil and distinct < whos then
        per[w], distinct = 1, distinct + 1
        kept[#kept + 1] = entries[i][1]
      elseif n ~= nil and n < per_who then
        per[w] = n + 1
        kept[#kept + 1] = entries[i][1]
      end
    end
    local out = {}
    for i = #kept, 1, -1 do out[#out + 1] = kept[i] end
    return table.concat(out)
  end

  -- Sets the fields and values `args` in the generation's hash `cur`, whose field "#" was `number`
  -- (nil when it had none). A generation's first write writes its header and sets the hash's TTL;
  -- when the other hash was numbered by another period (the policy's was edited), it may hold posts
  -- made until now: it is read, and kept, for a period more.
  local function index_set(head, start, cur, other, number, period, args)
    if number == head then
      redis.call('HSET', cur, unpack(args))
      return
    end
    local till = start + period
    local previous = redis.call('HGET', other, '#')
    if previous and previous ~= (math.floor(start / (2 * period)) - 1) .. '/' .. period then
      till = now + period
      local ttl = redis.call('PTTL', other)
      if ttl >= 0 and ttl < period / 1000 then redis.call('PEXPIRE', other, math.ceil(period / 1000)) end
    end
    redis.call('HSET', cur, '#', head, '~', string.format('%.0f', till), unpack(args))
    redis.call('PEXPIREAT', cur, string.format('%.0f', (start + 3 * period) / 1000))
  end

  -- Records `entry` under every key of `fields` in the generation's hash `cur` (`rows`: what HMGET
  -- read of it, "#" and "~" first; nil values where nothing was).
  local function index_write(head, start, cur, other, rows, fields, entry, who, per_who, whos, period)
    local args = {}
    local since = now - period
    for i = 1, #fields do
      local old = rows[i + 2]
      args[2 * i - 1], args[2 * i] = fields[i], old and index_merge(old, entry, who, per_who, whos, since) or entry
    end
    index_set(head, start, cur, other, rows[1], period, args)
  end

  return index_judge, index_write, index_set
end
