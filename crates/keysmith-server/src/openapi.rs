//! `GET /openapi.json`: the API described in OpenAPI 3.1, made with the
//! router from one route list (`api`).
//!
//! Each handler carries its operation (`#[utoipa::path]`: summary, query
//! and path parameters, body, every status it answers), and the request
//! and response types the server owns derive their schemas
//! (`utoipa::ToSchema`): the router and the document cannot disagree on a
//! route. What the handlers do not say is added here once: the statuses
//! every route but the probes can answer (400, 401, 403, 429, 503), the
//! bearer security, and this server's limits.
//!
//! The document states the rules the server checks: name patterns and
//! lengths, bounds of every number, the count limit of this server, and
//! every status each route can answer. Two rules JSON Schema cannot say are
//! in the descriptions: a name is at most 512 *bytes* of UTF-8 (the schema
//! counts characters), and the bounds that tie two fields together
//! (`start <= max` of a sequence, `start <= 2^63 - 2 * size` of a pool,
//! `offset < increment` of a residue class, and that a class has values
//! between a sequence's start and max, or room for a pool's members).
//!
//! The objects the library owns and the server passes through (a
//! sequence's row, a pool's, a fence report, a worker lease ...) have their
//! schemas in `crate::schemas::library`, as the library serializes them.

use std::sync::LazyLock;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::routes::{self as r, pools, sequences as seq};
use crate::schemas::library;
pub use crate::schemas::name_pattern;

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

/// The top of the document: what the handlers' operations go into.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "keysmith",
        description = "Unique keys over HTTP: durable sequences, value pools, host counters, shard keys. \
            Every value is handed out at most once. With a token or an access file, every route but the probes \
            (/livez, /readyz) needs `Authorization: Bearer TOKEN` (or HTTP Basic with the token as \
            the password, or a client certificate a principal names); a principal without the grant a route \
            needs gets a 403 that changes nothing. A browser's cross-site request (one with an `Origin` \
            header, or `Sec-Fetch-Site: cross-site`) gets a 403 unless its origin is allowed (`--allow-origin`); \
            without a token, so does a request whose `Host` is not a loopback name or address."
    ),
    components(schemas(crate::error::ErrorBody, library::Numbering))
)]
struct Top;

/// Every route of the API with its operation, in two groups: the routes
/// cut off at the request timeout, and those that take values (their own
/// deadline, see [`crate::routes::body_by_deadline`]). The one list the
/// router ([`crate::router`]) and the document ([`document_for`]) are made
/// from. The deprecated routes (tokens and tickets in the path) are still
/// served, marked deprecated in the document.
#[allow(deprecated)]
pub(crate) fn api() -> (OpenApiRouter<AppState>, OpenApiRouter<AppState>) {
    let bounded = OpenApiRouter::new()
        .routes(routes!(seq::create, seq::list))
        .routes(routes!(seq::show, seq::alter, seq::drop))
        .routes(routes!(r::tickets::take))
        .routes(routes!(r::tickets::commit))
        .routes(routes!(r::tickets::release))
        .routes(routes!(r::tickets::commit_body))
        .routes(routes!(r::tickets::release_body))
        .routes(routes!(r::tickets::parse))
        .routes(routes!(r::tickets::decode))
        .routes(routes!(r::sequences::rotate_key))
        .routes(routes!(pools::create, pools::list))
        .routes(routes!(pools::show, pools::drop))
        .routes(routes!(r::ids::next))
        .routes(routes!(r::ids::bounds))
        .routes(routes!(r::workers::list))
        .routes(routes!(r::workers::lease))
        .routes(routes!(r::workers::renew))
        .routes(routes!(r::workers::release))
        .routes(routes!(r::workers::renew_body))
        .routes(routes!(r::workers::release_body))
        .routes(routes!(r::ids::decode))
        .routes(routes!(r::fence::post))
        .routes(routes!(r::counters::next))
        .routes(routes!(r::shard_keys::encode))
        .routes(routes!(r::shard_keys::decode))
        .routes(routes!(crate::status::json))
        .routes(routes!(crate::status::page))
        .routes(routes!(r::healthz))
        .routes(routes!(r::livez))
        .routes(routes!(r::readyz))
        .routes(routes!(r::metrics))
        .routes(routes!(handler));
    let taking = OpenApiRouter::new()
        .routes(routes!(seq::next))
        .routes(routes!(seq::reserve))
        .routes(routes!(seq::release))
        .routes(routes!(pools::next));
    (bounded, taking)
}

/// The document of [`api`] with the server's defaults: made once.
static BASE: LazyLock<Value> = LazyLock::new(|| {
    let (bounded, taking) = api();
    let doc = OpenApiRouter::with_openapi(Top::openapi())
        .merge(bounded)
        .merge(taking)
        .into_openapi();
    let mut doc = serde_json::to_value(doc).unwrap_or_else(|e| json!({"error": e.to_string()}));
    complete(&mut doc);
    doc
});

/// The probes: no token, no grant, only their own statuses and the
/// browser check's 403 (`/healthz`, which pings the store, is not one).
const PROBES: [&str; 2] = crate::OPEN_PATHS;

