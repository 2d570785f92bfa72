//! The external string of a shard key: binary form, signature, base64.
//!
//! Layout of format version 1, before base64 (URL-safe alphabet, no padding):
//!
//! ```text
//! byte 0      version (1)
//! byte 1      flags: bit 7 = signed, bits 0-1 = number of child ids, others 0
//! byte 2      origin (ASCII letter or digit)
//! bytes 3-4   shard id, big-endian
//! then        the record id and each child id: one type byte (1..=14, the
//!             order of IdType::ALL) and the value:
//!               i8, u8: one byte; bool: 0 or 1
//!               i16..i64: zigzag LEB128; u16..u64, char: LEB128
//!               string: LEB128 length, UTF-8 bytes; uuid: 16 bytes
//!               datetime: zigzag Unix seconds, LEB128 nanoseconds,
//!                         zigzag offset minutes
//!               duration: zigzag seconds, zigzag nanoseconds (same sign)
//! last        12 bytes of HMAC-SHA-256 (signed) or 4 bytes of SHA-256
//!             (unsigned), over a domain label and every byte before it
//! ```
//!
//! Every value has exactly one encoding (shortest varints, no stray bits), so
//! a key has exactly one external string per codec.

use std::cell::RefCell;
use std::fmt;
use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use time::{OffsetDateTime, SignedDuration, UtcOffset};
use uuid::Uuid;

use super::id::{Id, IdType, MAX_STRING_ID_BYTES};
use super::{KeySchema, ShardKey};
use crate::secrets::{Kind, SecretKeys};
use crate::{Error, Result};

/// The format version this keysmith writes and reads.
pub const FORMAT_VERSION: u8 = 1;

/// Bytes of HMAC-SHA-256 kept in a signed external string (96 bits).
pub const MAC_BYTES: usize = 12;

/// Bytes of SHA-256 kept as the checksum of an unsigned external string.
pub const CHECKSUM_BYTES: usize = 4;

/// The longest external string [`ShardKeyCodec::decode`] looks at; longer
/// input is rejected before any work. No key encodes to more than 1,404
/// characters.
pub const MAX_EXTERNAL_LEN: usize = 2048;

/// The environment variable [`ShardKeyCodec::from_env`] reads the secret from.
pub const SECRET_ENV: &str = "KEYSMITH_SHARD_KEY_SECRET";

const SIGNED: u8 = 0x80;
const CHILD_MASK: u8 = 0x03;
const HEADER: usize = 5;
const DOMAIN: &[u8] = b"keysmith shard key\0";

type HmacSha256 = Hmac<Sha256>;

/// The secret keys that sign and check external strings: one key, or a
/// list of keys with ids (see [`crate::secrets`] for the file format), the
/// newest of which signs while every listed one is accepted, so strings
/// signed before a rotation keep decoding while their key stays listed.
///
/// Each key is at least [`ShardKeySecret::MIN_BYTES`] bytes; 32 random bytes
/// (for example `openssl rand -base64 32`) is a good choice. Its `Debug`
/// form shows the key ids only.
#[derive(Clone)]
pub struct ShardKeySecret(SecretKeys);

/// Shard key secrets as key lists.
const KIND: Kind = Kind {
    what: "shard key secret",
    min_bytes: ShardKeySecret::MIN_BYTES,
};

impl ShardKeySecret {
    /// The shortest secret accepted.
    pub const MIN_BYTES: usize = 16;

    /// One key (id [`crate::secrets::SINGLE_KEY_ID`]) of secret bytes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if it is shorter than [`Self::MIN_BYTES`].
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self> {
        SecretKeys::single(bytes.into(), KIND).map(ShardKeySecret)
    }

