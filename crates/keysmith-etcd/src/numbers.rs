//! etcd: the [`NumberStore`] half of the contract.
//!
//! Keys under `PREFIX/numbers/ENAME/` (gone with the sequence):
//!
//! | key | value |
//! | --- | --- |
//! | `settings` | the [`Numbering`], JSON; written with the sequence's keys |
//! | `current` | the current period key, decimal (absent: 0); only moves forward |
//! | `p/PPPPPPPPPP/next` | the period's next new number, decimal (absent: the start) |
//! | `p/PPPPPPPPPP/open/VVVVVVVVVVVVVVVVVVVV` | an open number: its ticket's token, or empty once released |
//! | `p/PPPPPPPPPP/held/VVVVVVVVVVVVVVVVVVVV` | the token again, attached to an etcd lease of the ticket's TTL |
//!
//! **The clock.** etcd has no clock a client can read. Ticket expiry uses
//! etcd's own: a lease of the TTL (whole seconds, rounded up, and at least
//! etcd's minimum of about 2 s) holds the `held` key, and etcd deletes the key
//! when the lease runs out, whichever client holds it. An open number
//! without its `held` key is free to take again. Periods are read from the
//! caller's system clock ([`NumberStore::clock_ms`]); the `current` key makes
//! them agree: a call uses the later of its own period and `current`, and
//! moves `current` forward, so once any process has started a period no
//! process hands out numbers of an earlier one, and a restart never misses a
//! reset. The limitation: a period starts when the first process whose clock
//! has reached it asks, so a host whose clock runs ahead starts it early for
//! everyone (run NTP).
//!
//! Every write is one transaction comparing what it read (the sequence's
//! create revision, `current`, the counter, the open number's key), so two
//! callers never take the same number; a caller that loses reads again, up
//! to [`ATTEMPTS`] times, then fails with [`Error::Contention`].

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{DeleteOptions, PutOptions};

use super::*;
use keysmith_core::driver::{
    HeldNumber, NumberStore, Numbering, NumberingSwap, NumbersRead, PeriodRange, Settle,
    TakenNumber, TicketTake, not_numbered, refused,
};

/// How often a take or reservation reads again after losing a race.
const ATTEMPTS: u32 = 64;

fn ttl_secs(ttl: Duration) -> i64 {
    (ttl.as_millis().div_ceil(1000) as i64).max(1)
}

/// What a take or reservation read, in one transaction.
struct Snapshot {
    row: SequenceRow,
    /// The `seq/NAME` key's create revision: the sequence was not dropped
    /// and created again in between when it is unchanged.
    created: i64,
    /// The current period and its key's mod revision (0: absent).
    current: (i64, i64),
    /// The period used: the later of the one asked for and `current`.
    period: i64,
    /// The period's counter and its key's mod revision (0: absent).
    next: (i64, i64),
    /// Open numbers of the period: value -> (token, mod revision).
    open: BTreeMap<i64, (String, i64)>,
    /// Numbers of the period whose `held` key exists.
    held: Vec<i64>,
}

impl EtcdStore {
    pub(super) fn numbers_prefix(&self, name: &str) -> String {
        format!("{}numbers/{}/", self.prefix, escape(name))
    }

    pub(super) fn settings_key(&self, name: &str) -> String {
        format!("{}settings", self.numbers_prefix(name))
    }

    fn current_key(&self, name: &str) -> String {
        format!("{}current", self.numbers_prefix(name))
    }

    fn period_prefix(&self, name: &str, period: i64) -> String {
        format!("{}p/{period:010}/", self.numbers_prefix(name))
    }

    /// The op that deletes every numbering key of a sequence (its drop).
    pub(super) fn delete_numbers_op(&self, name: &str) -> TxnOp {
        TxnOp::delete(
            self.numbers_prefix(name),
            Some(DeleteOptions::new().with_prefix()),
        )
    }

    /// The op that writes a numbered sequence's settings (its create).
    pub(super) fn put_settings_op(&self, name: &str, numbering: &Numbering) -> Result<TxnOp> {
        let v = keysmith_core::driver::numbering_json(numbering)?;
        Ok(TxnOp::put(self.settings_key(name), v, None))
    }

