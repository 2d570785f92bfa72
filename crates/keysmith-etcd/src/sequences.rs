//! etcd: the [`SequenceStore`] half of the contract.

use super::*;
use keysmith_core::store::{AtomicReserve, FENCE_VERSION_STEP};

/// How many times [`SequenceStore::record_counts`] tries its compare-and-swap
/// before giving up with [`Error::Contention`].
const COUNTS_ATTEMPTS: u32 = 16;

/// How many times [`SequenceStore::reserve_locked`] takes the lock again after losing it
/// (lease expired while held) before it gives up.
const LOCK_ATTEMPTS: u32 = 5;

/// What a sequence's spec key holds. The failover fields came later: an
/// older key reads with the defaults the SQL stores give their columns.
#[derive(Debug, Serialize, Deserialize)]
struct SpecValue {
    start: i64,
    max: i64,
    block: i64,
    #[serde(default = "default_failover_skip")]
    failover_skip: i64,
    #[serde(default)]
    failover_skip_set: bool,
    #[serde(default)]
    failover_skipped: i64,
    /// [`SequenceRow::incarnation`]: the life's first version; the row's
    /// version is `incarnation - 1` plus the `next` key's etcd version
    /// (see [`Life`]). 0 (absent) for a sequence created before keysmith
    /// recorded lives: its version is the etcd version itself.
    #[serde(default, skip_serializing_if = "is_zero")]
    incarnation: u64,
    /// How many fences this life went through: each raised the row's
    /// version by [`FENCE_VERSION_STEP`] while etcd's own version of the
    /// `next` key went up by 1 (see [`row_version`]). Always the etcd
    /// version of the `fences/NAME` key, which every fence puts in the same
    /// transaction and conditional writes compare. 0 (absent) before the
    /// first fence.
    #[serde(default, skip_serializing_if = "is_zero")]
    fences: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The life of a sequence as this store last read it: its incarnation and
/// the create revision of its `next` key. Each create makes the `next` key
/// anew (a drop deletes it), so the create revision names one life; etcd
/// restarts the key's version at 1 then, and the incarnation is the offset
/// that keeps the row's versions above every earlier life's.
///
/// A conditional write that has only a version to go by
/// ([`SequenceStore::put_if_version`], [`SequenceStore::alter_if_version`],
/// and with them the hand-backs of handles and leases) compares *both* the
/// `next` key's create revision with a life and its etcd version with the
/// caller's version less that life's offset. It can only succeed when the
/// name is in that life and the row's version there is the caller's; as
/// versions never repeat across the lives of a name, a version planned in
/// another life never matches. The life compared is only a guess (the one
/// this store last read): when it was wrong, the row read back says so and
/// the write is tried once more in the row's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Life {
    incarnation: u64,
    created: i64,
}

impl Life {
    /// Where a row of this life has version `version`: the etcd version
    /// of the `next` key and the number of fences; `None` when no row of
    /// this life has it (a version of an earlier life, or out of etcd's
    /// range).
    fn etcd_version(self, version: u64) -> Option<EtcdVersion> {
        etcd_version(self.incarnation, version)
    }
}

/// What a fence adds to a row's version beyond the 1 that etcd adds to the
/// `next` key's version when the fence puts it: a fenced row's version is
/// the old one plus [`FENCE_VERSION_STEP`], as in every store. Without it a
/// fenced row would have the version the first write this copy lost had,
/// and a hand-back planned on that lost write (a block reserved just before
/// a restore) would match the fenced row and move `next` back under values
/// handed out in the lost writes.
const FENCE_GAP: u64 = FENCE_VERSION_STEP - 1;

/// A row version as etcd holds it: the etcd version of the `next` key and
/// the number of fences of the life (the etcd version of `fences/NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EtcdVersion {
    next: i64,
    fences: u64,
}

/// The row version of a `next` key at etcd version `etcd` after `fences`
/// fences in the life of incarnation `incarnation` (0: a sequence from
/// before lives were recorded): `incarnation - 1 + fences * FENCE_GAP +
/// etcd`, so each fence raises it by [`FENCE_VERSION_STEP`] in all.
fn row_version(incarnation: u64, fences: u64, etcd: i64) -> u64 {
    incarnation
        .saturating_sub(1)
        .saturating_add(fences.saturating_mul(FENCE_GAP))
        .saturating_add(etcd.max(0) as u64)
}

/// The inverse of [`row_version`]: `None` when `version` is below the life
/// (or is no version a row reaches: etcd's version of the `next` key stays
/// below [`FENCE_GAP`], fewer than 2^32 writes in one life).
fn etcd_version(incarnation: u64, version: u64) -> Option<EtcdVersion> {
    let d = version.checked_sub(incarnation.saturating_sub(1))?;
    let next = d % FENCE_GAP;
    (next >= 1).then_some(EtcdVersion {
        next: next as i64,
        fences: d / FENCE_GAP,
    })
}

/// How many times a conditional write is tried in the life its row was
/// found in after the life this store remembered proved wrong.
const LIFE_ATTEMPTS: u32 = 3;

fn default_failover_skip() -> i64 {
    keysmith_core::driver::FAILOVER_SKIP_FLOOR
}

/// What an atomic reservation remembers of a sequence for the next one.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RowHint {
    /// The row as this store last wrote it, with the mod revision of its
    /// `next` key then. The next reservation plans from it and writes in
    /// one transaction that compares that revision (and the epoch): no
    /// write since, nor a drop and re-create (whose `next` key etcd makes
    /// anew, its etcd version at 1 again), can leave the revision as it
    /// was. A stale hint costs one conflict, which returns the current row. Only a snapshot restore can
    /// bring the row back as it was after others moved it on: the write's
    /// revision, not above what this process had seen, tells, and its
    /// range is skipped, never handed out.
    Row { row: SequenceRow, mod_revision: i64 },
    /// A hint lost to another writer lately: the next `reads` reservations
    /// read the row first. A lost transaction costs etcd a raft entry (a
    /// disk write); a linearizable read does not, so under contention
    /// reading first is the cheaper plan.
    Contended { reads: u32 },
}

/// How many reservations read the row first after a hint lost a race.
const CONTENDED_READS: u32 = 16;

