//! Keys from database rows ([`KeyMapping`]) and the key's parts as statement
//! parameters ([`KeyParam`]).
//!
//! A mapping names the columns a key comes from: the record column, up to
//! three child columns and, for a key that points at a record on another
//! shard, the column that holds that shard's id. Without a shard column the
//! shard id is the one of the connection the row came from (see
//! [`crate::shard_set::ShardConnection::shard`]).
//!
//! Both drivers keysmith's stores use are supported, with no cargo feature:
//! `tokio-postgres` and `rusqlite` are dependencies of the crate anyway.
//!
//! # Column types
//!
//! Without declared types ([`KeyMapping::with_types`]) an id takes the
//! column's own type: PostgreSQL `smallint` -> `i16`, `integer` -> `i32`,
//! `bigint` -> `i64`, `oid` -> `u32`, `"char"` -> `i8`, `boolean` -> `bool`,
//! `text`/`varchar`/`char(n)`/`name` -> `string`, `uuid` -> `uuid`,
//! `timestamptz` -> `datetime` (`timestamp` without time zone is read as
//! UTC); SQLite `INTEGER` -> `i64`, `TEXT` -> `string`.
//!
//! With declared types an integer column fits any integer type (range
//! checked), a text column is parsed as the declared type (as [`Id::parse`]
//! reads text: a UUID, an RFC 3339 date-time, `1.5s`...), and an SQLite
//! 16-byte blob is a UUID. Anything else (a float, a blob elsewhere, a value
//! out of range) is an error that names the column and its type.

#[cfg(feature = "postgres")]
use bytes::BytesMut;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use time::OffsetDateTime;
#[cfg(feature = "postgres")]
use time::{PrimitiveDateTime, UtcOffset};
#[cfg(feature = "postgres")]
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use uuid::Uuid;

use super::{EMPTY_ORIGIN, Id, IdType, KeySchema, MAX_CHILDREN, ShardKey};
use crate::{Error, Result};

/// Where a mapped key's shard id comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ShardSource {
    /// The shard of the connection the row was read from: the record lives
    /// on that shard.
    Connection,
    /// An integer column of the row (0 to 65535): the key points at a record
    /// on that shard, possibly another one (a foreign key).
    Column(String),
}

/// How to build a [`ShardKey`] from a database row: the origin, where the
/// shard id comes from, the record column and up to three child columns.
///
/// ```
/// use keysmith_core::shard_key::{IdType, KeyMapping, KeySchema};
///
/// // An order line: its own key, from the shard the row was read from.
/// let line = KeyMapping::new('l', "order_id")?.with_child("line_no")?;
/// // The customer the order belongs to, who may live on another shard
/// // (the seed's MapShardKey("@CustomerShardId", 'c', "@CustomerId")),
/// // with ids declared as u32 and a NULL customer an error.
/// let customer = KeyMapping::foreign("customer_shard", 'c', "customer_id")?
///     .with_types(KeySchema::new('c', IdType::U32)?)?
///     .required();
/// assert_eq!(customer.columns(), ["customer_shard", "customer_id"]);
/// # Ok::<(), keysmith_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyMapping {
    origin: char,
    shard: ShardSource,
    record: Column,
    children: Vec<Column>,
    required: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Column {
    name: String,
    ty: Option<IdType>,
}

impl Column {
    fn new(name: String) -> Result<Column> {
        if name.is_empty() {
            return Err(Error::invalid(
                "a key mapping's column name is empty; give the name of a column of the rows",
            ));
        }
        Ok(Column { name, ty: None })
    }
}

impl KeyMapping {
    /// Keys of `origin` whose record id is in column `record`, on the shard
    /// of the connection the row comes from.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the origin is not an ASCII letter or
    /// digit, is the reserved `'0'`, or the column name is empty.
    pub fn new(origin: char, record: impl Into<String>) -> Result<KeyMapping> {
        if !origin.is_ascii_alphanumeric() || origin == EMPTY_ORIGIN {
            return Err(Error::invalid(format!(
                "key mapping origin {origin:?} is not usable: use an ASCII letter or digit other than '0' naming the record type"
            )));
        }
        Ok(KeyMapping {
            origin,
            shard: ShardSource::Connection,
            record: Column::new(record.into())?,
            children: Vec::new(),
            required: false,
        })
    }

