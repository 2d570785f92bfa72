//! Shard keys: compound record keys that say which shard holds the record.
//!
//! With sharded data a record key must be unique across all shards and must
//! tell a client which shard to ask. keysmith supports both usual ways:
//!
//! - **Identity ranges** ([`ShardRanges`]): every shard takes ids from its own
//!   range (`[base + s * size, base + (s + 1) * size)`), through a per-shard
//!   sequence in the store. Ids never collide, data sets merge without
//!   conflicts, and the shard is a function of the id.
//! - **Compound keys** ([`ShardKey`]): the shard id travels inside the key,
//!   next to a data origin (which table or record type) and the record id,
//!   plus up to three child ids for the rows of child tables.
//!
//! A [`ShardKey`] leaves the program as an *external string*
//! ([`ShardKeyCodec`]): short, URL-safe, reversible, for REST paths. With a
//! secret it carries a 96-bit HMAC-SHA-256 tag, so an edited, cut or forged
//! string is rejected. **Without a secret it carries only a checksum, which
//! catches accidental edits and nothing else**: anybody can make a valid
//! unsigned string for any key.
//!
//! ```
//! use keysmith_core::shard_key::{IdType, KeySchema, ShardKey, ShardKeyCodec, ShardKeySecret};
//!
//! let secret = ShardKeySecret::new(*b"0123456789abcdef0123456789abcdef")?;
//! let codec = ShardKeyCodec::signed(&secret);
//! let key = ShardKey::new('c', 3, 42u32)?.with_child(7i64)?;
//! assert_eq!(key.to_string(), r#"["c",3,42,7]"#);
//!
//! let external = codec.encode(&key);
//! let schema = KeySchema::new('c', IdType::U32)?.with_child(IdType::I64)?;
//! assert_eq!(codec.decode(&external, &schema)?, key);
//!
//! // Another origin, other types, or a changed character: rejected.
//! assert!(codec.decode(&external, &KeySchema::new('p', IdType::U32)?).is_err());
//! let mut edited = external.clone().into_bytes();
//! edited[3] = if edited[3] == b'A' { b'B' } else { b'A' };
//! assert!(codec.decode_any(std::str::from_utf8(&edited).unwrap()).is_err());
//! # Ok::<(), keysmith_core::Error>(())
//! ```

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Error, Result};

mod codec;
mod id;
mod ranges;
mod row;

pub use codec::{
    CHECKSUM_BYTES, FORMAT_VERSION, MAC_BYTES, MAX_EXTERNAL_LEN, SECRET_ENV, ShardKeyCodec,
    ShardKeySecret,
};
pub use id::{Id, IdType, MAX_STRING_ID_BYTES};
pub use ranges::{ShardRanges, ShardStores};
pub use row::{KeyMapping, KeyParam, ShardSource};

/// The most child ids a key may have (child, grandchild, great-grandchild).
pub const MAX_CHILDREN: usize = 3;

/// The origin reserved for [`ShardKey::EMPTY`].
pub const EMPTY_ORIGIN: char = '0';

/// A record key that names its shard: a data origin, a 16-bit shard id, a
/// record id and up to [`MAX_CHILDREN`] child ids.
///
/// - The **origin** is one ASCII letter or digit naming the table or record
///   type (`'c'` for customers, `'p'` for products). `'0'` is reserved for
///   [`ShardKey::EMPTY`]. Keys of different origins are never equal, even
///   with the same shard and ids.
/// - The **record id** and **child ids** are [`Id`]s of any supported type;
///   a key of a child table is the parent's key plus a child id.
///
/// Keys are immutable values; every constructor checks the rules above.
/// `Display` gives a JSON list of the components (`["c",3,42,7]`); serde
/// writes the external string (see [`ShardKeyCodec::install_for_serde`]).
///
/// Keys are ordered by origin, then record id, then child ids (a parent
/// before its children), then shard; ids of different types order by type.
/// This is the order [`merge_by_key`] expects.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ShardKey {
    origin: u8,
    shard: u16,
    record: Id,
    children: Vec<Id>,
}