/// A row read fresh ([`EtcdStore::read_fenced`]): fenced into the current
/// generation, the values that fence skipped, and its `next` key's mod
/// revision.
struct Fresh {
    row: SequenceRow,
    skipped: i64,
    mod_revision: i64,
}

/// What [`EtcdStore::try_reserve`] wrote: the reservation, the revision of
/// the write and the generation it recorded.
struct Written {
    plan: Reservation,
    revision: i64,
    generation: String,
}

/// A lost [`EtcdStore::try_reserve`]: the row etcd holds now, the mod
/// revision of its `next` key, the values a fence skipped when the planned
/// row was of an older generation and had to be read fenced first, and the
/// failure branch's responses (none then).
struct Lost {
    current: Option<SequenceRow>,
    mod_revision: Option<i64>,
    skipped: i64,
    ops: Vec<TxnOpResponse>,
}

impl SpecValue {
    fn of(row: &SequenceRow) -> SpecValue {
        SpecValue {
            start: row.start,
            max: row.max,
            block: row.block,
            failover_skip: row.failover_skip,
            failover_skip_set: row.failover_skip_set,
            failover_skipped: row.failover_skipped,
            incarnation: row.incarnation,
            fences: etcd_version(row.incarnation, row.version).map_or(0, |v| v.fences),
        }
    }

    fn encode(&self, name: &str) -> Result<Vec<u8>> {
        serde_json::to_vec(self)
            .map_err(|e| Error::Corrupt(format!("cannot encode sequence {name:?}: {e}")))
    }
}

/// What a sequence's `next` key holds: `NEXT GENERATION`, or a bare number
/// when written before generations were recorded.
fn next_value(next: i64, generation: &str) -> String {
    format!("{next} {generation}")
}

/// The lease of one locked reservation. Dropped without [`EtcdStore::release`]
/// (the future was cancelled), it revokes the lease in the background.
struct LeaseGuard {
    id: i64,
    store: EtcdStore,
    keep_alive: Option<tokio::task::JoinHandle<()>>,
    released: bool,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some(task) = self.keep_alive.take() {
            task.abort();
        }
        if self.released {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let store = self.store.clone();
            let id = self.id;
            handle.spawn(async move {
                let _ = store
                    .call(
                        "release a lock",
                        |mut c| async move { c.lease_revoke(id).await },
                    )
                    .await;
            });
        }
    }
}

/// Keeps lease `id` alive until aborted: one keep-alive every third of the
/// TTL. A failed one is retried at the next tick; a lease lost meanwhile is
/// caught by the lock-key compare of the write.
fn keep_alive(store: &EtcdStore, id: i64) -> tokio::task::JoinHandle<()> {
    let store = store.clone();
    tokio::spawn(async move {
        let period = Duration::from_secs(LOCK_TTL_SECS as u64) / 3;
        loop {
            tokio::time::sleep(period).await;
            let _ = store
                .call("keep a lock's lease alive", |mut c| async move {
                    c.lease_keep_alive(id).await.map(drop)
                })
                .await;
        }
    })
}

impl EtcdStore {
    /// The puts that write `row`'s `next` key (its value and generation) and
    /// spec key: the whole row, for a transaction whose compares guard it.
    pub(super) fn row_puts(&self, row: &SequenceRow) -> Result<[TxnOp; 2]> {
        let generation = row.generation.as_deref().unwrap_or_default();
        Ok([
            TxnOp::put(
                self.next_key(&row.name),
                next_value(row.next, generation),
                None,
            ),
            TxnOp::put(
                self.seq_key(&row.name),
                SpecValue::of(row).encode(&row.name)?,
                None,
            ),
        ])
    }

    /// The counts a `counts/NAME` key holds; zero without one.
    fn counts_of(&self, name: &str, kv: Option<&KeyValue>) -> Result<SequenceCounts> {
        kv.map_or(Ok(SequenceCounts::default()), |kv| {
            serde_json::from_slice(kv.value()).map_err(|e| {
                Error::Corrupt(format!(
                    "the counts of sequence {name:?} ({}) are not what keysmith writes: {e}; delete the key",
                    self.counts_key(name)
                ))
            })
        })
    }

    /// The conditional write of a sequence: `puts` (which put the `next`
    /// key, bumping its version) only if the row's version is still
    /// `expected` in the same life, with the row read back in the same
    /// transaction; on a mismatch the row the store holds.
    ///
    /// The transaction compares the `next` key's create revision with the
    /// life this store last read and its etcd version with `expected` in
    /// that life ([`Life`]): a version of another life never matches. When
    /// the life remembered was not the row's (or none was), the row read
    /// back tells its life, and if `expected` is its version the write is
    /// tried again in it.
    async fn write_if_version(
        &self,
        name: &str,
        expected: u64,
        puts: Vec<TxnOp>,
        op: &str,
    ) -> Result<Put> {
        let written = puts.len();
        let mut life = self.lives.get(name);
        let mut current = None;
        for _ in 0..LIFE_ATTEMPTS {
            let gets = self.row_gets(name);
            let epoch = self.epoch().await?;
            let mut otherwise = gets.to_vec();
            otherwise.push(self.epoch_get());
            let pinned = life.and_then(|l| Some((l.created, l.etcd_version(expected)?)));
            let txn = match pinned {
                Some((created, version)) => Txn::new()
                    .when([
                        Compare::create_revision(self.next_key(name), CompareOp::Equal, created),
                        Compare::version(self.next_key(name), CompareOp::Equal, version.next),
                        // The fences too: a fence adds only 1 to the `next`
                        // key's etcd version, so a version planned on a write
                        // a restore lost has the etcd version of the fenced
                        // row, and only the fence count tells them apart.
                        Compare::version(
                            self.fences_key(name),
                            CompareOp::Equal,
                            version.fences as i64,
                        ),
                        self.epoch_compare(&epoch),
                    ])
                    .and_then(puts.iter().cloned().chain(gets).collect::<Vec<_>>())
                    .or_else(otherwise),
                // No life known, or `expected` is no version of the one
                // remembered: a plain read, which tells the row's life.
                None => Txn::new().and_then(otherwise),
            };
            let resp = self.txn(op, txn).await?;
            let ops = resp.op_responses();
            if pinned.is_some() && resp.succeeded() && ops.len() == written + 2 {
                let row = self
                    .row_from(name, &ops, written)?
                    .ok_or_else(|| Error::not_found("sequence", name))?;
                return Ok(Put::Done(row));
            }
            if ops.len() == 3 {
                self.adopt_epoch_from(&resp, 2)?;
            }
            // The row that beat us, fenced if it is of an older generation
            // (reading it remembers its life).
            let row = self
                .read_row(name)
                .await?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            let now = self.lives.get(name);
            let retry = row.version == expected && now.is_some() && now != life;
            current = Some(row);
            if !retry {
                break;
            }
            life = now;
        }
        // Only reached with a row read.
        current
            .map(Put::Conflict)
            .ok_or_else(|| Error::not_found("sequence", name))
    }

