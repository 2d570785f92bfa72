//! Leases: blocks reserved for a caller in another process (a client of the
//! HTTP service), which hands the values out itself.
//!
//! A [`Lease`] is one reservation, made with the same strategies and retry
//! budget as a [`super::Sequence`]'s blocks: durable before it is returned,
//! never handed to anyone else. [`release`] hands its unused tail back under
//! the rule of [`super::Sequence::close`]: only if no one reserved since (a
//! conditional put on the version the lease left behind); otherwise the tail
//! stays a gap.
//!
//! A caller outside the process holds a lease as a token ([`LeaseKey::seal`]),
//! signed with HMAC-SHA-256, so a token cannot be forged or edited to hand
//! back values that were never leased.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::high_water::HighWater;
use super::strategy::Allocator;
use super::{Strategy, describe};
use crate::store::{CountsDelta, Put, SequenceStore, Store, check_count};
use crate::{Error, Result};

/// One reservation held by a caller outside this process: the values
/// `start, start + step, ...` below `end` of sequence `name`, and the row
/// version it left behind. `step` is 1 but for a sequence whose values are
/// a residue class, where it is the class's increment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The sequence.
    pub name: String,
    /// First value (inclusive).
    pub start: i64,
    /// One past the last value.
    pub end: i64,
    /// The row's version right after the reservation.
    pub version: u64,
    /// The distance between two values of the lease.
    pub step: i64,
}

impl Lease {
    /// How many values the lease holds.
    pub fn len(&self) -> i64 {
        self.slot(self.end - 1) + 1 - self.slot(self.start)
    }

    /// Whether it holds none (never, for a lease [`lease`] made).
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// The slot (the store's counter) of value `v` of the lease.
    fn slot(&self, v: i64) -> i64 {
        let step = self.step.max(1);
        (v - self.start.rem_euclid(step)).div_euclid(step)
    }
}

/// Reserves up to `n` values of `name` for a caller outside this process
/// (fewer only near the maximum), durably, with `strategy`, retrying lost
/// races for up to `retry_budget`.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad `n`; [`Error::NotFound`] (with
/// similar names); [`Error::Exhausted`]; [`Error::Contention`] when the
/// budget is spent; what the store fails with.
pub async fn lease(
    store: Arc<dyn Store>,
    name: &str,
    n: i64,
    strategy: Strategy,
    retry_budget: Duration,
) -> Result<Lease> {
    lease_guarded(store, name, n, strategy, retry_budget, Arc::default()).await
}

/// [`lease`], checked against the ranges this process reserved of the
/// sequence before (`high_water`, shared with its handle: see
/// [`HighWater`]): a store that went back is refused.
///
/// # Errors
/// As [`lease`], and [`Error::StoreWentBack`].
pub async fn lease_guarded(
    store: Arc<dyn Store>,
    name: &str,
    n: i64,
    strategy: Strategy,
    retry_budget: Duration,
    high_water: Arc<HighWater>,
) -> Result<Lease> {
    check_count("count", n)?;
    let row = describe(&*store, name).await?;
    let residue = super::blocks_of(&*store, name).await?;
    let alloc = Allocator::new(store.clone(), row, strategy, retry_budget, None, high_water);
    let r = alloc.reserve(n).await?;
    // The values leave this process: for the sequence's counts they are
    // handed out (in the background: the lease does not wait for it).
    count_in_background(
        store,
        name,
        CountsDelta {
            handed_out: r.len(),
            ..CountsDelta::default()
        },
    );
    Ok(match residue {
        None => Lease {
            name: name.to_owned(),
            start: r.start,
            end: r.end,
            version: r.version,
            step: 1,
        },
        // A reservation holds at least one value.
        Some(c) => Lease {
            name: name.to_owned(),
            start: c.value(r.start),
            end: c.value(r.end - 1) + 1,
            version: r.version,
            step: c.increment,
        },
    })
}

