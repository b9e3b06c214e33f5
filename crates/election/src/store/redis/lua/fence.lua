-- The fence of a new term: above the last one issued (`last`), at least the caller's
-- floor (the highest it has seen: it keeps fences growing if the server lost its
-- counter), and at least the server's clock in µs (it keeps them growing after a restart
-- that lost every key, when the caller has seen none). Returns the fence, and whether
-- the floor had to raise it (the counter was behind: data was lost).
local function next_fence(last, floor, now_us)
  local f, regressed = last + 1, false
  if f < floor then
    f = floor
    regressed = true
  end
  if f < now_us then f = now_us end
  return f, regressed
end
