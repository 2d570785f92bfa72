//! The ids a shard key carries: [`Id`] (a value) and [`IdType`] (its type).

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, SignedDuration};
use uuid::Uuid;

use crate::{Error, Result};

/// The longest string id accepted, in bytes of UTF-8.
///
/// External strings travel in URL paths, so ids are kept short.
pub const MAX_STRING_ID_BYTES: usize = 256;

/// The type of an [`Id`].
///
/// Its text names (used by [`IdType::from_str`], [`Id::from_str`] and in
/// error messages) are `i8 i16 i32 i64 u8 u16 u32 u64 bool char string uuid
/// datetime duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum IdType {
    /// [`Id::I8`].
    I8,
    /// [`Id::I16`].
    I16,
    /// [`Id::I32`].
    I32,
    /// [`Id::I64`].
    I64,
    /// [`Id::U8`].
    U8,
    /// [`Id::U16`].
    U16,
    /// [`Id::U32`].
    U32,
    /// [`Id::U64`].
    U64,
    /// [`Id::Bool`].
    Bool,
    /// [`Id::Char`].
    Char,
    /// [`Id::String`].
    String,
    /// [`Id::Uuid`].
    Uuid,
    /// [`Id::DateTime`].
    DateTime,
    /// [`Id::Duration`].
    Duration,
}

impl IdType {
    /// Every type, in the order of their wire tags.
    pub const ALL: [IdType; 14] = [
        IdType::I8,
        IdType::I16,
        IdType::I32,
        IdType::I64,
        IdType::U8,
        IdType::U16,
        IdType::U32,
        IdType::U64,
        IdType::Bool,
        IdType::Char,
        IdType::String,
        IdType::Uuid,
        IdType::DateTime,
        IdType::Duration,
    ];

    /// The text name: `"u32"`, `"uuid"`, ...
    pub fn name(self) -> &'static str {
        match self {
            IdType::I8 => "i8",
            IdType::I16 => "i16",
            IdType::I32 => "i32",
            IdType::I64 => "i64",
            IdType::U8 => "u8",
            IdType::U16 => "u16",
            IdType::U32 => "u32",
            IdType::U64 => "u64",
            IdType::Bool => "bool",
            IdType::Char => "char",
            IdType::String => "string",
            IdType::Uuid => "uuid",
            IdType::DateTime => "datetime",
            IdType::Duration => "duration",
        }
    }

    /// The byte that names this type in the binary form (1 to 14).
    pub(crate) fn tag(self) -> u8 {
        self as u8 + 1
    }

    /// The type a binary tag names, if any.
    pub(crate) fn from_tag(tag: u8) -> Option<IdType> {
        IdType::ALL.get(usize::from(tag).checked_sub(1)?).copied()
    }

    /// The default value of this type: zero, `false`, `'\0'`, the empty string,
    /// the nil UUID, the Unix epoch at UTC, the zero duration.
    pub fn default_id(self) -> Id {
        match self {
            IdType::I8 => Id::I8(0),
            IdType::I16 => Id::I16(0),
            IdType::I32 => Id::I32(0),
            IdType::I64 => Id::I64(0),
            IdType::U8 => Id::U8(0),
            IdType::U16 => Id::U16(0),
            IdType::U32 => Id::U32(0),
            IdType::U64 => Id::U64(0),
            IdType::Bool => Id::Bool(false),
            IdType::Char => Id::Char('\0'),
            IdType::String => Id::String(String::new()),
            IdType::Uuid => Id::Uuid(Uuid::nil()),
            IdType::DateTime => Id::DateTime(OffsetDateTime::UNIX_EPOCH),
            IdType::Duration => Id::Duration(SignedDuration::ZERO),
        }
    }
}

impl fmt::Display for IdType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IdType {
    type Err = Error;

    /// Parses a text name such as `u32` (case-insensitive).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] listing the accepted names.
    fn from_str(s: &str) -> Result<Self> {
        IdType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown id type {s:?}; use one of {}",
                    IdType::ALL.map(IdType::name).join(", ")
                ))
            })
    }
}