impl ShardKey {
    /// The empty key: origin `'0'`, shard 0, record id `0i64`, no children.
    /// It names no record; [`ShardKey::is_empty`] is true for it alone.
    pub const EMPTY: ShardKey = ShardKey {
        origin: b'0',
        shard: 0,
        record: Id::I64(0),
        children: Vec::new(),
    };

    /// A key with no child ids.
    ///
    /// # Errors
    /// As [`ShardKey::from_parts`].
    pub fn new(origin: char, shard: u16, record: impl Into<Id>) -> Result<ShardKey> {
        ShardKey::from_parts(origin, shard, record.into(), Vec::new())
    }

    /// A key from all its parts.
    ///
    /// With origin `'0'` the result is [`ShardKey::EMPTY`], and only if the
    /// shard is 0 and every id is its type's default (zero, `""`, nil UUID...):
    /// the type of the ids is not kept.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the origin is not an ASCII letter or
    /// digit, if it is `'0'` with a non-zero shard or a non-default id, if
    /// there are more than [`MAX_CHILDREN`] child ids, or if an id breaks
    /// [`Id::validate`].
    pub fn from_parts(origin: char, shard: u16, record: Id, children: Vec<Id>) -> Result<ShardKey> {
        if !origin.is_ascii_alphanumeric() {
            return Err(Error::invalid(format!(
                "shard key origin {origin:?} is not an ASCII letter or digit; use one character naming the record type, such as 'c' for customers"
            )));
        }
        if children.len() > MAX_CHILDREN {
            return Err(Error::invalid(format!(
                "a shard key has at most {MAX_CHILDREN} child ids, got {}",
                children.len()
            )));
        }
        record.validate()?;
        for child in &children {
            child.validate()?;
        }
        if origin == EMPTY_ORIGIN {
            if shard != 0 || !record.is_default() || !children.iter().all(Id::is_default) {
                return Err(Error::invalid(format!(
                    "shard key origin '0' is reserved for the empty key, which has shard 0 and default ids; got shard {shard}, record {record}; pick another origin"
                )));
            }
            return Ok(ShardKey::EMPTY);
        }
        Ok(ShardKey {
            origin: origin as u8,
            shard,
            record,
            children,
        })
    }

    /// This key with one more child id appended (the key of a row in a child
    /// table).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the key has [`MAX_CHILDREN`] child ids
    /// already, or as [`ShardKey::from_parts`].
    pub fn with_child(self, child: impl Into<Id>) -> Result<ShardKey> {
        let origin = self.origin();
        let mut children = self.children;
        children.push(child.into());
        ShardKey::from_parts(origin, self.shard, self.record, children)
    }

    /// The key of the parent row: this key without its last child id, or
    /// `None` if it has no child ids.
    pub fn parent(&self) -> Option<ShardKey> {
        let (_, rest) = self.children.split_last()?;
        Some(ShardKey {
            children: rest.to_vec(),
            ..self.clone()
        })
    }

    /// The data origin.
    pub fn origin(&self) -> char {
        char::from(self.origin)
    }

    pub(crate) fn origin_byte(&self) -> u8 {
        self.origin
    }

    /// The shard that holds the record.
    pub fn shard(&self) -> u16 {
        self.shard
    }

    /// The record id.
    pub fn record(&self) -> &Id {
        &self.record
    }

    /// The child ids, outermost first (child, grandchild, great-grandchild).
    pub fn children(&self) -> &[Id] {
        &self.children
    }

    /// The record id followed by the child ids.
    pub fn ids(&self) -> impl Iterator<Item = &Id> {
        std::iter::once(&self.record).chain(&self.children)
    }

    /// Whether this is [`ShardKey::EMPTY`].
    pub fn is_empty(&self) -> bool {
        self.origin == b'0'
    }