/// What every operation shares, added once: the statuses every route but
/// the probes can answer, bearer security (the probes need none), and the
/// OpenAPI version this server speaks.
fn complete(doc: &mut Value) {
    doc["openapi"] = json!("3.1.0");
    // Exactly as written (utoipa's schema model does not hold every JSON
    // Schema form, e.g. a oneOf with a description).
    for (name, schema) in library::all() {
        doc["components"]["schemas"][name] = schema;
    }
    doc["components"]["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer"}});
    doc["security"] = json!([{"bearer": []}]);
    let err = |d: &str| json!({"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let common = [
        ("400", err("Bad input: name, body or query parameter.")),
        (
            "401",
            err("No token, the wrong one, or a Basic password too short to be a token."),
        ),
        (
            "403",
            err(
                "The caller's principal lacks the grant this route needs on this name (access file), \
                 or is over its quota; or a browser's cross-site request from an origin not allowed \
                 (`cross_origin`), or, without a token, a Host that is not loopback (`forbidden_host`); \
                 nothing changed.",
            ),
        ),
        (
            "429",
            err(
                "The caller's principal is over its request rate, or the caller's address is over its \
                 budget of failed authentications; see Retry-After.",
            ),
        ),
        (
            "503",
            err("Contention, store unavailable or request timeout; see Retry-After."),
        ),
    ];
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            let Some(op) = op.as_object_mut() else {
                continue;
            };
            // Unique, from the route (handlers of several routes share a
            // function name, such as `next`).
            op.insert("operationId".into(), json!(operation_id(method, path)));
            if op.get("description").is_some_and(|d| d == "") {
                op.remove("description");
            }
            if PROBES.contains(&path.as_str()) {
                op.insert("security".into(), json!([]));
                if let Some(r) = op.get_mut("responses").and_then(Value::as_object_mut) {
                    r.entry("403").or_insert_with(|| {
                        err("A browser's cross-site request from an origin not allowed, or, without \
                             a token, a Host that is not loopback; nothing ran.")
                    });
                }
                continue;
            }
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                continue;
            };
            for (status, response) in &common {
                responses.entry(*status).or_insert_with(|| response.clone());
            }
        }
    }
}

/// The operation id of `method` on `path`: `post_v1_sequences_name_next`.
fn operation_id(method: &str, path: &str) -> String {
    let words: Vec<&str> = path
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    match words.as_slice() {
        [] => format!("{method}_status_page"),
        _ => format!("{method}_{}", words.join("_")),
    }
}

/// Sets this server's limits where the document states them.
fn apply(doc: &mut Value, limits: &Limits) {
    let schemas = &mut doc["components"]["schemas"];
    schemas["CreatePool"]["properties"]["size"]["maximum"] = json!(limits.max_pool_size);
    schemas["Fence"]["properties"]["skip"]["maximum"] = json!(limits.max_fence_skip);
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for op in item.values_mut() {
            let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
                continue;
            };
            for p in params.iter_mut() {
                match p["name"].as_str() {
                    Some("count") => p["schema"]["maximum"] = json!(limits.max_count),
                    Some("ttl_ms") => p["schema"]["maximum"] = json!(limits.max_worker_ttl_ms),
                    Some("max") if path == "/v1/workers/{group}/lease" => {
                        p["schema"]["maximum"] = json!(limits.max_worker_group);
                        p["schema"]["default"] =
                            json!(keysmith::ids::DEFAULT_GROUP_SIZE.min(limits.max_worker_group));
                    }
                    _ => {}
                }
            }
        }
    }
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

/// The document of a server with `limits`.
pub(crate) fn document_with(limits: &Limits) -> Value {
    let mut doc = BASE.clone();
    apply(&mut doc, limits);
    doc
}