/// One id inside a shard key: the record id or a child id.
///
/// Supported types: signed and unsigned integers of 8 to 64 bits, `bool`,
/// `char`, `String` (at most [`MAX_STRING_ID_BYTES`] bytes), [`Uuid`],
/// a date-time with offset ([`OffsetDateTime`], years 0000 to 9999 and an
/// offset of whole minutes within ±23:59, so that it has an RFC 3339 form) and a signed
/// duration ([`SignedDuration`]). Floating-point numbers are left out on
/// purpose: they make poor keys (NaN, -0).
///
/// Equality is exact: ids of different types are never equal (`U8(1)` is not
/// `U16(1)`), and two date-times are equal only when both the instant and the
/// offset are. Ids order by type first (in [`IdType::ALL`] order), then by
/// value; date-times by instant, then offset.
///
/// The limits above are checked when a [`super::ShardKey`] is built.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Id {
    /// An `i8`.
    I8(i8),
    /// An `i16`.
    I16(i16),
    /// An `i32`.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// A `u8`.
    U8(u8),
    /// A `u16`.
    U16(u16),
    /// A `u32`.
    U32(u32),
    /// A `u64`.
    U64(u64),
    /// A `bool`.
    Bool(bool),
    /// A `char`.
    Char(char),
    /// A string of at most [`MAX_STRING_ID_BYTES`] bytes.
    String(String),
    /// A UUID.
    Uuid(Uuid),
    /// A date-time with its offset (years 0000 to 9999, whole-minute offset
    /// within ±23:59).
    DateTime(OffsetDateTime),
    /// A signed duration.
    Duration(SignedDuration),
}

impl Id {
    /// The type of this id.
    pub fn id_type(&self) -> IdType {
        match self {
            Id::I8(_) => IdType::I8,
            Id::I16(_) => IdType::I16,
            Id::I32(_) => IdType::I32,
            Id::I64(_) => IdType::I64,
            Id::U8(_) => IdType::U8,
            Id::U16(_) => IdType::U16,
            Id::U32(_) => IdType::U32,
            Id::U64(_) => IdType::U64,
            Id::Bool(_) => IdType::Bool,
            Id::Char(_) => IdType::Char,
            Id::String(_) => IdType::String,
            Id::Uuid(_) => IdType::Uuid,
            Id::DateTime(_) => IdType::DateTime,
            Id::Duration(_) => IdType::Duration,
        }
    }

    /// Whether this is its type's default value (see [`IdType::default_id`]).
    pub fn is_default(&self) -> bool {
        *self == self.id_type().default_id()
    }

