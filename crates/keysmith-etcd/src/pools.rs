//! etcd: the [`PoolStore`] half of the contract.

use super::*;
use keysmith_core::driver::{PoolTotals, Residue};

/// Members written per transaction (etcd allows 128 operations by default).
const POOL_BATCH: usize = 100;

/// Transactions in flight while a large pool is written.
const POOL_PARALLEL: usize = 4;

/// Members read per request by `list_members`.
const PAGE: i64 = 5000;

/// How many times a pool call is made again because the pool's meta changed
/// under it (dropped and created again) before it gives up with
/// [`Error::Contention`].
const META_ATTEMPTS: u32 = 3;

/// A pool's start, size and residue class, and the create revision of the
/// meta key they were read from: a pool created again under the same name
/// has another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PoolMeta {
    start: i64,
    size: i64,
    /// Kept to write it back with the generation (a fence).
    residue: Option<Residue>,
    revision: i64,
    /// A hash of the generation the pool was created or fenced in (0: none
    /// recorded): the cache holds `Copy` values.
    generation: u64,
    /// Kept to write it back with the generation (a fence).
    incarnation: u64,
}

/// The hash [`PoolMeta`] keeps of a generation; 0 for none.
fn generation_hash(generation: Option<&str>) -> u64 {
    use std::hash::{Hash, Hasher};
    generation.map_or(0, |g| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        g.hash(&mut h);
        h.finish() | 1
    })
}

