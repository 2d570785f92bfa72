//! The schemas the routes' annotations and the document share: names,
//! bounded integers, path parameters, and the objects the library owns and
//! the server passes through (`library`: a sequence's row, a pool's, a
//! fence report, a worker lease ...), written out as the library serializes
//! them (its types do not derive `ToSchema`). Below both the routes and
//! `openapi`, which assembles the document from the route list.

use serde_json::{Value, json};
use utoipa::IntoParams;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::{RefOr, Required, schema};

/// The characters a name may not hold, as inclusive ranges: whitespace
/// (Unicode `White_Space`) and control characters (`Cc`), as
/// [`keysmith::validate_name`] checks.
pub(crate) const NAME_EXCLUDED: [(u32, u32); 8] = [
    (0x00, 0x20),
    (0x7f, 0xa0),
    (0x1680, 0x1680),
    (0x2000, 0x200a),
    (0x2028, 0x2029),
    (0x202f, 0x202f),
    (0x205f, 0x205f),
    (0x3000, 0x3000),
];

/// The pattern of a name (ECMA-262 and Python alike): one or more
/// characters, none of them whitespace or a control character.
pub fn name_pattern() -> String {
    let mut class = String::new();
    for (lo, hi) in NAME_EXCLUDED {
        class.push_str(&format!("\\u{lo:04x}"));
        if hi != lo {
            class.push_str(&format!("-\\u{hi:04x}"));
        }
    }
    format!("^[^{class}]+$")
}

/// The schema of a name: 1 to [`keysmith::MAX_NAME_BYTES`] bytes, no
/// whitespace, no control characters (`schema_with` of names in bodies and
/// paths).
pub(crate) fn name_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(keysmith::MAX_NAME_BYTES))
        .pattern(Some(name_pattern()))
        .description(Some(format!(
            "1 to {} bytes of UTF-8 (the schema's maxLength counts characters), no whitespace \
             and no control characters. URL-like names such as `example.com/a#main` are fine.",
            keysmith::MAX_NAME_BYTES
        )))
        .into()
}

/// An integer schema from `min` to `max` (both included), with `description`.
pub(crate) fn int(min: i64, max: i64, description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(min))
        .maximum(Some(max))
        .description((!description.is_empty()).then(|| description.to_owned()))
}

/// [`int`], or null.
pub(crate) fn int_or_null(min: i64, max: i64, description: &str) -> Schema {
    int(min, max, description)
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .into()
}

/// A path parameter: required, with `description` and `schema`.
fn path_param(name: &str, description: &str, schema: Schema) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(schema))
        .build()
}

/// A string of `pattern`.
fn pattern(pattern: &str) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .into()
}