    /// The two gets that read a sequence's row, for the end of a transaction.
    fn row_gets(&self, name: &str) -> [TxnOp; 2] {
        [
            TxnOp::get(self.seq_key(name), None),
            TxnOp::get(self.next_key(name), None),
        ]
    }

    /// Reads the row from the two gets starting at response `at`.
    pub(super) fn row_from(
        &self,
        name: &str,
        resp: &[TxnOpResponse],
        at: usize,
    ) -> Result<Option<SequenceRow>> {
        let spec = first_kv(resp, at)?;
        let next = first_kv(resp, at + 1)?;
        self.build_row(name, spec.as_ref(), next.as_ref())
    }

    fn build_row(
        &self,
        name: &str,
        spec: Option<&KeyValue>,
        next: Option<&KeyValue>,
    ) -> Result<Option<SequenceRow>> {
        let (spec_kv, next_kv) = match (spec, next) {
            (None, None) => return Ok(None),
            (Some(s), Some(n)) => (s, n),
            (Some(_), None) | (None, Some(_)) => {
                return Err(Error::Corrupt(format!(
                    "sequence {name:?} under etcd prefix {:?} has only one of its two keys ({} and {}); \
                     something other than keysmith changed them: drop the sequence and create it again",
                    self.prefix,
                    self.seq_key(name),
                    self.next_key(name)
                )));
            }
        };
        let spec: SpecValue = serde_json::from_slice(spec_kv.value()).map_err(|e| {
            Error::Corrupt(format!(
                "etcd key {} does not hold a keysmith sequence ({e}); drop the sequence and create it again",
                self.seq_key(name)
            ))
        })?;
        let text = std::str::from_utf8(next_kv.value()).ok();
        let (number, generation) = match text.map(|t| t.split_once(' ')) {
            Some(Some((n, g))) => (Some(n), Some(g.to_owned())),
            Some(None) => (text, None),
            None => (None, None),
        };
        let next: i64 = number.and_then(|s| s.parse().ok()).ok_or_else(|| {
            Error::Corrupt(format!(
                "etcd key {} holds {:?}, not a number; drop the sequence and create it again",
                self.next_key(name),
                String::from_utf8_lossy(next_kv.value())
            ))
        })?;
        let valid = 0 <= spec.start
            && spec.start <= spec.max
            && spec.max <= keysmith_core::driver::MAX_VALUE
            && spec.start <= next
            && next <= spec.max + 1
            && spec.block >= 1
            && next_kv.version() >= 1;
        if !valid {
            return Err(Error::Corrupt(format!(
                "sequence {name:?} in etcd is inconsistent (start {}, max {}, block {}, next {}); \
                 drop it and create it again",
                spec.start, spec.max, spec.block, next
            )));
        }
        self.lives.remember(
            name,
            Life {
                incarnation: spec.incarnation,
                created: next_kv.create_revision(),
            },
        );
        Ok(Some(SequenceRow {
            name: name.to_owned(),
            next,
            start: spec.start,
            max: spec.max,
            block: spec.block,
            generation,
            failover_skip: spec.failover_skip,
            failover_skip_set: spec.failover_skip_set,
            failover_skipped: spec.failover_skipped,
            version: row_version(spec.incarnation, spec.fences, next_kv.version()),
            incarnation: spec.incarnation,
        }))
    }

    async fn read_row(&self, name: &str) -> Result<Option<SequenceRow>> {
        Ok(self.read_fenced(name).await?.map(|f| f.row))
    }

