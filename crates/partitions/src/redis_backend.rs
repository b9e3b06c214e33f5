//! [`GroupBackend`] for [`RedisStore`]: each operation is one script.

use std::sync::LazyLock;
use std::time::Duration;

use leasehold_election::keys::replica_of_token;
use leasehold_election::{Fence, LuaScript, RedisStore, StoreError};
use redis::Value;

use crate::backend::{
    Conflict, GroupBackend, GroupStatus, PartitionOwner, TickReply, TickRequest, Unowned,
};
use crate::keys::GroupKeys;

/// KEYS: members, owned, instances, meta, lease of every partition.
/// ARGV: replica, instance, ttl ms, owned (-1 settling), lease ms, digest, list,
///       renewal count, then (partition index, token) pairs.
///
/// Heartbeats (unless another live instance holds the replica id), expires dead
/// members, checks the partition list, renews, scans for partitions without a live
/// owner, and counts each live member's partitions from the leases themselves. Reply: {renewed[], members[], counts[], unowned[{index, holder, pttl}],
/// conflict, heartbeat ms left per member[]}.
static TICK: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
local replica, instance = ARGV[1], ARGV[2]
local ttl, owned, lease = tonumber(ARGV[3]), ARGV[4], ARGV[5]
local digest, list = ARGV[6], ARGV[7]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, d in ipairs(dead) do
  redis.call('ZREM', KEYS[1], d)
  redis.call('HDEL', KEYS[2], d)
  redis.call('HDEL', KEYS[3], d)
end

local conflict = ''
local other = redis.call('HGET', KEYS[3], replica)
if other and other ~= instance and redis.call('ZSCORE', KEYS[1], replica) then
  conflict = 'duplicate'
end
if conflict == '' then
  local stored = redis.call('HGET', KEYS[4], 'digest')
  if stored and stored ~= digest then
    local others = redis.call('ZCARD', KEYS[1])
    if redis.call('ZSCORE', KEYS[1], replica) then others = others - 1 end
    if others > 0 then conflict = 'mismatch' end
  end
  if conflict == '' and stored ~= digest then
    redis.call('HSET', KEYS[4], 'digest', digest, 'partitions', list)
  end
end
if conflict == '' then
  redis.call('ZADD', KEYS[1], now + ttl, replica)
  redis.call('HSET', KEYS[2], replica, owned)
  redis.call('HSET', KEYS[3], replica, instance)
end

local renewed = {}
local n = tonumber(ARGV[8])
for i = 1, n do
  local key = KEYS[4 + tonumber(ARGV[7 + 2 * i])]
  if conflict == '' and redis.call('GET', key) == ARGV[8 + 2 * i] then
    renewed[i] = redis.call('PEXPIRE', key, lease)
  else
    renewed[i] = 0
  end
end

local scored = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local members, lefts, live = {}, {}, {}
for i = 1, #scored, 2 do
  table.insert(members, scored[i])
  table.insert(lefts, tonumber(scored[i + 1]) - now)
  live[scored[i]] = true
end
local unowned, held = {}, {}
for i = 5, #KEYS do
  local holder = redis.call('GET', KEYS[i])
  if not holder then
    table.insert(unowned, {i - 5, '', -2})
  else
    local who = string.match(holder, '^(.*):[^:]*$') or holder
    if live[who] then
      held[who] = (held[who] or 0) + 1
    else
      table.insert(unowned, {i - 5, who, redis.call('PTTL', KEYS[i])})
    end
  end
end

-- Counts come from the leases themselves (consistent at this instant); the published
-- value only says whether a member is still settling (-1).
local counts = {}
if #members > 0 then counts = redis.call('HMGET', KEYS[2], unpack(members)) end
for i, m in ipairs(members) do
  if counts[i] == '-1' or not counts[i] then counts[i] = '-1' else counts[i] = held[m] or 0 end
end
return {renewed, members, counts, unowned, conflict, lefts}
"#,
    )
});

/// KEYS: members, owned, instances. ARGV: replica, instance.
static LEAVE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
if redis.call('HGET', KEYS[3], ARGV[1]) == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
end
return 1
"#,
    )
});

/// KEYS: members, owned, meta. Reply: {partition list or false, members[], counts[]}
/// (live members only).
static META: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
local counts = {}
if #members > 0 then counts = redis.call('HMGET', KEYS[2], unpack(members)) end
for i, c in ipairs(counts) do if not c then counts[i] = '-1' end end
return {redis.call('HGET', KEYS[3], 'partitions'), members, counts}
"#,
    )
});

/// KEYS: lease1, fence1, lease2, fence2, ... Reply: {holder or '', pttl, fence} each.
static OWNERS: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        r#"
local out = {}
for i = 1, #KEYS, 2 do
  table.insert(out, {redis.call('GET', KEYS[i]) or '', redis.call('PTTL', KEYS[i]), redis.call('GET', KEYS[i + 1]) or '0'})
end
return out
"#,
    )
});

fn protocol(what: &str, v: &Value) -> StoreError {
    StoreError::Protocol(format!("{what}: unexpected {v:?}"))
}

fn items(v: Value) -> Result<Vec<Value>, StoreError> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(protocol("array", &other)),
    }
}

fn int(v: &Value) -> Result<i64, StoreError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| protocol("integer", v)),
        other => Err(protocol("integer", other)),
    }
}

fn text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::BulkString(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Nil => Ok(String::new()),
        other => Err(protocol("string", other)),
    }
}