    /// Keys of `origin` whose shard id is in column `shard` and record id in
    /// column `record`: a reference to a record that may live on another
    /// shard.
    ///
    /// # Errors
    /// As [`KeyMapping::new`]; also for an empty shard column name.
    pub fn foreign(
        shard: impl Into<String>,
        origin: char,
        record: impl Into<String>,
    ) -> Result<KeyMapping> {
        let shard = Column::new(shard.into())?.name;
        let mut m = KeyMapping::new(origin, record)?;
        m.shard = ShardSource::Column(shard);
        Ok(m)
    }

    /// This mapping with one more child column.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if it has [`MAX_CHILDREN`] child columns
    /// already, if the name is empty, or if types were declared already
    /// (declare them last, with every column in place).
    pub fn with_child(mut self, column: impl Into<String>) -> Result<KeyMapping> {
        if self.children.len() >= MAX_CHILDREN {
            return Err(Error::invalid(format!(
                "a key mapping has at most {MAX_CHILDREN} child columns"
            )));
        }
        if self.record.ty.is_some() {
            return Err(Error::invalid(
                "add child columns before declaring types with with_types",
            ));
        }
        self.children.push(Column::new(column.into())?);
        Ok(self)
    }

    /// This mapping with the id types of `schema`: each column's value is
    /// converted to its declared type (see the module documentation), so
    /// keys read from PostgreSQL and SQLite compare equal.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the schema's origin or number of child
    /// ids differs from the mapping's.
    pub fn with_types(mut self, schema: KeySchema) -> Result<KeyMapping> {
        if schema.origin() != self.origin || schema.children().len() != self.children.len() {
            return Err(Error::invalid(format!(
                "the key schema (origin {:?}, {} child ids) does not fit the mapping (origin {:?}, {} child columns)",
                schema.origin(),
                schema.children().len(),
                self.origin,
                self.children.len()
            )));
        }
        self.record.ty = Some(schema.record());
        for (c, ty) in self.children.iter_mut().zip(schema.children()) {
            c.ty = Some(*ty);
        }
        Ok(self)
    }

    /// This mapping with NULLs refused: a NULL in any mapped column is an
    /// error naming the column, instead of `None`.
    pub fn required(mut self) -> KeyMapping {
        self.required = true;
        self
    }

    /// The origin of the keys.
    pub fn origin(&self) -> char {
        self.origin
    }

    /// Where the shard id comes from.
    pub fn shard_source(&self) -> &ShardSource {
        &self.shard
    }

    /// Whether a NULL is an error (see [`KeyMapping::required`]).
    pub fn is_required(&self) -> bool {
        self.required
    }

    /// The mapped columns, in the order of [`KeyMapping::params`]: the shard
    /// column (if any), the record column, the child columns.
    pub fn columns(&self) -> Vec<&str> {
        let shard = match &self.shard {
            ShardSource::Column(c) => Some(c.as_str()),
            ShardSource::Connection => None,
        };
        shard
            .into_iter()
            .chain(std::iter::once(self.record.name.as_str()))
            .chain(self.children.iter().map(|c| c.name.as_str()))
            .collect()
    }

    /// The key of a PostgreSQL row read from the shard `connection_shard`.
    ///
    /// `Ok(None)` if a mapped column is NULL (unless the mapping is
    /// [`required`](KeyMapping::required)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the column: a column the row lacks,
    /// a column type that cannot hold this id (naming the type), a shard id
    /// outside 0 to 65535, an id a key refuses, or a NULL in a required
    /// mapping.
    #[cfg(feature = "postgres")]
    pub fn from_postgres_row(
        &self,
        row: &tokio_postgres::Row,
        connection_shard: u16,
    ) -> Result<Option<ShardKey>> {
        self.build(connection_shard, |name| pg_value(row, name))
    }