    fn number_from(&self, key: &str, kv: &KeyValue) -> Result<i64> {
        std::str::from_utf8(kv.value())
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "etcd key {key} holds {:?}, not a number; drop the sequence and create it again",
                    String::from_utf8_lossy(kv.value())
                ))
            })
    }

    /// Reads the sequence, its current period, and period `period`'s keys
    /// (with `tickets`, its open and held numbers too).
    async fn snapshot(&self, name: &str, period: i64, tickets: bool) -> Result<Snapshot> {
        let mut asked = period;
        for _ in 0..2 {
            let pp = self.period_prefix(name, asked);
            let mut ops = vec![
                TxnOp::get(self.seq_key(name), None),
                TxnOp::get(self.next_key(name), None),
                TxnOp::get(self.settings_key(name), None),
                TxnOp::get(self.current_key(name), None),
                TxnOp::get(format!("{pp}next"), None),
            ];
            if tickets {
                let prefix = Some(GetOptions::new().with_prefix());
                ops.push(TxnOp::get(format!("{pp}open/"), prefix.clone()));
                ops.push(TxnOp::get(format!("{pp}held/"), prefix));
            }
            let resp = self
                .txn("read a numbered sequence", Txn::new().and_then(ops))
                .await?;
            let ops = resp.op_responses();
            let row = self
                .row_from(name, &ops, 0)?
                .ok_or_else(|| Error::not_found("sequence", name))?;
            let created = first_kv(&ops, 0)?.map_or(0, |kv| kv.create_revision());
            if first_kv(&ops, 2)?.is_none() {
                return Err(not_numbered(name));
            }
            let current = match first_kv(&ops, 3)? {
                Some(kv) => (
                    self.number_from(&self.current_key(name), &kv)?,
                    kv.mod_revision(),
                ),
                None => (0, 0),
            };
            if current.0 > asked {
                // Another process started a later period: read that one.
                asked = current.0;
                continue;
            }
            let next = match first_kv(&ops, 4)? {
                Some(kv) => (
                    self.number_from(&format!("{pp}next"), &kv)?,
                    kv.mod_revision(),
                ),
                None => (row.start, 0),
            };
            let (mut open, mut held) = (BTreeMap::new(), Vec::new());
            if tickets {
                let value_of = |kv: &KeyValue, sub: &str| -> Result<i64> {
                    let key = String::from_utf8_lossy(kv.key()).into_owned();
                    key.strip_prefix(&format!("{pp}{sub}"))
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| {
                            Error::Corrupt(format!(
                                "etcd key {key} is not a keysmith ticket; drop the sequence and create it again"
                            ))
                        })
                };
                for kv in kvs(&ops, 5)? {
                    let token = String::from_utf8_lossy(kv.value()).into_owned();
                    open.insert(value_of(&kv, "open/")?, (token, kv.mod_revision()));
                }
                for kv in kvs(&ops, 6)? {
                    held.push(value_of(&kv, "held/")?);
                }
            }
            return Ok(Snapshot {
                row,
                created,
                current,
                period: asked,
                next,
                open,
                held,
            });
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: 2,
        })
    }

    /// Compares that the sequence, `current` and the counter are as read,
    /// and the ops that move `current` forward if it must.
    fn base_compares(&self, name: &str, snap: &Snapshot) -> (Vec<Compare>, Vec<TxnOp>) {
        let rev_or_absent = |key: String, rev: i64| {
            if rev == 0 {
                Compare::version(key, CompareOp::Equal, 0)
            } else {
                Compare::mod_revision(key, CompareOp::Equal, rev)
            }
        };
        let when = vec![
            Compare::create_revision(self.seq_key(name), CompareOp::Equal, snap.created),
            rev_or_absent(self.current_key(name), snap.current.1),
        ];
        let mut ops = Vec::new();
        if snap.period != snap.current.0 {
            ops.push(TxnOp::put(
                self.current_key(name),
                snap.period.to_string(),
                None,
            ));
        }
        (when, ops)
    }

    /// Applies the generation rule of numbered sequences
    /// ([`keysmith_core::driver::numbers_fence`]) to a snapshot: `Ok(true)`
    /// when nothing needed doing, `Ok(false)` when a fence was written (or
    /// lost a race): the caller reads again.
    async fn numbers_current(&self, name: &str, snap: &Snapshot, gapless: bool) -> Result<bool> {
        use keysmith_core::driver::{NumbersFence, numbers_fence};
        let generation = self.current_generation().await?;
        let rule = numbers_fence(&snap.row, gapless, &generation);
        rule.check(name)?;
        let skip = match rule {
            NumbersFence::Current => return Ok(true),
            NumbersFence::Record | NumbersFence::Refuse => 0,
            NumbersFence::Skip(n) => n,
        };
        self.write_numbers_fence(name, snap, skip, &generation)
            .await
            .map(|_| false)
    }

    /// Moves the snapshot's period counter forward by `skip` and records
    /// `generation` on the sequence, if nothing changed since the snapshot:
    /// `Some((before, after))`, or `None` after a lost race.
    async fn write_numbers_fence(
        &self,
        name: &str,
        snap: &Snapshot,
        skip: i64,
        generation: &str,
    ) -> Result<Option<(i64, i64)>> {
        let before = snap.next.0;
        let after = keysmith_core::driver::skip_counter(before, snap.row.max, skip);
        let epoch = self.epoch().await?;
        let row = SequenceRow {
            generation: Some(generation.to_owned()),
            failover_skipped: snap.row.failover_skipped.saturating_add(after - before),
            ..snap.row.clone()
        };
        let (mut when, mut ops) = self.base_compares(name, snap);
        when.push(self.next_compare(name, snap));
        when.push(self.epoch_compare(&epoch));
        ops.push(TxnOp::put(
            format!("{}next", self.period_prefix(name, snap.period)),
            after.to_string(),
            None,
        ));
        ops.extend(self.row_puts(&row)?);
        let resp = self
            .txn(
                "fence a numbered sequence",
                Txn::new().when(when).and_then(ops),
            )
            .await?;
        Ok(resp.succeeded().then_some((before, after)))
    }

    fn next_compare(&self, name: &str, snap: &Snapshot) -> Compare {
        let key = format!("{}next", self.period_prefix(name, snap.period));
        if snap.next.1 == 0 {
            Compare::version(key, CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(key, CompareOp::Equal, snap.next.1)
        }
    }

    fn revoke_soon(&self, id: i64) {
        if id == 0 {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move {
            let _ = store
                .call("revoke a ticket's lease", |mut c| async move {
                    c.lease_revoke(id).await
                })
                .await;
        });
    }
}