    /// The row of a sequence, fenced into the current generation first if it
    /// was last written in another one ([`SequenceRow::fence`]; the fence
    /// writes `next` and the spec in one transaction that compares the
    /// version and the epoch), the values the fence skipped, and the mod
    /// revision of its `next` key.
    async fn read_fenced(&self, name: &str) -> Result<Option<Fresh>> {
        for _ in 0..ATOMIC_ATTEMPTS {
            let resp = self
                .txn("read", Txn::new().and_then(self.row_gets(name)))
                .await?;
            let ops = resp.op_responses();
            let Some(row) = self.row_from(name, &ops, 0)? else {
                return Ok(None);
            };
            let generation = self.current_generation().await?;
            let Some(fenced) = row.fence(&generation) else {
                let mod_revision = first_kv(&ops, 1)?.map_or(0, |kv| kv.mod_revision());
                return Ok(Some(Fresh {
                    row,
                    skipped: 0,
                    mod_revision,
                }));
            };
            let epoch = self.epoch().await?;
            // The `next` key as read: its mod revision pins the life and the
            // version both (a version alone may be another life's).
            let read_at = first_kv(&ops, 1)?.map_or(0, |kv| kv.mod_revision());
            let txn = Txn::new()
                .when([
                    Compare::mod_revision(self.next_key(name), CompareOp::Equal, read_at),
                    self.epoch_compare(&epoch),
                ])
                .and_then([
                    TxnOp::put(
                        self.next_key(name),
                        next_value(fenced.next, &generation),
                        None,
                    ),
                    TxnOp::put(
                        self.seq_key(name),
                        SpecValue::of(&fenced).encode(name)?,
                        None,
                    ),
                    // Its etcd version counts the fences of this life,
                    // as the spec's `fences` does ([`row_version`]).
                    TxnOp::put(self.fences_key(name), generation.clone(), None),
                ])
                .or_else([self.epoch_get()]);
            let resp = self.txn("fence a sequence", txn).await?;
            if resp.succeeded() {
                let skipped = fenced.next - row.next;
                tracing::warn!(
                    sequence = name,
                    skipped,
                    "etcd is in a new generation: the sequence moved forward by its failover skip"
                );
                // `next`'s etcd version went up by 1 and the fence count by
                // 1: the row's version by FENCE_VERSION_STEP, as `fence` says.
                debug_assert_eq!(fenced.version, row.version + FENCE_VERSION_STEP);
                return Ok(Some(Fresh {
                    row: fenced,
                    skipped,
                    mod_revision: revision_of(&resp),
                }));
            }
            self.adopt_epoch_from(&resp, 0)?;
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATOMIC_ATTEMPTS,
        })
    }

    /// One compare-and-put of `next` from `row`, read (or last written) when
    /// its `next` key had mod revision `read_at`: `Ok(Ok(written))` on
    /// success, `Ok(Err(lost))` on a conflict. The transaction compares
    /// that mod revision, which pins the row's life and version both (a
    /// version alone may be another life's, [`Life`]), and the version in
    /// the row's life. `extra` compares are added (the lock key);
    /// `extra_gets` are read on failure after the row.
    async fn try_reserve(
        &self,
        row: &SequenceRow,
        read_at: i64,
        n: i64,
        extra: Option<Compare>,
        extra_gets: Vec<TxnOp>,
    ) -> Result<std::result::Result<Written, Lost>> {
        let plan = row.plan(n)?;
        let expected = version_i64(row)?;
        let epoch = self.epoch().await?;
        let generation = self.current_generation().await?;
        if row.fence(&generation).is_some() {
            // Planned from a row of an older generation: read it fenced.
            let fresh = self.read_fenced(&row.name).await?;
            return Ok(Err(Lost {
                mod_revision: fresh.as_ref().map(|f| f.mod_revision),
                skipped: fresh.as_ref().map_or(0, |f| f.skipped),
                current: fresh.map(|f| f.row),
                ops: Vec::new(),
            }));
        }
        let mut when = vec![
            Compare::mod_revision(self.next_key(&row.name), CompareOp::Equal, read_at),
            Compare::version(self.next_key(&row.name), CompareOp::Equal, expected),
            self.epoch_compare(&epoch),
        ];
        when.extend(extra);
        let mut otherwise = self.row_gets(&row.name).to_vec();
        otherwise.extend(extra_gets);
        let epoch_at = otherwise.len();
        otherwise.push(self.epoch_get());
        let txn = Txn::new()
            .when(when)
            .and_then([TxnOp::put(
                self.next_key(&row.name),
                next_value(plan.end, &generation),
                None,
            )])
            .or_else(otherwise);
        let resp = self.txn("reserve", txn).await?;
        if resp.succeeded() {
            return Ok(Ok(Written {
                plan,
                revision: revision_of(&resp),
                generation,
            }));
        }
        self.adopt_epoch_from(&resp, epoch_at)?;
        let ops = resp.op_responses();
        let current = self.row_from(&row.name, &ops, 0)?;
        let mod_revision = first_kv(&ops, 1)?.map(|kv| kv.mod_revision());
        Ok(Err(Lost {
            current,
            mod_revision,
            skipped: 0,
            ops,
        }))
    }

    async fn release(&self, lease: &mut LeaseGuard) {
        if let Some(task) = lease.keep_alive.take() {
            task.abort();
        }
        let id = lease.id;
        // Revoking deletes the lock key, which releases the lock. If this fails
        // the lease (and with it the lock) expires after LOCK_TTL_SECS.
        match self
            .call(
                "release a lock",
                |mut c| async move { c.lease_revoke(id).await },
            )
            .await
        {
            Ok(_) => lease.released = true,
            Err(e) => tracing::warn!(lease = lease.id, error = %e, "cannot revoke lease"),
        }
    }

    /// One locked reservation: `Ok(None)` when the lock was lost before the
    /// write (the caller takes it again).
    async fn reserve_under_lock(
        &self,
        name: &str,
        n: i64,
        incarnation: u64,
        lock_key: &[u8],
    ) -> Result<Option<Reservation>> {
        let Fresh {
            mut row,
            mut skipped,
            mut mod_revision,
        } = self
            .read_fenced(name)
            .await?
            .ok_or_else(|| Error::not_found("sequence", name))?;
        // Other strategies may write between our read and our put: we keep the
        // lock and retry from the row the transaction returns.
        for _ in 0..ATOMIC_ATTEMPTS {
            // The write compares the next key's mod revision of this row:
            // it lands in this row's life or not at all.
            row.check_life(incarnation, "handle")?;
            let still_held = Compare::version(lock_key.to_vec(), CompareOp::Greater, 0);
            let lock_get = TxnOp::get(lock_key.to_vec(), Some(GetOptions::new().with_keys_only()));
            match self
                .try_reserve(&row, mod_revision, n, Some(still_held), vec![lock_get])
                .await?
            {
                Ok(w) => {
                    return Ok(Some(Reservation {
                        fenced: skipped,
                        ..w.plan
                    }));
                }
                Err(Lost {
                    current,
                    ops,
                    skipped: more,
                    mod_revision: at,
                }) => {
                    skipped += more;
                    if !ops.is_empty() && first_kv(&ops, 2)?.is_none() {
                        return Ok(None);
                    }
                    row = current.ok_or_else(|| Error::not_found("sequence", name))?;
                    mod_revision = at.ok_or_else(|| Error::not_found("sequence", name))?;
                }
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATOMIC_ATTEMPTS,
        })
    }
}

