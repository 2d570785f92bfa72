//! What `keysmith top` shows: a snapshot of the names in use, with each
//! one's rate, runway and leader lease, and the orders it can be sorted in.
//!
//! [`snapshot`] reads it from a store; a client of the HTTP service reads the
//! same rows from the server's status (`keysmith-client`'s `Client::top`).
//! Front ends only draw the rows.

use serde::{Deserialize, Serialize};

use crate::Result;
use crate::store::Store;

/// How many names [`snapshot`] reads the usage of by default: each costs a
/// few store reads (the status page of the server reads as many).
pub const DEFAULT_TOP_NAMES: usize = 100;

/// What a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NameKind {
    /// A sequence (plain or numbered).
    Sequence,
    /// A value pool.
    Pool,
}

impl NameKind {
    /// The word front ends show.
    pub fn as_str(self) -> &'static str {
        match self {
            NameKind::Sequence => "sequence",
            NameKind::Pool => "pool",
        }
    }
}

/// The leader lease of a leader-ordered sequence as the store holds it
/// (its worker group `leader/NAME`, [`crate::sequence::leader::leader_group`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderLease {
    /// Who holds it (the holder text: the leader's advertised address
    /// first), while a live lease does and the store recorded it.
    pub holder: Option<String>,
    /// The fence of its last acquisition: the term; 0 when no process
    /// ever led.
    pub term: i64,
    /// How long the live lease has left, in ms by the store's clock;
    /// `None` when no live lease holds it (no leader now).
    pub expires_in_ms: Option<i64>,
}

impl LeaderLease {
    /// Whether a live lease holds it.
    pub fn held(&self) -> bool {
        self.expires_in_ms.is_some()
    }
}

/// One name of a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NameActivity {
    /// The name.
    pub name: String,
    /// A sequence or a pool.
    pub kind: NameKind,
    /// Values taken per second recently; `None` when not measured yet.
    pub rate_per_second: Option<f64>,
    /// Seconds until the name runs out at that rate; `None` without a rate
    /// (or at a rate of zero).
    pub runway_seconds: Option<f64>,
    /// Values left before the maximum (a sequence's values not yet
    /// reserved, a pool's numbers not yet taken); `None` when not read.
    pub remaining: Option<i64>,
    /// The leader lease of a leader-ordered sequence; `None` for any other.
    pub lease: Option<LeaderLease>,
}

/// The columns a snapshot can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// The busiest first (no rate last), then by name.
    #[default]
    Rate,
    /// By name, then by kind.
    Name,
    /// The shortest runway first (none last), then by name.
    Runway,
}

impl SortKey {
    /// The word front ends show.
    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Rate => "rate",
            SortKey::Name => "name",
            SortKey::Runway => "runway",
        }
    }
}

impl std::str::FromStr for SortKey {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<SortKey> {
        match s {
            "rate" => Ok(SortKey::Rate),
            "name" => Ok(SortKey::Name),
            "runway" => Ok(SortKey::Runway),
            other => Err(crate::Error::invalid(format!(
                "no column {other:?} to sort by: give rate, name or runway"
            ))),
        }
    }
}

