//! Extractors whose rejections are JSON errors with the statuses of the API.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON request body. The content type is not checked (so `curl -d` works);
/// the body must parse as `T`. Rejections: 413 over the body limit, 400 for
/// anything that does not parse, naming the problem.
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
        let value: serde_json::Value = serde_json::from_slice(&bytes)
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

fn body_rejection(r: BytesRejection) -> ApiError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(format!(
            "the request body is larger than the server's limit: {}",
            r.body_text()
        ))
    } else {
        ApiError::bad_request(format!("cannot read the request body: {}", r.body_text()))
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
