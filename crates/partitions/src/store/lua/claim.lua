-- claim: new terms for a session: free partitions, or (a regrant) partitions the
-- session holds with no elector (after a resume, or a claim whose reply was lost).
--
-- ARGV: 1 replica, 2 process token, 3 session token, 4 request seq (per process,
-- growing), 5 ttl ms, 6 count, 7 fence floor, 8 budget (ended sessions' partitions to
-- free), 9 room (-1: none), 10 fallback (1/0), 11 the incarnation of the group the
-- session belongs to, 12 bound (with a room: how much weight it may take of the
-- partitions reserved for it), 13 channel, 14 the group's notice tag (a claim that
-- took any partition publishes its move notice, crate::notice), 15 k, then |k| partitions this replica is preferred
-- on (k < 0: take only those, a swap's first half), then s,
-- then s pairs (replica id, room): members that are to take the free partitions
-- preferred on them, then regrant: name, fence, name, fence...
--
-- Extends the session, then takes up to `count` free partitions, oldest first (with a
-- room: those among the first `count` whose weights fit into it, those reserved for
-- it into its bound, or with the fallback the first if none does). If the group has
-- preferences (PREFS exists), the free
-- partitions named as preferred on this replica come first (oldest first), and the
-- oldest free partitions preferred on a member named with a room are left to it, as
-- long as their weights fit into that room (each one left takes its weight out of
-- it); only the oldest `count` + 256 free partitions are looked at. A free partition
-- handed over to a named receiver (release.lua) is reserved for it until its hold
-- ends: the receiver's claims take it before any other, others' skip it. Or it regrants
-- each named partition whose current term is the
-- session's at that fence: if it is still listed, not revoked and the replica not
-- drained, in a new term; else it is given back. A drained replica takes nothing.
-- Every fence is max(last + 1, floor, the group's highest + 1, server µs). Every
-- partition taken (not regranted) is a change of owner: one entry in the ledger of
-- moves (free.lua's record_moves), in this same script, and, if there were any, one
-- move notice on the channel (not retried with the reply): `<tag>\t1\tmoved\t<life>\t
-- <the ledger's newest id before this claim's>\t<this claim's last id>\t<replica>\t
-- <its address>\t<partition>\t<fence>...`, read by GroupNotice::decode (notice.rs).
--
-- Safe to retry: the reply is kept per process; the same seq again gets it again, an
-- older one `stale` (it was overtaken).
--
-- Nothing is granted for one lease after the granting server changed (meta.lua's
-- follow_server).
--
-- Reply: {'ok', {name, fence, weight, ...}, {name given back, ...}, unowned, {cause,
-- ms unowned or -1, previous fence or '', bytes of state left (-1: none, -2: left in
-- another server lifetime), ...: per partition taken (not regranted), in order, what
-- its ledger entry says}, 1 if the fallback took a partition that fit nowhere else 0},
-- {'wait', ms} before the group grants anything, {'lost'} without a session,
-- {'stale'}.
local replica, process, session = ARGV[1], ARGV[2], ARGV[3]
local seq, ttl, want, floor = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
  tonumber(ARGV[7])
local bad = expect(ALL) or expect({PREFS})
if bad then return bad end
local now, now_us = clock()
-- Sessions are reaped by ticks; a claim only refuses one that has ended.
local until_ms = tonumber(redis.call('ZSCORE', MEMBERS, replica) or '0')
local holder = redis.call('HGET', HOLDERS, replica) or session
if redis.call('HGET', SESSIONS, replica) ~= session or holder ~= process or until_ms <= now then
  return {'lost'}
end
-- A parked session (a sticky restart, or a sticky replica's session that expired) waits
-- for the next process of its replica: a claim of the process that held it, delivered
-- late, takes nothing.
if redis.call('HGET', STATES, replica) == 'away' then return {'lost'} end
local m = meta()
-- A session of another incarnation of the group (see tick.lua) gets nothing here.
if ARGV[11] ~= m.inc then return {'lost'} end
-- The group's lease is the longest any replica claims with, so that the hold after the
-- granting server changed (meta.lua's follow_server) outlasts every owner's local
-- deadline, also a replica's whose lease is longer than the group creator's (a deploy
-- that lengthens the lease). It never shrinks.
if ttl > m.lease then
  redis.call('HSET', META, 'lease', ttl)
  m.lease = ttl
end
follow_server(m, now)
local ack = redis.call('HGET', ACKS, process)
if ack then
  local s, kept = string.match(ack, '^(%d+)\t(.*)$')
  if tonumber(s) == seq then return cjson.decode(kept) end
  if tonumber(s) > seq then return {'stale'} end
end
if grants_after(m) > now then return {'wait', grants_after(m) - now} end
redis.call('ZADD', MEMBERS, 'GT', now + ttl, replica)
local dead = free_ended(tonumber(ARGV[8]))
local drained = redis.call('HEXISTS', DRAINS, replica) == 1
local room, bound = tonumber(ARGV[9]), tonumber(ARGV[12])
local firsts, skip = {}, {}
local at = 15
local only = tonumber(ARGV[at]) < 0
local k = math.abs(tonumber(ARGV[at]))
for i = at + 1, at + k do firsts[#firsts + 1] = ARGV[i] end
at = at + k + 1
for i = at + 1, at + 2 * tonumber(ARGV[at]), 2 do skip[ARGV[i]] = tonumber(ARGV[i + 1]) end
at = at + 2 * tonumber(ARGV[at]) + 1
local names, regrant, returned = {}, #ARGV >= at, {}
-- Reservations (release.lua): a partition handed to a named receiver is free in FREE's
-- order only from the end of its hold, its receiver named in ENDED under '\2' .. name.
-- Until then the receiver's claims take it before any other, and others skip it.
local now_s = string.format('%.0f', now)
local mine, reserved, is_mine = {}, false, {}
-- Whether the fallback took a partition that fits nowhere (the reply says so).
local fell_back = false
local function reservations()
  mine, reserved = reserved_for(replica, now)
  for _, n in ipairs(mine) do is_mine[n] = true end
end
-- The first `k` free partitions this claim may take, in order: those reserved for it,
-- then the oldest free ones not held back for another.
local function claimable(k)
  local out = {}
  for _, n in ipairs(mine) do
    if #out < k then out[#out + 1] = n end
  end
  local left = k - #out
  if left > 0 then
    local old = redis.call('ZRANGE', FREE, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, left)
    for _, n in ipairs(old) do out[#out + 1] = n end
  end
  return out
end
-- Of `cand` (free partitions, in the order to take them): with no room (-1) all of
-- them; else those whose weights fit into the room together (those reserved for this
-- replica into its bound instead, the others into the room as well), or, if none
-- does and the fallback is on, the first.
local function fitting(cand)
  if room < 0 then return cand end
  local ws, acc, others, out = weights_of(cand), 0, 0, {}
  for j, n in ipairs(cand) do
    if is_mine[n] then
      if acc + ws[j] <= bound then
        out[#out + 1] = n
        acc = acc + ws[j]
      end
    elseif others + ws[j] <= room and acc + ws[j] <= math.max(bound, room) then
      out[#out + 1] = n
      acc = acc + ws[j]
      others = others + ws[j]
    end
  end
  if #out == 0 and #cand > 0 and ARGV[10] == '1' then
    out[1] = cand[1]
    fell_back = true
  end
  return out
end
-- With preferences: the free partitions this claim may take, in the order it takes
-- them (see the header).
local function preferred_order()
  local cand, seen = {}, {}
  if not only then
    for _, n in ipairs(mine) do
      seen[n] = true
      cand[#cand + 1] = n
    end
  end
  if #firsts > 0 then
    local sc = redis.call('ZMSCORE', FREE, unpack(firsts))
    local own = {}
    for j, n in ipairs(firsts) do
      if sc[j] and not seen[n] and tonumber(sc[j]) <= now then
        seen[n] = true
        own[#own + 1] = {tonumber(sc[j]), n}
      end
    end
    -- Oldest first; names freed at the same ms in byte order, as FREE orders them (Lua's
    -- `<` on strings follows the server's locale).
    local function before(a, b)
      if a[1] ~= b[1] then return a[1] < b[1] end
      for i = 1, math.min(#a[2], #b[2]) do
        local x, y = string.byte(a[2], i), string.byte(b[2], i)
        if x ~= y then return x < y end
      end
      return #a[2] < #b[2]
    end
    table.sort(own, before)
    for _, e in ipairs(own) do cand[#cand + 1] = e[2] end
  end
  if only then return cand end
  local scan = redis.call('ZRANGE', FREE, '-inf', now_s, 'BYSCORE', 'LIMIT', 0, want + 256)
  if #scan == 0 then return cand end
  local prefs = redis.call('HMGET', PREFS, unpack(scan))
  local ws = weights_of(scan)
  for j, n in ipairs(scan) do
    if not seen[n] then
      local left = prefs[j] and skip[prefs[j]]
      if left and ws[j] <= left then
        skip[prefs[j]] = left - ws[j]
      else
        cand[#cand + 1] = n
      end
    end
  end
  return cand
end
if regrant then
  local asked, fences = {}, {}
  for i = at, #ARGV, 2 do
    asked[#asked + 1] = ARGV[i]
    fences[#fences + 1] = ARGV[i + 1]
  end
  local owners = redis.call('HMGET', OWNERS, unpack(asked))
  local current = redis.call('HMGET', FENCES, unpack(asked))
  local listed = redis.call('ZMSCORE', PARTITIONS, unpack(asked))
  local revoked = redis.call('HMGET', REVOKED, unpack(asked))
  local back, back_fences = {}, {}
  for j, n in ipairs(asked) do
    if owners[j] == session and current[j] == fences[j] then
      if listed[j] and not revoked[j] and not drained then
        names[#names + 1] = n
      else
        back[#back + 1] = n
        back_fences[#back_fences + 1] = fences[j]
      end
    end
  end
  local why = 'removal'
  if drained then why = 'drain' end
  local flags = give_back(session, back, back_fences, now, why)
  for j, n in ipairs(back) do
    if flags[j] == 1 then returned[#returned + 1] = n end
  end
elseif want > 0 and not drained then
  reservations()
  if only or redis.call('HLEN', PREFS) > 0 then
    local cand, first = preferred_order(), {}
    for j = 1, math.min(want, #cand) do first[j] = cand[j] end
    names = fitting(first)
    if #names > 0 then redis.call('ZREM', FREE, unpack(names)) end
  elseif room < 0 and not reserved then
    local popped = redis.call('ZPOPMIN', FREE, want)
    for i = 1, #popped, 2 do names[#names + 1] = popped[i] end
  else
    names = fitting(claimable(want))
    if #names > 0 then redis.call('ZREM', FREE, unpack(names)) end
  end
end
local out, moved_info = {}, {}
if #names > 0 then
  local owners = redis.call('HMGET', OWNERS, unpack(names))
  local fences = redis.call('HMGET', FENCES, unpack(names))
  local ws = weights_of(names)
  local fset, oset, hset, sset, moved, moved_fences = {}, {}, {}, {}, {}, {}
  local gained, high = 0, m.fmax
  for j, n in ipairs(names) do
    local o = owners[j]
    -- A free partition is never held by a live session; if one is, it stays with it.
    if regrant or not (o and o ~= session and live(o, now)) then
      local f = next_fence(tonumber(fences[j] or '0'), math.max(floor, m.fmax + 1), now_us)
      if f > high then high = f end
      f = int(f)
      fset[#fset + 1] = n
      fset[#fset + 1] = f
      oset[#oset + 1] = n
      oset[#oset + 1] = session
      hset[#hset + 1] = 0
      hset[#hset + 1] = entry(session, n)
      sset[#sset + 1] = n
      sset[#sset + 1] = now
      out[#out + 1] = n
      out[#out + 1] = f
      out[#out + 1] = ws[j]
      if not regrant then
        gained = gained + ws[j]
        moved[#moved + 1] = n
        moved_fences[#moved_fences + 1] = f
      end
    end
  end
  if #out > 0 then
    redis.call('HSET', FENCES, unpack(fset))
    redis.call('HSET', OWNERS, unpack(oset))
    if redis.call('ZADD', HELD, unpack(hset)) > 0 or gained > 0 then roster_changed(replica) end
    redis.call('HSET', SINCE, unpack(sset))
    redis.call('HSET', META, 'fmax', int(high))
    if gained > 0 and m.weighted then redis.call('HINCRBY', LOADS, session, gained) end
    local before = ''
    if #moved > 0 then
      local newest = redis.call('XREVRANGE', MOVES, '+', '-', 'COUNT', 1)
      if #newest > 0 then before = newest[1][1] end
    end
    local last_id
    moved_info, last_id = record_moves(replica, moved, moved_fences, now, m.server)
    -- For routers and readers of the ledger (a dashboard); replicas ignore it.
    if #moved > 0 then
      local info = redis.call('HGET', INFO, replica) or ''
      local address = string.match(info, '^[^\t]*\t(.*)$') or ''
      local notice = {ARGV[14], '1', 'moved', m.life, before, last_id, replica, address}
      for j, n in ipairs(moved) do
        notice[#notice + 1] = n
        notice[#notice + 1] = moved_fences[j]
      end
      redis.call('PUBLISH', ARGV[13], table.concat(notice, '\t'))
    end
  end
end
local reply = {'ok', out, returned, unowned(dead), moved_info, fell_back and 1 or 0}
redis.call('HSET', ACKS, process, seq .. '\t' .. cjson.encode(reply))
return reply