    /// Checks the key has the origin and id types `schema` describes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first difference.
    pub fn check(&self, schema: &KeySchema) -> Result<()> {
        let expected = schema.origin;
        self.check_origin(expected)?;
        if self.children.len() != schema.children.len() {
            return Err(Error::invalid(format!(
                "shard key has {} child id(s), expected {} for origin {expected:?}",
                self.children.len(),
                schema.children.len()
            )));
        }
        let found = self.ids().map(Id::id_type);
        let wanted = std::iter::once(schema.record).chain(schema.children.iter().copied());
        for (i, (found, wanted)) in found.zip(wanted).enumerate() {
            if found != wanted {
                let which = match i {
                    0 => "record id".to_owned(),
                    n => format!("child id {n}"),
                };
                return Err(Error::invalid(format!(
                    "shard key {which} is a {found}, expected a {wanted} for origin {expected:?}"
                )));
            }
        }
        Ok(())
    }

    /// Checks the key has origin `expected` (and so is not the empty key).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying which origin it has.
    pub fn check_origin(&self, expected: char) -> Result<()> {
        if self.is_empty() {
            return Err(Error::invalid(format!(
                "this is the empty shard key; expected a key of origin {expected:?}"
            )));
        }
        if self.origin() != expected {
            return Err(Error::invalid(format!(
                "shard key has origin {:?}, expected {expected:?}: it names another kind of record",
                self.origin()
            )));
        }
        Ok(())
    }

    /// The JSON list `Display` prints: origin, shard, record id, child ids.
    /// Integers are numbers, bools booleans, the other ids their text (see
    /// [`Id::to_json`]).
    pub fn to_json(&self) -> serde_json::Value {
        let mut list = vec![
            serde_json::Value::from(self.origin().to_string()),
            serde_json::Value::from(self.shard),
        ];
        list.extend(self.ids().map(Id::to_json));
        serde_json::Value::Array(list)
    }

    /// A JSON object that also names each id's type:
    /// `{"origin":"c","shard":3,"record":{"type":"u32","value":42},"children":[...]}`.
    pub fn describe(&self) -> serde_json::Value {
        let typed =
            |id: &Id| serde_json::json!({"type": id.id_type().name(), "value": id.to_json()});
        serde_json::json!({
            "origin": self.origin().to_string(),
            "shard": self.shard,
            "record": typed(&self.record),
            "children": self.children.iter().map(typed).collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for ShardKey {
    /// A JSON list: `["c",3,42,7]`; see [`ShardKey::to_json`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

impl fmt::Debug for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardKey")
            .field("origin", &self.origin())
            .field("shard", &self.shard)
            .field("record", &self.record)
            .field("children", &self.children)
            .finish()
    }
}

impl Default for ShardKey {
    /// [`ShardKey::EMPTY`].
    fn default() -> Self {
        ShardKey::EMPTY
    }
}

impl PartialOrd for ShardKey {
    fn partial_cmp(&self, other: &ShardKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ShardKey {
    fn cmp(&self, other: &ShardKey) -> Ordering {
        self.origin
            .cmp(&other.origin)
            .then_with(|| self.record.cmp(&other.record))
            .then_with(|| self.children.cmp(&other.children))
            .then_with(|| self.shard.cmp(&other.shard))
    }
}

impl Serialize for ShardKey {
    /// The external string, made by the codec in force (a
    /// [`ShardKeyCodec::scope`], else the one installed with
    /// [`ShardKeyCodec::install_for_serde`], else an unsigned codec).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        codec::with_serde_codec(|c| serializer.serialize_str(&c.encode(self)))
    }
}

impl<'de> Deserialize<'de> for ShardKey {
    /// Reads an external string with the codec in force (see `Serialize`),
    /// with [`ShardKeyCodec::decode_any`]: any origin and id types are
    /// accepted, so check the result with [`ShardKey::check`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        codec::with_serde_codec(|c| c.decode_any(&s)).map_err(serde::de::Error::custom)
    }
}

/// What a decoder expects of a key: its origin and the types of its record
/// id and child ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeySchema {
    origin: char,
    record: IdType,
    children: Vec<IdType>,
}

impl KeySchema {
    /// Keys of `origin` whose record id is a `record`, with no child ids.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the origin is not an ASCII letter or
    /// digit, or is the reserved `'0'`.
    pub fn new(origin: char, record: IdType) -> Result<KeySchema> {
        if !origin.is_ascii_alphanumeric() || origin == EMPTY_ORIGIN {
            return Err(Error::invalid(format!(
                "shard key origin {origin:?} cannot be expected: use an ASCII letter or digit other than '0'"
            )));
        }
        Ok(KeySchema {
            origin,
            record,
            children: Vec::new(),
        })
    }

    /// This schema with one more child id of type `ty`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if it has [`MAX_CHILDREN`] already.
    pub fn with_child(mut self, ty: IdType) -> Result<KeySchema> {
        if self.children.len() >= MAX_CHILDREN {
            return Err(Error::invalid(format!(
                "a shard key has at most {MAX_CHILDREN} child ids"
            )));
        }
        self.children.push(ty);
        Ok(self)
    }

    /// The expected origin.
    pub fn origin(&self) -> char {
        self.origin
    }

    /// The expected type of the record id.
    pub fn record(&self) -> IdType {
        self.record
    }

    /// The expected types of the child ids.
    pub fn children(&self) -> &[IdType] {
        &self.children
    }
}

/// The shards other than `own` that `keys` point to, ascending. Empty keys
/// ([`ShardKey::EMPTY`]) name no shard and are skipped.
///
/// Use it to find which other shards a query must also visit.
pub fn foreign_shards<'a>(keys: impl IntoIterator<Item = &'a ShardKey>, own: u16) -> BTreeSet<u16> {
    keys.into_iter()
        .filter(|k| !k.is_empty() && k.shard != own)
        .map(|k| k.shard)
        .collect()
}

/// What [`merge_by_key`] does with a key found in both record sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duplicates {
    /// Keep the left record, drop the right one.
    KeepLeft,
    /// Keep the right record (a newer copy, say), drop the left one.
    KeepRight,
    /// Keep both, the left one first.
    KeepBoth,
    /// Fail with an error naming the key.
    Reject,
}