/// `GET /openapi.json`, with this server's limits.
#[utoipa::path(get, path = "/openapi.json", summary = "This document", description = "OpenAPI 3.1, with this server's limits.",
    responses((status = 200, description = "OpenAPI 3.1.", content_type = "application/json")))]
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
            crate::schemas::NAME_EXCLUDED
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

    /// Every parameter by name, of `method` on `path`.
    fn param<'a>(doc: &'a Value, path: &str, method: &str, name: &str) -> &'a Value {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
    }

    /// The bounds the types' attributes write as numbers are the library's
    /// constants (attributes take literals only).
    #[test]
    fn the_bounds_are_the_librarys() {
        use keysmith::store::{
            DEFAULT_BLOCK, DEFAULT_POOL_START, DEFAULT_START, MAX_INCREMENT, MAX_RESERVATION,
            MAX_TICKET_TTL, MAX_VALUE, MAX_WORKER_TTL, MAX_WORKERS,
        };
        let doc = document_with(&Limits {
            max_count: i64::from(u32::MAX),
            max_pool_size: i64::MAX,
            max_fence_skip: i64::MAX,
            max_worker_ttl_ms: MAX_WORKER_TTL.as_millis() as u64,
            max_worker_group: MAX_WORKERS,
        });
        let schemas = &doc["components"]["schemas"];
        let seq = &schemas["CreateSequence"]["properties"];
        let pool = &schemas["CreatePool"]["properties"];
        let ttl = keysmith::numbers::DEFAULT_TICKET_TTL.as_secs();
        for (what, got, want) in [
            ("sequence start", &seq["start"]["maximum"], json!(MAX_VALUE)),
            (
                "sequence start default",
                &seq["start"]["default"],
                json!(DEFAULT_START),
            ),
            ("sequence max", &seq["max"]["maximum"], json!(MAX_VALUE)),
            (
                "sequence max default",
                &seq["max"]["default"],
                json!(MAX_VALUE),
            ),
            ("block", &seq["block"]["maximum"], json!(MAX_RESERVATION)),
            (
                "block default",
                &seq["block"]["default"],
                json!(DEFAULT_BLOCK),
            ),
            (
                "failover_skip",
                &seq["failover_skip"]["maximum"],
                json!(MAX_RESERVATION),
            ),
            (
                "format",
                &seq["format"]["maxLength"],
                json!(keysmith::numbers::MAX_TEMPLATE_BYTES),
            ),
            ("pool start", &pool["start"]["maximum"], json!(i64::MAX - 1)),
            (
                "pool start default",
                &pool["start"]["default"],
                json!(DEFAULT_POOL_START),
            ),
            (
                "lease step",
                &schemas["Lease"]["properties"]["step"]["maximum"],
                json!(MAX_INCREMENT),
            ),
            (
                "ticket ttl",
                &param(&doc, "/v1/sequences/{name}/tickets", "post", "ttl")["schema"]["maximum"],
                json!(MAX_TICKET_TTL.as_secs()),
            ),
            (
                "ticket ttl default",
                &param(&doc, "/v1/sequences/{name}/tickets", "post", "ttl")["schema"]["default"],
                json!(ttl),
            ),
        ] {
            assert_eq!(*got, want, "{what}");
        }
    }

    #[test]
    fn the_count_limit_is_the_servers() {
        let doc = document_for(250, 77);
        assert_eq!(
            doc["components"]["schemas"]["CreatePool"]["properties"]["size"]["maximum"],
            77
        );
        for path in [
            "/v1/pools/{name}/next",
            "/v1/sequences/{name}/next",
            "/v1/sequences/{name}/reserve",
            "/v1/ids/next",
            "/v1/counters/next",
        ] {
            let count = param(&doc, path, "post", "count");
            assert_eq!(count["in"], "query", "{path}");
            assert_eq!(count["schema"]["maximum"], 250, "{path}");
            assert_eq!(count["schema"]["minimum"], 1, "{path}");
        }
    }

    /// Names in paths and bodies have the pattern and the byte limit of
    /// the library.
    #[test]
    fn names_have_the_pattern_and_the_limit() {
        let doc = document();
        let schemas = &doc["components"]["schemas"];
        for name in [
            &param(&doc, "/v1/sequences/{name}", "get", "name")["schema"],
            &param(&doc, "/v1/workers/{group}", "get", "group")["schema"],
            &schemas["CreateSequence"]["properties"]["name"],
            &schemas["CreatePool"]["properties"]["name"],
        ] {
            assert_eq!(name["pattern"], name_pattern(), "{name}");
            assert_eq!(name["maxLength"], keysmith::MAX_NAME_BYTES, "{name}");
            assert_eq!(name["minLength"], 1, "{name}");
            let d = name["description"].as_str().unwrap();
            assert!(d.contains("bytes of UTF-8"), "{d}");
        }
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
        assert_eq!(
            schemas["CreateSequence"]["properties"]["increment"]["maximum"],
            keysmith::store::MAX_INCREMENT
        );
    }

    /// The schemas written out are in the document as written.
    #[test]
    fn library_schemas_are_as_written() {
        let doc = document();
        for (name, schema) in library::all() {
            assert_eq!(doc["components"]["schemas"][name], schema, "{name}");
        }
        assert!(doc["components"]["schemas"]["Id"]["oneOf"].is_array());
    }

    /// Every operation but the probes answers the shared statuses and needs
    /// the bearer token; the probes need none; every `$ref` names a schema
    /// of the document.
    #[test]
    fn every_operation_is_complete() {
        let doc = document();
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["security"], json!([{"bearer": []}]));
        let mut ops = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                ops += 1;
                let responses = op["responses"].as_object().unwrap();
                if PROBES.contains(&path.as_str()) {
                    assert_eq!(op["security"], json!([]), "{method} {path}");
                    assert!(!responses.contains_key("401"), "{method} {path}");
                } else {
                    for status in ["400", "401", "403", "429", "503"] {
                        assert!(responses.contains_key(status), "{method} {path} {status}");
                    }
                }
                assert!(
                    op["summary"].as_str().is_some_and(|s| !s.is_empty()),
                    "{method} {path}"
                );
            }
        }
        assert!(ops > 30, "{ops}");
        let ids: std::collections::BTreeSet<_> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().values())
            .map(|op| op["operationId"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids.len(), ops, "operation ids are unique: {ids:?}");
        let text = doc.to_string();
        for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "no schema {name}"
            );
        }
    }
}