impl PoolMeta {
    /// The slot that holds `v` if `v` is a member.
    fn slot_of(&self, v: i64) -> i64 {
        // Both below 2^64 in magnitude, size >= 1: the result is in 0..size.
        (i128::from(v) - i128::from(self.start)).rem_euclid(i128::from(self.size)) as i64
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct PoolValue {
    start: i64,
    size: i64,
    /// The generation the pool was created or fenced in; absent in pools
    /// from before generations were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation: Option<String>,
    /// The residue class of the pool's values, `{"increment":..,"offset":..}`;
    /// absent without one, and in pools from before classes were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    residue: Option<Residue>,
    /// [`PoolRow::incarnation`]: the life of the name this pool is, above
    /// every version an earlier life of the name (of either kind) reached;
    /// absent (0) in pools from before lives were recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    incarnation: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl EtcdStore {
    /// The pools whose meta keys (under `under`, `PREFIX/pools/`) are `kvs`.
    fn pools_of(&self, under: &str, kvs: &[KeyValue]) -> Result<Vec<PoolRow>> {
        kvs.iter()
            .map(|kv| {
                let name = std::str::from_utf8(&kv.key()[under.len()..]).map_err(|_| {
                    Error::Corrupt(format!(
                        "etcd key {:?} is not a keysmith pool name",
                        String::from_utf8_lossy(kv.key())
                    ))
                })?;
                self.parse_pool(name, kv)
            })
            .collect()
    }

    /// The marks a `pool-marks/ENAME` key holds; none without one.
    fn marks_of(&self, name: &str, kv: Option<&KeyValue>) -> Result<RateMarks> {
        kv.map_or(Ok(RateMarks::default()), |kv| {
            serde_json::from_slice(kv.value()).map_err(|e| {
                Error::Corrupt(format!(
                    "the rate marks of pool {name:?} ({}) are not what keysmith writes: {e}; delete the key",
                    self.pool_marks_key(name)
                ))
            })
        })
    }

    fn parse_pool(&self, name: &str, kv: &KeyValue) -> Result<PoolRow> {
        let v: PoolValue = serde_json::from_slice(kv.value()).map_err(|e| {
            Error::Corrupt(format!(
                "etcd key {} does not hold a keysmith pool ({e}); drop the pool and create it again",
                self.pool_key(name)
            ))
        })?;
        if v.size < 1 || v.start.checked_add(v.size).is_none() {
            return Err(Error::Corrupt(format!(
                "pool {name:?} in etcd has start {} and size {}, which is impossible; drop it and create it again",
                v.start, v.size
            )));
        }
        let residue = v.residue.map(|r| (r.increment, r.offset)).unzip();
        Ok(PoolRow {
            name: name.to_owned(),
            start: v.start,
            size: v.size,
            generation: v.generation,
            residue: keysmith_core::driver::stored_residue(name, residue.0, residue.1)?,
            incarnation: v.incarnation,
        })
    }

    /// The meta a pool's key `kv` holds; remembered.
    fn meta_from(&self, name: &str, kv: &KeyValue) -> Result<PoolMeta> {
        let row = self.parse_pool(name, kv)?;
        let meta = PoolMeta {
            start: row.start,
            size: row.size,
            residue: row.residue,
            revision: kv.create_revision(),
            generation: generation_hash(row.generation.as_deref()),
            incarnation: row.incarnation,
        };
        self.pool_meta.remember(name, meta);
        Ok(meta)
    }

    /// The pool's meta as this store remembers it, or read (one round trip).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Corrupt`], [`Error::Unavailable`].
    async fn pool_meta(&self, name: &str) -> Result<PoolMeta> {
        if let Some(meta) = self.pool_meta.get(name) {
            return Ok(meta);
        }
        let key = self.pool_key(name);
        let resp = self
            .call("read a pool", |mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        match resp.kvs().first() {
            Some(kv) => self.meta_from(name, kv),
            None => Err(Error::not_found("pool", name)),
        }
    }

    /// The pool's meta read now (one round trip), and remembered.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Corrupt`], [`Error::Unavailable`].
    async fn fresh_meta(&self, name: &str) -> Result<PoolMeta> {
        self.pool_meta.forget(name);
        self.pool_meta(name).await
    }

    /// The compare that the pool's meta key is still the one `meta` was read
    /// from.
    fn same_pool(&self, name: &str, meta: &PoolMeta) -> Compare {
        Compare::create_revision(self.pool_key(name), CompareOp::Equal, meta.revision)
    }

    /// After [`Self::same_pool`] failed: the pool's meta now, from the get of
    /// the meta key at answer `i`, or `NotFound`.
    fn meta_now(&self, name: &str, ops: &[TxnOpResponse], i: usize) -> Result<PoolMeta> {
        match first_kv(ops, i)? {
            Some(kv) => self.meta_from(name, &kv),
            None => {
                self.pool_meta.forget(name);
                Err(Error::not_found("pool", name))
            }
        }
    }

    /// The member a slot key holds.
    fn member_of(&self, name: &str, kv: &KeyValue) -> Result<i64> {
        std::str::from_utf8(kv.value())
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "etcd key {:?} under pool {name:?} holds {:?}, not a member; drop the pool and create it again",
                    String::from_utf8_lossy(kv.key()),
                    String::from_utf8_lossy(kv.value())
                ))
            })
    }

    /// The put of `member` into `slot`.
    fn member_put(&self, name: &str, slot: i64, member: i64) -> TxnOp {
        TxnOp::put(self.slot_key(name, slot), member.to_string(), None)
    }

    /// Remembers the meta of a pool that the transaction `resp` created: it
    /// put the meta key, which did not exist, so the key's create revision
    /// is the transaction's revision.
    fn remember_created(&self, row: &PoolRow, resp: &TxnResponse) {
        if let Some(h) = resp.header() {
            self.pool_meta.remember(
                &row.name,
                PoolMeta {
                    start: row.start,
                    size: row.size,
                    residue: row.residue,
                    revision: h.revision(),
                    generation: generation_hash(row.generation.as_deref()),
                    incarnation: row.incarnation,
                },
            );
        }
    }

    /// The pool's meta key rewritten with `generation`, if the pool is still
    /// the one `meta` was read from.
    async fn record_pool_generation(
        &self,
        name: &str,
        meta: &PoolMeta,
        generation: &str,
    ) -> Result<()> {
        let value = serde_json::to_vec(&PoolValue {
            start: meta.start,
            size: meta.size,
            generation: Some(generation.to_owned()),
            residue: meta.residue,
            incarnation: meta.incarnation,
        })
        .map_err(|e| Error::Corrupt(format!("cannot encode pool {name:?}: {e}")))?;
        let txn = Txn::new()
            .when([self.same_pool(name, meta)])
            .and_then([TxnOp::put(self.pool_key(name), value, None)]);
        self.txn("record a pool's generation", txn).await?;
        self.pool_meta.forget(name);
        Ok(())
    }

    /// Moves every member forward by `rounds` (each keeps its slot) and then
    /// records the current generation, if the pool is still in the
    /// generation `from` hashes to (any, when `None`). Written in batches,
    /// each comparing the members it moves: a member a swap moved meanwhile
    /// is read again and moved from there. Until the generation is recorded
    /// every swap of the pool fences it too; a second fence moves members
    /// twice: a gap, never a repeat.
    async fn fence_from(&self, name: &str, rounds: i64, from: Option<u64>) -> Result<()> {
        let meta = self.fresh_meta(name).await?;
        if from.is_some_and(|f| f != meta.generation) {
            return Ok(()); // fenced by another caller already
        }
        let generation = self.current_generation().await?;
        let prefix = self.members_prefix(name);
        let mut slots: Vec<(Vec<u8>, i64, i64)> = Vec::new();
        let end = prefix_end(&prefix);
        let mut from_key = prefix.clone().into_bytes();
        loop {
            let opts = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
            let page = self
                .call("read a pool's members", |mut c| {
                    let (k, o) = (from_key.clone(), opts.clone());
                    async move { c.get(k, Some(o)).await }
                })
                .await?
                .take_kvs();
            for kv in &page {
                let v = self.member_of(name, kv)?;
                let class = meta.residue.as_ref();
                if keysmith_core::driver::fenced_member(v, rounds, meta.size, class).is_none() {
                    return Err(keysmith_core::driver::fence_exhausts(
                        name, meta.size, class,
                    ));
                }
                slots.push((kv.key().to_vec(), v, kv.mod_revision()));
            }
            if (page.len() as i64) < PAGE {
                break;
            }
            from_key = page[page.len() - 1].key().to_vec();
            from_key.push(0);
        }
        for batch in slots.chunks(FENCE_BATCH) {
            let mut batch = batch.to_vec();
            for _ in 0..META_ATTEMPTS * 4 {
                let mut when = vec![self.same_pool(name, &meta)];
                let mut puts = Vec::with_capacity(batch.len());
                for (key, v, rev) in &batch {
                    when.push(Compare::mod_revision(key.clone(), CompareOp::Equal, *rev));
                    let class = meta.residue.as_ref();
                    let moved = keysmith_core::driver::fenced_member(*v, rounds, meta.size, class)
                        .ok_or_else(|| {
                            keysmith_core::driver::fence_exhausts(name, meta.size, class)
                        })?;
                    puts.push(TxnOp::put(key.clone(), moved.to_string(), None));
                }
                let gets: Vec<TxnOp> = batch
                    .iter()
                    .map(|(k, _, _)| TxnOp::get(k.clone(), None))
                    .collect();
                let txn = Txn::new().when(when).and_then(puts).or_else(gets);
                let resp = self.txn("fence a pool", txn).await?;
                if resp.succeeded() {
                    break;
                }
                // A swap moved a member meanwhile: read the batch again.
                let ops = resp.op_responses();
                for (i, slot) in batch.iter_mut().enumerate() {
                    let kv = first_kv(&ops, i)?.ok_or_else(|| Error::not_found("pool", name))?;
                    slot.1 = self.member_of(name, &kv)?;
                    slot.2 = kv.mod_revision();
                }
            }
        }
        self.record_pool_generation(name, &meta, &generation).await
    }
}