#[async_trait]
impl SequenceStore for EtcdStore {
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow> {
        // Numbering keys a drop by an older keysmith may have left behind.
        self.create_with(spec, None, self.delete_numbers_op(&spec.name))
            .await
    }

    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        self.read_row(name).await
    }

    async fn put_if_version(&self, name: &str, new_next: i64, expected: u64) -> Result<Put> {
        // A row read through this store is fenced on read, so `expected`
        // is the version of a row of the current generation (or a version
        // the store has since left behind: a conflict).
        let generation = self.current_generation().await?;
        let puts = vec![TxnOp::put(
            self.next_key(name),
            next_value(new_next, &generation),
            None,
        )];
        self.write_if_version(name, expected, puts, "write a sequence")
            .await
    }

    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> Result<()> {
        for _ in 0..COUNTS_ATTEMPTS {
            let resp = self
                .txn("read a sequence", Txn::new().and_then(self.row_gets(name)))
                .await?;
            let ops = resp.op_responses();
            let row = self
                .row_from(name, &ops, 0)?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            if row.failover_skip_set || row.failover_skip >= at_least {
                return Ok(());
            }
            let spec_rev = first_kv(&ops, 0)?.map_or(0, |kv| kv.mod_revision());
            let spec = SpecValue {
                failover_skip: at_least,
                ..SpecValue::of(&row)
            };
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    self.seq_key(name),
                    CompareOp::Equal,
                    spec_rev,
                )])
                .and_then([TxnOp::put(self.seq_key(name), spec.encode(name)?, None)]);
            if self.txn("raise a failover skip", txn).await?.succeeded() {
                return Ok(());
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: COUNTS_ATTEMPTS,
        })
    }

    async fn alter_checked(&self, name: &str, change: &Alteration, expected: u64) -> Result<Put> {
        // `start` never changes, and every write of the spec key also puts
        // `next` (bumping its version): comparing that version covers both.
        let row = self
            .read_row(name)
            .await?
            .ok_or_else(|| Error::not_found("sequence", name))?;
        // The spec below is this row's (its life's incarnation among it):
        // written only over this very version, which no other life has.
        if row.version != expected {
            return Ok(Put::Conflict(row));
        }
        let spec = SpecValue {
            max: change.max,
            block: change.block,
            failover_skip: change.failover_skip,
            failover_skip_set: change.failover_skip_set,
            ..SpecValue::of(&row)
        }
        .encode(name)?;
        let generation = self.current_generation().await?;
        let puts = vec![
            TxnOp::put(
                self.next_key(name),
                next_value(change.next, &generation),
                None,
            ),
            TxnOp::put(self.seq_key(name), spec, None),
        ];
        self.write_if_version(name, expected, puts, "alter a sequence")
            .await
    }

    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        self.reserve_locked_in(name, n, 0).await
    }

    async fn reserve_locked_in(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        for _ in 0..LOCK_ATTEMPTS {
            let granted = self
                .call("grant a lease", |mut c| async move {
                    c.lease_grant(LOCK_TTL_SECS, None).await
                })
                .await?;
            let mut lease = LeaseGuard {
                id: granted.id(),
                store: self.clone(),
                keep_alive: Some(keep_alive(self, granted.id())),
                released: false,
            };
            let (lock_name, id) = (self.lock_name(name), lease.id);
            let locked = self
                .call_within("take a lock", LOCK_WAIT, |mut c| {
                    let lock_name = lock_name.clone();
                    async move {
                        c.lock(lock_name, Some(LockOptions::new().with_lease(id)))
                            .await
                    }
                })
                .await;
            let outcome = match locked {
                Ok(resp) => {
                    self.reserve_under_lock(name, n, incarnation, resp.key())
                        .await
                }
                Err(e) => Err(e),
            };
            self.release(&mut lease).await;
            match outcome? {
                Some(r) => return Ok(r),
                None => tracing::warn!(
                    sequence = name,
                    "lost the etcd lock (lease expired) before writing; taking it again"
                ),
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: LOCK_ATTEMPTS,
        })
    }

    fn atomic_reserve(&self) -> Option<&dyn AtomicReserve> {
        Some(self)
    }

    async fn list_sequences(&self) -> Result<Vec<SequenceRow>> {
        let seq = format!("{}seq/", self.prefix);
        let next = format!("{}next/", self.prefix);
        let txn = Txn::new().and_then([
            TxnOp::get(seq.clone(), Some(GetOptions::new().with_prefix())),
            TxnOp::get(next.clone(), Some(GetOptions::new().with_prefix())),
        ]);
        let resp = self.txn("list sequences", txn).await?;
        let ops = resp.op_responses();
        let specs = kvs(&ops, 0)?;
        let mut nexts: std::collections::BTreeMap<Vec<u8>, KeyValue> = kvs(&ops, 1)?
            .into_iter()
            .filter_map(|kv| {
                let name = kv.key().strip_prefix(next.as_bytes())?.to_vec();
                Some((name, kv))
            })
            .collect();
        let mut rows = Vec::with_capacity(specs.len());
        for kv in &specs {
            let raw = &kv.key()[seq.len()..];
            let name = std::str::from_utf8(raw).map_err(|_| {
                Error::Corrupt(format!(
                    "etcd key {:?} is not a keysmith sequence name",
                    String::from_utf8_lossy(kv.key())
                ))
            })?;
            let next_kv = nexts.remove(raw);
            if let Some(row) = self.build_row(name, Some(kv), next_kv.as_ref())? {
                rows.push(row);
            }
        }
        if let Some(orphan) = nexts.keys().next() {
            let name = String::from_utf8_lossy(orphan).into_owned();
            return Err(self
                .build_row(&name, None, Some(&nexts[orphan]))
                .unwrap_err());
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(rows)
    }

    async fn sequence_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.names_near("seq/", "sequence", name, limit).await
    }

    async fn count_sequences_with_prefix(&self, prefix: &str) -> Result<u64> {
        // One counted range read of the spec keys (a sequence is its two
        // keys; the spec key says it exists).
        let from = format!("{}seq/{prefix}", self.prefix);
        let resp = self
            .call("count sequences", |mut c| {
                let from = from.clone();
                async move {
                    c.get(
                        from,
                        Some(GetOptions::new().with_prefix().with_count_only()),
                    )
                    .await
                }
            })
            .await?;
        Ok(u64::try_from(resp.count()).unwrap_or(0))
    }

    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        // Compare-and-swap on the counts key alone: reservations go on.
        for _ in 0..COUNTS_ATTEMPTS {
            let [spec, next] = self.row_gets(name);
            let read = Txn::new().and_then([spec, next, TxnOp::get(self.counts_key(name), None)]);
            let resp = self.txn("read a sequence's counts", read).await?;
            let ops = resp.op_responses();
            let row = self
                .row_from(name, &ops, 0)?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            // The life the counts are checked against (`apply`) is the one
            // written in: the `next` key's create revision is compared.
            let created = first_kv(&ops, 1)?.map_or(0, |kv| kv.create_revision());
            let seen = first_kv(&ops, 2)?;
            let counts = self
                .counts_of(name, seen.as_ref())?
                .apply(&row, delta, now_ms)?;
            let value = serde_json::to_vec(&counts).map_err(|e| {
                Error::Corrupt(format!("cannot encode the counts of {name:?}: {e}"))
            })?;
            let unchanged = match &seen {
                Some(kv) => Compare::mod_revision(
                    self.counts_key(name),
                    CompareOp::Equal,
                    kv.mod_revision(),
                ),
                None => Compare::version(self.counts_key(name), CompareOp::Equal, 0),
            };
            let write = Txn::new()
                .when([
                    unchanged,
                    Compare::create_revision(self.next_key(name), CompareOp::Equal, created),
                ])
                .and_then([TxnOp::put(self.counts_key(name), value, None)]);
            if self
                .txn("record a sequence's counts", write)
                .await?
                .succeeded()
            {
                return Ok(());
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: COUNTS_ATTEMPTS,
        })
    }

    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)> {
        let [spec, next] = self.row_gets(name);
        let read = Txn::new().and_then([spec, next, TxnOp::get(self.counts_key(name), None)]);
        let resp = self.txn("read a sequence's counts", read).await?;
        let ops = resp.op_responses();
        let row = self
            .row_from(name, &ops, 0)?
            .ok_or_else(|| Error::not_found("sequence", name))?;
        Ok((row, self.counts_of(name, first_kv(&ops, 2)?.as_ref())?))
    }

    async fn drop_sequence(&self, name: &str) -> Result<()> {
        self.row_hints.forget(name);
        let numbers = self.numbers_prefix(name);
        for _ in 0..ATOMIC_ATTEMPTS {
            // One snapshot: the row, every numbering key, the tombstone.
            let read = Txn::new().and_then([
                TxnOp::get(self.seq_key(name), None),
                TxnOp::get(self.next_key(name), None),
                TxnOp::get(numbers.clone(), Some(GetOptions::new().with_prefix())),
                TxnOp::get(self.tombstone_key(SEQUENCE_KIND, name), None),
            ]);
            let resp = self.txn("drop a sequence", read).await?;
            let at = revision_of(&resp);
            let ops = resp.op_responses();
            let (seq_kv, next_kv) = (first_kv(&ops, 0)?, first_kv(&ops, 1)?);
            let Some(seq_kv) = seq_kv else {
                return Err(Error::not_found("sequence", name));
            };
            let tomb_kv = first_kv(&ops, 3)?;
            let mut t = self.tombstone_of(SEQUENCE_KIND, name, tomb_kv.as_ref())?;
            // A half-written row (Corrupt) is dropped as its message says,
            // raising the tombstone by what its next key holds, if anything.
            match self.build_row(name, Some(&seq_kv), next_kv.as_ref()) {
                Ok(Some(row)) => {
                    let (mut numbering, mut counters_next) = (None, None::<i64>);
                    for kv in kvs(&ops, 2)? {
                        let key = String::from_utf8_lossy(kv.key());
                        if key == self.settings_key(name) {
                            numbering = Some(keysmith_core::driver::parse_numbering(
                                name,
                                &String::from_utf8_lossy(kv.value()),
                            )?);
                        } else if key.starts_with(&format!("{numbers}p/")) && key.ends_with("/next")
                        {
                            let n: i64 = String::from_utf8_lossy(kv.value()).parse().map_err(|_| {
                                Error::Corrupt(format!(
                                    "a period counter of sequence {name:?} ({key}) is not a number"
                                ))
                            })?;
                            counters_next = Some(counters_next.map_or(n, |c| c.max(n)));
                        }
                    }
                    let generation = self.current_generation().await?;
                    t = t.after_sequence_drop(&row, numbering.as_ref(), counters_next, &generation);
                }
                Ok(None) => return Err(Error::not_found("sequence", name)),
                Err(e) => tracing::warn!(sequence = name, "dropping a damaged sequence: {e}"),
            }
            let txn = Txn::new()
                .when([
                    Compare::mod_revision(
                        self.seq_key(name),
                        CompareOp::Equal,
                        seq_kv.mod_revision(),
                    ),
                    Compare::mod_revision(
                        self.next_key(name),
                        CompareOp::Equal,
                        next_kv.as_ref().map_or(0, KeyValue::mod_revision),
                    ),
                    Compare::mod_revision(numbers.clone(), CompareOp::Less, at + 1).with_prefix(),
                    self.tombstone_unchanged(SEQUENCE_KIND, name, tomb_kv.as_ref()),
                ])
                .and_then([
                    TxnOp::delete(self.seq_key(name), None),
                    TxnOp::delete(self.next_key(name), None),
                    TxnOp::delete(self.counts_key(name), None),
                    TxnOp::delete(self.fences_key(name), None),
                    self.delete_numbers_op(name),
                    self.tombstone_put(SEQUENCE_KIND, name, t)?,
                ]);
            if self.txn("drop a sequence", txn).await?.succeeded() {
                self.row_hints.forget(name);
                return Ok(());
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATOMIC_ATTEMPTS,
        })
    }
}