/// Hands `from..lease.end` back to the sequence if no one reserved since the
/// lease was made; returns the range handed back, or `None` when someone did
/// (the values stay a gap, never handed out again). The caller must not have
/// handed out any value from `from` on.
///
/// # Errors
/// [`Error::InvalidArgument`] when `from` is outside the lease;
/// [`Error::NotFound`] if the sequence is gone; what the store fails with.
pub async fn release(
    store: &dyn SequenceStore,
    lease: &Lease,
    from: i64,
) -> Result<Option<Range<i64>>> {
    release_guarded(store, lease, from, &HighWater::new()).await
}

/// [`release`], lowering `high_water` (see [`lease_guarded`]) when the
/// values go back.
///
/// # Errors
/// As [`release`].
pub async fn release_guarded(
    store: &dyn SequenceStore,
    lease: &Lease,
    from: i64,
    high_water: &HighWater,
) -> Result<Option<Range<i64>>> {
    if !(lease.start..lease.end).contains(&from) {
        return Err(Error::invalid(format!(
            "from must be inside the lease {}..{} of {:?}, got {from}",
            lease.start, lease.end, lease.name
        )));
    }
    if (from - lease.start).rem_euclid(lease.step.max(1)) != 0 {
        return Err(Error::invalid(format!(
            "from must be a value of the lease {}..{} of {:?} (every {}th from {}), got {from}",
            lease.start, lease.end, lease.name, lease.step, lease.start
        )));
    }
    // The store counts slots; a lease of step 1 is its own slots.
    let (slot_from, slot_end) = (lease.slot(from), lease.slot(lease.end - 1) + 1);
    match high_water
        .hand_back(store, &lease.name, slot_from, lease.version)
        .await?
    {
        Put::Done(_) => {
            let back = slot_end - slot_from;
            let delta = CountsDelta {
                handed_back: back,
                handed_out: -back,
                ..CountsDelta::default()
            };
            record(store, &lease.name, delta).await;
            Ok(Some(from..lease.end))
        }
        Put::Conflict(_) => {
            let gap = slot_end - slot_from;
            let delta = CountsDelta {
                abandoned: gap,
                handed_out: -gap,
                ..CountsDelta::default()
            };
            record(store, &lease.name, delta).await;
            Ok(None)
        }
    }
}

/// Records `delta` in the sequence's counts, best effort: a count not
/// recorded only shows as unaccounted.
async fn record(store: &dyn SequenceStore, name: &str, delta: CountsDelta) {
    if let Err(e) = store.record_counts(name, &delta, super::now_ms()).await {
        tracing::warn!(sequence = %name, "counts not recorded: {e}");
    }
}

/// [`record`] in a task of its own.
fn count_in_background(store: Arc<dyn SequenceStore>, name: &str, delta: CountsDelta) {
    let name = name.to_owned();
    tokio::spawn(async move { record(&*store, &name, delta).await });
}

type HmacSha256 = Hmac<Sha256>;

/// The key that signs lease tokens. A token opens only with the key that
/// sealed it: give every server behind one load balancer the same key (see
/// [`LeaseKey::new`]), or releases sent to another server are refused.
#[derive(Clone)]
pub struct LeaseKey(HmacSha256);

impl std::fmt::Debug for LeaseKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeaseKey(..)")
    }
}

impl LeaseKey {
    /// The shortest secret accepted.
    pub const MIN_BYTES: usize = 16;

    /// A key from secret bytes (at least [`Self::MIN_BYTES`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the secret is too short.
    pub fn new(secret: &[u8]) -> Result<LeaseKey> {
        if secret.len() < Self::MIN_BYTES {
            return Err(Error::invalid(format!(
                "a lease secret must be at least {} bytes, this one is {}",
                Self::MIN_BYTES,
                secret.len()
            )));
        }
        // Domain separation: the same secret may sign other things.
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(secret)
            .map_err(|e| Error::invalid(format!("lease secret: {e}")))?;
        m.update(b"keysmith lease key v1");
        let derived = m.finalize().into_bytes();
        let mac = <HmacSha256 as KeyInit>::new_from_slice(&derived)
            .map_err(|e| Error::invalid(format!("lease secret: {e}")))?;
        Ok(LeaseKey(mac))
    }