/// Members moved per transaction by a fence: each needs a compare and a put,
/// and etcd allows 128 operations by default.
const FENCE_BATCH: usize = 60;

impl EtcdStore {
    /// One snapshot of a pool: its meta key, its tombstone's key, its
    /// members (slot order) and the revision they were read at; `None` when
    /// there is no pool. Members are read in pages, every page at the first
    /// one's revision.
    async fn members_snapshot(
        &self,
        name: &str,
    ) -> Result<Option<(KeyValue, Option<KeyValue>, Vec<i64>, i64)>> {
        let prefix = self.members_prefix(name);
        let end = prefix_end(&prefix);
        let page_of = || GetOptions::new().with_range(end.clone()).with_limit(PAGE);
        let txn = Txn::new().and_then([
            TxnOp::get(self.pool_key(name), None),
            TxnOp::get(prefix.clone(), Some(page_of())),
            TxnOp::get(self.tombstone_key(POOL_KIND, name), None),
        ]);
        let resp = self.txn("list pool members", txn).await?;
        let ops = resp.op_responses();
        let Some(meta) = first_kv(&ops, 0)? else {
            return Ok(None);
        };
        let tomb = first_kv(&ops, 2)?;
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut page = kvs(&ops, 1)?;
        let mut out = Vec::new();
        // Later pages are read at the first page's revision: one snapshot.
        while !page.is_empty() {
            for kv in &page {
                out.push(self.member_of(name, kv)?);
            }
            if (page.len() as i64) < PAGE {
                break;
            }
            let mut from = page[page.len() - 1].key().to_vec();
            from.push(0);
            let opts = page_of().with_revision(revision);
            page = self
                .call("list pool members", |mut c| {
                    let (from, opts) = (from.clone(), opts.clone());
                    async move { c.get(from, Some(opts)).await }
                })
                .await?
                .take_kvs();
        }
        Ok(Some((meta, tomb, out, revision)))
    }
}