/// etcd's one-step reservation: one transaction that compares the version
/// of the row this store's last reservation wrote (or a fresh read), retried
/// at once from the row etcd returns on a conflict.
#[async_trait]
impl AtomicReserve for EtcdStore {
    async fn reserve_one_step(&self, name: &str, n: i64) -> Result<Reservation> {
        self.reserve_one_step_in(name, n, 0).await
    }

    async fn reserve_one_step_in(
        &self,
        name: &str,
        n: i64,
        incarnation: u64,
    ) -> Result<Reservation> {
        let outcome = self.reserve_from_hint(name, n, incarnation).await;
        if outcome.is_err() {
            self.row_hints.forget(name);
        }
        outcome
    }
}

impl EtcdStore {
    /// `sequence_names_near` and `pool_names_near`: the names of the keys
    /// under `under` (which ends in '/') next to `name`, in one transaction
    /// of two bounded, sorted range reads; `kind` names them in messages.
    pub(crate) async fn names_near(
        &self,
        under: &str,
        kind: &str,
        name: &str,
        limit: usize,
    ) -> Result<Vec<String>> {
        use etcd_client::{SortOrder, SortTarget};
        // etcd reads "no limit" in a limit of 0: a side that wants none
        // is not asked.
        let (before, after) = (limit / 2, limit - limit / 2);
        let seq = format!("{}{under}", self.prefix);
        // Just past every key under `seq` (its last byte, '/', plus one).
        let end = format!("{}{}0", self.prefix, under.trim_end_matches('/'));
        let key = format!("{seq}{name}");
        let side = |from: &str, to: &str, n: usize, order: SortOrder| {
            TxnOp::get(
                from.to_owned(),
                Some(
                    GetOptions::new()
                        .with_range(to.to_owned())
                        .with_keys_only()
                        .with_sort(SortTarget::Key, order)
                        .with_limit(i64::try_from(n).unwrap_or(i64::MAX)),
                ),
            )
        };
        let mut ops = Vec::new();
        if before > 0 {
            ops.push(side(&seq, &key, before, SortOrder::Descend));
        }
        if after > 0 {
            ops.push(side(&key, &end, after, SortOrder::Ascend));
        }
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let resp = self
            .txn("read the names near a name", Txn::new().and_then(ops))
            .await?;
        let ops = resp.op_responses();
        let name_of = |kv: &KeyValue| {
            std::str::from_utf8(&kv.key()[seq.len()..])
                .map(str::to_owned)
                .map_err(|_| {
                    Error::Corrupt(format!(
                        "etcd key {:?} is not a keysmith {kind} name",
                        String::from_utf8_lossy(kv.key())
                    ))
                })
        };
        let mut out = Vec::with_capacity(limit);
        let mut i = 0;
        if before > 0 {
            for kv in kvs(&ops, i)?.iter().rev() {
                out.push(name_of(kv)?);
            }
            i += 1;
        }
        if after > 0 {
            for kv in &kvs(&ops, i)? {
                out.push(name_of(kv)?);
            }
        }
        Ok(out)
    }