#[async_trait]
impl NumberStore for EtcdStore {
    async fn read_numbering(&self, name: &str) -> Result<Option<Numbering>> {
        let txn = Txn::new().and_then([
            TxnOp::get(self.seq_key(name), None),
            TxnOp::get(self.settings_key(name), None),
        ]);
        let resp = self.txn("read a sequence's numbering", txn).await?;
        let ops = resp.op_responses();
        if first_kv(&ops, 0)?.is_none() {
            return Ok(None);
        }
        first_kv(&ops, 1)?
            .map(|kv| {
                keysmith_core::driver::parse_numbering(name, &String::from_utf8_lossy(kv.value()))
            })
            .transpose()
    }

    async fn read_numbers(&self, name: &str) -> Result<Option<NumbersRead>> {
        // One read of the current period's keys (a transaction of gets).
        let snap = match self.snapshot(name, 0, true).await {
            Err(Error::NotFound { .. }) => return Ok(None),
            other => other?,
        };
        let released = snap.open.values().filter(|(t, _)| t.is_empty()).count();
        Ok(Some(NumbersRead {
            period: snap.period,
            // Mod revision 0: the period has no counter key yet.
            counter: (snap.next.1 != 0).then_some(snap.next.0),
            held: (snap.open.len() - released) as i64,
            released: released as i64,
        }))
    }

    async fn swap_numbering(&self, swap: &NumberingSwap<'_>) -> Result<bool> {
        let (old, new) = swap.json()?;
        let key = self.settings_key(swap.name);
        let txn = Txn::new()
            .when([Compare::value(key.clone(), CompareOp::Equal, old)])
            .and_then([TxnOp::put(key, new, None)]);
        Ok(self
            .txn("replace a sequence's numbering", txn)
            .await?
            .succeeded())
    }

    async fn create_numbered(
        &self,
        spec: &SequenceSpec,
        numbering: &Numbering,
    ) -> Result<SequenceRow> {
        let put = self.put_settings_op(&spec.name, numbering)?;
        self.create_with(spec, Some(numbering), put).await
    }

    async fn clock_ms(&self) -> Result<i64> {
        Ok(keysmith_core::driver::now_ms())
    }

    async fn reserve_numbers_in(
        &self,
        name: &str,
        period: i64,
        n: i64,
        incarnation: u64,
    ) -> Result<PeriodRange> {
        keysmith_core::driver::check_count("count", n)?;
        for _ in 0..ATTEMPTS {
            let snap = self.snapshot(name, period, false).await?;
            // The write compares the `seq` key's create revision read here:
            // the life checked is the one written in.
            snap.row.check_life(incarnation, "handle")?;
            if !self.numbers_current(name, &snap, false).await? {
                continue;
            }
            let r = SequenceRow {
                next: snap.next.0,
                ..snap.row.clone()
            }
            .plan(n)?;
            let (mut when, mut ops) = self.base_compares(name, &snap);
            when.push(self.next_compare(name, &snap));
            ops.push(TxnOp::put(
                format!("{}next", self.period_prefix(name, snap.period)),
                r.end.to_string(),
                None,
            ));
            let txn = Txn::new().when(when).and_then(ops);
            if self.txn("reserve numbers", txn).await?.succeeded() {
                return Ok(PeriodRange {
                    period: snap.period,
                    start: r.start,
                    end: r.end,
                });
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATTEMPTS,
        })
    }

