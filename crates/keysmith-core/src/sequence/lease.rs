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
use crate::secrets::{Kind, SecretKeys};
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
    /// The life of the name the lease was made in
    /// ([`crate::store::SequenceRow::incarnation`]; 0 when unknown: a token
    /// sealed before keysmith recorded lives). A release into another life
    /// fails with [`Error::Dropped`] and changes nothing.
    pub incarnation: u64,
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
            incarnation: r.incarnation,
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
            incarnation: r.incarnation,
        },
        // A reservation holds at least one value.
        Some(c) => Lease {
            name: name.to_owned(),
            start: c.value(r.start),
            end: c.value(r.end - 1) + 1,
            version: r.version,
            step: c.increment,
            incarnation: r.incarnation,
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
/// [`Error::NotFound`] if the sequence is gone; [`Error::Dropped`] if it was
/// dropped and created again since the lease was made (nothing written:
/// the lease's version is of an earlier life, and no version repeats
/// across lives); what the store fails with.
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
                incarnation: lease.incarnation,
                ..CountsDelta::default()
            };
            record(store, &lease.name, delta).await;
            Ok(Some(from..lease.end))
        }
        Put::Conflict(current) => {
            // A lease of an earlier life: its counts went with that life.
            if lease.incarnation != 0 {
                current.check_life(lease.incarnation, "lease")?;
            } else if current.incarnation > lease.version {
                // A token from before lives were sealed in: every version
                // of a later life is above the lease's.
                current.check_life(u64::MAX, "lease")?;
            }
            let gap = slot_end - slot_from;
            let delta = CountsDelta {
                abandoned: gap,
                handed_out: -gap,
                incarnation: lease.incarnation,
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

/// The keys that sign and open lease tokens: the newest signs, every one
/// opens, so tokens sealed before a rotation keep opening while their key
/// stays listed (see [`crate::secrets`] for the file format). A token opens
/// only with a key that sealed it: give every server behind one load
/// balancer the same keys (see [`LeaseKey::new`], [`LeaseKey::from_file`]),
/// or releases sent to another server are refused. Its `Debug` form shows
/// the key ids only.
#[derive(Clone)]
pub struct LeaseKey {
    /// Oldest first; the last signs. Never empty.
    keys: Vec<(String, HmacSha256)>,
}

impl std::fmt::Debug for LeaseKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LeaseKey").field(&self.ids()).finish()
    }
}

/// Lease secrets as key lists.
const KIND: Kind = Kind {
    what: "lease secret",
    min_bytes: LeaseKey::MIN_BYTES,
};

impl LeaseKey {
    /// The shortest secret accepted.
    pub const MIN_BYTES: usize = 16;

    /// One key (id [`crate::secrets::SINGLE_KEY_ID`]) from secret bytes (at
    /// least [`Self::MIN_BYTES`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the secret is too short.
    pub fn new(secret: &[u8]) -> Result<LeaseKey> {
        Self::from_keys(&SecretKeys::single(secret.to_vec(), KIND)?)
    }

    /// The keys in `text`, a key list or one bare secret in the format of
    /// [`crate::secrets`]; the last key signs, every key opens.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the line and what is wrong with it
    /// (never showing a secret): a line not `KEY_ID:SECRET`, a secret
    /// shorter than [`Self::MIN_BYTES`], an id or secret used twice, no key,
    /// more than [`crate::secrets::MAX_KEYS`].
    pub fn parse(text: &[u8]) -> Result<LeaseKey> {
        Self::from_keys(&SecretKeys::parse(text, KIND)?)
    }

    /// The keys in the file at `path`, as [`Self::parse`]. Read it again
    /// after editing the file to rotate.
    ///
    /// # Errors
    /// As [`Self::parse`], naming the file, or when it cannot be read.
    pub fn from_file(path: &std::path::Path) -> Result<LeaseKey> {
        Self::from_keys(&SecretKeys::from_file(path, KIND)?)
    }

    fn from_keys(keys: &SecretKeys) -> Result<LeaseKey> {
        let keys = keys
            .keys()
            .iter()
            .map(|k| Ok((k.id.clone(), derive(&k.secret)?)))
            .collect::<Result<_>>()?;
        Ok(LeaseKey { keys })
    }

    /// The key ids, oldest first: the last one signs.
    pub fn ids(&self) -> Vec<String> {
        self.keys.iter().map(|(id, _)| id.clone()).collect()
    }

    /// The one key `$KEYSMITH_LEASE_SECRET` holds (its UTF-8 bytes, a bare
    /// secret, never a list), if set.
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
    /// signature by the newest key.
    pub fn seal(&self, lease: &Lease) -> String {
        let mut body = format!(
            "{}\n{}\n{}\n{}",
            lease.name, lease.start, lease.end, lease.version
        );
        // The step, then the life, each only when needed: tokens of an
        // ordinary lease of a name never dropped stay as they were.
        if lease.step != 1 || lease.incarnation > 1 {
            body.push_str(&format!("\n{}", lease.step));
        }
        if lease.incarnation > 1 {
            body.push_str(&format!("\n{}", lease.incarnation));
        }
        let tag = self.tag(body.as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(body.as_bytes()),
            URL_SAFE_NO_PAD.encode(&tag[..16])
        )
    }

