//! `GET /openapi.json`: the API described in OpenAPI 3.1.
//!
//! The document states the rules the server checks: name patterns and
//! lengths, bounds of every number, the count limit of this server, and
//! every status each route can answer. Two rules JSON Schema cannot say are
//! in the descriptions: a name is at most 512 *bytes* of UTF-8 (the schema
//! counts characters), and the bounds that tie two fields together
//! (`start <= max` of a sequence, `start <= 2^63 - 2 * size` of a pool,
//! `offset < increment` of a residue class, and that a class has values
//! between a sequence's start and max, or room for a pool's members).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::AppState;

/// The characters a name may not hold, as inclusive ranges: whitespace
/// (Unicode `White_Space`) and control characters (`Cc`), as
/// [`keysmith::validate_name`] checks.
const NAME_EXCLUDED: [(u32, u32); 8] = [
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

/// The OpenAPI document of the API, for a server with the default limits
/// ([`crate::DEFAULT_MAX_COUNT`], [`crate::DEFAULT_MAX_POOL_SIZE`],
/// [`crate::DEFAULT_MAX_FENCE_SKIP`], [`crate::DEFAULT_MAX_WORKER_TTL`],
/// [`crate::DEFAULT_MAX_WORKER_GROUP`]).
pub fn document() -> Value {
    document_with(&Limits::default())
}

/// The OpenAPI document of the API, for a server whose `next` routes take
/// at most `max_count` values a request and that creates pools of at most
/// `max_pool_size` members (the other limits at their defaults).
pub fn document_for(max_count: i64, max_pool_size: i64) -> Value {
    document_with(&Limits {
        max_count,
        max_pool_size,
        ..Limits::default()
    })
}

/// The limits a server states in its document.
pub(crate) struct Limits {
    pub(crate) max_count: i64,
    pub(crate) max_pool_size: i64,
    pub(crate) max_fence_skip: i64,
    pub(crate) max_worker_ttl_ms: u64,
    pub(crate) max_worker_group: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_count: crate::DEFAULT_MAX_COUNT,
            max_pool_size: crate::DEFAULT_MAX_POOL_SIZE,
            max_fence_skip: crate::DEFAULT_MAX_FENCE_SKIP,
            max_worker_ttl_ms: crate::DEFAULT_MAX_WORKER_TTL.as_millis() as u64,
            max_worker_group: crate::DEFAULT_MAX_WORKER_GROUP,
        }
    }
}