impl EtcdStore {
    /// [`PoolStore::create_pool`] of `spec` raised above the name's
    /// tombstones (of both kinds) read as `tombstones`, which its first
    /// transaction compares unchanged ([`Error::AlreadyExists`] also when
    /// one changed), as life `incarnation` of the name.
    async fn create_pool_at(
        &self,
        spec: &PoolSpec,
        tombstones: &[Option<KeyValue>; 2],
        incarnation: u64,
    ) -> Result<PoolRow> {
        let (name, start, size) = (spec.name.as_str(), spec.start, spec.size);

        match start.checked_add(size) {
            Some(_) if size >= 1 => {}
            _ => {
                return Err(Error::invalid(format!(
                    "pool {name:?}: start {start} and size {size} do not make a range of i64 values; \
                     the size must be 1 or more and start + size must fit in an i64"
                )));
            }
        }
        let generation = self.current_generation().await?;
        let meta = serde_json::to_vec(&PoolValue {
            start,
            size,
            generation: Some(generation.clone()),
            residue: spec.residue,
            incarnation,
        })
        .map_err(|e| Error::invalid(format!("cannot encode pool {name:?}: {e}")))?;
        let [seq_tomb, pool_tomb] = self.tombstones_unchanged(name, tombstones);
        let absent = [
            Compare::version(self.pool_key(name), CompareOp::Equal, 0),
            Compare::version(self.creating_key(name), CompareOp::Equal, 0),
            seq_tomb,
            pool_tomb,
        ];
        let exists = || Error::AlreadyExists {
            kind: "pool",
            name: name.to_owned(),
        };
        let row = PoolRow {
            name: name.to_owned(),
            start,
            size,
            generation: Some(generation),
            residue: spec.residue,
            incarnation,
        };
        if size as usize <= POOL_BATCH {
            // Small pool: one transaction.
            let mut ops = vec![TxnOp::put(self.pool_key(name), meta, None)];
            ops.extend((0..size).map(|slot| self.member_put(name, slot, start + slot)));
            let txn = Txn::new().when(absent).and_then(ops);
            let resp = self.txn("create a pool", txn).await?;
            if !resp.succeeded() {
                return Err(exists());
            }
            self.remember_created(&row, &resp);
            return Ok(row);
        }
        // Large pool: claim the name, write the members in batches guarded by
        // the claim, then publish the pool and drop the claim in one
        // transaction. Until then every other call sees no pool.
        let claim = Txn::new().when(absent).and_then([
            TxnOp::put(self.creating_key(name), meta.clone(), None),
            TxnOp::delete(
                self.members_prefix(name),
                Some(etcd_client::DeleteOptions::new().with_prefix()),
            ),
        ]);
        let resp = self.txn("create a pool", claim).await?;
        if !resp.succeeded() {
            return Err(exists());
        }
        let claim_rev = resp
            .header()
            .map(|h| h.revision())
            .ok_or_else(|| self.unavailable("create a pool", "answer without a revision"))?;
        let guard =
            || Compare::create_revision(self.creating_key(name), CompareOp::Equal, claim_rev);
        let gone = || Error::NotFound {
            kind: "pool",
            name: name.to_owned(),
            similar: Vec::new(),
        };
        // Half-open ranges of slots.
        let batches: Vec<(i64, i64)> = (0..size)
            .step_by(POOL_BATCH)
            .map(|lo| (lo, (lo + POOL_BATCH as i64).min(size)))
            .collect();
        for wave in batches.chunks(POOL_PARALLEL) {
            let writes = wave.iter().map(|&(lo, hi)| {
                let ops: Vec<TxnOp> = (lo..hi)
                    .map(|slot| self.member_put(name, slot, start + slot))
                    .collect();
                self.txn("create a pool", Txn::new().when([guard()]).and_then(ops))
            });
            for resp in futures_util::future::join_all(writes).await {
                if !resp?.succeeded() {
                    // Dropped while being created.
                    return Err(gone());
                }
            }
        }
        let publish = Txn::new().when([guard()]).and_then([
            TxnOp::put(self.pool_key(name), meta, None),
            TxnOp::delete(self.creating_key(name), None),
        ]);
        let resp = self.txn("create a pool", publish).await?;
        if resp.succeeded() {
            self.remember_created(&row, &resp);
            Ok(row)
        } else {
            Err(gone())
        }
    }
}

