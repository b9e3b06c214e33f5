-- Small helpers every group script shares.

-- The server's clock: milliseconds and microseconds.
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- ARGV from position `from` on.
local function tail(from)
  local out = {}
  for i = from, #ARGV do out[#out + 1] = ARGV[i] end
  return out
end

-- `names` without repeats, in order.
local function distinct(names)
  local seen, out = {}, {}
  for _, n in ipairs(names) do
    if not seen[n] then
      seen[n] = true
      out[#out + 1] = n
    end
  end
  return out
end

-- A hash's fields (by HGETALL: the minimal ACL rule has no HKEYS).
local function fields(key)
  local all, out = redis.call('HGETALL', key), {}
  for i = 1, #all, 2 do out[#out + 1] = all[i] end
  return out
end

local function sum(list)
  local n = 0
  for _, x in ipairs(list) do n = n + x end
  return n
end

-- An integer as Redis replies carry it (a Lua number above 2^31 would print in
-- exponent form).
local function int(x)
  return string.format('%.0f', x)
end

-- HELD's entries of session `tok` are `tok \1 partition`, so one session is one range.
local function entry(tok, name)
  return tok .. '\1' .. name
end

local function span(tok)
  return '[' .. tok .. '\1', '(' .. tok .. '\2'
end

local function names_of(tok, entries)
  local out = {}
  for i, e in ipairs(entries) do out[i] = string.sub(e, #tok + 2) end
  return out
end

-- The replica id in a token `<replica>:<hex>`.
local function replica_of(tok)
  return string.match(tok, '^(.*):[^:]*$')
end
