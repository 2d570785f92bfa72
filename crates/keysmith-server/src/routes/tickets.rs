//! Numbered sequences: `/v1/sequences/{name}/tickets` (gap-free numbers:
//! take, commit, release) and `/v1/sequences/{name}/parse`. Every call goes
//! to the store: a number is recorded as taken before it leaves.

use std::time::Duration;

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use keysmith::numbers::{DEFAULT_TICKET_TTL, Formatted, Numbers};
use keysmith::store::MAX_TICKET_TTL;
use serde::Deserialize;

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, Name, QueryParams};

/// `{name}` and `{ticket}` of a ticket's path.
#[derive(Debug)]
pub(crate) struct NameTicket(String, String);

impl<S: Send + Sync> FromRequestParts<S> for NameTicket {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map(|Path((n, t))| NameTicket(n, t))
            .map_err(|e| ApiError::bad_request(format!("bad path: {}", e.body_text())))
    }
}

/// The query of `POST /v1/sequences/{name}/tickets`: `?ttl=SECS`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TakeQuery {
    ttl: Option<String>,
}

impl TakeQuery {
    fn ttl(&self) -> ApiResult<Duration> {
        let Some(raw) = &self.ttl else {
            return Ok(DEFAULT_TICKET_TTL);
        };
        let max = MAX_TICKET_TTL.as_secs();
        raw.parse::<u64>()
            .ok()
            .filter(|s| (1..=max).contains(s))
            .map(Duration::from_secs)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "ttl must be a whole number of seconds from 1 to {max}, got {raw:?}"
                ))
            })
    }
}

async fn open(state: &AppState, name: &str) -> keysmith::Result<Numbers> {
    Numbers::open(state.shared().store.clone(), name).await
}

/// The number as JSON: its text for a formatted sequence, else the integer.
fn value(h: &Numbers, f: &Formatted) -> serde_json::Value {
    if h.is_formatted() {
        serde_json::Value::String(f.text.clone())
    } else {
        serde_json::Value::from(f.number.n)
    }
}

/// `POST /v1/sequences/{name}/tickets?ttl=SECS`: a gap-free number and the
/// ticket that commits or releases it.
pub(crate) async fn take(
    State(state): State<AppState>,
    Name(name): Name,
    QueryParams(q): QueryParams<TakeQuery>,
) -> ApiResult<Response> {
    let ttl = q.ttl()?;
    let h = open(&state, &name).await?;
    let t = h.take(ttl).await?;
    let f = Formatted {
        number: t.number,
        text: t.text,
    };
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({
            "value": value(&h, &f),
            "ticket": t.ticket.to_string(),
            "period": f.number.period,
            "n": f.number.n,
        })),
    )
        .into_response())
}

/// `POST /v1/sequences/{name}/tickets/{ticket}/commit`.
pub(crate) async fn commit(
    State(state): State<AppState>,
    NameTicket(name, ticket): NameTicket,
) -> ApiResult<Response> {
    keysmith::validate_name(&name)?;
    let h = open(&state, &name).await?;
    let f = h.commit(&ticket).await?;
    Ok(Json(serde_json::json!({ "committed": value(&h, &f) })).into_response())
}

/// `POST /v1/sequences/{name}/tickets/{ticket}/release`.
pub(crate) async fn release(
    State(state): State<AppState>,
    NameTicket(name, ticket): NameTicket,
) -> ApiResult<Response> {
    keysmith::validate_name(&name)?;
    let h = open(&state, &name).await?;
    let f = h.release(&ticket).await?;
    Ok(Json(serde_json::json!({ "released": value(&h, &f) })).into_response())
}

/// The body of `POST /v1/sequences/{name}/parse`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ParseBody {
    value: String,
}

/// `POST /v1/sequences/{name}/parse`: `{"value": "INV-20261123-0042"}` ->
/// `{"period": 20261123, "n": 42}`.
pub(crate) async fn parse(
    State(state): State<AppState>,
    Name(name): Name,
    JsonBody(b): JsonBody<ParseBody>,
) -> ApiResult<Response> {
    let h = open(&state, &name).await?;
    let n = h.parse(&b.value)?;
    Ok(Json(n).into_response())
}