    /// The key of an SQLite row read from the shard `connection_shard`.
    ///
    /// `Ok(None)` if a mapped column is NULL (unless the mapping is
    /// [`required`](KeyMapping::required)).
    ///
    /// # Errors
    /// As [`KeyMapping::from_postgres_row`].
    #[cfg(feature = "sqlite")]
    pub fn from_sqlite_row(
        &self,
        row: &rusqlite::Row<'_>,
        connection_shard: u16,
    ) -> Result<Option<ShardKey>> {
        self.build(connection_shard, |name| sqlite_value(row, name))
    }

    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    fn build(
        &self,
        connection_shard: u16,
        value: impl Fn(&str) -> Result<Option<Typed>>,
    ) -> Result<Option<ShardKey>> {
        let get = |name: &str| -> Result<Option<Typed>> {
            match value(name)? {
                Some(v) => Ok(Some(v)),
                None if self.required => Err(Error::invalid(format!(
                    "column {name:?} is NULL, but the key mapping of origin {:?} is required; allow NULLs (drop .required()) or fix the row",
                    self.origin
                ))),
                None => Ok(None),
            }
        };
        let shard = match &self.shard {
            ShardSource::Connection => connection_shard,
            ShardSource::Column(name) => match get(name)? {
                None => return Ok(None),
                Some(raw) => shard_id(name, raw)?,
            },
        };
        let Some(record) = get(&self.record.name)? else {
            return Ok(None);
        };
        let record = to_id(&self.record, record)?;
        let mut children = Vec::with_capacity(self.children.len());
        for c in &self.children {
            let Some(raw) = get(&c.name)? else {
                return Ok(None);
            };
            children.push(to_id(c, raw)?);
        }
        ShardKey::from_parts(self.origin, shard, record, children).map(Some)
    }

    /// The parts of `key` as statement parameters, in the order of
    /// [`KeyMapping::columns`]: the shard id (only if the mapping has a
    /// shard column), the record id, the child ids. Each [`KeyParam`] is a
    /// parameter for both `tokio-postgres` and `rusqlite`.
    ///
    /// ```
    /// use keysmith_core::shard_key::{KeyMapping, ShardKey};
    ///
    /// let m = KeyMapping::foreign("customer_shard", 'c', "customer_id")?;
    /// let key = ShardKey::new('c', 4, 2i64)?;
    /// let conn = rusqlite::Connection::open_in_memory().unwrap();
    /// let sql = format!("SELECT ?1 = 4 AND ?2 = 2 -- {:?}", m.columns());
    /// let ok: bool = conn
    ///     .query_row(&sql, rusqlite::params_from_iter(m.params(&key)?), |r| r.get(0))
    ///     .unwrap();
    /// assert!(ok);
    /// # Ok::<(), keysmith_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the key's origin or number of child
    /// ids differs from the mapping's, or (with declared types) an id has
    /// another type.
    pub fn params(&self, key: &ShardKey) -> Result<Vec<KeyParam>> {
        key.check_origin(self.origin)?;
        if key.children().len() != self.children.len() {
            return Err(Error::invalid(format!(
                "key {key} has {} child id(s), but the mapping of origin {:?} has {} child column(s)",
                key.children().len(),
                self.origin,
                self.children.len()
            )));
        }
        let mut out = Vec::with_capacity(2 + self.children.len());
        if let ShardSource::Column(_) = self.shard {
            out.push(KeyParam(Id::U16(key.shard())));
        }
        for (c, id) in std::iter::once(&self.record)
            .chain(&self.children)
            .zip(key.ids())
        {
            if let Some(ty) = c.ty
                && id.id_type() != ty
            {
                return Err(Error::invalid(format!(
                    "key {key}: the id for column {:?} is a {}, but the mapping declares a {ty}",
                    c.name,
                    id.id_type()
                )));
            }
            out.push(KeyParam(id.clone()));
        }
        Ok(out)
    }
}

/// One part of a key as a statement parameter, for `tokio-postgres`
/// ([`ToSql`](tokio_postgres::types::ToSql)) and `rusqlite`
/// ([`rusqlite::ToSql`]). See [`KeyMapping::params`].
///
/// For PostgreSQL an integer id is sent as whatever integer type the
/// statement's parameter has (`smallint`, `integer`, `bigint`, `oid`,
/// `"char"`), and fails if it does not fit; a UUID as `uuid` or text, a
/// date-time as `timestamptz` (or `timestamp`, in UTC) or text, anything as
/// text in its [`Id`] text form. For SQLite integers and bools are
/// integers, everything else text in its [`Id`] text form (what
/// [`KeyMapping::with_types`] reads back).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyParam(Id);