    /// The secret in `$KEYSMITH_SHARD_KEY_SECRET` (its UTF-8 bytes, one bare
    /// key, never a list), or `None` when the variable is not set.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the variable is set but empty, not
    /// Unicode, or shorter than [`Self::MIN_BYTES`]: a secret that was meant
    /// to be there is never silently dropped.
    pub fn from_env() -> Result<Option<Self>> {
        match std::env::var(SECRET_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::invalid(format!(
                "${SECRET_ENV} is not valid Unicode; use printable text such as base64"
            ))),
            Ok(s) if s.is_empty() => Err(Error::invalid(format!(
                "${SECRET_ENV} is set but empty; unset it for unsigned strings or set a secret of at least {} bytes",
                Self::MIN_BYTES
            ))),
            Ok(s) => Self::new(s.into_bytes())
                .map(Some)
                .map_err(|e| Error::invalid(format!("${SECRET_ENV}: {e}"))),
        }
    }

    /// The keys in `text`: a key list, or one bare secret (its bytes less
    /// one trailing newline), in the format of [`crate::secrets`]. The last
    /// key signs; every key is accepted.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the line and what is wrong with it
    /// (never showing a secret): a line not `KEY_ID:SECRET`, a secret
    /// shorter than [`Self::MIN_BYTES`], an id or secret used twice, no key,
    /// more than [`crate::secrets::MAX_KEYS`].
    pub fn parse(text: &[u8]) -> Result<Self> {
        SecretKeys::parse(text, KIND).map(ShardKeySecret)
    }

    /// The keys in a file, as [`Self::parse`]. A file of one bare secret
    /// (the format before key lists) is one key, as before.
    ///
    /// # Errors
    /// As [`Self::parse`], naming the file, or when it cannot be read.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        SecretKeys::from_file(path, KIND).map(ShardKeySecret)
    }

    /// The key ids, oldest first: the last one signs.
    pub fn ids(&self) -> Vec<String> {
        self.0.ids()
    }
}

impl fmt::Debug for ShardKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ShardKeySecret({:?}, <hidden>)", self.0.ids())
    }
}

/// Turns shard keys into external strings and back.
///
/// - **Signed** (built with a [`ShardKeySecret`]): each string carries 96 bits
///   of HMAC-SHA-256 over its content, by the newest key. Without a listed
///   key nobody can make a string this codec accepts, and any edit,
///   truncation or string signed with another secret is rejected; a string
///   is checked against each listed key, the newest first. Tags are
///   compared in constant time.
/// - **Unsigned** (no secret): each string carries a 32-bit checksum. It
///   catches typing and copying mistakes, **not** tampering: anyone can build
///   a valid unsigned string for any key. Do not use it where a client could
///   gain from naming another record.
///
/// A signed codec rejects unsigned strings and an unsigned codec rejects
/// signed ones, so stripping the signature does not help an attacker.
///
/// Cloning is cheap enough for every request (the keyed hash state is
/// precomputed); a codec is `Send + Sync`.
#[derive(Clone)]
pub struct ShardKeyCodec {
    /// One MAC per key, oldest first: the last signs. Empty: unsigned.
    macs: Vec<HmacSha256>,
}

impl fmt::Debug for ShardKeyCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardKeyCodec")
            .field("signed", &self.is_signed())
            .finish()
    }
}

impl ShardKeyCodec {
    /// A codec that signs with the newest key of `secret` and accepts
    /// strings signed with any of its keys.
    pub fn signed(secret: &ShardKeySecret) -> Self {
        let macs = secret
            .0
            .keys()
            .iter()
            .map(|k| {
                // HMAC takes keys of any length; new_from_slice cannot fail.
                <HmacSha256 as KeyInit>::new_from_slice(&k.secret)
                    .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"))
            })
            .collect();
        ShardKeyCodec { macs }
    }