    /// Checks the limits a key puts on its ids.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a string longer than
    /// [`MAX_STRING_ID_BYTES`], or a date-time outside years 0000 to 9999 or
    /// with an offset that is not a whole number of minutes within ±23:59.
    pub fn validate(&self) -> Result<()> {
        match self {
            Id::String(s) if s.len() > MAX_STRING_ID_BYTES => Err(Error::invalid(format!(
                "a string id may be at most {MAX_STRING_ID_BYTES} bytes, this one is {}; use a shorter id or a UUID",
                s.len()
            ))),
            Id::DateTime(t) if !(0..=9999).contains(&t.year()) => Err(Error::invalid(format!(
                "a date-time id must fall in the years 0000 to 9999, got year {}",
                t.year()
            ))),
            Id::DateTime(t)
                if t.offset().seconds_past_minute() != 0 || t.offset().whole_hours().abs() > 23 =>
            {
                Err(Error::invalid(format!(
                    "a date-time id must have an offset of whole minutes between -23:59 and +23:59 (as RFC 3339 writes them), got {}",
                    t.offset()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Parses the text of an id of a given type: an integer, `true`/`false`,
    /// one character, any string, a UUID, an RFC 3339 date-time
    /// (`2024-05-01T12:00:00+02:00`) or a duration in seconds with an `s`
    /// (`90s`, `-1.5s`, up to nine decimals). This is the inverse of `Display`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying what was expected.
    pub fn parse(ty: IdType, text: &str) -> Result<Id> {
        fn int<T: FromStr>(ty: IdType, text: &str) -> Result<T> {
            text.parse().map_err(|_| {
                Error::invalid(format!(
                    "{text:?} is not a valid {ty} (an integer in its range)"
                ))
            })
        }
        let id = match ty {
            IdType::I8 => Id::I8(int(ty, text)?),
            IdType::I16 => Id::I16(int(ty, text)?),
            IdType::I32 => Id::I32(int(ty, text)?),
            IdType::I64 => Id::I64(int(ty, text)?),
            IdType::U8 => Id::U8(int(ty, text)?),
            IdType::U16 => Id::U16(int(ty, text)?),
            IdType::U32 => Id::U32(int(ty, text)?),
            IdType::U64 => Id::U64(int(ty, text)?),
            IdType::Bool => Id::Bool(
                text.parse()
                    .map_err(|_| Error::invalid(format!("{text:?} is not a bool; use true or false")))?,
            ),
            IdType::Char => {
                let mut chars = text.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) => Id::Char(c),
                    _ => {
                        return Err(Error::invalid(format!(
                            "{text:?} is not a char; give exactly one character"
                        )));
                    }
                }
            }
            IdType::String => Id::String(text.to_owned()),
            IdType::Uuid => Id::Uuid(Uuid::parse_str(text).map_err(|e| {
                Error::invalid(format!(
                    "{text:?} is not a UUID ({e}); use the form 67e55044-10b1-426f-9247-bb680e5fe0c8"
                ))
            })?),
            IdType::DateTime => Id::DateTime(OffsetDateTime::parse(text, &Rfc3339).map_err(|e| {
                Error::invalid(format!(
                    "{text:?} is not an RFC 3339 date-time ({e}); use the form 2024-05-01T12:00:00+02:00"
                ))
            })?),
            IdType::Duration => Id::Duration(parse_duration(text)?),
        };
        id.validate()?;
        Ok(id)
    }

    /// The id as a JSON value: a number for integers, a boolean for `bool`,
    /// and its `Display` text as a string for the other types.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Id::I8(v) => Value::from(*v),
            Id::I16(v) => Value::from(*v),
            Id::I32(v) => Value::from(*v),
            Id::I64(v) => Value::from(*v),
            Id::U8(v) => Value::from(*v),
            Id::U16(v) => Value::from(*v),
            Id::U32(v) => Value::from(*v),
            Id::U64(v) => Value::from(*v),
            Id::Bool(v) => Value::from(*v),
            other => Value::from(other.to_string()),
        }
    }

    /// What equality, order and hashing look at, per variant.
    fn cmp_same_type(&self, other: &Id) -> Option<Ordering> {
        Some(match (self, other) {
            (Id::I8(a), Id::I8(b)) => a.cmp(b),
            (Id::I16(a), Id::I16(b)) => a.cmp(b),
            (Id::I32(a), Id::I32(b)) => a.cmp(b),
            (Id::I64(a), Id::I64(b)) => a.cmp(b),
            (Id::U8(a), Id::U8(b)) => a.cmp(b),
            (Id::U16(a), Id::U16(b)) => a.cmp(b),
            (Id::U32(a), Id::U32(b)) => a.cmp(b),
            (Id::U64(a), Id::U64(b)) => a.cmp(b),
            (Id::Bool(a), Id::Bool(b)) => a.cmp(b),
            (Id::Char(a), Id::Char(b)) => a.cmp(b),
            (Id::String(a), Id::String(b)) => a.cmp(b),
            (Id::Uuid(a), Id::Uuid(b)) => a.cmp(b),
            (Id::DateTime(a), Id::DateTime(b)) => a
                .cmp(b)
                .then(a.offset().whole_seconds().cmp(&b.offset().whole_seconds())),
            (Id::Duration(a), Id::Duration(b)) => a.cmp(b),
            _ => return None,
        })
    }
}

/// Formats a duration as seconds with up to nine decimals and an `s`.
fn format_duration(d: SignedDuration, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let secs = d.whole_seconds();
    let nanos = d.subsec_nanoseconds();
    let sign = if secs < 0 || nanos < 0 { "-" } else { "" };
    write!(f, "{sign}{}", secs.unsigned_abs())?;
    if nanos != 0 {
        let frac = format!("{:09}", nanos.unsigned_abs());
        write!(f, ".{}", frac.trim_end_matches('0'))?;
    }
    f.write_str("s")
}

fn parse_duration(text: &str) -> Result<SignedDuration> {
    let bad = || {
        Error::invalid(format!(
            "{text:?} is not a duration; give seconds with an 's', such as 90s or -1.5s (at most nine decimals)"
        ))
    };
    let body = text.strip_suffix('s').ok_or_else(bad)?;
    let (negative, body) = match body.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    let (whole, frac) = body.split_once('.').unwrap_or((body, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 9
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || (body.contains('.') && frac.is_empty())
    {
        return Err(bad());
    }
    let secs: i64 = whole.parse().map_err(|_| bad())?;
    let nanos: i32 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().map_err(|_| bad())?
    };
    let (secs, nanos) = if negative {
        (-secs, -nanos)
    } else {
        (secs, nanos)
    };
    // |nanos| < 10^9 and has the sign of secs: no carry, no overflow.
    SignedDuration::seconds(secs)
        .checked_add(SignedDuration::nanoseconds(i64::from(nanos)))
        .ok_or_else(bad)
}

impl fmt::Display for Id {
    /// The plain text of the value, as [`Id::parse`] reads it back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::I8(v) => v.fmt(f),
            Id::I16(v) => v.fmt(f),
            Id::I32(v) => v.fmt(f),
            Id::I64(v) => v.fmt(f),
            Id::U8(v) => v.fmt(f),
            Id::U16(v) => v.fmt(f),
            Id::U32(v) => v.fmt(f),
            Id::U64(v) => v.fmt(f),
            Id::Bool(v) => v.fmt(f),
            Id::Char(v) => fmt::Display::fmt(v, f),
            Id::String(v) => f.write_str(v),
            Id::Uuid(v) => v.hyphenated().fmt(f),
            Id::DateTime(v) => match v.format(&Rfc3339) {
                Ok(s) => f.write_str(&s),
                // Only for a date-time that a key would refuse (see validate).
                Err(_) => write!(f, "{v}"),
            },
            Id::Duration(v) => format_duration(*v, f),
        }
    }
}

impl FromStr for Id {
    type Err = Error;

