-- The buckets of a request's token-bucket rate limits: the arithmetic of
-- ratelimit.Memory (ratelimit/bucket.go), on Redis's clock, so that every
-- node deciding on a bucket agrees whatever its own clock says. Times are
-- microseconds (TIME's precision; nanoseconds since 1970 do not fit in the
-- 53 bits a Lua number holds exactly).
--
-- KEYS[i]   bucket i: "<tokens> <when>", the tokens it held when (µs)
-- ARGV[1]   "take" or "refund"
-- ARGV[4i-2], ARGV[4i-1], ARGV[4i], ARGV[4i+1]
--           bucket i's cost (tokens), burst (the most tokens it holds),
--           events and window (nanoseconds): its rate
--
-- Returns three numbers per bucket: allowed (0 or 1), retry after (µs,
-- when denied), remaining tokens.
--
-- A take is all or nothing: when one bucket lacks the tokens, no bucket is
-- written, so a request refused by one limit spends nothing of the others.
-- A bucket is written only when its tokens change, and expires when it
-- would be full again: a full bucket is the same as none, so Redis holds
-- only the buckets of clients that spent tokens lately. A key named twice
-- is one bucket, decided in order.

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local take = ARGV[1] == 'take'
local all = true
local out = {}
-- Bucket i as the script leaves it: tokens[i] held at last[i], and full[i]
-- when it will be full again (nil when unchanged); latest[key] is the last
-- i naming key.
local tokens, last, full, latest = {}, {}, {}, {}

for i, key in ipairs(KEYS) do
	local a = 4 * i - 2
	local cost = math.max(tonumber(ARGV[a]), 0)
	local burst, events, window = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])

	local t, l
	local before = latest[key]
	latest[key] = i
	if before then
		t, l = tokens[before], last[before]
	else
		-- A value that is not a bucket (another type, another format: a
		-- key someone else wrote) counts as no bucket, and is replaced
		-- when tokens are taken, rather than failing every decision on it.
		local held = redis.pcall('GET', key)
		if type(held) == 'string' then
			local space = string.find(held, ' ', 1, true)
			if space then
				t, l = tonumber(string.sub(held, 1, space - 1)), tonumber(string.sub(held, space + 1))
			end
		end
		if t == nil or l == nil then
			t, l = burst, now
		end
	end
	tokens[i], last[i] = t, l

	-- at: the tokens held now, at most burst
	local at = t
	if now > l then at = at + (now - l) * 1000 * events / window end
	at = math.min(at, burst)

	local o = 3 * i - 2
	local left
	if not take then
		left = math.min(at + cost, burst)
		out[o], out[o + 1], out[o + 2] = 1, 0, math.floor(left)
	elseif cost > burst then
		all = false
		out[o], out[o + 1], out[o + 2] = 0, math.ceil(burst * window / events / 1000), math.floor(at)
	else
		-- ready: when the bucket holds cost tokens
		local ready = l
		if t < cost then ready = l + math.ceil((cost - t) * window / events / 1000) end
		local when = math.max(now, l)
		if when < ready then
			all = false
			out[o], out[o + 1], out[o + 2] = 0, ready - now, math.min(math.floor(at), cost - 1)
		else
			left = math.max(at - cost, 0)
			out[o], out[o + 1], out[o + 2] = 1, 0, math.floor(left)
		end
	end
	if left then
		local when = math.max(now, l)
		tokens[i], last[i], full[i] = left, when, when
		if left < burst then full[i] = when + math.ceil((burst - left) * window / events / 1000) end
	end
end

if not all then
	return out
end
-- Store each bucket that changed, or drop it when it is full again.
for i, key in ipairs(KEYS) do
	if full[i] and latest[key] == i then
		if full[i] <= now then
			redis.call('DEL', key)
		else
			redis.call('SET', key, string.format('%.17g %d', tokens[i], last[i]), 'PXAT', math.ceil(full[i] / 1000))
		end
	end
end
return out