    /// The codec of a scope (a team, say): each key is replaced by
    /// HMAC-SHA-256(key, "keysmith shard key scope\0" || scope), so strings
    /// of one scope decode only in that scope, and holding one scope's keys
    /// tells nothing of another's or of the secret. Rotation works as for
    /// the secret: every listed key gives a scope key. An unsigned codec
    /// stays unsigned.
    pub fn for_scope(&self, scope: &str) -> Self {
        let macs = self
            .macs
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m.update(b"keysmith shard key scope\0");
                m.update(scope.as_bytes());
                let key = m.finalize().into_bytes();
                <HmacSha256 as KeyInit>::new_from_slice(&key)
                    .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"))
            })
            .collect();
        ShardKeyCodec { macs }
    }

    /// A codec without a secret: its strings carry a checksum that catches
    /// accidental edits only. See the type's documentation.
    pub fn unsigned() -> Self {
        ShardKeyCodec { macs: Vec::new() }
    }

    /// A signed codec with the secret in `$KEYSMITH_SHARD_KEY_SECRET` (its
    /// UTF-8 bytes), or an unsigned codec when the variable is not set.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the variable is set but empty, not
    /// Unicode, or shorter than [`ShardKeySecret::MIN_BYTES`]: a secret that
    /// was meant to be there is never silently dropped.
    pub fn from_env() -> Result<Self> {
        Ok(match ShardKeySecret::from_env()? {
            Some(secret) => Self::signed(&secret),
            None => Self::unsigned(),
        })
    }

    /// Whether this codec signs (has a secret).
    pub fn is_signed(&self) -> bool {
        !self.macs.is_empty()
    }

    /// The external string of `key`: URL-safe base64 without padding.
    /// Decoding it with the same codec gives `key` back.
    pub fn encode(&self, key: &ShardKey) -> String {
        let mut buf = Vec::with_capacity(32);
        let children = key.children().len() as u8; // at most 3, checked at build
        let flags = if self.is_signed() { SIGNED } else { 0 } | children;
        buf.extend_from_slice(&[FORMAT_VERSION, flags, key.origin_byte()]);
        buf.extend_from_slice(&key.shard().to_be_bytes());
        write_id(&mut buf, key.record());
        for child in key.children() {
            write_id(&mut buf, child);
        }
        self.append_tag(&mut buf);
        URL_SAFE_NO_PAD.encode(&buf)
    }

    /// Decodes an external string and checks it is a key of the kind `schema`
    /// describes (origin, record id type, child id types).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with a message saying which: not an
    /// external string, cut short, an unknown format version, signed when
    /// this codec has no secret or unsigned when it has one, failed its
    /// signature or checksum (edited, or signed with another secret), or a
    /// key of another origin or other id types than `schema` expects.
    pub fn decode(&self, external: &str, schema: &KeySchema) -> Result<ShardKey> {
        let key = self.decode_any(external)?;
        key.check(schema)?;
        Ok(key)
    }

    /// Decodes an external string whatever key it holds: the integrity checks
    /// of [`decode`](Self::decode) without the schema check. Use it only
    /// where any origin and id types are acceptable (a debugging tool).
    ///
    /// # Errors
    /// As [`decode`](Self::decode), except the schema checks.
    pub fn decode_any(&self, external: &str) -> Result<ShardKey> {
        if external.is_empty() {
            return Err(Error::invalid("an empty string is not a shard key"));
        }
        if external.len() > MAX_EXTERNAL_LEN {
            return Err(Error::invalid(format!(
                "shard key string is {} characters long; no key is longer than {MAX_EXTERNAL_LEN}",
                external.len()
            )));
        }
        let bytes = URL_SAFE_NO_PAD.decode(external).map_err(|_| {
            Error::invalid(
                "not a shard key string: it must be URL-safe base64 (A-Z a-z 0-9 - _) exactly as keysmith wrote it; was it cut or edited?",
            )
        })?;
        self.open(&bytes)
    }

    /// Checks version, mode and tag of raw bytes, then parses them.
    fn open(&self, bytes: &[u8]) -> Result<ShardKey> {
        if bytes.len() < HEADER + 2 + CHECKSUM_BYTES {
            return Err(Error::invalid(
                "shard key string is too short to be one; was it cut?",
            ));
        }
        if bytes[0] != FORMAT_VERSION {
            return Err(Error::invalid(format!(
                "shard key string has format version {}, this keysmith reads version {FORMAT_VERSION}; was it made by a newer keysmith, or edited?",
                bytes[0]
            )));
        }
        let signed = bytes[1] & SIGNED != 0;
        let tag_len = match (signed, self.is_signed()) {
            (true, false) => {
                return Err(Error::invalid(format!(
                    "this shard key string is signed; configure the secret it was signed with ({SECRET_ENV} for the command line) to decode it"
                )));
            }
            (false, true) => {
                return Err(Error::invalid(
                    "this shard key string is not signed, but a secret is configured: it was not made with this secret and is rejected",
                ));
            }
            (true, true) => MAC_BYTES,
            (false, false) => CHECKSUM_BYTES,
        };
        let Some(split) = bytes
            .len()
            .checked_sub(tag_len)
            .filter(|&n| n >= HEADER + 2)
        else {
            return Err(Error::invalid(
                "shard key string is too short to be one; was it cut?",
            ));
        };
        let (body, tag) = bytes.split_at(split);
        if self.is_signed() {
            // Newest first: most strings are signed with it.
            let signed_by_one = self.macs.iter().rev().any(|mac| {
                let mut mac = mac.clone();
                mac.update(DOMAIN);
                mac.update(body);
                mac.verify_truncated_left(tag).is_ok()
            });
            if !signed_by_one {
                return Err(Error::invalid(
                    "shard key string failed its signature check: it was edited, cut short, or signed with another secret \
                     (or with a key since removed from the shard key secret file)",
                ));
            }
        } else if checksum(body) != tag {
            return Err(Error::invalid(
                "shard key string failed its checksum: it was edited or cut short (mistyped?)",
            ));
        }
        parse_body(body)
    }

    fn append_tag(&self, buf: &mut Vec<u8>) {
        match self.macs.last() {
            Some(mac) => {
                let mut mac = mac.clone();
                mac.update(DOMAIN);
                mac.update(buf);
                let full = mac.finalize().into_bytes();
                buf.extend_from_slice(&full[..MAC_BYTES]);
            }
            None => {
                let sum = checksum(buf);
                buf.extend_from_slice(&sum);
            }
        }
    }

    /// Wraps arbitrary bytes as an external string with a valid tag, so that
    /// tests and fuzzing reach the body parser. Not part of the API: it can
    /// make strings no key encodes to.
    #[doc(hidden)]
    pub fn seal_raw_for_tests(&self, body: &[u8]) -> String {
        let mut buf = body.to_vec();
        if buf.len() > 1 {
            // Keep the mode flag truthful so the string is not rejected for it.
            buf[1] = (buf[1] & !SIGNED) | if self.is_signed() { SIGNED } else { 0 };
        }
        self.append_tag(&mut buf);
        URL_SAFE_NO_PAD.encode(&buf)
    }

    /// Makes this codec the one `serde` uses for [`ShardKey`] in this
    /// process, unless a [`scope`](Self::scope) overrides it on the current
    /// thread. Call it once at start-up, before anything (de)serializes a
    /// key; until then serde uses an unsigned codec.
    ///
    /// ```standalone_crate
    /// use keysmith_core::shard_key::{ShardKey, ShardKeyCodec, ShardKeySecret};
    ///
    /// let secret = ShardKeySecret::new(*b"0123456789abcdef0123456789abcdef")?;
    /// let codec = ShardKeyCodec::signed(&secret);
    /// codec.clone().install_for_serde()?;
    ///
    /// let key = ShardKey::new('c', 3, 42i64)?;
    /// let json = serde_json::to_string(&key).unwrap();
    /// assert_eq!(json, format!("\"{}\"", codec.encode(&key)));
    /// assert_eq!(serde_json::from_str::<ShardKey>(&json).unwrap(), key);
    /// assert!(ShardKeyCodec::unsigned().install_for_serde().is_err(), "only once");
    /// # Ok::<(), keysmith_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if a codec was installed before (it cannot
    /// be replaced, so no two parts of a process disagree).
    pub fn install_for_serde(self) -> Result<()> {
        GLOBAL.set(self).map_err(|_| {
            Error::invalid(
                "a shard key codec is already installed for serde; install it once, at start-up",
            )
        })
    }

    /// Runs `f` with this codec as the one `serde` uses for [`ShardKey`] on
    /// the current thread, then restores the previous one (also if `f`
    /// panics). Scopes nest. Async code that may move between threads should
    /// serialize inside the closure, not across an `.await`.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Pop;
        impl Drop for Pop {
            fn drop(&mut self) {
                SCOPED.with(|s| s.borrow_mut().pop());
            }
        }
        SCOPED.with(|s| s.borrow_mut().push(self.clone()));
        let _pop = Pop;
        f()
    }
}