/// Merges two record sets that are each ordered by key (strictly ascending,
/// in [`ShardKey`]'s order) into one ordered set, for example the answers of
/// two shards to one query. `key` gives a record's key; `duplicates` says
/// what to do with a key present in both.
///
/// # Errors
/// [`Error::InvalidArgument`] if either set is not strictly ascending by key
/// (naming the two keys out of order), or for a key in both sets with
/// [`Duplicates::Reject`]. Nothing is returned then.
pub fn merge_by_key<T>(
    left: impl IntoIterator<Item = T>,
    right: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> &ShardKey,
    duplicates: Duplicates,
) -> Result<Vec<T>> {
    let left: Vec<T> = left.into_iter().collect();
    let right: Vec<T> = right.into_iter().collect();
    for (name, set) in [("left", &left), ("right", &right)] {
        if let Some(w) = set.windows(2).find(|w| key(&w[0]) >= key(&w[1])) {
            return Err(Error::invalid(format!(
                "the {name} record set is not strictly ordered by key: {} comes before {}; sort each set by key and remove duplicates first",
                key(&w[0]),
                key(&w[1])
            )));
        }
    }
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let order = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => key(l).cmp(key(r)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => break,
        };
        match order {
            Ordering::Less => out.extend(left.next()),
            Ordering::Greater => out.extend(right.next()),
            Ordering::Equal => {
                let (Some(l), Some(r)) = (left.next(), right.next()) else {
                    unreachable!("both sides were peeked")
                };
                match duplicates {
                    Duplicates::KeepLeft => out.push(l),
                    Duplicates::KeepRight => out.push(r),
                    Duplicates::KeepBoth => out.extend([l, r]),
                    Duplicates::Reject => {
                        return Err(Error::invalid(format!(
                            "key {} is in both record sets",
                            key(&l)
                        )));
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
