//! Opaque values: a sequence whose values are a keyed permutation of its
//! internal counter, so that the ids handed out show neither their order
//! nor how many were handed out, while the store keeps a plain counter and
//! values stay unique by construction.
//!
//! # The permutation
//!
//! A balanced Feistel network over `2h` bits (the smallest even width that
//! holds the domain), [`FEISTEL_ROUNDS`] rounds, whose round function is
//! SipHash-2-4 (a keyed pseudo-random function with a 128-bit key) of the
//! round number, the right half and the domain size. A Feistel network is a
//! permutation of `0..2^2h` whatever its round function; *cycle-walking*
//! (applying it again while the result is outside the domain) makes it a
//! permutation of exactly `0..n` (fewer than four steps on average, since
//! `2^2h < 4n`). Why not FF1 or FF3-1 (NIST SP 800-38G): both encrypt digit
//! strings with AES and work through a radix, which we do not need for
//! integers; FF3-1 has known small-domain attacks and FF1 is several times
//! the cost. With 10 rounds a Feistel network is a pseudo-random permutation
//! for an attacker who sees far fewer than `2^h` values; a tiny range (a few
//! thousand values) hides order only weakly, whatever the construction.
//!
//! # Keys and rotation
//!
//! The value range `1..=value_max` is cut into [`KEY_SLOTS`] equal slots of
//! `S = value_max / KEY_SLOTS` values; key `k` (its id, `0..KEY_SLOTS`)
//! owns slot `k` and maps counter `c` (`0 <= c < S`) to
//! `1 + k * S + P_k(c)`, `P_k` the permutation of `0..S` under key `k`'s
//! secret. Values are unique by construction: counters are unique (the
//! store hands each out once), each `P_k` is a bijection, and two keys'
//! values lie in disjoint slots, so even a process still using an older
//! key after a rotation never collides with one using the newer. The price:
//! the counter runs to `S - 1`, a sixteenth of the range, and the slot (the
//! key id) is visible in a value, which tells only which key made it.
//!
//! The secret is created from the operating system's random generator with
//! the sequence and lives in the store beside it (the sequence's numbering).
//! It never leaves the library: [`KeySecret`]'s `Debug` form hides it, and
//! [`super::Numbering::public`], which the front ends show, leaves it out.

use std::fmt;

use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher24;

use crate::{Error, Result};

/// How many keys a sequence can have over its life: the value range is cut
/// into this many slots, one per key.
pub const KEY_SLOTS: i64 = 16;

/// Rounds of the Feistel network (at least 8 are advised for a
/// pseudo-random permutation from a pseudo-random function).
pub const FEISTEL_ROUNDS: u8 = 10;

/// The smallest `value_max` an opaque sequence can have: one value a slot.
pub const MIN_OPAQUE_MAX: i64 = KEY_SLOTS;

/// A 128-bit key of the permutation. Its `Debug` form hides it; it has no
/// `Display`. Serialized (for the store only) as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeySecret([u8; 16]);

impl KeySecret {
    /// A new key from the operating system's random generator.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the operating system gives no random
    /// bytes.
    pub fn random() -> Result<KeySecret> {
        let mut k = [0u8; 16];
        getrandom::fill(&mut k).map_err(|e| {
            Error::Unavailable(format!(
                "the operating system's random generator failed ({e}); no key was made"
            ))
        })?;
        Ok(KeySecret(k))
    }

    /// A key from its bytes: for tests and benchmarks.
    pub fn from_bytes(bytes: [u8; 16]) -> KeySecret {
        KeySecret(bytes)
    }
}

impl fmt::Debug for KeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySecret(<hidden>)")
    }
}

impl Serialize for KeySecret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&hex)
    }
}

impl<'de> Deserialize<'de> for KeySecret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<KeySecret, D::Error> {
        let s = String::deserialize(d)?;
        let bad = || serde::de::Error::custom("an opaque key is 32 hex digits");
        if s.len() != 32 || !s.is_ascii() {
            return Err(bad());
        }
        let mut k = [0u8; 16];
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(KeySecret(k))
    }
}

/// One key of an opaque sequence: its id (its slot), the first counter it
/// serves, and its secret (absent in the public view).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpaqueKey {
    /// The key id, `0..KEY_SLOTS`: the slot of the value range it maps into.
    pub id: u32,
    /// The first counter it serves (the sequence's next counter when the
    /// key was made).
    pub from: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<KeySecret>,
}