/// The document of a server with `limits`.
pub(crate) fn document_with(limits: &Limits) -> Value {
    let &Limits {
        max_count,
        max_pool_size,
        max_fence_skip,
        max_worker_ttl_ms,
        max_worker_group,
    } = limits;
    let name_schema = json!({
        "type": "string", "minLength": 1, "maxLength": keysmith::MAX_NAME_BYTES, "pattern": name_pattern(),
        "description": format!("1 to {} bytes of UTF-8 (the schema's maxLength counts characters), \
            no whitespace and no control characters. URL-like names such as `example.com/a#main` are fine.",
            keysmith::MAX_NAME_BYTES)
    });
    let name = json!({
        "name": "name", "in": "path", "required": true,
        "description": "Percent-encoded name (a `/` in a name is sent as %2F).",
        "schema": name_schema
    });
    let count = json!({
        "name": "count", "in": "query", "required": false,
        "description": "How many values. Above this server's maximum (`--max-count`) is a 413; a bad `as` is a 400 first.",
        "schema": {"type": "integer", "minimum": 1, "maximum": max_count, "default": 1}
    });
    let reserve_count = json!({
        "name": "count", "in": "query", "required": false,
        "description": "How many values to reserve. Above this server's maximum (`--max-count`) is a 413; a bad `as` is a 400 first.",
        "schema": {"type": "integer", "minimum": 1, "maximum": max_count, "default": 1}
    });
    let as_ = json!({
        "name": "as", "in": "query", "required": false,
        "description": "`string` sends values as JSON strings, for clients whose numbers lose precision above 2^53.",
        "schema": {"type": "string", "enum": ["number", "string"]}
    });
    let ticket = json!({
        "name": "ticket", "in": "path", "required": true,
        "description": "The ticket a take returned (PERIOD-VALUE-TOKEN).",
        "schema": {"type": "string", "pattern": "^[0-9]{1,19}-[0-9]{1,19}-[0-9a-f]{32}$"}
    });
    let group = json!({
        "name": "group", "in": "path", "required": true,
        "description": "The group of worker ids (a name; percent-encoded).",
        "schema": name_schema.clone()
    });
    let token = json!({
        "name": "token", "in": "path", "required": true,
        "description": "The token the last lease or renewal returned.",
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$"}
    });
    let ttl_ms = json!({
        "name": "ttl_ms", "in": "query", "required": false,
        "description": "The lease's time to live, ms (default 10000, or this server's limit if lower; a renewal: the lease's own). Above this server's limit (`--max-worker-ttl-ms`) is a 413.",
        "schema": {"type": "integer", "minimum": 1, "maximum": max_worker_ttl_ms}
    });
    let err = |d: &str| json!({"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let ok = |d: &str, schema: &str| json!({"description": d, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}});
    let common = |mut m: serde_json::Map<String, Value>| {
        m.insert(
            "400".into(),
            err("Bad input: name, body or query parameter."),
        );
        m.insert("401".into(), err("No token, or the wrong one."));
        m.insert(
            "403".into(),
            err("The caller's principal lacks the grant this route needs on this name (access file), or is over its quota; nothing changed."),
        );
        m.insert(
            "429".into(),
            err("The caller's principal is over its request rate; see Retry-After."),
        );
        m.insert(
            "503".into(),
            err("Contention, store unavailable or request timeout; see Retry-After."),
        );
        Value::Object(m)
    };
    let responses = |pairs: Vec<(&str, Value)>| {
        common(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    };
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "keysmith",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Unique keys over HTTP: durable sequences, value pools, host counters, shard keys. \
                Every value is handed out at most once. With a token or an access file, every route but the probes \
                (/healthz, /livez, /readyz) needs `Authorization: Bearer TOKEN` (or HTTP Basic with the token as \
                the password, or a client certificate a principal names); a principal without the grant a route \
                needs gets a 403 that changes nothing."
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                    "type": "object", "required": ["code", "message"],
                    "properties": {
                        "code": {"type": "string", "examples": ["not_found", "already_exists", "invalid_name", "too_large", "contention"]},
                        "message": {"type": "string"},
                        "similar": {"type": "array", "items": {"type": "string"}, "description": "Existing names that look alike (404 only)."}
                    }}}},
                "Lease": {"type": "object", "required": ["ranges", "step", "lease"], "properties": {
                    "step": {"type": "integer", "minimum": 1, "maximum": keysmith::store::MAX_INCREMENT,
                        "description": "The distance between two values of a range: 1, or a residue class's increment (values start, start + step, ... below end)."},
                    "ranges": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["start", "end"],
                        "description": "Half-open: start is the first value, end one past the last.",
                        "properties": {"start": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                                       "end": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}}},
                    "lease": {"type": "string", "description": "A signed token naming this reservation, for the release route."}}},
                "AlterSequence": {"type": "object", "additionalProperties": false, "properties": {
                    "next": {"type": ["integer", "null"], "format": "int64", "description": "null or absent keeps the current value (so for every field)."},
                    "max": {"type": ["integer", "null"], "format": "int64"},
                    "block": {"type": ["integer", "null"], "format": "int64"},
                    "failover_skip": {"type": ["integer", "null"], "format": "int64", "minimum": 0, "maximum": keysmith::store::MAX_RESERVATION,
                        "description": "How far next moves forward when a reservation finds the store in a new generation; set by hand from now on."}}},
                "Fence": {"type": "object", "required": ["skip"], "additionalProperties": false,
                    "description": "Exactly one of name and all (true); a null name is no name.",
                    "properties": {
                    "name": {"anyOf": [name_schema.clone(), {"type": "null"}]},
                    "all": {"type": "boolean", "default": false},
                    "skip": {"type": "integer", "minimum": 1, "maximum": max_fence_skip, "description": "Above this server's limit (`--max-fence-skip`) is a 413."},
                    "dry_run": {"type": "boolean", "default": false}}},
                "FenceReport": {"type": "object", "required": ["dry_run", "changes", "left_alone"], "properties": {
                    "dry_run": {"type": "boolean"},
                    "changes": {"type": "array", "items": {"type": "object", "properties": {
                        "kind": {"type": "string"}, "name": {"type": "string"},
                        "before": {"type": "integer"}, "after": {"type": "integer"}}}},
                    "left_alone": {"type": "array", "items": {"type": "string"}}}},
                "Release": {"type": "object", "required": ["lease", "from"], "additionalProperties": false, "properties": {
                    "lease": {"type": "string", "description": "The token a reserve call returned."},
                    "from": {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": "^-?[0-9]+$"}],
                        "description": "The first value of the lease not handed out; from..end goes back."}}},
                "Released": {"type": "object", "required": ["released"], "properties": {
                    "released": {"oneOf": [{"type": "null"}, {"type": "object", "required": ["start", "end"], "properties": {
                        "start": {"type": "integer"}, "end": {"type": "integer"}}}],
                        "description": "The range handed back, or null when someone reserved since (the values stay a gap)."}}},
                "Ids": {"type": "object", "required": ["ids"], "properties": {
                    "ids": {"type": "array", "items": {"oneOf": [{"type": "integer", "format": "int64"}, {"type": "string"}]}}}},
                "IdBounds": {"type": "object", "required": ["from_ms", "to_ms", "from", "to", "min_id", "max_id"], "properties": {
                    "from_ms": {"type": "integer", "format": "int64"}, "to_ms": {"type": "integer", "format": "int64"},
                    "from": {"type": "string"}, "to": {"type": "string"},
                    "min_id": {"type": "integer", "format": "int64", "description": "The smallest id whose time unit overlaps the window."},
                    "max_id": {"type": "integer", "format": "int64", "description": "The largest id whose time unit overlaps the window."}}},
                "HeldWorker": {"type": "object", "required": ["group", "worker", "fence", "max", "not_before_ms", "until_ms", "expires_ms", "ttl_ms", "lease"], "properties": {
                    "group": {"type": "string"},
                    "worker": {"type": "integer", "minimum": 0, "description": "The worker id, 0..max."},
                    "fence": {"type": "integer", "minimum": 1, "description": "Bumped by every acquisition of this worker id."},
                    "max": {"type": "integer"},
                    "not_before_ms": {"type": "integer", "format": "int64", "description": "Ids made with this worker id use times at or above this (ms since 1970)."},
                    "until_ms": {"type": "integer", "format": "int64", "description": "Ids made with this worker id use times below this; renewals move it forward."},
                    "expires_ms": {"type": "integer", "format": "int64", "description": "The lease expires then unless renewed; a renewal after it is a 409."},
                    "ttl_ms": {"type": "integer"},
                    "lease": {"type": "string", "description": "The signed token that renews and releases the lease; a renewal returns a new one."}}},
                "WorkerList": {"type": "object", "required": ["group", "workers"], "properties": {
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
                        "expires_in_ms": {"type": ["integer", "null"], "minimum": 0, "description": "While held: the time the lease has left by the store's clock (etcd: whole seconds)."}}}}}},
                "WorkerReleased": {"type": "object", "required": ["released"], "properties": {
                    "released": {"type": "boolean", "description": "false: the lease was lost already (another holder leased the worker id)."}}},
                "DecodedId": {"type": "object", "required": ["id", "time_ms", "time", "worker", "sequence"], "properties": {
                    "id": {"type": "integer", "format": "int64"}, "time_ms": {"type": "integer", "format": "int64"},
                    "time": {"type": "string", "format": "date-time"}, "worker": {"type": "integer"}, "sequence": {"type": "integer"}}},
                "Values": {"type": "object", "required": ["values"], "properties": {
                    "values": {"type": "array", "items": {"oneOf": [{"type": "integer"}, {"type": "string"}]}},
                    "partial": {"type": "object", "required": ["requested", "reason", "message"],
                        "description": "Present when `values` holds fewer than asked for: a pool request stops at its deadline \
                            (a little before the request timeout) or when a take fails after others succeeded, and answers \
                            with every number it took. Ask again for the rest.",
                        "properties": {
                            "requested": {"type": "integer", "description": "The count asked for."},
                            "reason": {"type": "string", "examples": ["deadline", "exhausted", "contention", "unavailable"]},
                            "message": {"type": "string"}}}}},
                "CreateSequence": {"type": "object", "required": ["name"], "additionalProperties": false,
                    "description": "start must not be above max.",
                    "properties": {
                    "name": name_schema,
                    "start": {"type": "integer", "default": 1, "minimum": 0, "maximum": keysmith::store::MAX_VALUE},
                    "max": {"type": "integer", "default": keysmith::store::MAX_VALUE, "minimum": 0, "maximum": keysmith::store::MAX_VALUE},
                    "block": {"type": "integer", "default": 100, "minimum": 1, "maximum": keysmith::store::MAX_RESERVATION},
                    "failover_skip": {"type": ["integer", "null"], "minimum": 0, "maximum": keysmith::store::MAX_RESERVATION,
                        "description": "How far next moves forward when a reservation finds the store in a new generation (a failover, a restore). Default (absent or null): automatic."},
                    "bit_reversed": {"type": "boolean", "default": false,
                        "description": "Values are the bit reversal of an internal counter: positive, unique, spread over the whole range. \
                            Not with gapless, period or format; start at least 1."},
                    "skip_range": {"type": ["object", "null"], "required": ["start", "end"], "additionalProperties": false,
                        "description": "With bit_reversed: values start..end (end excluded) are never handed out; 0 <= start < end, at most 2^62 values.",
                        "properties": {"start": {"type": "integer", "minimum": 0, "maximum": keysmith::store::MAX_VALUE},
                                       "end": {"type": "integer", "minimum": 1, "maximum": i64::MAX}}},
                    "increment": {"type": ["integer", "null"], "minimum": 2, "maximum": keysmith::store::MAX_INCREMENT,
                        "description": "Values are all offset modulo increment (a residue class: one per region, each with its own store, and no two regions ever \
                            hand out the same value). Handed out in blocks like any sequence; not with gapless, period, format or bit_reversed. \
                            start and max are rounded into the class; none of its values between them is a 400."},
                    "offset": {"type": ["integer", "null"], "minimum": 0, "maximum": keysmith::store::MAX_INCREMENT - 1,
                        "description": "With increment: every value's remainder, 0 <= offset < increment (default 0). Without increment: a 400."},
                    "start_below_dropped": {"type": "boolean", "default": false,
                        "description": "Creating a dropped name continues above the values it handed out: the start is raised above them \
                            (the response's continued_above_dropped says to what). true starts at start even below them; only when none of \
                            those values is in use any more. A max that leaves no room above them is a 400 naming this field."},
                    "gapless": {"type": "boolean", "default": false,
                        "description": "Gap-free numbers: taken with tickets (POST .../tickets), then committed or released; `next` is a 400."},
                    "period": {"type": ["string", "null"], "enum": ["day", "month", "year", null],
                        "description": "Numbers restart every UTC day, month or year, by the store's clock; the period is part of every number."},
                    "format": {"type": ["string", "null"], "minLength": 1, "maxLength": keysmith::numbers::MAX_TEMPLATE_BYTES,
                        "description": "How numbers are printed: literal text with {n} (or {n:04}, zero-padded) exactly once, and {period} exactly once \
                            with a period (never without), e.g. INV-{period}-{n:04}; no whitespace, no other braces. A bad template is a 400 and creates nothing. \
                            Default with a period: {period}-{n}. Formatted sequences answer `next` with strings."}}},
                "Numbering": {"type": "object", "properties": {
                    "gapless": {"type": "boolean"}, "period": {"type": ["string", "null"]}, "template": {"type": ["string", "null"]},
                    "residue": {"$ref": "#/components/schemas/Residue"}}},
                "Residue": {"type": "object", "required": ["increment", "offset"], "properties": {
                    "increment": {"type": "integer"}, "offset": {"type": "integer"}}},
                "Ticket": {"type": "object", "required": ["value", "ticket", "period", "n"], "properties": {
                    "value": {"oneOf": [{"type": "integer"}, {"type": "string"}], "description": "The number: a string for a formatted sequence."},
                    "ticket": {"type": "string", "description": "PERIOD-VALUE-TOKEN: commits or releases the number."},
                    "period": {"type": ["integer", "null"]}, "n": {"type": "integer"}}},
                "Committed": {"type": "object", "required": ["committed"], "properties": {
                    "committed": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}},
                "ReleasedNumber": {"type": "object", "required": ["released"], "properties": {
                    "released": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}},
                "ParseNumber": {"type": "object", "required": ["value"], "additionalProperties": false, "properties": {
                    "value": {"type": "string", "description": "A number the sequence printed."}}},
                "NumberParts": {"type": "object", "required": ["period", "n"], "properties": {
                    "period": {"type": ["integer", "null"]}, "n": {"type": "integer"}}},
                "Sequence": {"type": "object", "properties": {
                    "numbering": {"$ref": "#/components/schemas/Numbering"},
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
                    "server": {"description": "This server's handle, null until it handed out a value.",
                        "oneOf": [{"type": "null"}, {"type": "object", "properties": {
                            "block": {"type": "integer", "description": "Current (adaptive) block size."},
                            "served": {"type": "integer"}, "last_served": {"type": ["integer", "null"]},
                            "rate": {"type": "number"}, "refills": {"type": "integer"}, "conflicts": {"type": "integer"}}}]}}},
                "SequenceList": {"type": "object", "properties": {"sequences": {"type": "array", "items": {"$ref": "#/components/schemas/Sequence"}}}},
                "CreatePool": {"type": "object", "required": ["name", "size"], "additionalProperties": false,
                    "description": "start must be at most 2^63 - 2 * size, so that every first member can be taken once. \
                        With increment, in values of the class: the value 2 * size - 1 places of the class above the first value at or above start must fit in a 64-bit integer.",
                    "properties": {
                    "name": name_schema,
                    "start": {"type": "integer", "default": 1, "minimum": 0, "maximum": i64::MAX - 1,
                        "description": "The first number; with increment, rounded up to the first value of the class at or above it."},
                    "start_below_dropped": {"type": "boolean", "default": false,
                        "description": "Creating a dropped name continues above the numbers it handed out: the start is raised above them \
                            (the response's continued_above_dropped says to what). true starts at start even below them; only when none of \
                            those numbers is in use any more."},
                    "size": {"type": "integer", "minimum": 1, "maximum": max_pool_size,
                        "description": "Above this server's limit (`--max-pool-size`) is a 413."},
                    "increment": {"type": ["integer", "null"], "minimum": 2, "maximum": keysmith::store::MAX_INCREMENT,
                        "description": "Every number the pool hands out is offset modulo increment (a residue class: one per region, each with its own store, \
                            and no two regions ever hand out the same number). Kept with the pool: every server opening it hands out only values of the class."},
                    "offset": {"type": ["integer", "null"], "minimum": 0, "maximum": keysmith::store::MAX_INCREMENT - 1,
                        "description": "With increment: every number's remainder, 0 <= offset < increment (default 0). Without increment: a 400."}}},
                "Pool": {"type": "object", "properties": {
                    "name": {"type": "string"}, "start": {"type": "integer", "description": "The first number (a value of the class, for a pool in one)."},
                    "size": {"type": "integer"},
                    "generation": {"type": ["string", "null"], "description": "The store generation the pool was created or last fenced in."},
                    "increment": {"type": "integer", "description": "Of a pool in a residue class: every number is offset modulo increment (start, lowest, highest and max_value are values of it). Absent otherwise."},
                    "offset": {"type": "integer"},
                    "continued_above_dropped": {"type": "integer", "description": "create only, present when a dropped pool of the name \
                        had handed out numbers at or above the start asked for: the start the pool got instead."},
                    "lowest": {"type": "integer", "description": "show only"}, "highest": {"type": "integer", "description": "show only"},
                    "taken": {"type": "integer", "description": "show only"}, "max_value": {"type": "integer", "description": "show only"},
                    "server": {"description": "This server's handle, null until it handed out a number.",
                        "oneOf": [{"type": "null"}, {"type": "object", "properties": {
                            "served": {"type": "integer"}, "rate": {"type": "number"}, "attempts": {"type": "integer"},
                            "conflicts": {"type": "integer"}, "conflict_rate": {"type": "number"}}}]}}},
                "PoolList": {"type": "object", "properties": {"pools": {"type": "array", "items": {"$ref": "#/components/schemas/Pool"}}}},
                "CounterNames": {"type": "object", "properties": {
                    "host": {"type": "string"}, "first": {"type": ["integer", "string"]}, "last": {"type": ["integer", "string"]},
                    "names": {"type": "array", "items": {"type": "string"}}}},
                "Id": {"description": "An integer (an i64), \"TYPE:VALUE\" (u32:42, string:abc, uuid:..., datetime:2024-05-01T12:00:00Z, duration:1.5s), or {\"type\", \"value\"}.",
                    "oneOf": [{"type": "integer"}, {"type": "string"}, {"type": "object", "required": ["type", "value"],
                        "properties": {"type": {"type": "string"}, "value": {}}}]},
                "ShardKeyParts": {"type": "object", "required": ["origin", "shard", "record"], "additionalProperties": false, "properties": {
                    "origin": {"type": "string", "pattern": "^[A-Za-z0-9]$", "description": "One ASCII letter or digit naming the record type; `0` is reserved for the empty key (shard 0, default ids)."},
                    "shard": {"type": "integer", "minimum": 0, "maximum": 65535},
                    "record": {"$ref": "#/components/schemas/Id"},
                    "children": {"type": "array", "maxItems": 3, "items": {"$ref": "#/components/schemas/Id"}}}},
                "ShardKeyDecode": {"type": "object", "required": ["external"], "additionalProperties": false, "properties": {
                    "external": {"type": "string"},
                    "origin": {"type": ["string", "null"], "pattern": "^[A-Za-z0-9]$", "description": "Fail unless the key has this origin."},
                    "record_type": {"type": ["string", "null"], "description": "Fail unless the record id has this type (needs origin)."},
                    "child_types": {"type": "array", "items": {"type": "string"}}}},
                "ShardKey": {"type": "object", "properties": {
                    "external": {"type": "string"},
                    "key": {"type": "object", "description": "{origin, shard, record: {type, value}, children: [...]}"},
                    "list": {"type": "array", "description": "[origin, shard, record, children...]"}}},
                "Health": {"type": "object", "properties": {"status": {"type": "string"}, "store": {"type": "string"}}}
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/sequences": {
                "post": {"summary": "Create a sequence",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CreateSequence"}}}},
                    "responses": responses(vec![("201", ok("Created.", "Sequence")), ("409", err("A sequence of that name exists.")), ("413", err("Body over the limit."))])},
                "get": {"summary": "List sequences", "responses": responses(vec![("200", ok("Every sequence, by name.", "SequenceList"))])}
            },
            "/v1/sequences/{name}": {
                "parameters": [name],
                "get": {"summary": "Show a sequence", "responses": responses(vec![("200", ok("The sequence.", "Sequence")), ("404", err("No such sequence."))])},
                "patch": {"summary": "Alter a sequence's next value, maximum or block size",
                    "description": "Safe while values are handed out: next only moves forward (the values skipped are never handed out), \
                        max never goes below the values reserved so far. A change the sequence does not allow is a 400 and changes nothing.",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AlterSequence"}}}},
                    "responses": responses(vec![("200", ok("The sequence after the change.", "Sequence")), ("404", err("No such sequence.")),
                        ("409", err("A numbered sequence (`wrong_kind`): it has no next value to alter.")),
                        ("413", err("Body over the limit."))])},
                "delete": {"summary": "Drop a sequence for good", "responses": responses(vec![("200", json!({"description": "Dropped."})), ("404", err("No such sequence."))])}
            },
            "/v1/sequences/{name}/next": {
                "parameters": [name],
                "post": {"summary": "Take values",
                    "description": "Values are unique forever and increase in the order this server answers requests. \
                        A periodic or formatted sequence answers with its numbers as strings, from the store on every request; \
                        a gap-free one is a 409 `wrong_kind` (take tickets).",
                    "parameters": [count, as_],
                    "responses": responses(vec![("200", ok("The values, ascending.", "Values")), ("404", err("No such sequence.")),
                        ("409", err("The sequence is exhausted, or gap-free (`wrong_kind`: take tickets).")), ("413", err("Count over the server's maximum."))])}
            },
            "/v1/sequences/{name}/tickets": {
                "parameters": [name],
                "post": {"summary": "Take a gap-free number with a ticket",
                    "description": "The lowest number of the current period that was released or whose ticket expired, else the next new one. \
                        Commit it or release it with the ticket; a holder that does neither loses it after `ttl` seconds.",
                    "parameters": [{"name": "ttl", "in": "query", "required": false,
                        "description": "Seconds the ticket lives, by the store's clock.",
                        "schema": {"type": "integer", "minimum": 1, "maximum": keysmith::store::MAX_TICKET_TTL.as_secs(), "default": keysmith::numbers::DEFAULT_TICKET_TTL.as_secs()}}],
                    "responses": responses(vec![("201", ok("The number and its ticket.", "Ticket")), ("404", err("No such sequence.")),
                        ("409", err("The sequence is exhausted, or not gap-free (`wrong_kind`)."))])}
            },
            "/v1/sequences/{name}/tickets/{ticket}/commit": {
                "parameters": [name, ticket.clone()],
                "post": {"summary": "Make a taken number final",
                    "description": "Refused with a 409, changing nothing, when the ticket no longer holds the number (committed or released already, \
                        or expired and taken by another).",
                    "responses": responses(vec![("200", ok("The number committed.", "Committed")), ("404", err("No such sequence.")),
                        ("409", err("The ticket does not hold the number, or the sequence is not gap-free (`wrong_kind`)."))])}
            },
            "/v1/sequences/{name}/tickets/{ticket}/release": {
                "parameters": [name, ticket],
                "post": {"summary": "Free a taken number: it is the next one taken",
                    "responses": responses(vec![("200", ok("The number released.", "ReleasedNumber")), ("404", err("No such sequence.")),
                        ("409", err("The ticket does not hold the number, or the sequence is not gap-free (`wrong_kind`)."))])}
            },
            "/v1/sequences/{name}/parse": {
                "parameters": [name],
                "post": {"summary": "Split a number a formatted sequence printed into its period and counter",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ParseNumber"}}}},
                    "responses": responses(vec![("200", ok("The parts.", "NumberParts")), ("404", err("No such sequence.")),
                        ("409", err("An ordinary sequence (`wrong_kind`): it prints plain integers.")), ("413", err("Body over the limit."))])}
            },
            "/v1/sequences/{name}/reserve": {
                "parameters": [name],
                "post": {"summary": "Reserve a block for the caller to hand out itself",
                    "description": "The values are reserved durably for this caller only, never handed to anyone else. \
                        Fewer than asked for only near the sequence's maximum.",
                    "parameters": [reserve_count, as_],
                    "responses": responses(vec![("200", ok("The reserved ranges and a lease token.", "Lease")), ("404", err("No such sequence.")),
                        ("409", err("The sequence is exhausted, or numbered (`wrong_kind`: its numbers come from next or tickets).")), ("413", err("Count over the server's limit of values a request."))])}
            },
            "/v1/sequences/{name}/release": {
                "parameters": [name],
                "post": {"summary": "Hand the unused tail of a lease back",
                    "description": "Only if no one reserved since the lease (the rule of closing a handle); otherwise the values stay a gap, never reused.",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Release"}}}},
                    "responses": responses(vec![("200", ok("What was handed back.", "Released")), ("404", err("No such sequence.")),
                        ("413", err("Body over the limit."))])}
            },
            "/v1/pools": {
                "post": {"summary": "Create a value pool holding start..start+size (with increment, size values of its residue class from start on)",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CreatePool"}}}},
                    "responses": responses(vec![("201", ok("Created.", "Pool")), ("409", err("A pool of that name exists.")), ("413", err("Body over the limit, or size over this server's maximum."))])},
                "get": {"summary": "List pools", "responses": responses(vec![("200", ok("Every pool, by name.", "PoolList"))])}
            },
            "/v1/pools/{name}": {
                "parameters": [name],
                "get": {"summary": "Show a pool (reads every member)", "responses": responses(vec![("200", ok("The pool.", "Pool")), ("404", err("No such pool."))])},
                "delete": {"summary": "Drop a pool for good", "responses": responses(vec![("200", json!({"description": "Dropped."})), ("404", err("No such pool."))])}
            },
            "/v1/pools/{name}/next": {
                "parameters": [name],
                "post": {"summary": "Take numbers from a pool",
                    "description": "Numbers are unique forever, in no particular order.",
                    "parameters": [count, as_],
                    "responses": responses(vec![("200", ok("The numbers, in the order taken; `partial` when fewer than asked for.", "Values")), ("404", err("No such pool.")),
                        ("409", err("The pool is exhausted: no member can be taken.")), ("413", err("Count over the server's maximum."))])}
            },
            "/v1/ids/next": {
                "post": {"summary": "Take time-ordered 64-bit ids (time, worker, sequence bits)",
                    "description": "Ids increase per server and are unique across every server of the store: the worker id is leased from the store, and the time is kept above a floor stored with the lease.",
                    "parameters": [count, as_],
                    "responses": responses(vec![("200", ok("The ids, ascending.", "Ids")), ("413", err("Count over the server's maximum.")),
                        ("503", err("Every worker id is held, or the clock is too far behind; retry later."))])}
            },
            "/v1/ids/bounds": {
                "get": {"summary": "The smallest and largest id of a time window, for range queries",
                    "description": "Every id of this server's layout whose time unit overlaps the window (both ends included) lies between min_id and max_id, and no other.",
                    "parameters": [
                        {"name": "from", "in": "query", "required": true, "description": "The window's start: RFC 3339 or ms since 1970.",
                         "schema": {"type": "string", "pattern": "^(-?[0-9]{1,19}|[0-9]{4}-[0-9]{2}-[0-9]{2}T.+)$"}},
                        {"name": "to", "in": "query", "required": true, "description": "The window's end (included): RFC 3339 or ms since 1970, at or after from.",
                         "schema": {"type": "string", "pattern": "^(-?[0-9]{1,19}|[0-9]{4}-[0-9]{2}-[0-9]{2}T.+)$"}}],
                    "responses": responses(vec![("200", ok("The bounds.", "IdBounds")), ("400", err("A missing or bad time, or a window with no id of the layout."))])}
            },
            "/v1/workers/{group}": {
                "parameters": [group.clone()],
                "get": {"summary": "List a group's worker ids: held or free, by whom, until when, fence and time floor",
                    "responses": responses(vec![("200", ok("The group's worker ids (never a lease token).", "WorkerList"))])}
            },
            "/v1/workers/{group}/lease": {
                "parameters": [group.clone()],
                "post": {"summary": "Lease a worker id for another generator (sonyflake, bwmarrin/snowflake)",
                    "description": "The lowest worker id of 0..max without a live lease. Use it only for ids with times in                         not_before_ms..until_ms, renew every third of the TTL, stop when a renewal is refused. Every holder of a group uses the same max.",
                    "parameters": [ttl_ms.clone(),
                        {"name": "max", "in": "query", "required": false, "description": "Worker ids are 0..max.",
                         "schema": {"type": "integer", "minimum": 1, "maximum": max_worker_group, "default": keysmith::ids::DEFAULT_GROUP_SIZE.min(max_worker_group)}}],
                    "responses": responses(vec![("200", ok("The lease.", "HeldWorker")),
                        ("409", err("Every worker id of the group is held (`lease_refused`, naming the group and its size).")),
                        ("413", err("ttl_ms or max above this server's limits (`--max-worker-ttl-ms`, `--max-worker-group`)."))])}
            },
            "/v1/workers/{group}/lease/{token}/renew": {
                "parameters": [group.clone(), token.clone()],
                "post": {"summary": "Renew a worker lease; answers with a new token",
                    "parameters": [ttl_ms],
                    "responses": responses(vec![("200", ok("The lease, renewed.", "HeldWorker")),
                        ("409", err("The lease expired, or another holder leased the worker id since (`lease_refused`): stop issuing ids with it.")),
                        ("413", err("ttl_ms above this server's limit (`--max-worker-ttl-ms`)."))])}
            },
            "/v1/workers/{group}/lease/{token}/release": {
                "parameters": [group, token],
                "post": {"summary": "Release a worker lease: the worker id is free at once, its time floor stays",
                    "responses": responses(vec![("200", ok("Whether it was released.", "WorkerReleased"))])}
            },
            "/v1/ids/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"}, "description": "An id made with this server's layout: a whole number from 0 to 9223372036854775807."}],
                "get": {"summary": "Take an id apart: its time, worker and sequence",
                    "responses": responses(vec![("200", ok("The parts.", "DecodedId")), ("400", err("Not an id of this server's layout."))])}
            },
            "/v1/fence": {
                "post": {"summary": "Move sequences forward after the store went back unseen",
                    "description": "For a restore keysmith cannot detect (a file copy put back, a backup restored into the same generation). \
                        Every move is a conditional write, safe while values are handed out; dry_run writes nothing.",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Fence"}}}},
                    "responses": responses(vec![("200", ok("What moved, or would move.", "FenceReport")), ("404", err("No such sequence.")),
                        ("409", err("A numbered sequence (`wrong_kind`).")), ("413", err("Body over the limit, or skip over the server's largest fence skip."))])}
            },
            "/v1/counters/next": {
                "post": {"summary": "Take `<hostname>/<n>` names from this host's counter",
                    "description": "Names are unique across a cluster as long as host names are; numbers increase per host.",
                    "parameters": [count, as_],
                    "responses": responses(vec![("200", ok("The names, ascending; `first`/`last` are strings with as=string.", "CounterNames")),
                        ("413", err("Count over the server's maximum."))])}
            },
            "/v1/shard-keys/encode": {
                "post": {"summary": "The external string of a shard key, signed with the server's secret",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ShardKeyParts"}}}},
                    "responses": responses(vec![("200", ok("The key.", "ShardKey")), ("413", err("Body over the limit.")), ("501", err("The server has no shard key secret."))])}
            },
            "/v1/shard-keys/decode": {
                "post": {"summary": "Decode an external string; rejected if edited, forged or signed with another secret",
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ShardKeyDecode"}}}},
                    "responses": responses(vec![("200", ok("The key.", "ShardKey")), ("413", err("Body over the limit.")), ("501", err("The server has no shard key secret."))])}
            },
            "/v1/status": {"get": {"summary": "What the status page shows", "responses": responses(vec![("200", json!({"description": "Status; integers that may pass 2^53 are strings."}))])}},
            "/": {"get": {"summary": "Status page (HTML)", "responses": responses(vec![("200", json!({"description": "HTML."}))])}},
            "/healthz": {"get": {"summary": "Checks the store; needs no token", "security": [],
                "responses": {"200": ok("The store answers.", "Health"), "503": err("The store does not answer.")}}},
            "/livez": {"get": {"summary": "Answers while the process runs; touches nothing; needs no token", "security": [],
                "responses": {"200": ok("Alive.", "Health")}}},
            "/readyz": {"get": {"summary": "Ready for requests; 503 while the server drains after its shutdown signal; needs no token", "security": [],
                "responses": {"200": ok("Ready.", "Health"), "503": err("Draining (`draining`): send requests to another server.")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": responses(vec![("200", json!({"description": "Prometheus text format."}))])}},
            "/openapi.json": {"get": {"summary": "This document", "responses": responses(vec![("200", json!({"description": "OpenAPI 3.1."}))])}}
        }
    })
}

