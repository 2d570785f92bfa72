//! etcd: the [`WorkerStore`] half of the contract.
//!
//! Two keys per worker id, under `PREFIX/workers/EGROUP/WWWWWWWWWWWWWWWWWWWW/`:
//!
//! - `lease`: the fence, decimal, attached to an etcd lease: it exists while
//!   the worker id is held, and etcd deletes it when the lease expires;
//! - `floor`: JSON `{"fence":F,"until_ms":U,"generation":G,"holder":H}`,
//!   attached to no lease, so the fence and the time floor outlive every
//!   holder (`holder`: who acquired it last, for listings).
//!
//! An acquisition reads the group's keys, picks the lowest worker id without
//! a `lease` key, and writes both keys in one transaction that compares the
//! `lease` key absent and the `floor` key unchanged (its mod revision), so
//! two acquirers never both win. A renewal keeps the etcd lease alive and
//! moves the floor in a transaction comparing the `floor` key unchanged; a
//! lease that expired but that no one acquired since is taken again under
//! the same fence. etcd lease TTLs are whole seconds (and at least etcd's
//! minimum, about 2 s): the store's expiry is never earlier than the TTL
//! asked for.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{DeleteOptions, PutOptions};

use super::*;
use keysmith_core::driver::{
    Release, Renewal, WorkerClaim, WorkerEntry, WorkerLease, WorkerStore, acquisition_start,
    all_taken, lowest_free, same_worker_generation,
};

/// How often a call reads again after losing a race.
const ATTEMPTS: u32 = 32;

/// How many leases' time left a listing asks etcd for at once.
const LIST_PARALLEL: usize = 32;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Floor {
    fence: i64,
    until_ms: i64,
    /// The store generation of the last acquisition or renewal (absent in
    /// floors from before generations were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation: Option<String>,
    /// Who acquired the worker id last (absent in floors from before
    /// holders were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder: Option<String>,
}

/// What the store holds of one worker id.
#[derive(Debug, Default)]
struct Slot {
    /// The `lease` key: its etcd lease id and create revision.
    lease: Option<(i64, i64)>,
    /// The `floor` key and its mod revision.
    floor: Option<(Floor, i64)>,
}

fn ttl_secs(ttl: Duration) -> i64 {
    (ttl.as_millis().div_ceil(1000) as i64).max(1)
}

impl EtcdStore {
    fn group_prefix(&self, group: &str) -> String {
        format!("{}workers/{}/", self.prefix, escape(group))
    }

    fn worker_prefix(&self, group: &str, worker: i64) -> String {
        format!("{}{worker:020}/", self.group_prefix(group))
    }