    /// The key in `$KEYSMITH_LEASE_SECRET` (its UTF-8 bytes), if set.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if it is set but too short or not Unicode.
    pub fn from_env() -> Result<Option<LeaseKey>> {
        match std::env::var("KEYSMITH_LEASE_SECRET") {
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid(
                "KEYSMITH_LEASE_SECRET is not valid Unicode; use printable text such as base64",
            )),
            Ok(s) => LeaseKey::new(s.as_bytes())
                .map(Some)
                .map_err(|e| Error::invalid(format!("KEYSMITH_LEASE_SECRET: {e}"))),
        }
    }

    /// A key of 32 random bytes: tokens open only in this process.
    pub fn random() -> LeaseKey {
        let bytes: [u8; 32] = rand::random();
        LeaseKey::new(&bytes).expect("32 bytes is long enough")
    }

    /// The token of `lease`: URL-safe base64 of its fields and a 128-bit
    /// signature.
    pub fn seal(&self, lease: &Lease) -> String {
        let mut body = format!(
            "{}\n{}\n{}\n{}",
            lease.name, lease.start, lease.end, lease.version
        );
        // Tokens of ordinary leases stay as they were.
        if lease.step != 1 {
            body.push_str(&format!("\n{}", lease.step));
        }
        let tag = self.tag(body.as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(body.as_bytes()),
            URL_SAFE_NO_PAD.encode(&tag[..16])
        )
    }

    /// The lease a token describes, if this key sealed it for sequence `name`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a token that is malformed, edited,
    /// sealed by another key, or made for another sequence.
    pub fn open(&self, name: &str, token: &str) -> Result<Lease> {
        let bad = || {
            Error::invalid(
                "invalid lease token: give back the token a reserve call of this server returned, unchanged (a token from another server or from before a restart opens only with a shared lease secret)",
            )
        };
        let (body, tag) = token.split_once('.').ok_or_else(bad)?;
        let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| bad())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| bad())?;
        let want = self.tag(&body);
        if tag.len() != 16 || !constant_time_eq(&tag, &want[..16]) {
            return Err(bad());
        }
        let text = String::from_utf8(body).map_err(|_| bad())?;
        let mut parts = text.split('\n');
        let (Some(n), Some(s), Some(e), Some(v), step, None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad());
        };
        let step = match step {
            None => 1,
            Some(t) => t.parse().ok().filter(|t: &i64| *t >= 2).ok_or_else(bad)?,
        };
        if n != name {
            return Err(Error::invalid(format!(
                "this lease token is for sequence {n:?}, not {name:?}"
            )));
        }
        Ok(Lease {
            name: n.to_owned(),
            start: s.parse().map_err(|_| bad())?,
            end: e.parse().map_err(|_| bad())?,
            version: v.parse().map_err(|_| bad())?,
            step,
        })
    }

    /// `body` as a token of kind `domain` (other than sequence leases):
    /// URL-safe base64 of the body and a 128-bit signature over the domain
    /// and the body, so a token of one kind never opens as another.
    pub(crate) fn seal_text(&self, domain: &str, body: &str) -> String {
        let tag = self.tag(&domained(domain, body.as_bytes()));
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(body.as_bytes()),
            URL_SAFE_NO_PAD.encode(&tag[..16])
        )
    }

    /// The body of a token [`LeaseKey::seal_text`] made for `domain` with
    /// this key, or `None` for a token malformed, edited, of another kind
    /// or sealed by another key.
    pub(crate) fn open_text(&self, domain: &str, token: &str) -> Option<String> {
        let (body, tag) = token.split_once('.')?;
        let body = URL_SAFE_NO_PAD.decode(body).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let want = self.tag(&domained(domain, &body));
        if tag.len() != 16 || !constant_time_eq(&tag, &want[..16]) {
            return None;
        }
        String::from_utf8(body).ok()
    }

    fn tag(&self, body: &[u8]) -> [u8; 32] {
        let mut m = self.0.clone();
        m.update(body);
        m.finalize().into_bytes().into()
    }
}