static GLOBAL: OnceLock<ShardKeyCodec> = OnceLock::new();

thread_local! {
    static SCOPED: RefCell<Vec<ShardKeyCodec>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with the codec serde should use now.
pub(super) fn with_serde_codec<R>(f: impl FnOnce(&ShardKeyCodec) -> R) -> R {
    let scoped = SCOPED.with(|s| s.borrow().last().cloned());
    match scoped {
        Some(codec) => f(&codec),
        None => match GLOBAL.get() {
            Some(codec) => f(codec),
            None => f(&ShardKeyCodec::unsigned()),
        },
    }
}

fn checksum(body: &[u8]) -> [u8; CHECKSUM_BYTES] {
    let digest = Sha256::new()
        .chain_update(DOMAIN)
        .chain_update(body)
        .finalize();
    let mut out = [0; CHECKSUM_BYTES];
    out.copy_from_slice(&digest[..CHECKSUM_BYTES]);
    out
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn write_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn write_id(buf: &mut Vec<u8>, id: &Id) {
    buf.push(id.id_type().tag());
    match id {
        Id::I8(v) => buf.push(*v as u8),
        Id::I16(v) => write_varint(buf, zigzag(i64::from(*v))),
        Id::I32(v) => write_varint(buf, zigzag(i64::from(*v))),
        Id::I64(v) => write_varint(buf, zigzag(*v)),
        Id::U8(v) => buf.push(*v),
        Id::U16(v) => write_varint(buf, u64::from(*v)),
        Id::U32(v) => write_varint(buf, u64::from(*v)),
        Id::U64(v) => write_varint(buf, *v),
        Id::Bool(v) => buf.push(u8::from(*v)),
        Id::Char(v) => write_varint(buf, u64::from(u32::from(*v))),
        Id::String(v) => {
            write_varint(buf, v.len() as u64);
            buf.extend_from_slice(v.as_bytes());
        }
        Id::Uuid(v) => buf.extend_from_slice(v.as_bytes()),
        Id::DateTime(v) => {
            write_varint(buf, zigzag(v.unix_timestamp()));
            write_varint(buf, u64::from(v.nanosecond()));
            write_varint(buf, zigzag(i64::from(v.offset().whole_minutes())));
        }
        Id::Duration(v) => {
            write_varint(buf, zigzag(v.whole_seconds()));
            write_varint(buf, zigzag(i64::from(v.subsec_nanoseconds())));
        }
    }
}

fn malformed(what: &str) -> Error {
    Error::invalid(format!(
        "shard key string is malformed ({what}); it was not made by this version of keysmith"
    ))
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.rest.len() < n {
            return Err(malformed(&format!("{what} is cut short")));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn byte(&mut self, what: &str) -> Result<u8> {
        Ok(self.bytes(1, what)?[0])
    }

    /// A LEB128 value in its shortest form.
    fn varint(&mut self, what: &str) -> Result<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.byte(what)?;
            if i == 9 && b > 1 {
                return Err(malformed(&format!("{what} overflows 64 bits")));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(malformed(&format!("{what} is not in its shortest form")));
                }
                return Ok(v);
            }
        }
        Err(malformed(&format!("{what} overflows 64 bits")))
    }

    fn signed(&mut self, what: &str) -> Result<i64> {
        self.varint(what).map(unzigzag)
    }
}