    /// Parses `TYPE:VALUE` (`u32:42`, `string:abc`, `uuid:67e5...`,
    /// `datetime:2024-05-01T12:00:00Z`, `duration:1.5s`), or a bare integer,
    /// which is an `i64`. See [`Id::parse`] for the value forms.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an unknown type or a bad value.
    fn from_str(s: &str) -> Result<Self> {
        if let Ok(v) = s.parse::<i64>() {
            return Ok(Id::I64(v));
        }
        match s.split_once(':') {
            Some((ty, value)) => Id::parse(ty.parse()?, value),
            None => Err(Error::invalid(format!(
                "{s:?} is not an id; give an integer (an i64) or TYPE:VALUE such as u32:42, string:abc, uuid:67e55044-10b1-426f-9247-bb680e5fe0c8"
            ))),
        }
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Id) -> bool {
        self.cmp_same_type(other) == Some(Ordering::Equal)
    }
}

impl Eq for Id {}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Id) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Id {
    fn cmp(&self, other: &Id) -> Ordering {
        self.cmp_same_type(other)
            .unwrap_or_else(|| self.id_type().cmp(&other.id_type()))
    }
}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id_type().hash(state);
        match self {
            Id::I8(v) => v.hash(state),
            Id::I16(v) => v.hash(state),
            Id::I32(v) => v.hash(state),
            Id::I64(v) => v.hash(state),
            Id::U8(v) => v.hash(state),
            Id::U16(v) => v.hash(state),
            Id::U32(v) => v.hash(state),
            Id::U64(v) => v.hash(state),
            Id::Bool(v) => v.hash(state),
            Id::Char(v) => v.hash(state),
            Id::String(v) => v.hash(state),
            Id::Uuid(v) => v.hash(state),
            Id::DateTime(v) => {
                v.hash(state);
                v.offset().whole_seconds().hash(state);
            }
            Id::Duration(v) => v.hash(state),
        }
    }
}