    /// The lease a token describes, if one of these keys sealed it for
    /// sequence `name`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a token that is malformed, edited,
    /// sealed by a key not listed here (another, or one since removed), or
    /// made for another sequence.
    pub fn open(&self, name: &str, token: &str) -> Result<Lease> {
        let bad = || {
            Error::invalid(
                "invalid lease token: give back the token a reserve call of this server returned, unchanged \
                 (a token from another server or from before a restart opens only with a shared lease secret, \
                 and one signed with a key since removed from the lease secret file no longer opens)",
            )
        };
        let (body, tag) = token.split_once('.').ok_or_else(bad)?;
        let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| bad())?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| bad())?;
        if !self.verifies(&body, &tag) {
            return Err(bad());
        }
        let text = String::from_utf8(body).map_err(|_| bad())?;
        let mut parts = text.split('\n');
        let (Some(n), Some(s), Some(e), Some(v), step, life, None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad());
        };
        let step = match (step, life) {
            (None, _) => 1,
            // Written beside a life even when it is 1.
            (Some(t), Some(_)) => t.parse().ok().filter(|t: &i64| *t >= 1).ok_or_else(bad)?,
            (Some(t), None) => t.parse().ok().filter(|t: &i64| *t >= 2).ok_or_else(bad)?,
        };
        let incarnation = match life {
            None => 1,
            Some(l) => l.parse().ok().filter(|l: &u64| *l >= 2).ok_or_else(bad)?,
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
            incarnation,
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
    /// one of these keys, or `None` for a token malformed, edited, of another
    /// kind or sealed by a key not listed.
    pub(crate) fn open_text(&self, domain: &str, token: &str) -> Option<String> {
        let (body, tag) = token.split_once('.')?;
        let body = URL_SAFE_NO_PAD.decode(body).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        if !self.verifies(&domained(domain, &body), &tag) {
            return None;
        }
        String::from_utf8(body).ok()
    }

    /// The signature of `body` by the newest key.
    fn tag(&self, body: &[u8]) -> [u8; 32] {
        let (_, newest) = self.keys.last().expect("a LeaseKey has a key");
        tag_with(newest, body)
    }

    /// Whether `tag` is the 128-bit signature of `body` by any key, the
    /// newest tried first.
    fn verifies(&self, body: &[u8], tag: &[u8]) -> bool {
        tag.len() == 16
            && self
                .keys
                .iter()
                .rev()
                .any(|(_, mac)| constant_time_eq(tag, &tag_with(mac, body)[..16]))
    }
}

fn tag_with(mac: &HmacSha256, body: &[u8]) -> [u8; 32] {
    let mut m = mac.clone();
    m.update(body);
    m.finalize().into_bytes().into()
}

/// The MAC of lease tokens of `secret`, kept apart (by a derived key) from
/// whatever else the same secret may sign.
fn derive(secret: &[u8]) -> Result<HmacSha256> {
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(secret)
        .map_err(|e| Error::invalid(format!("lease secret: {e}")))?;
    m.update(b"keysmith lease key v1");
    let derived = m.finalize().into_bytes();
    <HmacSha256 as KeyInit>::new_from_slice(&derived)
        .map_err(|e| Error::invalid(format!("lease secret: {e}")))
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
            incarnation: 1,
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
    fn tokens_of_a_listed_key_open_after_a_rotation_and_not_after_its_removal() {
        let (a, b) = ("first secret, long enough", "second secret, long enough");
        let k1 = LeaseKey::new(a.as_bytes()).unwrap();
        let both = LeaseKey::parse(format!("# rotation\nk1:{a}\nk2:{b}\n").as_bytes()).unwrap();
        let k2 = LeaseKey::parse(format!("k2:{b}").as_bytes()).unwrap();
        assert_eq!(both.ids(), ["k1", "k2"]);
        assert!(!format!("{both:?}").contains("secret"), "{both:?}");
        let old = k1.seal(&sample());
        let new = both.seal(&sample());
        assert_ne!(old, new, "the newest key signs");
        assert_eq!(both.open("example.com/a#main", &old).unwrap(), sample());
        assert_eq!(both.open("example.com/a#main", &new).unwrap(), sample());
        assert_eq!(k2.open("example.com/a#main", &new).unwrap(), sample());
        assert!(k1.open("example.com/a#main", &new).is_err());
        let e = k2.open("example.com/a#main", &old).unwrap_err().to_string();
        assert!(e.contains("key since removed"), "{e}");
        // Worker-lease tokens alike.
        let t = k1.seal_text("d", "body");
        assert_eq!(both.open_text("d", &t).as_deref(), Some("body"));
        assert_eq!(k2.open_text("d", &t), None);
        assert_eq!(
            k2.open_text("d", &both.seal_text("d", "x")).as_deref(),
            Some("x")
        );
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
