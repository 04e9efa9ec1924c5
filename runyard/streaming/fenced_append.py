"""The Lua script that appends a run's events to its Redis stream, fenced by attempt.

One script call makes an append atomic with its checks: the attempt's fence, the retry of a
batch whose reply was lost, the stream's cap and expiry, and the announcements (to other
instances' stream readers, and of the run's completion). `RedisEventBroker`
(redis_broker.py) registers it and makes every append through it.
"""

# Appends events (ARGV[10..]: event, data, event, data...) only while the publisher's
# attempt is the run's current one (fencing; false otherwise), and returns the stream's last
# id before this append ("0-0" if none) followed by each new entry's id. ARGV[4] = '1' first
# records the attempt as the newest (an older one can never lower it); a non-empty ARGV[5]
# is a channel on which the run id (ARGV[6]) is published afterwards. ARGV[7] names the
# batch: a retry whose first try was applied (its reply was lost) returns "-" and that
# try's last id instead of appending the events twice. ARGV[8] is the channel on which the
# stream readers of other instances learn of the append, when one of them follows the
# stream (KEYS[4], see streaming/followers.py; ARGV[9] is the appending instance, whose own
# subscribers are served without it): three lines, the stream key, its last id before this
# append, and (unless the events are large) the new entries as JSON [[id, event, data],
# ...], so a reader that is up to date with the key delivers them without reading it.
FENCED_XADD = """
local last = redis.call('GET', KEYS[3])
if last then
  local sep = string.find(last, ' ', 1, true)
  if sep and string.sub(last, 1, sep - 1) == ARGV[7] then
    return {'-', string.sub(last, sep + 1)}
  end
end
local attempt = tonumber(ARGV[1])
local current = redis.call('GET', KEYS[2])
if attempt >= 0 and current and tonumber(current) > attempt then
  return false
end
if ARGV[4] == '1' and (not current or tonumber(current) < attempt) then
  redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[3])
end
local previous = '0-0'
if last then
  previous = string.sub(last, (string.find(last, ' ', 1, true) or 0) + 1)
end
local ids = {previous}
for i = 10, #ARGV, 2 do
  ids[#ids + 1] = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*',
                             'event', ARGV[i], 'data', ARGV[i + 1])
end
if #ids > 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  local others = redis.call('HLEN', KEYS[4])
  if others > 0 and redis.call('HEXISTS', KEYS[4], ARGV[9]) == 1 then
    others = others - 1
  end
  if others > 0 then
    local added = {}
    local size = 0
    for i = 10, #ARGV, 2 do
      added[#added + 1] = {ids[#added + 2], ARGV[i], ARGV[i + 1]}
      size = size + string.len(ARGV[i + 1])
    end
    local body = ''
    if size <= 16384 then
      body = cjson.encode(added)
    end
    redis.call('PUBLISH', ARGV[8], KEYS[1] .. '\\n' .. previous .. '\\n' .. body)
  end
  redis.call('SET', KEYS[3], ARGV[7] .. ' ' .. ids[#ids], 'EX', ARGV[3])
end
if ARGV[5] ~= '' then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return ids
"""