    async fn take_ticket_checked(&self, take: &TicketTake<'_>) -> Result<TakenNumber> {
        let (name, period, token, ttl) = (take.name, take.period, take.token, take.ttl);
        let secs = ttl_secs(ttl);
        let mut lease = 0;
        for _ in 0..ATTEMPTS {
            let snap = self.snapshot(name, period, true).await?;
            snap.row.check_life(take.incarnation, "handle")?;
            if !self.numbers_current(name, &snap, true).await? {
                continue;
            }
            let pp = self.period_prefix(name, snap.period);
            let free = snap
                .open
                .iter()
                .find(|(v, _)| snap.held.binary_search(v).is_err())
                .map(|(v, (_, rev))| (*v, *rev));
            let (mut when, mut ops) = self.base_compares(name, &snap);
            let value = match free {
                Some((v, rev)) => {
                    when.push(Compare::mod_revision(
                        format!("{pp}open/{v:020}"),
                        CompareOp::Equal,
                        rev,
                    ));
                    v
                }
                None => {
                    let v = SequenceRow {
                        next: snap.next.0,
                        ..snap.row.clone()
                    }
                    .plan(1)?
                    .start;
                    when.push(self.next_compare(name, &snap));
                    ops.push(TxnOp::put(format!("{pp}next"), (v + 1).to_string(), None));
                    v
                }
            };
            let held = format!("{pp}held/{value:020}");
            when.push(Compare::version(held.clone(), CompareOp::Equal, 0));
            if lease == 0 {
                lease = self
                    .call("grant a ticket's lease", |mut c| async move {
                        c.lease_grant(secs, None).await
                    })
                    .await?
                    .id();
            }
            ops.push(TxnOp::put(format!("{pp}open/{value:020}"), token, None));
            ops.push(TxnOp::put(
                held,
                token,
                Some(PutOptions::new().with_lease(lease)),
            ));
            let txn = Txn::new().when(when).and_then(ops);
            match self.txn("take a ticket", txn).await {
                Ok(r) if r.succeeded() => {
                    return Ok(TakenNumber {
                        period: snap.period,
                        value,
                    });
                }
                Ok(_) => {}
                Err(e) => {
                    self.revoke_soon(lease);
                    return Err(e);
                }
            }
        }
        self.revoke_soon(lease);
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATTEMPTS,
        })
    }

    /// Commit (delete the open number) or release (empty its token) a number
    /// held by `token`, and let its lease go.
    async fn settle_ticket(&self, what: Settle, held: &HeldNumber<'_>) -> Result<()> {
        let (name, period, value, token) = (held.name, held.period, held.value, held.token);
        let pp = self.period_prefix(name, period);
        let (open, held) = (
            format!("{pp}open/{value:020}"),
            format!("{pp}held/{value:020}"),
        );
        let change = if what == Settle::Commit {
            TxnOp::delete(open.clone(), None)
        } else {
            TxnOp::put(open.clone(), "", None)
        };
        let txn = Txn::new()
            .when([Compare::value(open.clone(), CompareOp::Equal, token)])
            .and_then([
                TxnOp::get(held.clone(), None),
                TxnOp::delete(held, None),
                change,
            ])
            .or_else([TxnOp::get(self.seq_key(name), None), TxnOp::get(open, None)]);
        let resp = self.txn(&format!("{what} a ticket"), txn).await?;
        let ops = resp.op_responses();
        if resp.succeeded() {
            if let Some(kv) = first_kv(&ops, 0)? {
                self.revoke_soon(kv.lease());
            }
            return Ok(());
        }
        if first_kv(&ops, 0)?.is_none() {
            return Err(Error::not_found("sequence", name));
        }
        let h = first_kv(&ops, 1)?.map(|kv| String::from_utf8_lossy(kv.value()).into_owned());
        Err(refused(
            what,
            name,
            period,
            value,
            h.as_ref().map(|t| (!t.is_empty()).then_some(t.as_str())),
        ))
    }

    async fn fence_numbers(&self, name: &str, skip: i64) -> Result<(i64, i64, i64)> {
        for _ in 0..ATTEMPTS {
            let snap = self.snapshot(name, 0, false).await?;
            let generation = self.current_generation().await?;
            if let Some((before, after)) = self
                .write_numbers_fence(name, &snap, skip, &generation)
                .await?
            {
                return Ok((snap.period, before, after));
            }
        }
        Err(Error::Contention {
            name: name.to_owned(),
            attempts: ATTEMPTS,
        })
    }
}
