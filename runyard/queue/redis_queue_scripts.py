"""The Lua scripts of the Redis job queue (runyard/queue/redis_queue.py describes its keys):
each one is atomic, so two instances never see a group half-updated."""

from __future__ import annotations

# Wake-ups kept at most: more than any number of parked worker loops.
READY_CAP = 1000
# A score is (priority - PRIORITY_FIRST) * 2^44 + arrival: exact in a double while arrivals
# stay below 2^44.
PRIORITY_STEP = 2**44

# ENQUEUE(run_id, priority_offset, group): shared by the push and promotion scripts.
# KEYS: arrivals, turns, waiting, ready; ARGV[1]: the group key prefix.
ENQUEUE = f"""
local function enqueue(run_id, offset, group)
  local key = ARGV[1] .. group
  if redis.call('ZSCORE', key, run_id) then
    return 0
  end
  redis.call('HSET', KEYS[3], run_id, group)
  if redis.call('EXISTS', key) == 0 then
    redis.call('RPUSH', KEYS[2], group)
  end
  local arrival = redis.call('INCR', KEYS[1])
  redis.call('ZADD', key, offset * {PRIORITY_STEP} + arrival, run_id)
  redis.call('RPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], -{READY_CAP}, -1)
  return 1
end
"""
# ARGV: group key prefix, run id, priority offset, group.
PUSH = ENQUEUE + "return enqueue(ARGV[2], tonumber(ARGV[3]), ARGV[4])"
# KEYS: + delayed set, placing hash; ARGV: group key prefix, now.
PROMOTE = (
    ENQUEUE
    + """
local due = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', ARGV[2], 'LIMIT', 0, 100)
for _, id in ipairs(due) do
  if redis.call('ZREM', KEYS[5], id) == 1 then
    local placing = redis.call('HGET', KEYS[6], id) or '5|default'
    redis.call('HDEL', KEYS[6], id)
    local sep = string.find(placing, '|', 1, true)
    enqueue(id, tonumber(string.sub(placing, 1, sep - 1)), string.sub(placing, sep + 1))
  end
end
return #due
"""
)
# KEYS: legacy list, turns, waiting, ready; ARGV: group key prefix, whether to spend a
# wake-up (one per run taken, so the wake-ups left match the runs left; a loop that BLPOPed
# one has spent it already), hold key prefix, probe milliseconds ('0': no group is capped),
# whether groups are capped by default ('1'/'0'), the groups that differ (JSON object of
# group -> 1/0). A run taken from a capped group holds the group (value: the run id) until
# its claim is decided: one claim of a capped group in flight at a time. Returns {run id,
# group, score, '1' when it probes} ({run id} from the legacy list).
POP = """
local legacy = redis.call('LPOP', KEYS[1])
if legacy then
  return {legacy}
end
local overrides = nil
for _ = 1, redis.call('LLEN', KEYS[2]) do
  local group = redis.call('LPOP', KEYS[2])
  if not group then
    return false
  end
  local key = ARGV[1] .. group
  if redis.call('EXISTS', ARGV[3] .. group) == 1 then
    redis.call('RPUSH', KEYS[2], group)
  else
    local popped = redis.call('ZPOPMIN', key)
    if #popped > 0 then
      if redis.call('EXISTS', key) == 1 then
        redis.call('RPUSH', KEYS[2], group)
      end
      redis.call('HDEL', KEYS[3], popped[1])
      if ARGV[2] == '1' then
        redis.call('LPOP', KEYS[4])
      end
      local probe = '0'
      if ARGV[4] ~= '0' then
        overrides = overrides or cjson.decode(ARGV[6])
        local capped = overrides[group]
        if capped == nil then
          capped = tonumber(ARGV[5])
        end
        if capped == 1 then
          redis.call('SET', ARGV[3] .. group, popped[1], 'PX', ARGV[4])
          probe = '1'
        end
      end
      return {popped[1], group, popped[2], probe}
    end
  end
end
return false
"""
# KEYS: arrivals, turns, waiting, the group's hold key; ARGV: group key prefix, run id,
# group, score ('' when not known: from the priority offset and a new arrival), priority
# offset, hold milliseconds. Replaces a probe's hold; of two holds, the longer is kept.
HOLD = f"""
local current = redis.call('GET', KEYS[4])
if current ~= 'held' or redis.call('PTTL', KEYS[4]) < tonumber(ARGV[6]) then
  redis.call('SET', KEYS[4], 'held', 'PX', ARGV[6])
end
local key = ARGV[1] .. ARGV[3]
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 or redis.call('ZSCORE', key, ARGV[2]) then
  return 0
end
local score = tonumber(ARGV[4])
if not score then
  score = tonumber(ARGV[5]) * {PRIORITY_STEP} + redis.call('INCR', KEYS[1])
end
if redis.call('EXISTS', key) == 0 then
  redis.call('RPUSH', KEYS[2], ARGV[3])
end
redis.call('ZADD', key, score, ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
return 1
"""
# KEYS: the group's hold key, ready; ARGV: the probing run id (or 'held': the hold a refused
# claim set), group key. Lifts that hold (not another set since) and wakes a worker loop
# when the group has runs waiting.
SETTLE = f"""
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if redis.call('EXISTS', ARGV[2]) == 1 then
    redis.call('RPUSH', KEYS[2], '1')
    redis.call('LTRIM', KEYS[2], -{READY_CAP}, -1)
  end
end
return 1
"""