fn fit<S, T: TryFrom<S>>(ty: IdType, v: S) -> Result<T> {
    T::try_from(v).map_err(|_| malformed(&format!("{ty} value out of range")))
}

fn read_id(r: &mut Reader<'_>) -> Result<Id> {
    let tag = r.byte("id type")?;
    let ty = IdType::from_tag(tag).ok_or_else(|| malformed(&format!("unknown id type {tag}")))?;
    let what = ty.name();
    Ok(match ty {
        IdType::I8 => Id::I8(r.byte(what)? as i8),
        IdType::I16 => Id::I16(fit(ty, r.signed(what)?)?),
        IdType::I32 => Id::I32(fit(ty, r.signed(what)?)?),
        IdType::I64 => Id::I64(r.signed(what)?),
        IdType::U8 => Id::U8(r.byte(what)?),
        IdType::U16 => Id::U16(fit(ty, r.varint(what)?)?),
        IdType::U32 => Id::U32(fit(ty, r.varint(what)?)?),
        IdType::U64 => Id::U64(r.varint(what)?),
        IdType::Bool => match r.byte(what)? {
            0 => Id::Bool(false),
            1 => Id::Bool(true),
            _ => return Err(malformed("bool that is neither 0 nor 1")),
        },
        IdType::Char => {
            let v: u32 = fit(ty, r.varint(what)?)?;
            Id::Char(char::from_u32(v).ok_or_else(|| malformed("char that is no Unicode scalar"))?)
        }
        IdType::String => {
            let len = r.varint(what)?;
            if len > MAX_STRING_ID_BYTES as u64 {
                return Err(malformed("string id too long"));
            }
            let bytes = r.bytes(len as usize, what)?;
            Id::String(
                std::str::from_utf8(bytes)
                    .map_err(|_| malformed("string id that is not UTF-8"))?
                    .to_owned(),
            )
        }
        IdType::Uuid => {
            Id::Uuid(Uuid::from_slice(r.bytes(16, what)?).map_err(|_| malformed("uuid"))?)
        }
        IdType::DateTime => {
            let secs = r.signed(what)?;
            let nanos: u32 = fit(ty, r.varint(what)?)?;
            let minutes: i16 = fit(ty, r.signed(what)?)?;
            let bad = || malformed("date-time out of range");
            let offset =
                UtcOffset::from_whole_seconds(i32::from(minutes) * 60).map_err(|_| bad())?;
            let t = OffsetDateTime::from_unix_timestamp(secs)
                .map_err(|_| bad())?
                .replace_nanosecond(nanos)
                .map_err(|_| bad())?
                .checked_to_offset(offset)
                .ok_or_else(bad)?;
            Id::DateTime(t)
        }
        IdType::Duration => {
            let secs = r.signed(what)?;
            let nanos = r.signed(what)?;
            let canonical = nanos.unsigned_abs() < 1_000_000_000
                && (nanos == 0 || secs == 0 || (secs < 0) == (nanos < 0));
            if !canonical {
                return Err(malformed("duration nanoseconds out of range"));
            }
            let d = SignedDuration::seconds(secs)
                .checked_add(SignedDuration::nanoseconds(nanos))
                .ok_or_else(|| malformed("duration out of range"))?;
            Id::Duration(d)
        }
    })
}

