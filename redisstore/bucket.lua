-- One bucket of a token-bucket rate limit: the arithmetic of
-- ratelimit.Memory (ratelimit/bucket.go), on Redis's clock, so that every
-- node deciding on this bucket agrees whatever its own clock says. Times are
-- microseconds (TIME's precision; nanoseconds since 1970 do not fit in the
-- 53 bits a Lua number holds exactly).
--
-- KEYS[1]  the bucket: "<tokens> <when>", the tokens it held when (µs)
-- ARGV[1]  "take" or "refund"
-- ARGV[2]  cost, in tokens
-- ARGV[3]  burst: the most tokens the bucket holds
-- ARGV[4]  events and ARGV[5] window (nanoseconds): the rate
--
-- Returns {allowed (0 or 1), retry after (µs, when denied), remaining}.
-- A bucket is written only when tokens change, and expires when it would be
-- full again: a full bucket is the same as none, so Redis holds only the
-- buckets of clients that spent tokens lately.

local key = KEYS[1]
local op = ARGV[1]
local cost = math.max(tonumber(ARGV[2]), 0)
local burst = tonumber(ARGV[3])
local events = tonumber(ARGV[4])
local window = tonumber(ARGV[5])

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

-- tokens refilled in d microseconds, and microseconds to refill n tokens
local function tokens_in(d) return d * 1000 * events / window end
local function time_for(n) return n * window / events / 1000 end

-- A value that is not a bucket (another type, another format: a key
-- someone else wrote) counts as no bucket, and is replaced when tokens are
-- taken, rather than failing every decision on it.
local tokens, last
local held = redis.pcall('GET', key)
if type(held) == 'string' then
	local t, l = string.match(held, '^(%S+) (%S+)$')
	tokens, last = tonumber(t), tonumber(l)
end
if tokens == nil or last == nil then
	tokens, last = burst, now
end

-- at: the tokens held now, at most burst
local at = tokens
if now > last then at = at + tokens_in(now - last) end
at = math.min(at, burst)

-- ready_at: when the bucket will hold n tokens
local function ready_at(n)
	if tokens >= n then return last end
	return last + math.ceil(time_for(n - tokens))
end

-- store the bucket, or drop it when it is full again
local function set(t, when)
	local full = when
	if t < burst then full = when + math.ceil(time_for(burst - t)) end
	if full <= now then
		redis.call('DEL', key)
		return
	end
	redis.call('SET', key, string.format('%.17g %d', t, when), 'PXAT', math.ceil(full / 1000))
end

local when = math.max(now, last)
if op == 'refund' then
	set(math.min(at + cost, burst), when)
	return {1, 0, math.floor(math.min(at + cost, burst))}
end

if cost > burst then
	return {0, math.ceil(time_for(burst)), math.floor(at)}
end
local ready = ready_at(cost)
if when < ready then
	return {0, ready - now, math.min(math.floor(at), cost - 1)}
end
local left = math.max(at - cost, 0)
set(left, when)
return {1, 0, math.floor(left)}
