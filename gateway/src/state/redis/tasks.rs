//! Task records in Redis, bounded per identity as the memory store bounds them (see
//! [`super::SharedState::put_task`]), in one Lua script per write so that replicas
//! writing tasks of one identity at once see each other's whole steps.
//!
//! Keys (under `<prefix>:`), besides `task:<id>` (the record, for its TTL):
//! - `tasks-kept:<owner>`: a sorted set of the owner's kept task ids, scored by when each
//!   was first stored (Redis's clock, in microseconds), oldest first;
//! - `tasks-meta:<owner>`: a hash of the same ids to `<bytes> <settled 0|1> <expires ms>`;
//! - `tasks-dropped:<owner>`: a sorted set of the ids of its dropped tasks still
//!   remembered, scored by when they would have expired;
//! - `task-dropped:<id>`: a dropped task's tombstone, naming its owner, until then.
//!
//! `<owner>` is `=` and the identity, or `-` for no credentials. The script reaches the
//! records and tombstones of dropped tasks by names it builds, which a single Redis
//! allows (a Redis Cluster would not: the gateway uses one Redis).

use redis::Script;

use crate::state::{StoredTask, TaskBound, TaskEntry, TaskKept};

/// Stores a task within its owner's bound. KEYS: the record, `tasks-kept`, `tasks-meta`,
/// `tasks-dropped` of its owner. ARGV: id, record, ttl ms, bytes, settled (0|1),
/// max tasks, max bytes, ids remembered, the prefix of records, the prefix of
/// tombstones, the owner's tag. Returns 1 when kept, 0 when refused.
const PUT_TASK: &str = r"
local time = redis.call('TIME')
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now = math.floor(now_us / 1000)
local id, ttl, bytes = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local settled = ARGV[5] == '1'
local max_tasks, max_bytes = tonumber(ARGV[6]), tonumber(ARGV[7])
local remembered = tonumber(ARGV[8])
local records, tombstones, owner = ARGV[9], ARGV[10], ARGV[11]
local function int(n) return string.format('%d', n) end

-- The owner's tasks that expired are forgotten.
local entries = {}
local meta = redis.call('HGETALL', KEYS[3])
for i = 1, #meta, 2 do
  local b, s, e = string.match(meta[i + 1], '^(%d+) ([01]) (%d+)$')
  if b == nil or tonumber(e) <= now then
    redis.call('HDEL', KEYS[3], meta[i])
    redis.call('ZREM', KEYS[2], meta[i])
  else
    entries[meta[i]] = {tonumber(b), s == '1', tonumber(e)}
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)

-- A new running task needs room beside the owner's running ones.
local known = entries[id] ~= nil
if not known and not settled then
  local count, used = 0, 0
  for _, entry in pairs(entries) do
    if not entry[2] then
      count = count + 1
      used = used + entry[1]
    end
  end
  if count >= max_tasks or used + bytes > max_bytes then
    return 0
  end
end

local expires = now + ttl
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('DEL', tombstones .. id)
redis.call('ZREM', KEYS[4], id)
redis.call('HSET', KEYS[3], id, int(bytes) .. ' ' .. (settled and '1' or '0') .. ' ' .. int(expires))
if not known then
  redis.call('ZADD', KEYS[2], int(now_us), id)
end
entries[id] = {bytes, settled, expires}

-- Settled tasks are dropped, oldest first, until the kept ones are within the bound.
local count, used = 0, 0
for _, entry in pairs(entries) do
  count = count + 1
  used = used + entry[1]
end
if count > max_tasks or used > max_bytes then
  for _, other in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if count <= max_tasks and used <= max_bytes then
      break
    end
    local entry = entries[other]
    if entry ~= nil and entry[2] then
      redis.call('DEL', records .. other)
      redis.call('HDEL', KEYS[3], other)
      redis.call('ZREM', KEYS[2], other)
      redis.call('SET', tombstones .. other, owner, 'PX', math.max(entry[3] - now, 1))
      redis.call('ZADD', KEYS[4], int(entry[3]), other)
      count = count - 1
      used = used - entry[1]
    end
  end
  local excess = redis.call('ZCARD', KEYS[4]) - remembered
  if excess > 0 then
    for _, old in ipairs(redis.call('ZRANGE', KEYS[4], 0, excess - 1)) do
      redis.call('DEL', tombstones .. old)
    end
    redis.call('ZREMRANGEBYRANK', KEYS[4], 0, excess - 1)
  end
end

-- The owner's index lasts as long as its longest-lived task.
for i = 2, 4 do
  if redis.call('PTTL', KEYS[i]) < ttl then
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return 1
";

/// The names of the keys one owner's tasks use.
pub struct TaskKeys {
    prefix: String,
}

impl TaskKeys {
    pub fn new(prefix: &str) -> TaskKeys {
        TaskKeys {
            prefix: prefix.to_owned(),
        }
    }

    pub fn record(&self, id: &str) -> String {
        format!("{}:task:{id}", self.prefix)
    }

    pub fn tombstone(&self, id: &str) -> String {
        format!("{}:task-dropped:{id}", self.prefix)
    }

    fn owners(&self, kind: &str, owner: &str) -> String {
        format!("{}:{kind}:{owner}", self.prefix)
    }
}

/// The tag of `owner` in key names and tombstones.
fn tag(owner: Option<&str>) -> String {
    owner.map_or_else(|| "-".to_owned(), |owner| format!("={owner}"))
}

/// The owner a tombstone's tag names.
fn untag(tag: &str) -> Option<String> {
    tag.strip_prefix('=').map(str::to_owned)
}

/// The script that stores tasks.
pub struct PutTask(Script);

impl PutTask {
    pub fn new() -> PutTask {
        PutTask(Script::new(PUT_TASK))
    }

    /// Stores `task` within `bound` (see [`super::SharedState::put_task`]).
    pub async fn invoke(
        &self,
        connection: &mut redis::aio::ConnectionManager,
        keys: &TaskKeys,
        task: TaskEntry<'_>,
        bound: TaskBound,
    ) -> redis::RedisResult<TaskKept> {
        let owner = tag(task.owner);
        let ttl = u64::try_from(task.ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let bytes = task.bytes();
        let kept = self
            .0
            .key(keys.record(task.id))
            .key(keys.owners("tasks-kept", &owner))
            .key(keys.owners("tasks-meta", &owner))
            .key(keys.owners("tasks-dropped", &owner))
            .arg(task.id)
            .arg(task.record)
            .arg(ttl)
            .arg(bytes)
            .arg(u8::from(task.settled))
            .arg(bound.max_tasks)
            .arg(bound.max_bytes)
            .arg(bound.remembered)
            .arg(keys.record(""))
            .arg(keys.tombstone(""))
            .arg(&owner)
            .invoke_async::<i64>(connection)
            .await?;
        Ok(if kept == 1 {
            TaskKept::Kept
        } else {
            TaskKept::Refused
        })
    }
}

/// Task `id` from its record and its tombstone, as read together.
pub fn stored(record: Option<String>, tombstone: Option<String>) -> Option<StoredTask> {
    match (record, tombstone) {
        (Some(record), _) => Some(StoredTask::Record(record)),
        (None, Some(owner)) => Some(StoredTask::Dropped {
            owner: untag(&owner),
        }),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_tag_reads_back_as_the_owner() {
        for owner in [None, Some(""), Some("token:ab"), Some("-")] {
            assert_eq!(untag(&tag(owner)).as_deref(), owner);
        }
    }
}
