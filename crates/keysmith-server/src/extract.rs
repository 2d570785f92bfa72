//! Extractors whose rejections are JSON errors with the statuses of the API.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON request body. A number without a fraction (`3.0`, `1e3`) is an
/// integer, as JSON Schema says. The content type is not checked (so `curl -d` works);
/// the body must parse as `T`. Rejections: 413 over the body limit, 400 for
/// anything that does not parse, naming the problem; also 400 for an object
/// with a key twice (JSON parsers disagree on which one wins, so the server
/// takes neither).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(body_rejection)?;
        if bytes.is_empty() {
            return Err(ApiError::bad_request(
                "the request needs a JSON object as its body",
            ));
        }
        let value = parse_strict(&bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "the body must be a JSON object, e.g. {\"name\": \"orders\"}",
            ));
        }
        serde_json::from_value(value)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid here: {e}")))
    }
}

/// Parses JSON text, refusing an object that has a key twice (at any depth).
pub(crate) fn parse_strict(bytes: &[u8]) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_slice::<Strict>(bytes).map(|s| s.0)
}

/// A JSON value whose objects have no key twice.
struct Strict(serde_json::Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    /// A number with no fraction is an integer, as JSON Schema counts
    /// (`3.0`, `1e3`), when it fits in an `i64`.
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        // -2^63 <= v < 2^63: exact in an i64.
        if v.fract() == 0.0
            && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&v)
        {
            return Ok((v as i64).into());
        }
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(out.into())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(v) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "the key {key:?} appears twice in one object"
                )));
            }
            out.insert(key, v);
        }
        Ok(out.into())
    }
}

fn body_rejection(r: BytesRejection) -> ApiError {
    body_error(r.status() == StatusCode::PAYLOAD_TOO_LARGE, &r.body_text())
}

/// A body that could not be read in full (by `axum::body::to_bytes`): 413
/// over the limit, else 400.
pub(crate) fn read_error(e: axum::Error) -> ApiError {
    let e = e.into_inner();
    let over = e
        .downcast_ref::<http_body_util::LengthLimitError>()
        .is_some();
    body_error(over, &e.to_string())
}

fn body_error(over_limit: bool, why: &str) -> ApiError {
    if over_limit {
        ApiError::too_large(format!(
            "the request body is larger than the server's limit: {why}"
        ))
    } else {
        ApiError::bad_request(format!("cannot read the request body: {why}"))
    }
}

/// The `{name}` segment of a route, percent-decoded (a name with `/` in it
/// is sent as `%2F`). Invalid percent-encoding or UTF-8 is a 400.
#[derive(Debug)]
pub struct Name(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(n)| Name(n))
            .map_err(|e| ApiError::bad_request(format!("bad name in the path: {}", e.body_text())))
    }
}

/// Query parameters parsed into `T`; unknown or malformed parameters are a 400.
#[derive(Debug)]
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| QueryParams(q))
            .map_err(|e| ApiError::bad_request(format!("bad query parameters: {}", e.body_text())))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        let e = super::parse_strict(br#"{"name":"a","name":"b"}"#).unwrap_err();
        assert!(e.to_string().contains("\"name\" appears twice"), "{e}");
        let e = super::parse_strict(br#"{"a":[{"x":1,"x":2}]}"#).unwrap_err();
        assert!(e.to_string().contains("\"x\""), "{e}");
        let v = super::parse_strict(br#"{"a":[1,-2,3.5,"s",null,true],"b":{"a":1}}"#).unwrap();
        assert_eq!(v["a"][1], -2);
        assert_eq!(v["b"]["a"], 1);
        let v = super::parse_strict(br#"{"a":3.0,"b":1e3,"c":-0.0,"d":1e19,"e":2.5}"#).unwrap();
        assert_eq!(v["a"], 3);
        assert_eq!(v["b"], 1000);
        assert_eq!(v["c"], 0);
        assert!(v["d"].is_f64() && v["e"].is_f64(), "{v}");
    }
}
