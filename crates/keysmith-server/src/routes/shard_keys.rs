//! `POST /v1/shard-keys/encode` and `/decode`: external strings of shard
//! keys, signed with the server's secret, or with the keys of the caller's
//! `shard_key_scope` (see [`crate::access`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use keysmith::shard_key::{Id, IdType, KeySchema, ShardKey, ShardKeyCodec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::AppState;
use crate::access::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;

/// The body of `encode`: a key's parts. Ids are a JSON integer (an `i64`), a
/// string `TYPE:VALUE` (`"u32:42"`, `"string:abc"`, `"uuid:..."`), or an
/// object `{"type": "u32", "value": 42}` (the form `decode` returns).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ShardKeyParts)]
pub(crate) struct EncodeBody {
    /// One ASCII letter or digit naming the record type; `0` is reserved
    /// for the empty key (shard 0, default ids).
    #[schema(pattern = "^[A-Za-z0-9]$")]
    origin: String,
    #[schema(minimum = 0, maximum = 65535)]
    shard: u16,
    #[schema(value_type = crate::schemas::library::Id)]
    record: Value,
    #[serde(default)]
    #[schema(value_type = Vec<crate::schemas::library::Id>, max_items = 3)]
    children: Vec<Value>,
}

/// The body of `decode`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ShardKeyDecode)]
pub(crate) struct DecodeBody {
    external: String,
    /// Fail unless the key has this origin.
    #[schema(pattern = "^[A-Za-z0-9]$")]
    origin: Option<String>,
    /// Fail unless the record id has this type (needs `origin`).
    record_type: Option<String>,
    /// With `record_type`: the type of each child id, outermost first.
    #[serde(default)]
    child_types: Vec<String>,
}

/// A key as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ShardKey)]
pub(crate) struct KeyView {
    /// The external string.
    external: String,
    /// `{"origin", "shard", "record": {"type", "value"}, "children": [...]}`.
    #[schema(value_type = Object)]
    key: Value,
    /// The compact JSON list: `["c", 3, 42, 7]`.
    #[schema(value_type = Vec<Value>)]
    list: Value,
}

fn view(codec: &ShardKeyCodec, key: &ShardKey, external: Option<String>) -> KeyView {
    KeyView {
        external: external.unwrap_or_else(|| codec.encode(key)),
        key: key.describe(),
        list: key.to_json(),
    }
}

/// The codec of the caller: the server's secret, or the keys of the
/// caller's `shard_key_scope` ([`ShardKeyCodec::for_scope`]), so that one
/// team's keys do not decode for another, nor can it mint them.
fn codec(state: &AppState, caller: Option<&Caller>) -> ApiResult<Arc<ShardKeyCodec>> {
    let codec = server_codec(state)?;
    Ok(match caller.and_then(|c| c.0.shard_key_scope.as_deref()) {
        Some(scope) => Arc::new(codec.for_scope(scope)),
        None => codec,
    })
}

fn server_codec(state: &AppState) -> ApiResult<Arc<ShardKeyCodec>> {
    state.shared().shard_codec.get().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "no_secret",
            format!(
                "this server has no shard key secret, so it makes no shard key strings: start it with \
                 ${} or --shard-key-secret-file (at least {} bytes)",
                keysmith::shard_key::SECRET_ENV,
                keysmith::shard_key::ShardKeySecret::MIN_BYTES
            ),
        )
    })
}

fn one_char(what: &str, s: &str) -> ApiResult<char> {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(ApiError::from(keysmith::Error::InvalidArgument(format!(
            "{what} must be one character, got {s:?}"
        )))),
    }
}

fn id_of(what: &str, v: &Value) -> ApiResult<Id> {
    let bad = |m: String| ApiError::from(keysmith::Error::InvalidArgument(m));
    match v {
        Value::Number(n) => n.as_i64().map(Id::I64).ok_or_else(|| {
            bad(format!(
                "{what}: {n} is not an i64; write other numbers as \"u64:{n}\" or {{\"type\":\"u64\",\"value\":{n}}}"
            ))
        }),
        Value::String(s) => Ok(s.parse::<Id>()?),
        Value::Object(o) => {
            let ty: IdType = o
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("{what}: an id object needs \"type\"")))?
                .parse()?;
            let text = match o.get("value") {
                Some(Value::String(s)) => s.clone(),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
                _ => return Err(bad(format!("{what}: an id object needs \"value\""))),
            };
            if o.len() > 2 {
                return Err(bad(format!(
                    "{what}: an id object has only \"type\" and \"value\""
                )));
            }
            Ok(Id::parse(ty, &text)?)
        }
        other => Err(bad(format!(
            "{what}: {other} is not an id; give an integer, \"TYPE:VALUE\" or {{\"type\":..,\"value\":..}}"
        ))),
    }
}

/// `POST /v1/shard-keys/encode`.
#[utoipa::path(post, path = "/v1/shard-keys/encode", summary = "The external string of a shard key, signed with the server's secret", description = "",
    request_body = EncodeBody,
    responses((status = 200, description = "The key.", body = KeyView),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody),
        (status = 501, description = "The server has no shard key secret.", body = crate::error::ErrorBody)))]
pub(crate) async fn encode(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    JsonBody(b): JsonBody<EncodeBody>,
) -> ApiResult<Json<KeyView>> {
    let codec = codec(&state, caller.as_deref())?;
    let origin = one_char("origin", &b.origin)?;
    let record = id_of("record", &b.record)?;
    let children = b
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| id_of(&format!("children[{i}]"), c))
        .collect::<ApiResult<Vec<_>>>()?;
    let key = ShardKey::from_parts(origin, b.shard, record, children)?;
    Ok(Json(view(&codec, &key, None)))
}

/// `POST /v1/shard-keys/decode`.
#[utoipa::path(post, path = "/v1/shard-keys/decode", summary = "Decode an external string; rejected if edited, forged or signed with another secret", description = "",
    request_body = DecodeBody,
    responses((status = 200, description = "The key.", body = KeyView),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody),
        (status = 501, description = "The server has no shard key secret.", body = crate::error::ErrorBody)))]
pub(crate) async fn decode(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    JsonBody(b): JsonBody<DecodeBody>,
) -> ApiResult<Json<KeyView>> {
    let codec = codec(&state, caller.as_deref())?;
    let origin = b
        .origin
        .as_deref()
        .map(|o| one_char("origin", o))
        .transpose()?;
    let key = match (origin, &b.record_type) {
        (Some(origin), Some(record)) => {
            let mut schema = KeySchema::new(origin, record.parse()?)?;
            for ty in &b.child_types {
                schema = schema.with_child(ty.parse()?)?;
            }
            codec.decode(&b.external, &schema)?
        }
        (None, Some(_)) => {
            return Err(ApiError::bad_request(
                "record_type needs origin: a schema names both",
            ));
        }
        (_, None) if !b.child_types.is_empty() => {
            return Err(ApiError::bad_request("child_types needs record_type"));
        }
        (origin, None) => {
            let key = codec.decode_any(&b.external)?;
            if let Some(o) = origin {
                key.check_origin(o)?;
            }
            key
        }
    };
    Ok(Json(view(&codec, &key, Some(b.external))))
}