/// `GET /openapi.json`, with this server's limits.
pub(crate) async fn handler(State(state): State<AppState>) -> Json<Value> {
    let o = &state.shared().options;
    Json(document_with(&Limits {
        max_count: o.max_count,
        max_pool_size: o.max_pool_size,
        max_fence_skip: o.max_fence_skip,
        max_worker_ttl_ms: u64::try_from(o.max_worker_ttl.as_millis()).unwrap_or(u64::MAX),
        max_worker_group: o.max_worker_group,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pattern's class is exactly what `validate_name` refuses.
    #[test]
    fn the_name_pattern_excludes_exactly_whitespace_and_control_characters() {
        let excluded = |c: char| {
            NAME_EXCLUDED
                .iter()
                .any(|&(lo, hi)| (lo..=hi).contains(&u32::from(c)))
        };
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            assert_eq!(
                excluded(c),
                c.is_whitespace() || c.is_control(),
                "{c:?} (U+{:04X})",
                u32::from(c)
            );
            assert_eq!(
                excluded(c),
                keysmith::validate_name(&format!("a{c}b")).is_err(),
                "{c:?}"
            );
        }
        assert_eq!(
            name_pattern(),
            "^[^\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028-\\u2029\\u202f\\u205f\\u3000]+$"
        );
    }

    #[test]
    fn the_count_limit_is_the_servers() {
        let doc = document_for(250, 77);
        assert_eq!(
            doc["components"]["schemas"]["CreatePool"]["properties"]["size"]["maximum"],
            77
        );
        let count = &doc["paths"]["/v1/pools/{name}/next"]["post"]["parameters"][0];
        assert_eq!(count["name"], "count");
        assert_eq!(count["schema"]["maximum"], 250);
    }

    /// Both creates take `start_below_dropped`, and both objects say when a
    /// create continued above a dropped one.
    #[test]
    fn creates_document_the_tombstone_fields() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        for (create, shown) in [("CreateSequence", "Sequence"), ("CreatePool", "Pool")] {
            assert_eq!(
                schemas[create]["properties"]["start_below_dropped"]["type"], "boolean",
                "{create}"
            );
            assert!(
                schemas[shown]["properties"]["continued_above_dropped"].is_object(),
                "{shown}"
            );
        }
    }

    /// Pools take a residue class as sequences do, with the same bounds.
    #[test]
    fn pools_take_a_residue_class_like_sequences() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        for field in ["increment", "offset"] {
            assert_eq!(
                schemas["CreatePool"]["properties"][field]["minimum"],
                schemas["CreateSequence"]["properties"][field]["minimum"],
                "{field}"
            );
            assert_eq!(
                schemas["CreatePool"]["properties"][field]["maximum"],
                schemas["CreateSequence"]["properties"][field]["maximum"],
                "{field}"
            );
            assert!(schemas["Pool"]["properties"][field].is_object(), "{field}");
        }
    }
}