    /// [`AtomicReserve::reserve_one_step`]: one transaction that compares the
    /// row's version and its `next` key's mod revision, planned from the
    /// row this store last wrote ([`RowHint::Row`]), or read fresh when it
    /// has none, the hint is of an older generation, or hints lost races
    /// lately ([`RowHint::Contended`]); on a conflict retried at once from
    /// the row etcd returns. The hint never decides alone: the compare
    /// does, and a range is planned only from a row of the current
    /// generation.
    async fn reserve_from_hint(&self, name: &str, n: i64, incarnation: u64) -> Result<Reservation> {
        let generation = self.current_generation().await?;
        let (hint, mut reads) = match self.row_hints.get(name) {
            // A hint of another life (this process's, before a drop) is no
            // hint for this caller: the row is read fresh, and tells.
            Some(RowHint::Row { row, mod_revision })
                if row.fence(&generation).is_none()
                    && (incarnation == 0 || row.incarnation == incarnation) =>
            {
                (Some((row, mod_revision)), 0)
            }
            Some(RowHint::Contended { reads }) => (None, reads),
            _ => (None, 0),
        };
        let mut from_hint = hint.is_some();
        let (mut row, mut at, mut fenced) = match hint {
            Some((row, rev)) => (row, rev, 0),
            None => self.fresh(name).await?,
        };
        for _ in 0..ATOMIC_ATTEMPTS {
            // Planned from this row, compared on its mod revision: the write
            // lands in this row's life or not at all.
            row.check_life(incarnation, "handle")?;
            let floor = self.generation.floor();
            let lost = match self.try_reserve(&row, at, n, None, Vec::new()).await {
                // Planned from a hint without a read: a snapshot restored
                // under this process can bring back the very row it wrote
                // (version, revision, epoch and all) after others moved it
                // on. The write's revision tells: its range may be values
                // handed out before the restore, so it is never handed out
                // (a gap), and the row is read again, which renews the
                // epoch and fences the sequence forward.
                Ok(Ok(w)) if from_hint && self.generation.went_back_under(w.revision, floor) => {
                    tracing::warn!(
                        sequence = name,
                        "etcd went back under a remembered row (a restore?): values {}..{} are skipped, never handed out",
                        w.plan.start,
                        w.plan.end
                    );
                    self.row_hints.forget(name);
                    let (r, a, f) = self.fresh(name).await?;
                    (row, at, fenced, from_hint) = (r, a, fenced + f, false);
                    continue;
                }
                Ok(Ok(w)) => {
                    let hint = match reads.checked_sub(1) {
                        Some(reads) => RowHint::Contended { reads },
                        None => RowHint::Row {
                            row: SequenceRow {
                                next: w.plan.end,
                                version: w.plan.version,
                                generation: Some(w.generation),
                                ..row
                            },
                            mod_revision: w.revision,
                        },
                    };
                    self.row_hints.remember(name, hint);
                    return Ok(Reservation { fenced, ..w.plan });
                }
                Ok(Err(lost)) => lost,
                // A hint may predate a hand-back: only the store's own row
                // may declare the sequence exhausted.
                Err(Error::Exhausted { .. }) if from_hint => {
                    let (r, a, f) = self.fresh(name).await?;
                    (row, at, fenced, from_hint) = (r, a, fenced + f, false);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if from_hint {
                reads = CONTENDED_READS;
                from_hint = false;
            }
            fenced += lost.skipped;
            let current = lost
                .current
                .ok_or_else(|| Error::not_found("sequence", name))?;
            let generation = self.current_generation().await?;
            (row, at) = match (current.fence(&generation), lost.mod_revision) {
                (None, Some(rev)) => (current, rev),
                // Of an older generation (or read fenced without its
                // revision): fence it here, counting what that skips.
                _ => {
                    let (r, a, f) = self.fresh(name).await?;
                    fenced += f;
                    (r, a)
                }
            };
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATOMIC_ATTEMPTS,
        })
    }

    /// [`Self::read_fenced`] of a sequence that must exist: the row, its
    /// `next` key's mod revision and the values the fence skipped.
    async fn fresh(&self, name: &str) -> Result<(SequenceRow, i64, i64)> {
        let f = self
            .read_fenced(name)
            .await?
            .ok_or_else(|| Error::not_found("sequence", name))?;
        Ok((f.row, f.mod_revision, f.skipped))
    }

    /// Creates a sequence's keys, with `extra` in the same transaction (the
    /// numbering's settings, or the deletion of stale numbering keys).
    /// Creates the sequence of `spec` (with `numbering`, whose settings
    /// `extra` writes, if it has one), its start raised above the name's
    /// tombstone, which the transaction compares unchanged since it was read.
    pub(super) async fn create_with(
        &self,
        spec: &SequenceSpec,
        numbering: Option<&keysmith_core::driver::Numbering>,
        extra: TxnOp,
    ) -> Result<SequenceRow> {
        let generation = self.current_generation().await?;
        for _ in 0..ATOMIC_ATTEMPTS {
            // Every kind's tombstone: the new life starts above all the
            // name's earlier lives, and its values above theirs.
            let (tomb, tomb_kvs) = self.read_tombstones(&spec.name).await?;
            let spec = &tomb.raise_sequence(spec, numbering)?;
            let row = SequenceRow::created_after(spec, &generation, &tomb);
            let value = SpecValue::of(&row).encode(&spec.name)?;
            let [seq_tomb, pool_tomb] = self.tombstones_unchanged(&spec.name, &tomb_kvs);
            let txn = Txn::new()
                .when([
                    Compare::version(self.seq_key(&spec.name), CompareOp::Equal, 0),
                    // Deleted by every drop: the put below makes it anew,
                    // at etcd version 1 (row version `incarnation`).
                    Compare::version(self.next_key(&spec.name), CompareOp::Equal, 0),
                    seq_tomb,
                    pool_tomb,
                ])
                .and_then([
                    TxnOp::put(self.seq_key(&spec.name), value, None),
                    TxnOp::put(
                        self.next_key(&spec.name),
                        next_value(spec.start, &generation),
                        None,
                    ),
                    // Counts a drop by an older keysmith may have left behind.
                    TxnOp::delete(self.counts_key(&spec.name), None),
                    // The fences of an earlier life (a drop deletes them;
                    // one by an older keysmith leaves none): this life's
                    // count starts at 0, as its spec's.
                    TxnOp::delete(self.fences_key(&spec.name), None),
                    extra.clone(),
                ])
                .or_else(self.row_gets(&spec.name));
            let resp = self.txn("create a sequence", txn).await?;
            if resp.succeeded() {
                // The `next` key's create revision names this life.
                self.lives.remember(
                    &spec.name,
                    Life {
                        incarnation: row.incarnation,
                        created: revision_of(&resp),
                    },
                );
                return Ok(row);
            }
            // Tells a half-written leftover (Corrupt) from a real sequence;
            // with neither, a drop moved the tombstone: read it again.
            if self
                .row_from(&spec.name, &resp.op_responses(), 0)?
                .is_some()
            {
                return Err(Error::AlreadyExists {
                    kind: "sequence",
                    name: spec.name.clone(),
                });
            }
        }
        Err(Error::Contention {
            name: spec.name.clone(),
            attempts: ATOMIC_ATTEMPTS,
        })
    }
}

/// The etcd version of `row`'s `next` key: its version in its life.
fn version_i64(row: &SequenceRow) -> Result<i64> {
    etcd_version(row.incarnation, row.version)
        .map(|v| v.next)
        .ok_or_else(|| {
            Error::Corrupt(format!(
                "sequence {:?}: version {} is not one of its life (incarnation {}) in etcd's range",
                row.name, row.version, row.incarnation
            ))
        })
}

/// The revision a transaction's response was answered at: for a write, the
/// mod revision of every key it put.
fn revision_of(resp: &TxnResponse) -> i64 {
    resp.header().map_or(0, |h| h.revision())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_offset_by_the_life_and_the_fences_and_back() {
        let at = |next, fences| EtcdVersion { next, fences };
        // A row from before lives: the etcd version itself.
        assert_eq!(row_version(0, 0, 1), 1);
        assert_eq!(etcd_version(0, 7), Some(at(7, 0)));
        assert_eq!(etcd_version(0, 0), None);
        // The first life, and a later one that starts at 10.
        assert_eq!(row_version(1, 0, 1), 1);
        assert_eq!(row_version(10, 0, 1), 10);
        assert_eq!(row_version(10, 0, 4), 13);
        for (life, fences, etcd) in [
            (1, 0, 1),
            (1, 0, 9),
            (10, 0, 1),
            (10, 0, 4),
            (10, 2, 4),
            (u64::MAX / 4, 1, 3),
        ] {
            assert_eq!(
                etcd_version(life, row_version(life, fences, etcd)),
                Some(at(etcd, fences))
            );
        }
        // Every version of an earlier life is below the later one's first:
        // none is a version of that life, whatever etcd's own version.
        for v in 1..10 {
            assert_eq!(etcd_version(10, v), None, "{v}");
        }
        // A fence: etcd adds 1 to `next` and the count 1; the row's version
        // goes up by FENCE_VERSION_STEP, as SequenceRow::fence says.
        assert_eq!(
            row_version(10, 1, 5),
            row_version(10, 0, 4) + FENCE_VERSION_STEP
        );
        // The version a write lost to a restore had (one above the row
        // restored) is the fenced row's etcd version, but not its count.
        let lost = row_version(10, 0, 5);
        assert_eq!(etcd_version(10, lost), Some(at(5, 0)));
        assert_ne!(
            etcd_version(10, lost),
            etcd_version(10, row_version(10, 1, 5))
        );
        let life = Life {
            incarnation: 10,
            created: 5,
        };
        assert_eq!(life.etcd_version(12), Some(at(3, 0)));
        assert_eq!(life.etcd_version(9), None);
    }
}