fn pttl(ms: i64) -> Option<Duration> {
    match ms {
        -1 => None,
        m if m < 0 => Some(Duration::ZERO),
        m => Some(Duration::from_millis(m.unsigned_abs())),
    }
}

fn count(v: &Value) -> Result<Option<usize>, StoreError> {
    let c = int(v)?;
    Ok(usize::try_from(c).ok())
}

fn members(names: Value, counts: Value) -> Result<Vec<(String, Option<usize>)>, StoreError> {
    let names = items(names)?;
    let counts = items(counts)?;
    names
        .iter()
        .zip(counts.iter())
        .map(|(n, c)| Ok((text(n)?, count(c)?)))
        .collect()
}

impl GroupBackend for RedisStore {
    async fn tick(&self, keys: &GroupKeys, req: &TickRequest) -> Result<TickReply, StoreError> {
        let mut k: Vec<&str> = vec![&keys.members, &keys.owned, &keys.instances, &keys.meta];
        k.extend(keys.partitions.iter().map(|p| p.lease.as_str()));
        let ttl = req.ttl.as_millis().max(1).to_string();
        let owned = req.owned.map_or_else(|| "-1".to_owned(), |o| o.to_string());
        let lease = req.lease.as_millis().max(1).to_string();
        let n = req.renewals.len().to_string();
        let renewals: Vec<(String, &str)> = req
            .renewals
            .iter()
            .map(|(i, t)| ((i + 1).to_string(), t.as_str()))
            .collect();
        let mut a: Vec<&str> = vec![
            &req.replica,
            &req.instance,
            &ttl,
            &owned,
            &lease,
            &req.digest,
            &req.list,
            &n,
        ];
        for (i, t) in &renewals {
            a.push(i);
            a.push(t);
        }
        let reply = items(self.eval(&TICK, &k, &a).await?)?;
        let [renewed, names, counts, unowned, conflict, lefts] = <[Value; 6]>::try_from(reply)
            .map_err(|v| StoreError::Protocol(format!("tick replied {v:?}")))?;
        let renewed = items(renewed)?
            .iter()
            .map(|v| int(v).map(|i| i == 1))
            .collect::<Result<_, _>>()?;
        let unowned = items(unowned)?
            .into_iter()
            .map(|u| {
                let u = items(u)?;
                let (Some(i), Some(h), Some(p)) = (u.first(), u.get(1), u.get(2)) else {
                    return Err(StoreError::Protocol("short unowned entry".into()));
                };
                let holder = text(h)?;
                Ok(Unowned {
                    index: usize::try_from(int(i)?).map_err(|_| protocol("index", i))?,
                    remaining: if holder.is_empty() {
                        None
                    } else {
                        pttl(int(p)?)
                    },
                    holder: (!holder.is_empty()).then_some(holder),
                })
            })
            .collect::<Result<_, StoreError>>()?;
        let conflict = match text(&conflict)?.as_str() {
            "duplicate" => Some(Conflict::DuplicateReplica),
            "mismatch" => Some(Conflict::PartitionListMismatch),
            _ => None,
        };
        Ok(TickReply {
            renewed,
            members: members(names, counts)?,
            heartbeat_left: items(lefts)?
                .iter()
                .map(|v| int(v).map(|ms| Duration::from_millis(ms.max(0).unsigned_abs())))
                .collect::<Result<_, _>>()?,
            unowned,
            conflict,
        })
    }

    async fn leave(
        &self,
        keys: &GroupKeys,
        replica: &str,
        instance: &str,
    ) -> Result<(), StoreError> {
        self.eval(
            &LEAVE,
            &[&keys.members, &keys.owned, &keys.instances],
            &[replica, instance],
        )
        .await
        .map(drop)
    }

    async fn group_status(&self, keys: &GroupKeys) -> Result<Option<GroupStatus>, StoreError> {
        let meta = items(
            self.eval(&META, &[&keys.members, &keys.owned, &keys.meta], &[])
                .await?,
        )?;
        let [list, names, counts] = <[Value; 3]>::try_from(meta)
            .map_err(|v| StoreError::Protocol(format!("meta replied {v:?}")))?;
        if list == Value::Nil {
            return Ok(None);
        }
        let partitions: Vec<String> = text(&list)?.split('\n').map(str::to_owned).collect();
        let prefix_keys = keys.with_partitions(&partitions);
        let mut k: Vec<&str> = Vec::new();
        for p in &prefix_keys.partitions {
            k.push(&p.lease);
            k.push(&p.fence);
        }
        let owners = items(self.eval(&OWNERS, &k, &[]).await?)?;
        let partitions = partitions
            .into_iter()
            .zip(owners)
            .map(|(partition, o)| {
                let o = items(o)?;
                let (Some(h), Some(p), Some(f)) = (o.first(), o.get(1), o.get(2)) else {
                    return Err(StoreError::Protocol("short owner entry".into()));
                };
                let holder = text(h)?;
                Ok(PartitionOwner {
                    partition,
                    owner: (!holder.is_empty()).then(|| replica_of_token(&holder).to_owned()),
                    remaining: if holder.is_empty() {
                        None
                    } else {
                        pttl(int(p)?)
                    },
                    fence: Fence(u64::try_from(int(f)?).unwrap_or(0)),
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Some(GroupStatus {
            partitions,
            replicas: members(names, counts)?,
        }))
    }
}