/// Sorts `rows` by `key` (a total order: ties fall back to the name and
/// kind, so rows never swap places between two refreshes of equal values).
pub fn sort(rows: &mut [NameActivity], key: SortKey) {
    use std::cmp::Ordering;
    // `None` after every number; NaN (never produced) with them.
    fn some_first(a: Option<f64>, b: Option<f64>, desc: bool) -> Ordering {
        match (a.filter(|v| !v.is_nan()), b.filter(|v| !v.is_nan())) {
            (Some(x), Some(y)) if desc => y.total_cmp(&x),
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    }
    let by_name = |a: &NameActivity, b: &NameActivity| {
        a.name
            .cmp(&b.name)
            .then_with(|| a.kind.as_str().cmp(b.kind.as_str()))
    };
    rows.sort_by(|a, b| match key {
        SortKey::Rate => {
            some_first(a.rate_per_second, b.rate_per_second, true).then_with(|| by_name(a, b))
        }
        SortKey::Name => by_name(a, b),
        SortKey::Runway => {
            some_first(a.runway_seconds, b.runway_seconds, false).then_with(|| by_name(a, b))
        }
    });
}

/// The leader lease of sequence `name` if it is leader-ordered (`None` for
/// any other sequence, or one that is not there): one read of its
/// numbering, and for a leader-ordered one a listing of its lease's group.
///
/// # Errors
/// [`crate::Error::InvalidName`]; what the store fails with.
pub async fn leader_lease(store: &dyn Store, name: &str) -> Result<Option<LeaderLease>> {
    crate::validate_name(name)?;
    let leader = store
        .read_numbering(name)
        .await?
        .is_some_and(|n| n.is_leader());
    if !leader {
        return Ok(None);
    }
    let group = crate::sequence::leader::leader_group(name)?;
    let entries = store.list_workers(&group).await?;
    // The lease is the group's one worker id; the live entry if any.
    let entry = entries
        .iter()
        .find(|e| e.expires_in_ms.is_some())
        .or_else(|| entries.iter().max_by_key(|e| e.fence));
    Ok(Some(match entry {
        Some(e) => LeaderLease {
            holder: e.holder.clone(),
            term: e.fence,
            expires_in_ms: e.expires_in_ms,
        },
        None => LeaderLease {
            holder: None,
            term: 0,
            expires_in_ms: None,
        },
    }))
}

/// The names of `store` with their rates, runways and leader leases,
/// sorted by `key`. The sequences and the pools are listed in name order,
/// and the first `limit` of each read in full (a sequence's counts, its
/// numbering twice, and a leader-ordered one's lease; a pool's rate marks);
/// the rest are listed without a rate. Names dropped while it reads are
/// left out.
///
/// # Errors
/// What the store fails with.
pub async fn snapshot(store: &dyn Store, limit: usize, key: SortKey) -> Result<Vec<NameActivity>> {
    let mut rows = Vec::new();
    for (i, row) in store.list_sequences().await?.into_iter().enumerate() {
        if i >= limit {
            rows.push(NameActivity {
                remaining: Some(row.remaining()),
                name: row.name,
                kind: NameKind::Sequence,
                rate_per_second: None,
                runway_seconds: None,
                lease: None,
            });
            continue;
        }
        let Some(info) = crate::sequence::show_if_exists(store, &row.name).await? else {
            continue;
        };
        let usage = info.usage;
        rows.push(NameActivity {
            lease: leader_lease(store, &row.name).await?,
            rate_per_second: usage.and_then(|u| u.rate_per_second),
            runway_seconds: usage.and_then(|u| u.runway_seconds),
            remaining: Some(info.remaining),
            name: row.name,
            kind: NameKind::Sequence,
        });
    }
    for (i, row) in crate::pool::list(store).await?.into_iter().enumerate() {
        let info = if i < limit {
            match crate::pool::describe_if_exists(store, &row.name).await? {
                Some(info) => Some(info),
                None => continue,
            }
        } else {
            None
        };
        rows.push(NameActivity {
            rate_per_second: info.as_ref().and_then(|i| i.rate_per_second),
            runway_seconds: info.as_ref().and_then(|i| i.runway_seconds),
            remaining: info.as_ref().map(|i| i.remaining()),
            lease: None,
            name: row.name,
            kind: NameKind::Pool,
        });
    }
    sort(&mut rows, key);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequence::Sequence;
    use crate::store::memory::MemoryStore;
    use crate::store::{PoolSpec, SequenceSpec};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_leader_shows_in_its_stats_and_in_the_lease_top_reads() {
        use crate::sequence::{LeaderOptions, LeaderSequence, LeaderStats};
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        crate::sequence::create_leader(&*store, &SequenceSpec::new("ledger"))
            .await
            .unwrap();
        let open = || LeaderSequence::open(store.clone(), "ledger", LeaderOptions::default());
        let a = open().await.unwrap();
        let idle = LeaderStats {
            leading: false,
            terms_begun: 0,
            terms_lost: 0,
        };
        assert_eq!(a.stats(), idle);
        a.next_n(1).await.unwrap();
        assert_eq!(
            a.stats(),
            LeaderStats {
                leading: true,
                terms_begun: 1,
                ..idle
            }
        );
        let first = leader_lease(&*store, "ledger").await.unwrap().unwrap();
        assert!(first.held(), "{first:?}");
        assert_eq!(Some(first.term), a.term());
        a.close().await.unwrap();
        assert!(!a.stats().leading);

        // Released: the next handle begins a later term.
        let b = open().await.unwrap();
        b.next_n(1).await.unwrap();
        assert_eq!(b.stats().terms_begun, 1);
        let second = leader_lease(&*store, "ledger").await.unwrap().unwrap();
        assert!(second.held() && second.term > first.term, "{second:?}");
        b.close().await.unwrap();
        // Not leader-ordered, or not there: no lease.
        assert_eq!(leader_lease(&*store, "nothing").await.unwrap(), None);
    }

    fn row(name: &str, rate: Option<f64>, runway: Option<f64>) -> NameActivity {
        NameActivity {
            name: name.into(),
            kind: NameKind::Sequence,
            rate_per_second: rate,
            runway_seconds: runway,
            remaining: None,
            lease: None,
        }
    }

    fn names(rows: &[NameActivity]) -> Vec<&str> {
        rows.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn each_key_sorts_its_column_with_the_unmeasured_last() {
        let mut rows = vec![
            row("b", Some(5.0), Some(100.0)),
            row("a", None, None),
            row("c", Some(50.0), Some(10.0)),
            row("d", Some(5.0), None),
        ];
        sort(&mut rows, SortKey::Rate);
        assert_eq!(names(&rows), ["c", "b", "d", "a"]);
        sort(&mut rows, SortKey::Name);
        assert_eq!(names(&rows), ["a", "b", "c", "d"]);
        sort(&mut rows, SortKey::Runway);
        assert_eq!(names(&rows), ["c", "b", "a", "d"]);
    }

    #[test]
    fn sort_keys_parse_from_their_words_and_refuse_others() {
        for k in [SortKey::Rate, SortKey::Name, SortKey::Runway] {
            assert_eq!(k.as_str().parse::<SortKey>().unwrap(), k);
        }
        let e = "speed".parse::<SortKey>().unwrap_err().to_string();
        assert!(e.contains("rate, name or runway"), "{e}");
    }

    #[tokio::test]
    async fn a_snapshot_lists_sequences_and_pools_with_what_they_have_left() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let orders = SequenceSpec {
            start: 1,
            max: 1000,
            ..SequenceSpec::new("orders")
        };
        crate::sequence::create(&*store, &orders).await.unwrap();
        crate::sequence::create_leader(&*store, &SequenceSpec::new("tickets"))
            .await
            .unwrap();
        crate::pool::create(&*store, &PoolSpec::new("seats", 10))
            .await
            .unwrap();
        let seq = Sequence::builder()
            .store(store.clone())
            .name("orders")
            .block(10)
            .build()
            .await
            .unwrap();
        seq.next().await.unwrap();
        seq.close().await.unwrap();

        let rows = snapshot(&*store, DEFAULT_TOP_NAMES, SortKey::Name)
            .await
            .unwrap();
        assert_eq!(names(&rows), ["orders", "seats", "tickets"]);
        let orders = &rows[0];
        assert_eq!(orders.kind, NameKind::Sequence);
        assert_eq!(orders.remaining, Some(999), "{orders:?}");
        assert_eq!(orders.lease, None);
        assert_eq!(rows[1].kind, NameKind::Pool);
        assert_eq!(
            rows[1].remaining.map(|r| r > 0),
            Some(true),
            "{:?}",
            rows[1]
        );
        // A leader-ordered sequence no process led yet: a lease, not held.
        let lease = rows[2].lease.as_ref().expect("a leader lease");
        assert!(!lease.held(), "{lease:?}");

        // Past the limit: listed, not read.
        let rows = snapshot(&*store, 0, SortKey::Name).await.unwrap();
        assert_eq!(names(&rows), ["orders", "seats", "tickets"]);
        assert!(
            rows.iter()
                .all(|r| r.rate_per_second.is_none() && r.lease.is_none())
        );
    }
}