impl OpaqueKey {
    /// A new key with a random secret.
    ///
    /// # Errors
    /// As [`KeySecret::random`].
    pub fn random(id: u32, from: i64) -> Result<OpaqueKey> {
        Ok(OpaqueKey {
            id,
            from,
            secret: Some(KeySecret::random()?),
        })
    }

    /// A key with a given secret: for tests and benchmarks.
    pub fn with_secret(id: u32, from: i64, secret: KeySecret) -> OpaqueKey {
        OpaqueKey {
            id,
            from,
            secret: Some(secret),
        }
    }

    /// Whether it carries its secret (the store's copy does; the public
    /// view does not).
    pub fn has_secret(&self) -> bool {
        self.secret.is_some()
    }

    /// The same key without its secret.
    pub fn public(&self) -> OpaqueKey {
        OpaqueKey {
            secret: None,
            ..self.clone()
        }
    }
}

/// The opaque setting of a sequence, kept in its numbering.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Opaque {
    /// The largest value handed out (values are `1..=value_max`); set by
    /// [`crate::numbers::create`] from the sequence's max.
    #[serde(default)]
    pub value_max: i64,
    /// The keys, oldest first; the last one maps new counters. Made by
    /// [`crate::numbers::create`].
    #[serde(default)]
    pub keys: Vec<OpaqueKey>,
}

impl Opaque {
    /// The number of values per key slot: `value_max / KEY_SLOTS`.
    pub fn slot_size(value_max: i64) -> i64 {
        value_max / KEY_SLOTS
    }

    /// The largest counter an opaque sequence with values up to
    /// `value_max` can use: `slot_size - 1`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `value_max` below [`MIN_OPAQUE_MAX`].
    pub fn counter_max(value_max: i64) -> Result<i64> {
        if value_max < MIN_OPAQUE_MAX {
            return Err(Error::invalid(format!(
                "an opaque sequence needs a max of at least {MIN_OPAQUE_MAX} (one value for each of its {KEY_SLOTS} key slots), got {value_max}"
            )));
        }
        Ok(Self::slot_size(value_max) - 1)
    }

    /// The setting without its secrets: what may be shown.
    pub fn public(&self) -> Opaque {
        Opaque {
            value_max: self.value_max,
            keys: self.keys.iter().map(OpaqueKey::public).collect(),
        }
    }

    /// The setting with one more key, serving counters from `from` on.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when all [`KEY_SLOTS`] keys are used.
    pub fn rotated(&self, from: i64) -> Result<Opaque> {
        let id = self.keys.len() as u32;
        if i64::from(id) >= KEY_SLOTS {
            return Err(Error::invalid(format!(
                "this opaque sequence has used all of its {KEY_SLOTS} keys; no more rotations are possible (create a new sequence)"
            )));
        }
        let mut keys = self.keys.clone();
        keys.push(OpaqueKey::random(id, from)?);
        Ok(Opaque {
            value_max: self.value_max,
            keys,
        })
    }
}

/// A keyed permutation of `0..n`: a Feistel network with cycle-walking
/// (see the module docs). Its `Debug` form hides the key.
#[derive(Clone)]
pub struct Feistel {
    hasher: SipHasher24,
    n: u64,
    half: u32,
    mask: u64,
}

impl fmt::Debug for Feistel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Feistel(n = {}, key <hidden>)", self.n)
    }
}

impl Feistel {
    /// The permutation of `0..n` under `key`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `n` outside `1..=2^63`.
    pub fn new(key: &KeySecret, n: u64) -> Result<Feistel> {
        if n == 0 || n > 1 << 63 {
            return Err(Error::invalid(format!(
                "a permutation's domain has 1 to 2^63 values, got {n}"
            )));
        }
        let bits = 64 - (n - 1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        Ok(Feistel {
            hasher: SipHasher24::new_with_key(&key.0),
            n,
            half,
            mask: (1u64 << half) - 1,
        })
    }

    /// The domain size `n`.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Always false: a domain has at least one value.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn round(&self, i: u8, r: u64) -> u64 {
        let mut buf = [0u8; 17];
        buf[0] = i;
        buf[1..9].copy_from_slice(&r.to_le_bytes());
        buf[9..17].copy_from_slice(&self.n.to_le_bytes());
        self.hasher.hash(&buf) & self.mask
    }

