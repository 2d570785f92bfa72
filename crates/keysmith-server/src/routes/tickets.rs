//! Numbered sequences: `/v1/sequences/{name}/tickets` (gap-free numbers:
//! take, commit, release) and `/v1/sequences/{name}/parse`. Every call goes
//! to the store: a number is recorded as taken before it leaves.

use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use keysmith::numbers::{DEFAULT_TICKET_TTL, Formatted, Numbers};
use keysmith::store::MAX_TICKET_TTL;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::access::Caller;
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
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct TakeQuery {
    /// Seconds the ticket lives, by the store's clock.
    #[param(value_type = Option<u64>, minimum = 1, maximum = 86400, default = 60)]
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
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Value {
    Number(i64),
    Text(String),
}

impl Value {
    fn of(h: &Numbers, f: Formatted) -> Value {
        if h.is_formatted() {
            Value::Text(f.text)
        } else {
            Value::Number(f.number.n)
        }
    }
}

/// The answer of a take: the number and its ticket.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Ticket)]
pub(crate) struct TicketBody {
    /// The number: a string for a formatted sequence.
    #[schema(value_type = crate::schemas::library::IntOrString)]
    value: Value,
    /// PERIOD-VALUE-TOKEN: commits or releases the number.
    ticket: String,
    period: Option<i64>,
    n: i64,
}

/// The answer of a commit.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Committed)]
pub(crate) struct CommittedBody {
    #[schema(value_type = crate::schemas::library::IntOrString)]
    committed: Value,
}

/// The answer of a ticket's release.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ReleasedNumber)]
pub(crate) struct ReleasedNumberBody {
    #[schema(value_type = crate::schemas::library::IntOrString)]
    released: Value,
}

/// `POST /v1/sequences/{name}/tickets?ttl=SECS`: a gap-free number and the
/// ticket that commits or releases it.
#[utoipa::path(post, path = "/v1/sequences/{name}/tickets", summary = "Take a gap-free number with a ticket",
    description = "The lowest number of the current period that was released or whose ticket expired, else the next new one. \
        Commit it or release it with the ticket; a holder that does neither loses it after `ttl` seconds.",
    params(crate::schemas::NameParam, TakeQuery),
    responses((status = 201, description = "The number and its ticket.", body = TicketBody),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "The sequence is exhausted, or not gap-free (`wrong_kind`).", body = crate::error::ErrorBody)))]
pub(crate) async fn take(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Name(name): Name,
    QueryParams(q): QueryParams<TakeQuery>,
) -> ApiResult<Response> {
    let ttl = q.ttl()?;
    let h = open(&state, &name).await?;
    crate::auth::still_granted(&state)?;
    let t = h.take(ttl).await?;
    // Counted in the principal's max_open_tickets (checked before the
    // handler: crate::quota::run_use).
    if let Some(Extension(Caller(p))) = &caller {
        state
            .shared()
            .quotas
            .took_ticket(p, &name, &t.ticket.to_string(), ttl);
    }
    let (period, n) = (t.number.period, t.number.n);
    let f = Formatted {
        number: t.number,
        text: t.text,
    };
    Ok((
        StatusCode::CREATED,
        Json(TicketBody {
            value: Value::of(&h, f),
            ticket: t.ticket.to_string(),
            period,
            n,
        }),
    )
        .into_response())
}

/// `POST /v1/sequences/{name}/tickets/{ticket}/commit`.
#[utoipa::path(post, path = "/v1/sequences/{name}/tickets/{ticket}/commit", summary = "Make a taken number final",
    description = "Deprecated: the ticket in the URL reaches proxies' and access logs; use `POST /v1/sequences/{name}/tickets/commit` with the ticket in the body. Refused with a 409, changing nothing, when the ticket no longer holds the number (committed or released already, \
        or expired and taken by another).",
    params(crate::schemas::NameParam, crate::schemas::TicketParam),
    responses((status = 200, description = "The number committed.", body = CommittedBody),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "The ticket does not hold the number, or the sequence is not gap-free (`wrong_kind`).", body = crate::error::ErrorBody),
        (status = 410, description = "The ticket is of an earlier life of the name: it was dropped and created again since (`dropped`); nothing changed.", body = crate::error::ErrorBody)))]