fn parse_body(body: &[u8]) -> Result<ShardKey> {
    let mut r = Reader { rest: body };
    let head = r.bytes(HEADER, "header")?;
    let flags = head[1];
    if flags & !(SIGNED | CHILD_MASK) != 0 {
        return Err(malformed("unknown flags"));
    }
    let origin = head[2];
    if !origin.is_ascii_alphanumeric() {
        return Err(malformed("origin is not an ASCII letter or digit"));
    }
    let shard = u16::from_be_bytes([head[3], head[4]]);
    let record = read_id(&mut r)?;
    let n = usize::from(flags & CHILD_MASK);
    let mut children = Vec::with_capacity(n);
    for _ in 0..n {
        children.push(read_id(&mut r)?);
    }
    if !r.rest.is_empty() {
        return Err(malformed("bytes after the last id"));
    }
    ShardKey::from_parts(char::from(origin), shard, record, children)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_file_loses_one_trailing_newline_and_must_be_long_enough() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        let secret = b"0123456789abcdef";
        for written in [
            b"0123456789abcdef\n".to_vec(),
            b"0123456789abcdef\r\n".to_vec(),
            b"0123456789abcdef".to_vec(),
        ] {
            std::fs::write(&path, &written).unwrap();
            let keys = ShardKeySecret::from_file(&path).unwrap();
            assert_eq!(keys.0.keys().len(), 1);
            assert_eq!(keys.0.keys()[0].secret, secret);
        }
        // A secret of several lines was one bare secret before key lists;
        // now it is a list, and refused with the line that is wrong.
        std::fs::write(&path, b"0123456789abcdef\n\n").unwrap();
        let e = ShardKeySecret::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("line 1: expected KEY_ID:SECRET"), "{e}");
        std::fs::write(&path, b"short\n").unwrap();
        let e = ShardKeySecret::from_file(&path).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let missing = dir.path().join("missing");
        let e = ShardKeySecret::from_file(&missing).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }

    #[test]
    fn strings_of_every_listed_key_decode_and_the_newest_signs() {
        let (a, b) = ("first shard secret 0123", "second shard secret 456");
        let old = ShardKeyCodec::signed(&ShardKeySecret::new(a).unwrap());
        let both = ShardKeySecret::parse(format!("k1:{a}\nk2:{b}\n").as_bytes()).unwrap();
        assert_eq!(both.ids(), ["k1", "k2"]);
        assert!(!format!("{both:?}").contains("secret 0123"), "{both:?}");
        let both = ShardKeyCodec::signed(&both);
        let only_new =
            ShardKeyCodec::signed(&ShardKeySecret::parse(format!("k2:{b}").as_bytes()).unwrap());
        let key = ShardKey::new('c', 3, 42i64).unwrap();
        let s_old = old.encode(&key);
        let s_new = both.encode(&key);
        assert_ne!(s_old, s_new, "the newest key signs");
        assert_eq!(both.decode_any(&s_old).unwrap(), key);
        assert_eq!(both.decode_any(&s_new).unwrap(), key);
        assert_eq!(only_new.decode_any(&s_new).unwrap(), key);
        assert!(old.decode_any(&s_new).is_err());
        let e = only_new.decode_any(&s_old).unwrap_err().to_string();
        assert!(e.contains("key since removed"), "{e}");
    }
}