    fn encrypt(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half, x & self.mask);
        for i in 0..FEISTEL_ROUNDS {
            (l, r) = (r, l ^ self.round(i, r));
        }
        (l << self.half) | r
    }

    fn decrypt(&self, y: u64) -> u64 {
        let (mut l, mut r) = (y >> self.half, y & self.mask);
        for i in (0..FEISTEL_ROUNDS).rev() {
            (l, r) = (r ^ self.round(i, l), l);
        }
        (l << self.half) | r
    }

    /// The image of `x`, or `None` for `x` outside `0..n`.
    pub fn permute(&self, x: u64) -> Option<u64> {
        if x >= self.n {
            return None;
        }
        let mut y = self.encrypt(x);
        while y >= self.n {
            y = self.encrypt(y);
        }
        Some(y)
    }

    /// The preimage of `y`, or `None` for `y` outside `0..n`.
    pub fn invert(&self, y: u64) -> Option<u64> {
        if y >= self.n {
            return None;
        }
        let mut x = self.decrypt(y);
        while x >= self.n {
            x = self.decrypt(x);
        }
        Some(x)
    }
}

/// An [`Opaque`] setting made ready to map: one [`Feistel`] per key.
#[derive(Debug, Clone)]
pub struct OpaqueMap {
    slot: i64,
    keys: Vec<(OpaqueKey, Feistel)>,
}

