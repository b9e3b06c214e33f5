-- The granting server's lifetime (lifetime.lua) as a group follows it: how long a
-- tick may take it as read.
--
-- Reading `INFO` and finding the lifetime in it costs a steady tick about as much as
-- everything else it does, so a tick takes the lifetime as the group's (META `server`)
-- without reading it for one window, a quarter lease, after a script last read it
-- and found it the group's (META `checked`). A claim, a restore and a seed always read
-- it. A server whose lifetime changed (a restart that kept the group, a failover) may
-- so extend sessions for up to one window before a script sees the change, and the
-- hold after the change (meta.lua's follow_server) counts its lease from the last
-- moment one may have (the window's end, or the change's discovery if sooner) when
-- that is after the new lifetime began.

-- The window (ms) for a group of lease `lease` ms.
local function check_window(lease)
  return math.floor(lease / 4)
end

-- Whether a tick at `now` may take the lifetime as the group's without reading it:
-- the last check (`checked`, nil if none) is at most one window old, and not in the
-- future (a server whose clock is behind the one that checked reads it).
local function lifetime_fresh(checked, lease, now)
  return checked ~= nil and checked <= now and now < checked + check_window(lease)
end