    /// Every worker id of the group the store has keys for.
    async fn read_slots(&self, prefix: &str) -> Result<BTreeMap<i64, Slot>> {
        let p = prefix.to_owned();
        let resp = self
            .call("read worker leases", |mut c| {
                let p = p.clone();
                async move { c.get(p, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut out: BTreeMap<i64, Slot> = BTreeMap::new();
        for kv in resp.kvs() {
            let key = String::from_utf8_lossy(kv.key());
            let rest = key.strip_prefix(prefix).unwrap_or("");
            let (w, what) = rest.split_once('/').unwrap_or((rest, ""));
            let corrupt = || {
                Error::Corrupt(format!(
                    "etcd key {key} is not a keysmith worker lease; delete the keys under {prefix}"
                ))
            };
            // Read with a worker's own prefix, the ids are absent.
            let w: i64 = if w.is_empty() {
                0
            } else {
                w.parse().map_err(|_| corrupt())?
            };
            let slot = out.entry(w).or_default();
            match what {
                "lease" => slot.lease = Some((kv.lease(), kv.create_revision())),
                "floor" => {
                    let f: Floor = serde_json::from_slice(kv.value()).map_err(|_| corrupt())?;
                    slot.floor = Some((f, kv.mod_revision()));
                }
                _ => return Err(corrupt()),
            }
        }
        Ok(out)
    }

    /// Reads one worker id's keys.
    async fn read_slot(&self, group: &str, worker: i64) -> Result<Slot> {
        let prefix = self.worker_prefix(group, worker);
        let p = prefix.clone();
        let resp = self
            .call("read a worker lease", |mut c| {
                let p = p.clone();
                async move { c.get(p, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut slot = Slot::default();
        for kv in resp.kvs() {
            let key = String::from_utf8_lossy(kv.key());
            match key.strip_prefix(&prefix) {
                Some("lease") => slot.lease = Some((kv.lease(), kv.create_revision())),
                Some("floor") => {
                    let f: Floor = serde_json::from_slice(kv.value()).map_err(|_| {
                        Error::Corrupt(format!(
                            "etcd key {key} is not a keysmith worker floor; delete the keys under {prefix}"
                        ))
                    })?;
                    slot.floor = Some((f, kv.mod_revision()));
                }
                _ => {}
            }
        }
        Ok(slot)
    }

    async fn grant(&self, ttl: Duration) -> Result<i64> {
        let secs = ttl_secs(ttl);
        self.call("grant a worker lease", |mut c| async move {
            c.lease_grant(secs, None).await
        })
        .await
        .map(|r| r.id())
    }

    fn revoke_later(&self, id: i64) {
        let store = self.clone();
        tokio::spawn(async move {
            let _ = store
                .call("revoke a worker lease", |mut c| async move {
                    c.lease_revoke(id).await
                })
                .await;
        });
    }

    /// Whether etcd still has lease `id` (and reset its TTL).
    async fn keep_alive_once(&self, id: i64) -> Result<bool> {
        self.call("keep a worker lease alive", |mut c| async move {
            let (mut keeper, mut stream) = c.lease_keep_alive(id).await?;
            keeper.keep_alive().await?;
            Ok(stream
                .message()
                .await?
                .map(|r| r.ttl() > 0)
                .unwrap_or(false))
        })
        .await
    }

    /// Puts the `lease` key (on etcd lease `id`) and the floor, if neither
    /// changed since `slot` was read.
    async fn take_slot(
        &self,
        group: &str,
        worker: i64,
        slot: &Slot,
        id: i64,
        floor: Floor,
    ) -> Result<bool> {
        let p = self.worker_prefix(group, worker);
        let (lease_key, floor_key) = (format!("{p}lease"), format!("{p}floor"));
        let floor_same = match slot.floor {
            Some((_, rev)) => Compare::mod_revision(floor_key.clone(), CompareOp::Equal, rev),
            None => Compare::version(floor_key.clone(), CompareOp::Equal, 0),
        };
        let value = serde_json::to_vec(&floor).map_err(|e| Error::Corrupt(e.to_string()))?;
        let epoch = self.epoch().await?;
        let txn = Txn::new()
            .when([
                Compare::version(lease_key.clone(), CompareOp::Equal, 0),
                floor_same,
                self.epoch_compare(&epoch),
            ])
            .and_then([
                TxnOp::put(
                    lease_key,
                    floor.fence.to_string(),
                    Some(PutOptions::new().with_lease(id)),
                ),
                TxnOp::put(floor_key, value, None),
            ]);
        Ok(self.txn("take a worker id", txn).await?.succeeded())
    }

    /// Puts the floor if it did not change since `rev`; with `drop_lease`
    /// also deletes the `lease` key.
    async fn put_floor(
        &self,
        group: &str,
        worker: i64,
        rev: i64,
        floor: Floor,
        drop_lease: bool,
    ) -> Result<bool> {
        let p = self.worker_prefix(group, worker);
        let floor_key = format!("{p}floor");
        let value = serde_json::to_vec(&floor).map_err(|e| Error::Corrupt(e.to_string()))?;
        let mut ops = vec![TxnOp::put(floor_key.clone(), value, None)];
        if drop_lease {
            ops.push(TxnOp::delete(format!("{p}lease"), None::<DeleteOptions>));
        }
        let epoch = self.epoch().await?;
        let txn = Txn::new()
            .when([
                Compare::mod_revision(floor_key, CompareOp::Equal, rev),
                self.epoch_compare(&epoch),
            ])
            .and_then(ops)
            .or_else([self.epoch_get()]);
        let resp = self.txn("move a worker's floor", txn).await?;
        if !resp.succeeded() {
            self.adopt_epoch_from(&resp, 0)?;
        }
        Ok(resp.succeeded())
    }
}

#[async_trait]
impl WorkerStore for EtcdStore {
    async fn acquire_worker(&self, claim: &WorkerClaim) -> Result<WorkerLease> {
        claim.validate()?;
        let prefix = self.group_prefix(&claim.group);
        let id = self.grant(claim.ttl).await?;
        for _ in 0..ATTEMPTS {
            let mut slots = match self.read_slots(&prefix).await {
                Ok(s) => s,
                Err(e) => {
                    self.revoke_later(id);
                    return Err(e);
                }
            };
            let live: Vec<i64> = slots
                .iter()
                .filter(|(_, s)| s.lease.is_some())
                .map(|(w, _)| *w)
                .collect();
            let Some(worker) = lowest_free(&live, claim.max_workers) else {
                self.revoke_later(id);
                return Err(all_taken(&claim.group, claim.max_workers));
            };
            let slot = slots.remove(&worker).unwrap_or_default();
            let (fence, old_until, recorded) = slot
                .floor
                .clone()
                .map(|(f, _)| (f.fence, f.until_ms, f.generation))
                .unwrap_or((0, 0, None));
            let generation = match self.current_generation().await {
                Ok(g) => g,
                Err(e) => {
                    self.revoke_later(id);
                    return Err(e);
                }
            };
            let start_ms =
                acquisition_start(recorded.as_deref(), &generation, old_until, claim.now_ms);
            let lease = claim.lease(worker, fence + 1, start_ms);
            let floor = Floor {
                fence: lease.fence,
                until_ms: lease.until_ms,
                generation: Some(generation),
                holder: Some(claim.holder.clone()),
            };
            match self.take_slot(&claim.group, worker, &slot, id, floor).await {
                Ok(true) => {
                    return Ok(lease);
                }
                Ok(false) => continue,
                Err(e) => {
                    self.revoke_later(id);
                    return Err(e);
                }
            }
        }
        self.revoke_later(id);
        Err(Error::Contention {
            name: claim.group.clone(),
            attempts: ATTEMPTS,
        })
    }

    async fn renew_worker_checked(&self, renewal: &Renewal<'_>) -> Result<Option<i64>> {
        let (group, worker, fence) = (renewal.group, renewal.worker, renewal.fence);
        let (ttl, from_ms, window_ms) = (renewal.ttl, renewal.from_ms, renewal.window_ms);
        for _ in 0..ATTEMPTS {
            let slot = self.read_slot(group, worker).await?;
            let Some((floor, rev)) = slot.floor.clone() else {
                return Ok(None);
            };
            let generation = self.current_generation().await?;
            if floor.fence != fence
                || !same_worker_generation(floor.generation.as_deref(), &generation)
            {
                return Ok(None);
            }
            let new = Floor {
                fence,
                until_ms: floor.until_ms.max(from_ms + window_ms),
                generation: Some(generation),
                holder: floor.holder.clone(),
            };
            let until_ms = new.until_ms;
            match slot.lease {
                Some((id, _)) => {
                    if !self.keep_alive_once(id).await? {
                        continue; // Expired meanwhile: read again.
                    }
                    if self.put_floor(group, worker, rev, new, false).await? {
                        return Ok(Some(until_ms));
                    }
                }
                None => {
                    // Expired, and no one took it since: take it again.
                    let id = self.grant(ttl).await?;
                    if self.take_slot(group, worker, &slot, id, new).await? {
                        return Ok(Some(until_ms));
                    }
                    self.revoke_later(id);
                }
            }
        }
        Err(Error::Contention {
            name: group.to_owned(),
            attempts: ATTEMPTS,
        })
    }

    async fn release_worker_checked(&self, release: &Release<'_>) -> Result<bool> {
        let (group, worker) = (release.group, release.worker);
        let (fence, floor_ms) = (release.fence, release.floor_ms);
        for _ in 0..ATTEMPTS {
            let slot = self.read_slot(group, worker).await?;
            let Some((floor, rev)) = slot.floor.clone() else {
                return Ok(false);
            };
            let generation = self.current_generation().await?;
            if floor.fence != fence
                || !same_worker_generation(floor.generation.as_deref(), &generation)
            {
                return Ok(false);
            }
            let new = Floor {
                fence,
                until_ms: floor.until_ms.min(floor_ms),
                generation: floor.generation.clone(),
                holder: floor.holder.clone(),
            };
            if self.put_floor(group, worker, rev, new, true).await? {
                if let Some((id, _)) = slot.lease {
                    self.revoke_later(id);
                }
                return Ok(true);
            }
        }
        Err(Error::Contention {
            name: group.to_owned(),
            attempts: ATTEMPTS,
        })
    }

    async fn fence_workers(
        &self,
        skip_ms: i64,
    ) -> Result<Vec<keysmith_core::driver::WorkerFloorMove>> {
        let prefix = format!("{}workers/", self.prefix);
        let p = prefix.clone();
        let resp = self
            .call("read worker floors", |mut c| {
                let p = p.clone();
                async move { c.get(p, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut out = Vec::new();
        for kv in resp.kvs() {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            let Some(rest) = key
                .strip_prefix(&prefix)
                .and_then(|r| r.strip_suffix("/floor"))
            else {
                continue;
            };
            let Some((group, worker)) = rest.rsplit_once('/') else {
                continue;
            };
            let worker: i64 = worker.parse().map_err(|_| {
                Error::Corrupt(format!("etcd key {key} is not a keysmith worker floor"))
            })?;
            let (mut value, mut rev) = (kv.value().to_vec(), kv.mod_revision());
            for attempt in 0..=ATTEMPTS {
                let floor: Floor = serde_json::from_slice(&value).map_err(|e| {
                    Error::Corrupt(format!(
                        "etcd key {key} is not a keysmith worker floor: {e}"
                    ))
                })?;
                let moved = Floor {
                    until_ms: floor.until_ms.saturating_add(skip_ms),
                    ..floor.clone()
                };
                let new = serde_json::to_vec(&moved).map_err(|e| Error::Corrupt(e.to_string()))?;
                let txn = Txn::new()
                    .when([Compare::mod_revision(key.clone(), CompareOp::Equal, rev)])
                    .and_then([TxnOp::put(key.clone(), new, None)])
                    .or_else([TxnOp::get(key.clone(), None)]);
                let resp = self.txn("move a worker's floor", txn).await?;
                if resp.succeeded() {
                    out.push(keysmith_core::driver::WorkerFloorMove {
                        group: unescape(group),
                        worker,
                        before: floor.until_ms,
                        after: moved.until_ms,
                    });
                    break;
                }
                let Some(now) = first_kv(&resp.op_responses(), 0)? else {
                    break; // gone meanwhile
                };
                if attempt == ATTEMPTS {
                    return Err(Error::Contention {
                        name: group.to_owned(),
                        attempts: ATTEMPTS,
                    });
                }
                (value, rev) = (now.value().to_vec(), now.mod_revision());
            }
        }
        Ok(out)
    }

    async fn list_workers(&self, group: &str) -> Result<Vec<WorkerEntry>> {
        // One read of the group's keys (one revision): a worker id is live
        // while its `lease` key exists, as an acquisition decides it.
        let slots = self.read_slots(&self.group_prefix(group)).await?;
        let mut out: Vec<WorkerEntry> = slots
            .iter()
            .map(|(&worker, slot)| {
                // A floor is written with every lease key; without one the
                // worker id counts as new, as an acquisition counts it.
                let (fence, until_ms, holder) = slot
                    .floor
                    .as_ref()
                    .map(|(f, _)| (f.fence, f.until_ms, f.holder.clone()))
                    .unwrap_or((0, 0, None));
                let live = slot.lease.is_some();
                WorkerEntry {
                    worker,
                    fence,
                    until_ms,
                    expires_in_ms: live.then_some(0),
                    holder: holder.filter(|_| live),
                }
            })
            .collect();
        // The time each live lease has left, from etcd's lease: a few calls
        // at a time.
        let live: Vec<(usize, i64)> = slots
            .values()
            .enumerate()
            .filter_map(|(i, slot)| slot.lease.map(|(id, _)| (i, id)))
            .collect();
        for wave in live.chunks(LIST_PARALLEL) {
            let asks = wave.iter().map(|&(_, id)| {
                self.call("read a worker lease's time left", move |mut c| async move {
                    c.lease_time_to_live(id, None).await
                })
            });
            for (&(i, _), resp) in wave.iter().zip(futures_util::future::join_all(asks).await) {
                // -1: the lease ended since the read; it was live then.
                out[i].expires_in_ms = Some(resp?.ttl().max(0).saturating_mul(1000));
            }
        }
        Ok(out)
    }
}