/// Declares a path parameter type for `params(...)` of an operation.
macro_rules! path_params {
    ($($(#[$doc:meta])* $ty:ident => $name:literal, $description:literal, $schema:expr;)*) => {$(
        $(#[$doc])*
        pub(crate) struct $ty;

        impl IntoParams for $ty {
            fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
                vec![path_param($name, $description, $schema)]
            }
        }
    )*};
}

path_params! {
    /// `{name}`: a sequence's or a pool's name.
    NameParam => "name", "Percent-encoded name (a `/` in a name is sent as %2F).", name_schema();
    /// `{group}`: a group of worker ids.
    GroupParam => "group", "The group of worker ids (a name; percent-encoded).", name_schema();
    /// `{ticket}`: a ticket a take returned.
    TicketParam => "ticket", "The ticket a take returned, quoted exactly (PERIOD-VALUE-TOKEN, with -LIFE after it for a name dropped and created again).",
        pattern("^[0-9]{1,19}-[0-9]{1,19}-[0-9a-f]{32}(-[0-9]{1,19})?$");
    /// `{token}`: a worker lease's token.
    TokenParam => "token", "The token the last lease or renewal returned.",
        pattern("^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$");
    /// `{id}`: an id of this server's layout.
    IdParam => "id", "An id made with this server's layout: a whole number from 0 to 9223372036854775807.",
        pattern("^[0-9]{1,19}$");
}

/// A JSON schema written out, as a component.
fn from_json(v: Value) -> RefOr<Schema> {
    serde_json::from_value(v).unwrap_or_else(|_| RefOr::T(Schema::Object(schema::Object::new())))
}

/// Declares components whose schemas are written out in JSON: the
/// objects the library serializes and the server passes through. Each is a
/// type for `body = ...` of an operation; `all()` lists them, and the
/// document holds each one exactly as written (see `complete`).
macro_rules! library_schemas {
    ($($(#[$doc:meta])* $name:ident => $json:expr;)*) => {
        $(
            $(#[$doc])*
            #[allow(dead_code)] // A type for its schema only.
            pub(crate) struct $name;

            impl utoipa::PartialSchema for $name {
                fn schema() -> RefOr<Schema> {
                    from_json($json)
                }
            }

            impl utoipa::ToSchema for $name {
                fn name() -> std::borrow::Cow<'static, str> {
                    std::borrow::Cow::Borrowed(stringify!($name))
                }
            }
        )*

        /// Every schema written out here, by name, as written.
        pub(crate) fn all() -> Vec<(&'static str, Value)> {
            vec![$((stringify!($name), $json)),*]
        }
    };
}

/// Schemas of what the library serializes and the server sends as it is
/// (the library's types do not derive `ToSchema`).
pub(crate) mod library {
    use super::*;
    use keysmith::store::{MAX_INCREMENT, MAX_RESERVATION, MAX_VALUE};

    /// An integer, or a string of one with `as=string` (a formatted
    /// number's text, where a route says so).
    fn int_or_string() -> Value {
        json!({"oneOf": [{"type": "integer"}, {"type": "string"}]})
    }

    library_schemas! {
        /// The body of `PATCH /v1/sequences/{name}` ([`keysmith::sequence::AlterSpec`]).
        AlterSequence => json!({"type": "object", "additionalProperties": false, "properties": {
            "next": {"type": ["integer", "null"], "format": "int64", "description": "null or absent keeps the current value (so for every field)."},
            "max": {"type": ["integer", "null"], "format": "int64"},
            "block": {"type": ["integer", "null"], "format": "int64"},
            "failover_skip": {"type": ["integer", "null"], "format": "int64", "minimum": 0, "maximum": MAX_RESERVATION,
                "description": "How far next moves forward when a reservation finds the store in a new generation; set by hand from now on."}}});
        /// With `bit_reversed`: values never handed out ([`keysmith::numbers::SkipRange`]).
        SkipRange => json!({"type": "object", "required": ["start", "end"], "additionalProperties": false,
            "description": "With bit_reversed: values start..end (end excluded) are never handed out; 0 <= start < end, at most 2^62 values.",
            "properties": {"start": {"type": "integer", "minimum": 0, "maximum": MAX_VALUE},
                           "end": {"type": "integer", "minimum": 1, "maximum": i64::MAX}}});
        /// How a numbered sequence hands out numbers ([`keysmith::numbers::Numbering`]).
        Numbering => json!({"type": "object", "properties": {
            "gapless": {"type": "boolean"}, "period": {"type": ["string", "null"]}, "template": {"type": ["string", "null"]},
            "residue": {"type": "object", "required": ["increment", "offset"], "properties": {
                "increment": {"type": "integer"}, "offset": {"type": "integer"}}},
            "opaque": {"type": "object", "description": "Opaque values; the keys' secrets are never shown.", "properties": {
                "value_max": {"type": "integer", "format": "int64"},
                "keys": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "integer"}, "from": {"type": "integer", "format": "int64"}}}}}},
            "encoding": {"type": "object", "properties": {
                "alphabet": {"type": "string", "enum": ["base32", "base62"]},
                "prefix": {"type": "string"}, "width": {"type": "integer"}}}}});
        /// A sequence ([`keysmith::sequence::SequenceInfo`]) with this server's handle.
        Sequence => json!({"type": "object", "properties": {
            "numbering": {"$ref": "#/components/schemas/Numbering"},
            "range_left_share": {"type": "number", "description": "The share of the range not yet reserved, 0 to 1."},
            "range_warning": {"type": "string", "description": "Present when less than 10 % of the range is left."},
            "name": {"type": "string"}, "next": {"type": "integer"}, "start": {"type": "integer"},
            "max": {"type": "integer"}, "block": {"type": "integer", "description": "The default block size."},
            "version": {"type": "integer"}, "remaining": {"type": "integer"},
            "generation": {"type": ["string", "null"], "description": "The store generation of the row's last write."},
            "failover_skip": {"type": "integer"}, "failover_skip_set": {"type": "boolean"},
            "skipped_at_failover": {"type": "integer", "description": "Values skipped at generation changes so far."},
            "continued_above_dropped": {"type": "integer", "description": "create only, present when a dropped sequence of the name \
                had handed out values at or above the start asked for: the start the sequence got instead (creating a dropped name \
                continues above the values it handed out)."},
            "increment": {"type": "integer", "description": "Of a residue class: every value is offset modulo increment (next, start and max are values of it)."},
            "offset": {"type": "integer"},
            "server": {"description": "This server's handle, null until it handed out a value (always null for a numbered sequence).",
                "oneOf": [{"type": "null"}, {"type": "object", "properties": {
                    "block": {"type": "integer", "description": "Current (adaptive) block size."},
                    "served": {"type": "integer"}, "last_served": {"type": ["integer", "null"]},
                    "rate": {"type": "number"}, "refills": {"type": "integer"}, "conflicts": {"type": "integer"}}}]}}});
        /// Every sequence.
        SequenceList => json!({"type": "object", "properties": {"sequences": {"type": "array", "items": {"$ref": "#/components/schemas/Sequence"}}}});
        /// A pool ([`keysmith::store::PoolRow`], [`keysmith::pool::PoolInfo`]) with this server's handle.
        Pool => json!({"type": "object", "properties": {
            "name": {"type": "string"}, "start": {"type": "integer", "description": "The first number (a value of the class, for a pool in one)."},
            "size": {"type": "integer"},
            "generation": {"type": ["string", "null"], "description": "The store generation the pool was created or last fenced in."},
            "increment": {"type": "integer", "description": "Of a pool in a residue class: every number is offset modulo increment (start, lowest, highest and max_value are values of it). Absent otherwise."},
            "offset": {"type": "integer"},
            "continued_above_dropped": {"type": "integer", "description": "create only, present when a dropped pool of the name \
                had handed out numbers at or above the start asked for: the start the pool got instead."},
            "lowest": {"type": "integer", "description": "show only"}, "highest": {"type": "integer", "description": "show only"},
            "taken": {"type": "integer", "description": "show only"}, "max_value": {"type": "integer", "description": "show only"},
            "rate_per_second": {"type": ["number", "null"], "description": "show only"},
            "runway_seconds": {"type": ["number", "null"], "description": "show only"},
            "server": {"description": "This server's handle, null until it handed out a number.",
                "oneOf": [{"type": "null"}, {"type": "object", "properties": {
                    "served": {"type": "integer"}, "rate": {"type": "number"}, "attempts": {"type": "integer"},
                    "conflicts": {"type": "integer"}, "conflict_rate": {"type": "number"}}}]}}});
        /// Every pool.
        PoolList => json!({"type": "object", "properties": {"pools": {"type": "array", "items": {"$ref": "#/components/schemas/Pool"}}}});
        /// What a fence moved ([`keysmith::fence::FenceReport`]).
        FenceReport => json!({"type": "object", "required": ["dry_run", "changes", "left_alone"], "properties": {
            "dry_run": {"type": "boolean"},
            "changes": {"type": "array", "items": {"type": "object", "properties": {
                "kind": {"type": "string"}, "name": {"type": "string"},
                "before": {"type": "integer"}, "after": {"type": "integer"}}}},
            "left_alone": {"type": "array", "items": {"type": "string"}}}});
        /// The parts of a number a sequence printed ([`keysmith::numbers::Number`]).
        NumberParts => json!({"type": "object", "required": ["period", "n"], "properties": {
            "period": {"type": ["integer", "null"]}, "n": {"type": "integer"}}});
        /// A value mapped back to its counter ([`keysmith::numbers::Decoded`]).
        Decoded => json!({"type": "object", "required": ["value", "counter"], "properties": {
            "value": {"type": "integer", "format": "int64"}, "counter": {"type": "integer", "format": "int64"}}});
        /// An id taken apart ([`keysmith::ids::DecodedId`]).
        DecodedId => json!({"type": "object", "required": ["id", "time_ms", "time", "worker", "sequence"], "properties": {
            "id": {"type": "integer", "format": "int64"}, "time_ms": {"type": "integer", "format": "int64"},
            "time": {"type": "string", "format": "date-time"}, "worker": {"type": "integer"}, "sequence": {"type": "integer"}}});
        /// The ids of a time window ([`keysmith::ids::IdBounds`]).
        IdBounds => json!({"type": "object", "required": ["from_ms", "to_ms", "from", "to", "min_id", "max_id"], "properties": {
            "from_ms": {"type": "integer", "format": "int64"}, "to_ms": {"type": "integer", "format": "int64"},
            "from": {"type": "string"}, "to": {"type": "string"},
            "min_id": {"type": "integer", "format": "int64", "description": "The smallest id whose time unit overlaps the window."},
            "max_id": {"type": "integer", "format": "int64", "description": "The largest id whose time unit overlaps the window."}}});
        /// A worker lease ([`keysmith::ids::HeldWorker`]).
        HeldWorker => json!({"type": "object", "required": ["group", "worker", "fence", "max", "not_before_ms", "until_ms", "expires_ms", "ttl_ms", "lease"], "properties": {
            "group": {"type": "string"},
            "worker": {"type": "integer", "minimum": 0, "description": "The worker id, 0..max."},
            "fence": {"type": "integer", "minimum": 1, "description": "Bumped by every acquisition of this worker id."},
            "max": {"type": "integer"},
            "not_before_ms": {"type": "integer", "format": "int64", "description": "Ids made with this worker id use times at or above this (ms since 1970)."},
            "until_ms": {"type": "integer", "format": "int64", "description": "Ids made with this worker id use times below this; renewals move it forward."},
            "expires_ms": {"type": "integer", "format": "int64", "description": "The lease expires then unless renewed; a renewal after it is a 409."},
            "ttl_ms": {"type": "integer"},
            "lease": {"type": "string", "description": "The signed token that renews and releases the lease; a renewal returns a new one."}}});
        /// A group's worker ids ([`keysmith::ids::WorkerList`]).
        WorkerList => json!({"type": "object", "required": ["group", "workers"], "properties": {
            "group": {"type": "string"},
            "workers": {"type": "array", "description": "Every worker id of the group ever leased, ordered by worker id, held or not; \
                empty for a group no one leased from. No lease tokens.",
                "items": {"type": "object", "required": ["worker", "held", "holder", "fence", "until_ms", "expires_ms", "expires_in_ms"], "properties": {
                "worker": {"type": "integer", "minimum": 0},
                "held": {"type": "boolean", "description": "A live lease holds it, by the store's clock: a lease of the group passes it over."},
                "holder": {"type": ["string", "null"], "description": "While held: HOST/PID of a keysmith id generator, or lease/HOST/PID of the server or command that leased it."},
                "fence": {"type": "integer", "description": "The fence of its last acquisition."},
                "until_ms": {"type": "integer", "format": "int64", "description": "Its time floor (ms since 1970): ids made with it lie below; the next holder starts at or above it."},
                "expires_ms": {"type": ["integer", "null"], "format": "int64", "description": "While held: when the lease expires unless renewed (this server's clock)."},
                "expires_in_ms": {"type": ["integer", "null"], "minimum": 0, "description": "While held: the time the lease has left by the store's clock (etcd: whole seconds)."}}}}}});
        /// An integer, or a string of one (`as=string`, or a formatted number).
        IntOrString => int_or_string();
        /// A shard key's record or child id.
        Id => json!({"description": "An integer (an i64), \"TYPE:VALUE\" (u32:42, string:abc, uuid:..., datetime:2024-05-01T12:00:00Z, duration:1.5s), or {\"type\", \"value\"}.",
            "oneOf": [{"type": "integer"}, {"type": "string"}, {"type": "object", "required": ["type", "value"],
                "properties": {"type": {"type": "string"}, "value": {}}}]});
    }

    /// The bounds of `increment` (`schema_with` of the create bodies).
    pub(crate) fn increment() -> Schema {
        super::int_or_null(
            2,
            MAX_INCREMENT,
            "Values are all offset modulo increment (a residue class: one per region, each with its own store, \
             and no two regions ever hand out the same value). Kept with the object: every server opening it \
             hands out only values of the class.",
        )
    }

    /// The bounds of `offset` (`schema_with` of the create bodies).
    pub(crate) fn offset() -> Schema {
        super::int_or_null(
            0,
            MAX_INCREMENT - 1,
            "With increment: every value's remainder, 0 <= offset < increment (default 0). Without increment: a 400.",
        )
    }
}