#[async_trait]
impl PoolStore for EtcdStore {
    async fn create_pool(&self, spec: &PoolSpec) -> Result<PoolRow> {
        for _ in 0..META_ATTEMPTS * 4 {
            // Every kind's tombstone: a pool under a dropped sequence's name
            // starts above its values, and its life above its versions.
            let (tomb, kvs) = self.read_tombstones(&spec.name).await?;
            let raised = tomb.raise_pool(spec)?;
            let revisions =
                |kvs: &[Option<KeyValue>; 2]| kvs.clone().map(|k| k.map(|k| k.mod_revision()));
            match self.create_pool_at(&raised, &kvs, tomb.incarnation()).await {
                // A drop moved a tombstone since it was read: again.
                Err(Error::AlreadyExists { .. })
                    if revisions(&self.read_tombstones(&spec.name).await?.1) != revisions(&kvs)
                        && self.read_pool(&spec.name).await?.is_none() => {}
                other => return other,
            }
        }
        Err(Error::Contention {
            name: spec.name.clone(),
            attempts: META_ATTEMPTS * 4,
        })
    }

    async fn read_pool(&self, name: &str) -> Result<Option<PoolRow>> {
        let key = self.pool_key(name);
        let resp = self
            .call("read a pool", |mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await?;
        resp.kvs()
            .first()
            .map(|kv| self.parse_pool(name, kv))
            .transpose()
    }

    async fn sample_members(&self, name: &str, k: usize) -> Result<Vec<i64>> {
        let mut meta = self.pool_meta(name).await?;
        'draw: for _ in 0..META_ATTEMPTS {
            let slots = keysmith_core::driver::sample_slots(meta.size, k);
            // At least one transaction: it also says whether the pool exists.
            let batches: Vec<&[i64]> = if slots.is_empty() {
                vec![&[]]
            } else {
                slots.chunks(POOL_BATCH).collect()
            };
            let drawn_with = meta;
            let reads = batches.iter().map(|batch| {
                let gets: Vec<TxnOp> = batch
                    .iter()
                    .map(|&slot| TxnOp::get(self.slot_key(name, slot), None))
                    .collect();
                let txn = Txn::new()
                    .when([self.same_pool(name, &drawn_with)])
                    .and_then(gets)
                    .or_else([TxnOp::get(self.pool_key(name), None)]);
                self.txn("sample a pool", txn)
            });
            let answers = futures_util::future::join_all(reads).await;
            let mut out = Vec::with_capacity(slots.len());
            for (batch, resp) in batches.iter().zip(answers) {
                let resp = resp?;
                let ops = resp.op_responses();
                if !resp.succeeded() {
                    // Dropped, or dropped and created again: draw again from
                    // the pool as it is now.
                    meta = self.meta_now(name, &ops, 0)?;
                    continue 'draw;
                }
                for (i, &slot) in batch.iter().enumerate() {
                    let kv = first_kv(&ops, i)?.ok_or_else(|| {
                        Error::Corrupt(format!(
                            "pool {name:?} (size {}) has no member in slot {slot} (etcd key {}); drop the pool and create it again",
                            meta.size,
                            self.slot_key(name, slot)
                        ))
                    })?;
                    out.push(self.member_of(name, &kv)?);
                }
            }
            return Ok(out);
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: META_ATTEMPTS,
        })
    }

    async fn swap_member(&self, name: &str, take: i64, put: i64) -> Result<bool> {
        self.swap_member_in(name, 0, take, put).await
    }

    /// The swap in life `incarnation` of the name only (0: any): the life is
    /// checked on the meta the transaction compares (`same_pool`: the meta
    /// key's create revision), so a swap planned in one life never lands
    /// in the next.
    async fn swap_member_in(
        &self,
        name: &str,
        incarnation: u64,
        take: i64,
        put: i64,
    ) -> Result<bool> {
        let mut meta = self.pool_meta(name).await?;
        for _ in 0..META_ATTEMPTS {
            let generation = self.current_generation().await?;
            if meta.generation != generation_hash(Some(&generation)) {
                // The remembered meta may be stale: decide on the pool as it is.
                meta = self.fresh_meta(name).await?;
                if meta.generation == 0 {
                    self.record_pool_generation(name, &meta, &generation)
                        .await?;
                    meta = self.fresh_meta(name).await?;
                    continue;
                }
                if meta.generation != generation_hash(Some(&generation)) {
                    let rounds = keysmith_core::driver::pool_fence_rounds(meta.size);
                    self.fence_from(name, rounds, Some(meta.generation)).await?;
                    return Ok(false);
                }
            }
            if incarnation != 0 && meta.incarnation != 0 && meta.incarnation != incarnation {
                // The remembered meta may be of another life: decide on the
                // pool as it is.
                let now = self.fresh_meta(name).await?;
                if now != meta {
                    meta = now;
                    continue;
                }
                return Err(Error::Dropped {
                    kind: "pool",
                    name: name.to_owned(),
                    held: "handle",
                });
            }
            let epoch = self.epoch().await?;
            let slot = meta.slot_of(take);
            if meta.slot_of(put) != slot {
                // The remembered size may be stale: check with the pool as
                // it is now before refusing.
                let now = self.fresh_meta(name).await?;
                if now != meta {
                    meta = now;
                    continue;
                }
                // Would put a member where another slot's may be: refused
                // rather than risk holding a number twice.
                return Err(Error::invalid(format!(
                    "pool {name:?}: cannot swap {take} for {put}: the new member must be the old one plus the pool's size {} (here {})",
                    meta.size,
                    i128::from(take) + i128::from(meta.size)
                )));
            }
            let key = self.slot_key(name, slot);
            let txn = Txn::new()
                .when([
                    self.same_pool(name, &meta),
                    Compare::value(key, CompareOp::Equal, take.to_string()),
                    self.epoch_compare(&epoch),
                ])
                .and_then([self.member_put(name, slot, put)])
                .or_else([TxnOp::get(self.pool_key(name), None), self.epoch_get()]);
            let resp = self.txn("swap a pool member", txn).await?;
            if resp.succeeded() {
                return Ok(true);
            }
            self.adopt_epoch_from(&resp, 1)?;
            if self.epoch().await? != epoch {
                // A new epoch: decide again, on the pool as it is now.
                meta = self.fresh_meta(name).await?;
                continue;
            }
            let now = self.meta_now(name, &resp.op_responses(), 0)?;
            if now.revision == meta.revision {
                // Same pool: the slot holds another member.
                return Ok(false);
            }
            meta = now;
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: META_ATTEMPTS,
        })
    }

    async fn fence_pool(&self, name: &str, rounds: i64) -> Result<()> {
        self.fence_from(name, rounds, None).await
    }

    async fn list_members(&self, name: &str) -> Result<Vec<i64>> {
        let (_, _, mut out, _) = self
            .members_snapshot(name)
            .await?
            .ok_or_else(|| Error::not_found("pool", name))?;
        // Slot order is not value order.
        out.sort_unstable();
        Ok(out)
    }

    async fn record_pool_mark(&self, name: &str, now_ms: i64, taken: i64) -> Result<()> {
        for _ in 0..META_ATTEMPTS * 4 {
            let read = Txn::new().and_then([
                TxnOp::get(self.pool_key(name), None),
                TxnOp::get(self.pool_marks_key(name), None),
            ]);
            let resp = self.txn("read a pool's rate marks", read).await?;
            let ops = resp.op_responses();
            if first_kv(&ops, 0)?.is_none() {
                return Err(Error::not_found("pool", name));
            }
            let seen = first_kv(&ops, 1)?;
            let marks = self.marks_of(name, seen.as_ref())?.advance(now_ms, taken);
            let value = serde_json::to_vec(&marks)
                .map_err(|e| Error::Corrupt(format!("cannot encode the marks of {name:?}: {e}")))?;
            let unchanged = match &seen {
                Some(kv) => Compare::mod_revision(
                    self.pool_marks_key(name),
                    CompareOp::Equal,
                    kv.mod_revision(),
                ),
                None => Compare::version(self.pool_marks_key(name), CompareOp::Equal, 0),
            };
            let write = Txn::new()
                .when([
                    unchanged,
                    Compare::version(self.pool_key(name), CompareOp::Greater, 0),
                ])
                .and_then([TxnOp::put(self.pool_marks_key(name), value, None)]);
            if self
                .txn("record a pool's rate marks", write)
                .await?
                .succeeded()
            {
                return Ok(());
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: META_ATTEMPTS * 4,
        })
    }

    async fn read_pool_marks(&self, name: &str) -> Result<RateMarks> {
        let read = Txn::new().and_then([
            TxnOp::get(self.pool_key(name), None),
            TxnOp::get(self.pool_marks_key(name), None),
        ]);
        let resp = self.txn("read a pool's rate marks", read).await?;
        let ops = resp.op_responses();
        if first_kv(&ops, 0)?.is_none() {
            return Err(Error::not_found("pool", name));
        }
        self.marks_of(name, first_kv(&ops, 1)?.as_ref())
    }

    async fn pool_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.names_near("pools/", "pool", name, limit).await
    }

    async fn pool_totals_with_prefix(&self, prefix: &str) -> Result<PoolTotals> {
        // One range read of the pools' meta keys (their sizes), not of
        // their members.
        let under = format!("{}pools/", self.prefix);
        let from = format!("{under}{prefix}");
        let resp = self
            .call("count pools", |mut c| {
                let from = from.clone();
                async move { c.get(from, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        Ok(PoolTotals::of(&self.pools_of(&under, resp.kvs())?))
    }

    async fn list_pools(&self) -> Result<Vec<PoolRow>> {
        let prefix = format!("{}pools/", self.prefix);
        let resp = self
            .call("list pools", |mut c| {
                let prefix = prefix.clone();
                async move { c.get(prefix, Some(GetOptions::new().with_prefix())).await }
            })
            .await?;
        let mut rows = self.pools_of(&prefix, resp.kvs())?;
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }

    async fn drop_pool(&self, name: &str) -> Result<()> {
        let members = || {
            TxnOp::delete(
                self.members_prefix(name),
                Some(etcd_client::DeleteOptions::new().with_prefix()),
            )
        };
        self.pool_meta.forget(name);
        for _ in 0..META_ATTEMPTS * 4 {
            let Some((meta, tomb, all, at)) = self.members_snapshot(name).await? else {
                break;
            };
            let row = self.parse_pool(name, &meta)?;
            let generation = self.current_generation().await?;
            let t = self
                .tombstone_of(POOL_KIND, name, tomb.as_ref())?
                .after_pool_drop(&row, all.iter().copied().max(), &generation);
            let txn = Txn::new()
                .when([
                    Compare::mod_revision(
                        self.pool_key(name),
                        CompareOp::Equal,
                        meta.mod_revision(),
                    ),
                    Compare::mod_revision(self.members_prefix(name), CompareOp::Less, at + 1)
                        .with_prefix(),
                    self.tombstone_unchanged(POOL_KIND, name, tomb.as_ref()),
                ])
                .and_then([
                    TxnOp::delete(self.pool_marks_key(name), None),
                    TxnOp::delete(self.pool_key(name), None),
                    members(),
                    TxnOp::delete(self.creating_key(name), None),
                    self.tombstone_put(POOL_KIND, name, t)?,
                ]);
            if self.txn("drop a pool", txn).await?.succeeded() {
                self.pool_meta.forget(name);
                return Ok(());
            }
        }
        self.pool_meta.forget(name);
        // A pool whose creation is under way or died half-way: it handed
        // nothing out (it was never published), so no tombstone.
        let txn = Txn::new()
            .when([Compare::version(
                self.creating_key(name),
                CompareOp::Greater,
                0,
            )])
            .and_then([TxnOp::delete(self.creating_key(name), None), members()]);
        if self.txn("drop a pool", txn).await?.succeeded() {
            Ok(())
        } else if self.read_pool(name).await?.is_some() {
            Err(Error::Contention {
                name: name.to_owned(),
                attempts: META_ATTEMPTS * 4,
            })
        } else {
            Err(Error::not_found("pool", name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_keeps_its_slot() {
        let meta = PoolMeta {
            start: -3,
            size: 5,
            residue: None,
            revision: 1,
            generation: 0,
            incarnation: 1,
        };
        for slot in 0..5 {
            let v = -3 + slot;
            assert_eq!(meta.slot_of(v), slot);
            assert_eq!(meta.slot_of(v + 5), slot);
            assert_eq!(meta.slot_of(v + 5 * 1000), slot);
        }
        let far = PoolMeta {
            start: i64::MAX - 10,
            size: 7,
            residue: None,
            revision: 1,
            generation: 0,
            incarnation: 1,
        };
        assert!((0..7).contains(&far.slot_of(i64::MIN)));
        assert_eq!(far.slot_of(i64::MAX - 10), 0);
    }
}