macro_rules! from_impls {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for Id {
            fn from(v: $t) -> Id {
                Id::$v(v)
            }
        }
    )*};
}

from_impls!(
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    bool => Bool, char => Char, String => String, Uuid => Uuid,
    OffsetDateTime => DateTime, SignedDuration => Duration,
);

impl From<&str> for Id {
    fn from(v: &str) -> Id {
        Id::String(v.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_round_trip_and_tags_are_dense() {
        for (i, t) in IdType::ALL.into_iter().enumerate() {
            assert_eq!(t.name().parse::<IdType>().unwrap(), t);
            assert_eq!(t.tag() as usize, i + 1);
            assert_eq!(IdType::from_tag(t.tag()), Some(t));
            assert_eq!(t.default_id().id_type(), t);
            assert!(t.default_id().is_default());
        }
        assert_eq!(IdType::from_tag(0), None);
        assert_eq!(IdType::from_tag(15), None);
        let err = "float".parse::<IdType>().unwrap_err().to_string();
        assert!(err.contains("u32"), "{err}");
    }

    #[test]
    fn text_forms_round_trip() {
        for text in [
            "i8:-128",
            "u64:18446744073709551615",
            "bool:true",
            "char:é",
            "string:a b:c",
            "uuid:67e55044-10b1-426f-9247-bb680e5fe0c8",
            "datetime:2024-05-01T12:00:00.5+02:00",
            "duration:-1.25s",
            "duration:0s",
            "duration:3s",
        ] {
            let id: Id = text.parse().unwrap();
            let (_, value) = text.split_once(':').unwrap();
            assert_eq!(id.to_string(), value, "{text}");
            assert_eq!(Id::parse(id.id_type(), &id.to_string()).unwrap(), id);
        }
        assert_eq!("42".parse::<Id>().unwrap(), Id::I64(42));
    }

    #[test]
    fn bad_text_is_explained() {
        for (text, needle) in [
            ("u8:256", "u8"),
            ("abc", "TYPE:VALUE"),
            ("float:1", "unknown id type"),
            ("char:ab", "exactly one"),
            ("duration:1", "seconds"),
            ("duration:1.s", "seconds"),
            ("duration:1.0000000001s", "seconds"),
            ("duration:99999999999999999999s", "seconds"),
            ("datetime:2024-05-01", "RFC 3339"),
            ("uuid:xyz", "UUID"),
        ] {
            let err = text.parse::<Id>().unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn equality_is_exact() {
        assert_ne!(Id::U8(1), Id::U16(1));
        let a = OffsetDateTime::parse("2024-05-01T12:00:00Z", &Rfc3339).unwrap();
        let b = OffsetDateTime::parse("2024-05-01T14:00:00+02:00", &Rfc3339).unwrap();
        assert_eq!(a, b, "time says these are the same instant");
        assert_ne!(Id::DateTime(a), Id::DateTime(b), "but as ids they differ");
        assert!(Id::DateTime(a) < Id::DateTime(b));
        assert!(Id::I64(i64::MAX) < Id::U8(0), "type first");
    }

    #[test]
    fn validate_limits() {
        Id::String("x".repeat(MAX_STRING_ID_BYTES))
            .validate()
            .unwrap();
        assert!(
            Id::String("x".repeat(MAX_STRING_ID_BYTES + 1))
                .validate()
                .is_err()
        );
        let odd = OffsetDateTime::UNIX_EPOCH
            .checked_to_offset(time::UtcOffset::from_whole_seconds(30).unwrap())
            .unwrap();
        assert!(Id::DateTime(odd).validate().is_err());
        // RFC 3339 offsets stop at 23:59 (proptest found -24:59 once).
        let far = OffsetDateTime::UNIX_EPOCH
            .checked_to_offset(time::UtcOffset::from_hms(-24, -59, 0).unwrap())
            .unwrap();
        let err = Id::DateTime(far).validate().unwrap_err().to_string();
        assert!(err.contains("-23:59"), "{err}");
        let early = OffsetDateTime::UNIX_EPOCH.replace_year(-1).unwrap();
        assert!(Id::DateTime(early).validate().is_err());
    }
}