impl KeyParam {
    /// The id this parameter sends (a shard id is a `u16`).
    pub fn id(&self) -> &Id {
        &self.0
    }
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn integer(id: &Id) -> Option<i128> {
    Some(match *id {
        Id::I8(v) => v.into(),
        Id::I16(v) => v.into(),
        Id::I32(v) => v.into(),
        Id::I64(v) => v.into(),
        Id::U8(v) => v.into(),
        Id::U16(v) => v.into(),
        Id::U32(v) => v.into(),
        Id::U64(v) => v.into(),
        _ => return None,
    })
}

#[cfg(feature = "postgres")]
fn is_pg_text(ty: &Type) -> bool {
    [
        Type::TEXT,
        Type::VARCHAR,
        Type::BPCHAR,
        Type::NAME,
        Type::UNKNOWN,
    ]
    .contains(ty)
}

#[cfg(feature = "postgres")]
type BoxError = Box<dyn std::error::Error + Sync + Send>;

#[cfg(feature = "postgres")]
impl ToSql for KeyParam {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        let id = &self.0;
        let mismatch = || -> BoxError {
            format!(
                "a {} id ({id}) cannot be sent as a PostgreSQL {ty}",
                id.id_type()
            )
            .into()
        };
        let range = |v: i128| -> BoxError {
            format!("id {v} does not fit the PostgreSQL {ty} parameter").into()
        };
        if let Some(v) = integer(id) {
            return if *ty == Type::INT2 {
                i16::try_from(v).map_err(|_| range(v))?.to_sql(ty, out)
            } else if *ty == Type::INT4 {
                i32::try_from(v).map_err(|_| range(v))?.to_sql(ty, out)
            } else if *ty == Type::INT8 {
                i64::try_from(v).map_err(|_| range(v))?.to_sql(ty, out)
            } else if *ty == Type::OID {
                u32::try_from(v).map_err(|_| range(v))?.to_sql(ty, out)
            } else if *ty == Type::CHAR {
                i8::try_from(v).map_err(|_| range(v))?.to_sql(ty, out)
            } else if is_pg_text(ty) {
                v.to_string().to_sql(ty, out)
            } else {
                Err(mismatch())
            };
        }
        match id {
            Id::Bool(b) if *ty == Type::BOOL => b.to_sql(ty, out),
            Id::Uuid(u) if *ty == Type::UUID => u.to_sql(ty, out),
            Id::DateTime(t) if *ty == Type::TIMESTAMPTZ => t.to_sql(ty, out),
            Id::DateTime(t) if *ty == Type::TIMESTAMP => {
                let utc = t.to_offset(UtcOffset::UTC);
                PrimitiveDateTime::new(utc.date(), utc.time()).to_sql(ty, out)
            }
            _ if is_pg_text(ty) => id.to_string().to_sql(ty, out),
            _ => Err(mismatch()),
        }
    }

    fn accepts(ty: &Type) -> bool {
        is_pg_text(ty)
            || [
                Type::INT2,
                Type::INT4,
                Type::INT8,
                Type::OID,
                Type::CHAR,
                Type::BOOL,
                Type::UUID,
                Type::TIMESTAMPTZ,
                Type::TIMESTAMP,
            ]
            .contains(ty)
    }

    to_sql_checked!();
}