/// `domain`, a NUL, `body`: what a token of a kind other than sequence
/// leases is signed over. A sequence lease's body starts with its name,
/// which holds no NUL, so the two never sign the same bytes.
fn domained(domain: &str, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(domain.len() + 1 + body.len());
    v.extend_from_slice(domain.as_bytes());
    v.push(0);
    v.extend_from_slice(body);
    v
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Lease {
        Lease {
            name: "example.com/a#main".into(),
            start: 100,
            end: 200,
            version: 7,
            step: 1,
        }
    }

    #[test]
    fn a_token_opens_with_its_key_only() {
        let k = LeaseKey::random();
        let t = k.seal(&sample());
        assert_eq!(k.open("example.com/a#main", &t).unwrap(), sample());
        assert!(LeaseKey::random().open("example.com/a#main", &t).is_err());
        assert!(
            k.open("other", &t)
                .unwrap_err()
                .to_string()
                .contains("not \"other\"")
        );
    }

    #[test]
    fn every_edit_of_a_token_is_refused() {
        let k = LeaseKey::new(b"a shared secret, long enough").unwrap();
        let t = k.seal(&sample());
        for i in 0..t.len() {
            for c in ['A', 'x', '0', '-', '.'] {
                let mut e: Vec<char> = t.chars().collect();
                if e[i] == c {
                    continue;
                }
                e[i] = c;
                let edited: String = e.into_iter().collect();
                assert!(
                    k.open("example.com/a#main", &edited).is_err(),
                    "{edited} opened"
                );
            }
        }
        assert!(k.open("example.com/a#main", &t[..t.len() - 1]).is_err());
        assert!(k.open("example.com/a#main", "").is_err());
    }

    #[test]
    fn short_secrets_are_refused() {
        assert!(LeaseKey::new(b"short").is_err());
    }

    #[tokio::test]
    async fn release_hands_the_tail_back_only_if_no_one_reserved_since() {
        let store: Arc<dyn Store> = Arc::new(crate::store::memory::MemoryStore::new());
        crate::sequence::create(&*store, &crate::store::SequenceSpec::new("s"))
            .await
            .unwrap();
        let budget = Duration::from_secs(1);
        let a = lease(store.clone(), "s", 10, Strategy::Atomic, budget)
            .await
            .unwrap();
        assert_eq!((a.start, a.end), (1, 11));
        assert!(release(&*store, &a, 11).await.is_err(), "outside the lease");
        assert!(release(&*store, &a, 0).await.is_err(), "outside the lease");
        assert_eq!(release(&*store, &a, 4).await.unwrap(), Some(4..11));
        // Released twice: the version moved, nothing changes.
        assert_eq!(release(&*store, &a, 4).await.unwrap(), None);
        let b = lease(store.clone(), "s", 10, Strategy::Optimistic, budget)
            .await
            .unwrap();
        assert_eq!((b.start, b.end), (4, 14));
        let c = lease(store.clone(), "s", 5, Strategy::Locked, budget)
            .await
            .unwrap();
        assert_eq!(
            release(&*store, &b, 10).await.unwrap(),
            None,
            "c reserved since"
        );
        assert_eq!(c.start, 14);
        assert!(matches!(
            lease(store.clone(), "nope", 1, Strategy::Atomic, budget).await,
            Err(Error::NotFound { .. })
        ));
    }
}
