-- tick: one replica's heartbeat.
--
-- ARGV: 1 replica, 2 process token, 3 session token (the process's own, or the one it
-- resumed), 4 join (1/0), 5 state, 6 ttl ms, 7 budget (ended sessions' partitions to
-- free), 8 channel, 9 notice, 10 instance, 11 capacity, 12 rejoin grace ms (0: not
-- sticky), 13 the incarnation of the group the session belongs to (the join's reply
-- said; '' for a join), 14 the server lifetime the replica's last tick reply named
-- ('' if none), 15 the roster version the replica last read ('' if none).
--
-- Ends expired sessions (a sticky replica's is parked for it instead, for its grace:
-- session.lua's reap); starts, resumes or extends this replica's session, and keeps a
-- sticky replica's grace with it (HEIRS). A session lives in one incarnation of the
-- group: a join finds no group (`nogroup`, nothing started), and a tick of another
-- incarnation (Redis lost the group since, and a late copy of the session's join may
-- have started it again here) is `lost`. A session that has
-- ended is never extended again, an `away` one is resumed by the next process to
-- join (its expiry is then set to one ttl from now, not only raised), and the process
-- that resumed it gets the same answer again if it asks again (its reply was lost); a
-- parking tick (state `away`) sets the expiry to one ttl from now, and a tick of the
-- parked process delivered after it changes nothing. Publishes the
-- notice when the member's state changes. Frees partitions of ended sessions, and
-- reads the group.
--
-- After the granting server changed (a restart that kept the group, a failover: see
-- meta.lua's follow_server), a session may hold less than its replica believes: its
-- last claims may be lost. So the first tick of an extended session in a server
-- lifetime other than the one the replica last saw lists everything the session holds
-- here (slot `holdings`), and the replica keeps only those terms: this tick extends no
-- other.
--
-- A steady tick costs O(log N), whatever the number of members N: the roster (slots
-- `names`, `entries` and `gone`) is sent only if it changed since the version the
-- replica names (meta.lua's roster_changed), and then only the members changed since
-- (session.lua's roster_for), each entry kept ready in ROSTER; else those slots are
-- empty and slot `roster_sent` is 0. The member whose session expires first is found through the
-- expiry index (slot `soonest`).
-- A quiet tick (an extension that changes nothing but the session's expiry, finds
-- nothing expired or ended and the same server and roster) is answered by
-- heartbeat.lua, a script of its own that a replica whose last tick changed nothing
-- sends first; this one checks every key's type before it writes.
--
-- Reply: one value per slot of the reply, in order, each filled by name
-- (`r[SLOT.<name>]`): the slots and what each holds are named once, in Rust (`TickSlot`
-- in ops/tick.rs), which puts `local SLOT = {status = 1, ...}` in front of this script.
-- No slot is ever nil (Redis would end the reply there): the tests check that every
-- slot is filled, and the parser that the reply has every slot.
local replica, process, session = ARGV[1], ARGV[2], ARGV[3]
local join, state, ttl = ARGV[4] == '1', ARGV[5], tonumber(ARGV[6])
local grace = tonumber(ARGV[12])
local now = clock()
local m = meta()
local bad = expect(ALL)
if bad then return bad end
local expired = reap(now)
local lifetime = follow_server(m, now, true)
local status, resumed = 'live', ''
local cur = redis.call('HGET', SESSIONS, replica)
local parked = redis.call('HGET', STATES, replica) == 'away'
-- A session always has a holder (the process ticking it); one written by an older
-- version of the protocol has none: its own token holds it.
local holder = redis.call('HGET', HOLDERS, replica) or cur
if join and not m.exists then
  -- Sessions live in a group: the replica seeds or restores it first, then joins.
  status = 'nogroup'
elseif not join and ARGV[13] ~= m.inc then
  -- The session belongs to another incarnation of the group: never extended here.
  status = 'lost'
elseif cur and cur == session and holder == process and parked and state ~= 'away' then
  -- A tick the parked process sent before its parking tick, delivered after it: the
  -- process is gone, and the session stays parked for its return.
  status = 'lost'
elseif cur and cur == session and holder == process then
  if state == 'away' then
    redis.call('ZADD', MEMBERS, now + ttl, replica)
  else
    redis.call('ZADD', MEMBERS, 'GT', now + ttl, replica)
  end
elseif not join then
  status = 'lost'
elseif cur and holder == process and parked then
  -- A join of the process that has parked the session since: delivered late.
  status = 'lost'
elseif cur and holder == process then
  -- This process resumed the session before; its reply was lost.
  resumed = cur
  redis.call('ZADD', MEMBERS, 'GT', now + ttl, replica)
  remember_grace(replica, grace, ttl)
  if state == 'settling' then state = 'active' end
elseif cur and parked then
  -- Back from a sticky restart: this process takes the session over.
  resumed = cur
  if holder then redis.call('HDEL', ACKS, holder) end
  redis.call('HSET', HOLDERS, replica, process)
  redis.call('ZADD', MEMBERS, now + ttl, replica)
  remember_grace(replica, grace, ttl)
  if state == 'settling' then state = 'active' end
elseif cur then
  status = 'duplicate'
  if grace > 0 then
    -- A restart after a crash knocks: the session goes to it when it expires, also
    -- if its grace would not hold it that long.
    knock(replica, now, ttl)
  end
else
  roster_changed(replica)
  redis.call('HSET', SESSIONS, replica, process)
  redis.call('HSET', HOLDERS, replica, process)
  redis.call('ZADD', MEMBERS, now + ttl, replica)
  remember_grace(replica, grace, ttl)
end
local drained, revoked = 0, {}
if status == 'live' then
  local tok = session
  if resumed ~= '' then tok = resumed end
  if redis.call('HGET', STATES, replica) ~= state then
    roster_changed(replica)
    redis.call('HSET', STATES, replica, state)
    redis.call('PUBLISH', ARGV[8], ARGV[9])
  end
  if join then
    if redis.call('HGET', CAPACITY, replica) ~= ARGV[11] then roster_changed(replica) end
    redis.call('HSET', INFO, replica, ARGV[10])
    redis.call('HSET', CAPACITY, replica, ARGV[11])
  end
  if redis.call('HEXISTS', DRAINS, replica) == 1 then drained = 1 end
  if redis.call('HLEN', REVOKED) > 0 then
    local all = redis.call('HGETALL', REVOKED)
    local names = {}
    for i = 1, #all, 2 do names[#names + 1] = all[i] end
    local owners = redis.call('HMGET', OWNERS, unpack(names))
    for j, n in ipairs(names) do
      if owners[j] == tok then
        revoked[#revoked + 1] = n
        revoked[#revoked + 1] = all[2 * j]
      end
    end
  end
end
local holds = 0
if status == 'live' and not join and resumed == '' and lifetime ~= ARGV[14] then
  holds = holdings(session)
end
local dead = free_ended(tonumber(ARGV[7]))
local rver, sent, names, entries, gone = roster_for(m, lifetime, ARGV[15])
local wait = m.grant_after - now
if wait < 0 then wait = 0 end
local w, total, wmax, wver = weight_info(m)
local mine = 0
if status == 'live' then mine = #reserved_for(replica, now) end
local r = {}
r[SLOT.status] = status
r[SLOT.resumed] = resumed
r[SLOT.exists] = m.exists and 1 or 0
r[SLOT.count] = m.count
r[SLOT.version] = m.version
r[SLOT.digest] = m.digest
r[SLOT.names] = names
r[SLOT.entries] = entries
r[SLOT.gone] = gone
r[SLOT.unowned] = unowned(dead)
r[SLOT.grant_wait] = wait
r[SLOT.ending] = #dead
r[SLOT.drained] = drained
r[SLOT.revoked] = revoked
r[SLOT.expired] = expired
r[SLOT.weighted] = w
r[SLOT.total_weight] = total
r[SLOT.max_weight] = wmax
r[SLOT.weights_version] = wver
r[SLOT.life] = m.life
r[SLOT.set_version] = m.sver
r[SLOT.highest_fence] = int(m.fmax)
r[SLOT.origin] = m.origin
r[SLOT.lease] = m.lease
r[SLOT.restore_count] = m.rcount
r[SLOT.incarnation] = m.inc
r[SLOT.lifetime] = lifetime
r[SLOT.holdings] = holds
r[SLOT.roster_version] = rver
r[SLOT.roster_sent] = sent
r[SLOT.soonest] = soonest(now, replica)
r[SLOT.reserved] = mine
return r