#[cfg(feature = "sqlite")]
impl rusqlite::ToSql for KeyParam {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value};
        let id = &self.0;
        if let Some(v) = integer(id) {
            return i64::try_from(v)
                .map(|v| ToSqlOutput::Owned(Value::Integer(v)))
                .map_err(|_| {
                    rusqlite::Error::ToSqlConversionFailure(
                        format!("id {v} does not fit an SQLite integer (at most 2^63 - 1)").into(),
                    )
                });
        }
        Ok(ToSqlOutput::Owned(match id {
            Id::Bool(b) => Value::Integer(i64::from(*b)),
            other => Value::Text(other.to_string()),
        }))
    }
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
/// A non-NULL column value, before conversion to an [`Id`]. Booleans, UUIDs
/// and date-times come from PostgreSQL's typed columns only.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
enum Raw {
    /// An integer and the id type its column naturally gives.
    Int(i64, IdType),
    Bool(bool),
    Text(String),
    Bytes(Vec<u8>),
    Uuid(Uuid),
    DateTime(OffsetDateTime),
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
/// Names the column's type in errors.
struct Typed {
    raw: Raw,
    sql_type: String,
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn shard_id(column: &str, raw: Typed) -> Result<u16> {
    match raw.raw {
        Raw::Int(v, _) => u16::try_from(v).map_err(|_| {
            Error::invalid(format!(
                "column {column:?} holds {v}, which is not a shard id (0 to 65535)"
            ))
        }),
        _ => Err(Error::invalid(format!(
            "column {column:?} is of type {}, but a shard id column must be an integer (0 to 65535)",
            raw.sql_type
        ))),
    }
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn to_id(column: &Column, value: Typed) -> Result<Id> {
    let name = &column.name;
    let Typed { raw, sql_type } = value;
    let cannot = |wanted: &str| {
        Error::invalid(format!(
            "column {name:?} is of type {sql_type}, which cannot be read as a {wanted} id; change the column or the mapping's declared type (supported: integers, text, uuid, timestamptz, boolean)"
        ))
    };
    let id = match (raw, column.ty) {
        (Raw::Int(v, natural), ty) => {
            let ty = ty.unwrap_or(natural);
            let out_of_range = || {
                Error::invalid(format!(
                    "column {name:?} holds {v}, which does not fit a {ty} id"
                ))
            };
            match ty {
                IdType::I8 => Id::I8(v.try_into().map_err(|_| out_of_range())?),
                IdType::I16 => Id::I16(v.try_into().map_err(|_| out_of_range())?),
                IdType::I32 => Id::I32(v.try_into().map_err(|_| out_of_range())?),
                IdType::I64 => Id::I64(v),
                IdType::U8 => Id::U8(v.try_into().map_err(|_| out_of_range())?),
                IdType::U16 => Id::U16(v.try_into().map_err(|_| out_of_range())?),
                IdType::U32 => Id::U32(v.try_into().map_err(|_| out_of_range())?),
                IdType::U64 => Id::U64(v.try_into().map_err(|_| out_of_range())?),
                other => return Err(cannot(other.name())),
            }
        }
        (Raw::Bool(b), None | Some(IdType::Bool)) => Id::Bool(b),
        (Raw::Text(s), None | Some(IdType::String)) => Id::String(s),
        (Raw::Text(s), Some(ty)) => Id::parse(ty, &s).map_err(|e| {
            Error::invalid(format!(
                "column {name:?} ({sql_type}) holds {s:?}, which is not a {ty}: {e}"
            ))
        })?,
        (Raw::Bytes(b), Some(IdType::Uuid)) if b.len() == 16 => {
            Id::Uuid(Uuid::from_slice(&b).map_err(|_| cannot("uuid"))?)
        }
        (Raw::Uuid(u), None | Some(IdType::Uuid)) => Id::Uuid(u),
        (Raw::DateTime(t), None | Some(IdType::DateTime)) => Id::DateTime(t),
        (_, ty) => {
            return Err(cannot(ty.map_or("key", IdType::name)));
        }
    };
    id.validate()
        .map_err(|e| Error::invalid(format!("column {name:?}: {e}")))?;
    Ok(id)
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn missing_column(name: &str, columns: Vec<&str>) -> Error {
    Error::invalid(format!(
        "the row has no column {name:?} (its columns: {}); select it or fix the key mapping",
        columns.join(", ")
    ))
}

#[cfg(feature = "postgres")]
fn pg_value(row: &tokio_postgres::Row, name: &str) -> Result<Option<Typed>> {
    let Some(idx) = row.columns().iter().position(|c| c.name() == name) else {
        return Err(missing_column(
            name,
            row.columns().iter().map(|c| c.name()).collect(),
        ));
    };
    let ty = row.columns()[idx].type_().clone();
    let sql_type = ty.name().to_owned();
    let failed = |e: tokio_postgres::Error| {
        Error::invalid(format!(
            "column {name:?} of type {sql_type} cannot be read: {e}"
        ))
    };
    let raw = if ty == Type::INT2 {
        row.try_get::<_, Option<i16>>(idx)
            .map_err(failed)?
            .map(|v| Raw::Int(v.into(), IdType::I16))
    } else if ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(idx)
            .map_err(failed)?
            .map(|v| Raw::Int(v.into(), IdType::I32))
    } else if ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(idx)
            .map_err(failed)?
            .map(|v| Raw::Int(v, IdType::I64))
    } else if ty == Type::OID {
        row.try_get::<_, Option<u32>>(idx)
            .map_err(failed)?
            .map(|v| Raw::Int(v.into(), IdType::U32))
    } else if ty == Type::CHAR {
        row.try_get::<_, Option<i8>>(idx)
            .map_err(failed)?
            .map(|v| Raw::Int(v.into(), IdType::I8))
    } else if ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(idx)
            .map_err(failed)?
            .map(Raw::Bool)
    } else if is_pg_text(&ty) {
        row.try_get::<_, Option<String>>(idx)
            .map_err(failed)?
            .map(Raw::Text)
    } else if ty == Type::UUID {
        row.try_get::<_, Option<Uuid>>(idx)
            .map_err(failed)?
            .map(Raw::Uuid)
    } else if ty == Type::TIMESTAMPTZ {
        row.try_get::<_, Option<OffsetDateTime>>(idx)
            .map_err(failed)?
            .map(Raw::DateTime)
    } else if ty == Type::TIMESTAMP {
        row.try_get::<_, Option<PrimitiveDateTime>>(idx)
            .map_err(failed)?
            .map(|t| Raw::DateTime(t.assume_utc()))
    } else if ty == Type::BYTEA {
        row.try_get::<_, Option<Vec<u8>>>(idx)
            .map_err(failed)?
            .map(Raw::Bytes)
    } else {
        return Err(Error::invalid(format!(
            "column {name:?} is of type {sql_type}, which cannot hold a key id; use an integer, text, uuid or timestamptz column"
        )));
    };
    Ok(raw.map(|raw| Typed { raw, sql_type }))
}

#[cfg(feature = "sqlite")]
fn sqlite_value(row: &rusqlite::Row<'_>, name: &str) -> Result<Option<Typed>> {
    use rusqlite::types::ValueRef;
    let stmt = row.as_ref();
    let Ok(idx) = stmt.column_index(name) else {
        return Err(missing_column(name, stmt.column_names().collect()));
    };
    let value = row
        .get_ref(idx)
        .map_err(|e| Error::invalid(format!("column {name:?} cannot be read: {e}")))?;
    let (raw, sql_type) = match value {
        ValueRef::Null => return Ok(None),
        ValueRef::Integer(v) => (Raw::Int(v, IdType::I64), "INTEGER"),
        ValueRef::Text(t) => (
            Raw::Text(
                std::str::from_utf8(t)
                    .map_err(|_| {
                        Error::invalid(format!("column {name:?} holds text that is not UTF-8"))
                    })?
                    .to_owned(),
            ),
            "TEXT",
        ),
        ValueRef::Blob(b) => (Raw::Bytes(b.to_vec()), "BLOB"),
        ValueRef::Real(_) => {
            return Err(Error::invalid(format!(
                "column {name:?} holds a REAL (floating-point) value, which cannot be a key id; use an INTEGER or TEXT column"
            )));
        }
    };
    Ok(Some(Typed {
        raw,
        sql_type: sql_type.to_owned(),
    }))
}

#[cfg(all(test, feature = "postgres", feature = "sqlite"))]
mod tests {
    use super::*;