#[deprecated = "the token or ticket in the URL reaches logs; use POST /v1/sequences/{name}/tickets/commit with it in the body"]
pub(crate) async fn commit(
    State(state): State<AppState>,
    NameTicket(name, ticket): NameTicket,
) -> ApiResult<Response> {
    settle(&state, &name, &ticket, Settle::Commit).await
}

/// `POST /v1/sequences/{name}/tickets/{ticket}/release`.
#[utoipa::path(post, path = "/v1/sequences/{name}/tickets/{ticket}/release", summary = "Free a taken number: it is the next one taken",
    description = "Deprecated: the ticket in the URL reaches proxies' and access logs; use `POST /v1/sequences/{name}/tickets/release` with the ticket in the body.",
    params(crate::schemas::NameParam, crate::schemas::TicketParam),
    responses((status = 200, description = "The number released.", body = ReleasedNumberBody),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "The ticket does not hold the number, or the sequence is not gap-free (`wrong_kind`).", body = crate::error::ErrorBody),
        (status = 410, description = "The ticket is of an earlier life of the name: it was dropped and created again since (`dropped`); nothing changed.", body = crate::error::ErrorBody)))]
#[deprecated = "the token or ticket in the URL reaches logs; use POST /v1/sequences/{name}/tickets/release with it in the body"]
pub(crate) async fn release(
    State(state): State<AppState>,
    NameTicket(name, ticket): NameTicket,
) -> ApiResult<Response> {
    settle(&state, &name, &ticket, Settle::Release).await
}

/// What a settle route does with a ticket's number.
#[derive(Debug, Clone, Copy)]
enum Settle {
    Commit,
    Release,
}

/// Commits or releases `ticket`'s number of sequence `name`: what the four
/// settle routes (the ticket in the path, deprecated, or in the body) do.
async fn settle(state: &AppState, name: &str, ticket: &str, what: Settle) -> ApiResult<Response> {
    keysmith::validate_name(name)?;
    let h = open(state, name).await?;
    crate::auth::still_granted(state)?;
    let res = match what {
        Settle::Commit => Json(CommittedBody {
            committed: Value::of(&h, h.commit(ticket).await?),
        })
        .into_response(),
        Settle::Release => Json(ReleasedNumberBody {
            released: Value::of(&h, h.release(ticket).await?),
        })
        .into_response(),
    };
    state.shared().quotas.settled_ticket(name, ticket);
    Ok(res)
}

/// The body of the commit and release routes that keep the ticket out of
/// the URL: `{"ticket": "..."}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = TicketRef)]
pub(crate) struct TicketRef {
    /// The ticket the take answered with.
    ticket: String,
}

