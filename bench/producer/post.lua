-- post.lua - wrk script for POST /v1/reports with Idempotency-Key.
-- REPLAY=0.5 (env) makes that share of requests reuse a key this thread
-- has already sent (same body: a replay); the rest use new keys (creates).
-- Every answer that is not 201 is counted and printed at the end.
local body = '{"title":"Crash on save","module":"editor","severity":"high",' ..
             '"steps":"1. open a file 2. press save"}'
local threads = {}
local next_id = 0

function setup(thread)
	thread:set("tid", next_id)
	next_id = next_id + 1
	table.insert(threads, thread)
end

function init(args)
	replay_share = tonumber(os.getenv("REPLAY") or "0")
	prefix = string.format("bench-%d-%d-%d-", os.time(), tid, math.random(1, 1000000000))
	sent = 0
	bad = 0
	replays = 0
	math.randomseed(os.time() + tid)
end

function request()
	local key
	if sent > 0 and math.random() < replay_share then
		key = prefix .. math.random(1, sent)
		replays = replays + 1
	else
		sent = sent + 1
		key = prefix .. sent
	end
	return wrk.format("POST", "/v1/reports",
		{ ["Idempotency-Key"] = key, ["Content-Type"] = "application/json" }, body)
end

function response(status, headers, b)
	if status ~= 201 then
		bad = bad + 1
	end
end

function done(summary, latency, requests)
	local created, replayed, non201 = 0, 0, 0
	for _, t in ipairs(threads) do
		created = created + t:get("sent")
		replayed = replayed + t:get("replays")
		non201 = non201 + t:get("bad")
	end
	io.write(string.format("keys_new=%d replays_sent=%d non_201=%d p50_ms=%.2f p99_ms=%.2f\n",
		created, replayed, non201, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