    fn sqlite_key(m: &KeyMapping, select: &str, shard: u16) -> Result<Option<ShardKey>> {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.query_row(select, [], |r| Ok(m.from_sqlite_row(r, shard)))
            .unwrap()
    }

    #[test]
    fn sqlite_rows_give_keys_nulls_none_and_required_errors() {
        let m = KeyMapping::new('o', "id")
            .unwrap()
            .with_child("line")
            .unwrap();
        let k = sqlite_key(&m, "SELECT 42 AS id, 7 AS line", 3)
            .unwrap()
            .unwrap();
        assert_eq!(
            k,
            ShardKey::new('o', 3, 42i64)
                .unwrap()
                .with_child(7i64)
                .unwrap()
        );
        assert_eq!(
            sqlite_key(&m, "SELECT 42 AS id, NULL AS line", 3).unwrap(),
            None
        );
        let err = sqlite_key(&m.clone().required(), "SELECT 42 AS id, NULL AS line", 3)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"line\"") && err.contains("NULL"), "{err}");
    }

    #[test]
    fn foreign_shard_comes_from_its_column_and_is_range_checked() {
        let m = KeyMapping::foreign("cs", 'c', "cid").unwrap();
        let k = sqlite_key(&m, "SELECT 4 AS cs, 2 AS cid", 1)
            .unwrap()
            .unwrap();
        assert_eq!(k, ShardKey::new('c', 4, 2i64).unwrap());
        let err = sqlite_key(&m, "SELECT 70000 AS cs, 2 AS cid", 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"cs\"") && err.contains("70000"), "{err}");
        let err = sqlite_key(&m, "SELECT 'x' AS cs, 2 AS cid", 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"cs\"") && err.contains("TEXT"), "{err}");
    }

    #[test]
    fn wrong_types_name_column_and_type() {
        let m = KeyMapping::new('o', "id").unwrap();
        let err = sqlite_key(&m, "SELECT 1.5 AS id", 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"id\"") && err.contains("REAL"), "{err}");
        let err = sqlite_key(&m, "SELECT x'00' AS id", 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"id\"") && err.contains("BLOB"), "{err}");
        let err = sqlite_key(&m, "SELECT 1 AS other", 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"id\"") && err.contains("other"), "{err}");
        let typed = m
            .clone()
            .with_types(KeySchema::new('o', IdType::U8).unwrap())
            .unwrap();
        let err = sqlite_key(&typed, "SELECT 300 AS id", 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"id\"") && err.contains("u8"), "{err}");
        let uuid = m
            .with_types(KeySchema::new('o', IdType::Uuid).unwrap())
            .unwrap();
        let err = sqlite_key(&uuid, "SELECT 'nope' AS id", 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"id\"") && err.contains("TEXT"), "{err}");
    }

    #[test]
    fn declared_types_round_trip_through_sqlite_params() {
        let schema = KeySchema::new('o', IdType::Uuid)
            .unwrap()
            .with_child(IdType::DateTime)
            .unwrap()
            .with_child(IdType::U16)
            .unwrap();
        let m = KeyMapping::foreign("s", 'o', "a")
            .unwrap()
            .with_child("b")
            .unwrap()
            .with_child("c")
            .unwrap()
            .with_types(schema)
            .unwrap();
        let key = ShardKey::from_parts(
            'o',
            65535,
            Id::Uuid(Uuid::from_u128(0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8)),
            vec![
                "datetime:2024-05-01T12:00:00+02:00".parse().unwrap(),
                Id::U16(9),
            ],
        )
        .unwrap();
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let back = conn
            .query_row(
                "SELECT ?1 AS s, ?2 AS a, ?3 AS b, ?4 AS c",
                rusqlite::params_from_iter(m.params(&key).unwrap()),
                |r| Ok(m.from_sqlite_row(r, 0)),
            )
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(back, key);
        // A key of another shape is refused.
        let other = ShardKey::new('o', 1, 5i64).unwrap();
        assert!(m.params(&other).is_err());
        assert!(m.params(&ShardKey::new('x', 1, 5i64).unwrap()).is_err());
    }

    #[test]
    fn bad_mappings_are_refused() {
        assert!(KeyMapping::new('0', "id").is_err());
        assert!(KeyMapping::new('-', "id").is_err());
        assert!(KeyMapping::new('o', "").is_err());
        let full = KeyMapping::new('o', "a")
            .unwrap()
            .with_child("b")
            .unwrap()
            .with_child("c")
            .unwrap()
            .with_child("d")
            .unwrap();
        assert!(full.clone().with_child("e").is_err());
        assert!(
            full.with_types(KeySchema::new('o', IdType::I64).unwrap())
                .is_err()
        );
    }
}