/// `POST /v1/sequences/{name}/tickets/commit` with `{"ticket": ...}`:
/// [`commit`] with the ticket in the body.
#[utoipa::path(post, path = "/v1/sequences/{name}/tickets/commit", summary = "Make a taken number final",
    description = "The ticket travels in the body, never in the URL. Refused with a 409, changing nothing, when the ticket no longer holds \
        the number (committed or released already, or expired and taken by another).",
    params(crate::schemas::NameParam),
    request_body = TicketRef,
    responses((status = 200, description = "The number committed.", body = CommittedBody),
        (status = 400, description = "No ticket, or not a ticket.", body = crate::error::ErrorBody),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "The ticket does not hold the number, or the sequence is not gap-free (`wrong_kind`).", body = crate::error::ErrorBody),
        (status = 410, description = "The ticket is of an earlier life of the name: it was dropped and created again since (`dropped`); nothing changed.", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn commit_body(
    State(state): State<AppState>,
    Name(name): Name,
    JsonBody(b): JsonBody<TicketRef>,
) -> ApiResult<Response> {
    settle(&state, &name, &b.ticket, Settle::Commit).await
}

/// `POST /v1/sequences/{name}/tickets/release` with `{"ticket": ...}`:
/// [`release`] with the ticket in the body.
#[utoipa::path(post, path = "/v1/sequences/{name}/tickets/release", summary = "Free a taken number: it is the next one taken",
    description = "The ticket travels in the body, never in the URL.",
    params(crate::schemas::NameParam),
    request_body = TicketRef,
    responses((status = 200, description = "The number released.", body = ReleasedNumberBody),
        (status = 400, description = "No ticket, or not a ticket.", body = crate::error::ErrorBody),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "The ticket does not hold the number, or the sequence is not gap-free (`wrong_kind`).", body = crate::error::ErrorBody),
        (status = 410, description = "The ticket is of an earlier life of the name: it was dropped and created again since (`dropped`); nothing changed.", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn release_body(
    State(state): State<AppState>,
    Name(name): Name,
    JsonBody(b): JsonBody<TicketRef>,
) -> ApiResult<Response> {
    settle(&state, &name, &b.ticket, Settle::Release).await
}

/// The body of `POST /v1/sequences/{name}/parse`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ParseNumber)]
pub(crate) struct ParseBody {
    /// A number the sequence printed.
    value: String,
}

/// `POST /v1/sequences/{name}/parse`: `{"value": "INV-20261123-0042"}` ->
/// `{"period": 20261123, "n": 42}`.
#[utoipa::path(post, path = "/v1/sequences/{name}/parse", summary = "Split a number a formatted sequence printed into its period and counter", description = "",
    params(crate::schemas::NameParam),
    request_body = ParseBody,
    responses((status = 200, description = "The parts.", body = crate::schemas::library::NumberParts),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "An ordinary sequence (`wrong_kind`): it prints plain integers.", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn parse(
    State(state): State<AppState>,
    Name(name): Name,
    JsonBody(b): JsonBody<ParseBody>,
) -> ApiResult<Response> {
    let h = open(&state, &name).await?;
    let n = h.parse(&b.value)?;
    Ok(Json(n).into_response())
}

/// The body of `POST /v1/sequences/{name}/decode`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DecodeValue)]
pub(crate) struct DecodeBody {
    /// A value the sequence handed out: an integer (as a number or a
    /// string) or an encoded string.
    #[schema(value_type = crate::schemas::library::IntOrString)]
    value: DecodeInput,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DecodeInput {
    Number(i64),
    Text(String),
}

/// `POST /v1/sequences/{name}/decode`: [`Numbers::decode`]. Needs the `use`
/// grant (it reveals the counter behind an opaque value).
#[utoipa::path(post, path = "/v1/sequences/{name}/decode", summary = "Map a value an opaque, encoded or bit-reversed sequence handed out back to its counter",
    description = "The answer is {\"value\": V, \"counter\": C}: V the value as an integer (an encoded string decoded), C the plain counter it was made from. \
        A value the sequence never makes (a wrong prefix, character, width or check character; outside its range; of a key it does not have) is a 400 naming what was wrong.",
    params(crate::schemas::NameParam),
    request_body = DecodeBody,
    responses((status = 200, description = "The value and its counter.", body = crate::schemas::library::Decoded),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "An ordinary, formatted or gap-free sequence (`wrong_kind`).", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn decode(
    State(state): State<AppState>,
    Name(name): Name,
    JsonBody(b): JsonBody<DecodeBody>,
) -> ApiResult<Response> {
    let h = open(&state, &name).await?;
    let d = match b.value {
        DecodeInput::Number(n) => h.decode_value(n)?,
        DecodeInput::Text(t) => h.decode(&t)?,
    };
    Ok(Json(d).into_response())
}