impl OpaqueMap {
    /// Compiles a setting as the store keeps it.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a setting without keys, with a key missing its
    /// secret, out of order, or a `value_max` too small.
    pub fn new(o: &Opaque) -> Result<OpaqueMap> {
        let corrupt = |what: &str| Error::Corrupt(format!("opaque setting: {what}"));
        if o.value_max < MIN_OPAQUE_MAX {
            return Err(corrupt("value_max below 16"));
        }
        if o.keys.is_empty() || o.keys.len() as i64 > KEY_SLOTS {
            return Err(corrupt("1 to 16 keys expected"));
        }
        let slot = Opaque::slot_size(o.value_max);
        let keys = o
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                if k.id as usize != i {
                    return Err(corrupt("key ids out of order"));
                }
                let secret = k
                    .secret
                    .as_ref()
                    .ok_or_else(|| corrupt("a key without its secret"))?;
                Ok((k.clone(), Feistel::new(secret, slot as u64)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(OpaqueMap { slot, keys })
    }

    /// The largest counter (`slot size - 1`).
    pub fn counter_max(&self) -> i64 {
        self.slot - 1
    }

    /// The largest value any key makes: `KEY_SLOTS * slot size`.
    pub fn value_max(&self) -> i64 {
        self.slot * KEY_SLOTS
    }

    /// The value of counter `c` under the newest key.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a counter outside `0..=counter_max`.
    pub fn value_of(&self, c: i64) -> Result<i64> {
        let (k, f) = self.keys.last().expect("at least one key");
        self.value_with(k, f, c)
    }

    fn value_with(&self, k: &OpaqueKey, f: &Feistel, c: i64) -> Result<i64> {
        let y = u64::try_from(c)
            .ok()
            .and_then(|c| f.permute(c))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "counter {c} is outside an opaque sequence's counters 0 to {}",
                    self.counter_max()
                ))
            })?;
        Ok(1 + i64::from(k.id) * self.slot + y as i64)
    }

    /// The counter value `v` was made from, under whichever key made it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a value this sequence never makes:
    /// outside `1..=value_max`, in the slot of a key it does not have, or
    /// decoding to a counter before its key's first one.
    pub fn counter_of(&self, v: i64) -> Result<i64> {
        if !(1..=self.value_max()).contains(&v) {
            return Err(Error::invalid(format!(
                "{v} is not a value of this opaque sequence: its values are 1 to {}",
                self.value_max()
            )));
        }
        let x = v - 1;
        let id = x / self.slot;
        let Some((k, f)) = self.keys.get(id as usize) else {
            return Err(Error::invalid(format!(
                "{v} is not a value of this opaque sequence: it lies in the range of key {id}, which the sequence does not have (a value of another sequence?)"
            )));
        };
        let c = f.invert((x % self.slot) as u64).expect("inside the slot") as i64;
        if c < k.from {
            return Err(Error::invalid(format!(
                "{v} is not a value of this opaque sequence: it decodes to counter {c}, before the first counter of key {id} ({}); a value of another sequence?",
                k.from
            )));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> KeySecret {
        KeySecret::from_bytes([b; 16])
    }

    #[test]
    fn every_small_domain_is_permuted_exactly() {
        for n in 1..=1000u64 {
            let f = Feistel::new(&key(n as u8), n).unwrap();
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = f.permute(x).unwrap();
                assert!(y < n);
                assert!(!seen[y as usize], "n {n}: {y} twice");
                seen[y as usize] = true;
                assert_eq!(f.invert(y), Some(x));
            }
            assert_eq!(f.permute(n), None);
            assert_eq!(f.invert(n), None);
        }
    }

    #[test]
    fn the_secret_never_shows_in_debug() {
        let o = Opaque {
            value_max: 1000,
            keys: vec![OpaqueKey::with_secret(0, 1, key(0xab))],
        };
        let s = serde_json::to_string(&o).unwrap();
        assert!(s.contains(&"ab".repeat(16)), "the store's copy keeps it");
        for shown in [
            format!("{o:?}"),
            format!("{:?}", OpaqueMap::new(&o).unwrap()),
            serde_json::to_string(&o.public()).unwrap(),
        ] {
            assert!(!shown.contains("abab"), "{shown}");
        }
        let back: Opaque = serde_json::from_str(&s).unwrap();
        assert_eq!(back, o);
        assert!(OpaqueMap::new(&o.public()).is_err());
    }

    #[test]
    fn rotation_keeps_old_values_and_new_ones_apart() {
        let mut o = Opaque {
            value_max: 16 * 500,
            keys: vec![OpaqueKey::with_secret(0, 1, key(1))],
        };
        let mut seen = std::collections::HashMap::new();
        let mut c = 1;
        for round in 0..KEY_SLOTS {
            if round > 0 {
                o = o.rotated(c).unwrap();
            }
            let m = OpaqueMap::new(&o).unwrap();
            for _ in 0..30 {
                let v = m.value_of(c).unwrap();
                assert!(seen.insert(v, c).is_none(), "{v} twice");
                c += 1;
            }
            // Every value made so far, under every key, decodes to its counter.
            for (v, c) in &seen {
                assert_eq!(m.counter_of(*v).unwrap(), *c);
            }
        }
        assert!(o.rotated(c).is_err(), "16 keys at most");
        // A stale handle with the first key keeps making values in slot 0:
        // never one of the newer keys' values.
        let first = OpaqueMap::new(&Opaque {
            keys: o.keys[..1].to_vec(),
            ..o.clone()
        })
        .unwrap();
        for c in c..m_counter_max(&o) {
            assert!(!seen.contains_key(&first.value_of(c).unwrap()));
        }
    }

    fn m_counter_max(o: &Opaque) -> i64 {
        Opaque::counter_max(o.value_max).unwrap()
    }

    #[test]
    fn foreign_values_are_refused() {
        let o = Opaque {
            value_max: 16 * 1000,
            keys: vec![OpaqueKey::with_secret(0, 100, key(7))],
        };
        let m = OpaqueMap::new(&o).unwrap();
        for bad in [0, -1, 16 * 1000 + 1, 1000 + 1] {
            assert!(m.counter_of(bad).is_err(), "{bad}");
        }
        let e = m.counter_of(2000).unwrap_err().to_string();
        assert!(e.contains("key 1"), "{e}");
        // Some value in slot 0 decodes below the first counter (100).
        let below = (1..=1000).find(|v| m.counter_of(*v).is_err()).unwrap();
        assert!(
            m.counter_of(below)
                .unwrap_err()
                .to_string()
                .contains("before the first counter")
        );
        assert!(Opaque::counter_max(15).is_err());
        assert_eq!(Opaque::counter_max(16).unwrap(), 0);
    }

    proptest! {
        /// On large domains (up to 2^63 - 1 values, and the JavaScript-safe
        /// 2^53 - 1), sampled: the image is in range and maps back.
        #[test]
        fn large_domains_round_trip(
            k in any::<[u8; 16]>(),
            n in prop_oneof![Just((1u64 << 63) - 1), Just((1u64 << 53) - 1), Just(1u64 << 63), 1u64..=(1 << 63)],
            xs in proptest::collection::vec(any::<u64>(), 1..50),
        ) {
            let f = Feistel::new(&KeySecret::from_bytes(k), n).unwrap();
            let mut images = std::collections::HashSet::new();
            let mut inputs = std::collections::HashSet::new();
            for x in xs {
                let x = x % n;
                let y = f.permute(x).unwrap();
                prop_assert!(y < n);
                prop_assert_eq!(f.invert(y), Some(x));
                if inputs.insert(x) {
                    prop_assert!(images.insert(y), "two inputs, one image");
                }
            }
        }

        /// Odd and random small domains, exhaustively.
        #[test]
        fn small_domains_are_bijections(k in any::<[u8; 16]>(), n in 1u64..5000) {
            let f = Feistel::new(&KeySecret::from_bytes(k), n).unwrap();
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = f.permute(x).unwrap();
                prop_assert!(!seen[y as usize]);
                seen[y as usize] = true;
                prop_assert_eq!(f.invert(y), Some(x));
            }
        }
    }
}
