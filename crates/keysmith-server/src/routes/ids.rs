//! `POST /v1/ids/next`, `GET /v1/ids/{id}` and `GET /v1/ids/bounds`:
//! time-ordered ids (integers or UUIDv7s).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::NextQuery;
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Name, QueryParams};
use keysmith::ids::{DecodedId, IdBounds, IdFormat, IdGenerator, IdValues, parse_time_ms};

/// The server's generator, leased on first use (a failed lease is tried
/// again by the next request).
async fn generator(state: &AppState) -> keysmith::Result<Arc<IdGenerator>> {
    let s = state.shared();
    s.ids
        .get_or_try_init(|| async {
            IdGenerator::builder()
                .store(s.store.clone())
                .config(s.ids_config.clone())
                .build()
                .await
                .map(Arc::new)
        })
        .await
        .cloned()
}

/// The query of `POST /v1/ids/next`: `?count=N&as=number|string&format=integer|uuidv7`.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct IdsNextQuery {
    /// How many ids. Above this server's maximum (`--max-count`) is a 413;
    /// a bad `as` or `format` is a 400 first.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000, default = 1)]
    count: Option<String>,
    /// `string` sends integer ids as JSON strings, for clients whose numbers
    /// lose precision above 2^53 (UUIDs are always strings).
    #[serde(rename = "as")]
    #[param(value_type = Option<super::As>, inline)]
    as_: Option<String>,
    /// `integer` (default): 64-bit time ids; `uuidv7`: RFC 9562 version-7
    /// UUIDs of the same time, worker id and sequence (48 bits of ms,
    /// version 7, a 12-bit counter, variant 10, a 22-bit worker id, 40
    /// random bits), as JSON strings.
    #[param(value_type = Option<IdFormatParam>, inline)]
    format: Option<String>,
}

/// The formats of `?format=`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // Only its schema is used: the library parses the text.
pub(crate) enum IdFormatParam {
    /// 64-bit integers of the server's layout.
    Integer,
    /// Version-7 UUIDs.
    Uuidv7,
}

/// `POST /v1/ids/next?count=N&as=number|string&format=integer|uuidv7` ->
/// `{"ids":[...]}`, increasing.
#[utoipa::path(post, path = "/v1/ids/next", summary = "Take time-ordered ids: 64-bit integers (time, worker, sequence bits) or UUIDv7s of the same",
    description = "Ids increase per server and are unique across every server of the store: the worker id is leased from the store, and the time is kept above a floor stored with the lease. With format=uuidv7 they are RFC 9562 version-7 UUIDs (strings) carrying the same time, worker id and sequence: unique by construction, increasing per server.",
    params(IdsNextQuery),
    responses((status = 200, description = "The ids, ascending.", body = IdsBody),
        (status = 400, description = "A bad count, as or format, or format=uuidv7 with a layout of more than 12 sequence bits.", body = crate::error::ErrorBody),
        (status = 413, description = "Count over the server's maximum.", body = crate::error::ErrorBody),
        (status = 503, description = "Every worker id is held, or the clock is too far behind; retry later.", body = crate::error::ErrorBody)))]
pub(crate) async fn next(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<IdsNextQuery>,
) -> ApiResult<Response> {
    let base = NextQuery {
        count: q.count,
        as_: q.as_,
    };
    let as_strings = base.as_strings()?;
    let format: IdFormat = q.format.as_deref().unwrap_or("integer").parse()?;
    format.check(&state.shared().ids_config.layout)?;
    let n = base.count(state.shared().options.max_count)?;
    let generator = generator(&state).await?;
    crate::auth::still_granted(&state)?;
    let ids = match generator.next_as(n, format).await? {
        IdValues::Integers(v) => Json(IdsBody {
            ids: IdsOut::Integers(super::Ints {
                values: &v,
                as_strings,
            }),
        })
        .into_response(),
        IdValues::Uuids(v) => Json(IdsBody {
            ids: IdsOut::Uuids(v.iter().map(|u| u.hyphenated().to_string()).collect()),
        })
        .into_response(),
    };
    Ok(ids)
}

/// The answer of `POST /v1/ids/next`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = Ids)]
pub(crate) struct IdsBody<'a> {
    /// Integers (numbers, or strings with as=string), or UUID strings
    /// with format=uuidv7.
    #[schema(value_type = Vec<crate::schemas::library::IntOrString>)]
    ids: IdsOut<'a>,
}

/// The ids as JSON: integers as `as` says, UUIDs as canonical strings.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
enum IdsOut<'a> {
    Integers(super::Ints<'a>),
    Uuids(Vec<String>),
}

/// `?from=T&to=T`: RFC 3339 or ms since 1970.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct BoundsQuery {
    /// The window's start: RFC 3339 or ms since 1970.
    #[param(required = true, value_type = String, pattern = "^(-?[0-9]{1,19}|[0-9]{4}-[0-9]{2}-[0-9]{2}T.+)$")]
    from: Option<String>,
    /// The window's end (included): RFC 3339 or ms since 1970, at or after
    /// from.
    #[param(required = true, value_type = String, pattern = "^(-?[0-9]{1,19}|[0-9]{4}-[0-9]{2}-[0-9]{2}T.+)$")]
    to: Option<String>,
}

/// `GET /v1/ids/bounds?from=T&to=T` -> the smallest and largest id of this
/// server's layout made in the window (both ends included); 400 for a
/// missing or bad time or an empty window.
#[utoipa::path(get, path = "/v1/ids/bounds", summary = "The smallest and largest id of a time window, for range queries",
    description = "Every id of this server's layout whose time unit overlaps the window (both ends included) lies between min_id and max_id, and no other.",
    params(BoundsQuery),
    responses((status = 200, description = "The bounds.", body = crate::schemas::library::IdBounds),
        (status = 400, description = "A missing or bad time, or a window with no id of the layout.", body = crate::error::ErrorBody)))]
pub(crate) async fn bounds(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<BoundsQuery>,
) -> ApiResult<Json<IdBounds>> {
    let time = |v: &Option<String>, what: &str| -> ApiResult<i64> {
        let raw = v.as_deref().ok_or_else(|| {
            ApiError::bad_request(format!(
                "{what} is required: RFC 3339 (e.g. 2026-11-24T17:00:00Z) or ms since 1970"
            ))
        })?;
        Ok(parse_time_ms(raw)?)
    };
    let (from, to) = (time(&q.from, "from")?, time(&q.to, "to")?);
    Ok(Json(state.shared().ids_config.layout.bounds(from, to)?))
}

/// `GET /v1/ids/{id}` -> its time, worker and sequence, by this server's
/// layout; 400 for text that is not an id of it.
#[utoipa::path(get, path = "/v1/ids/{id}", summary = "Take an id apart: its time, worker and sequence", description = "",
    params(crate::schemas::IdParam),
    responses((status = 200, description = "The parts.", body = crate::schemas::library::DecodedId),
        (status = 400, description = "Not an id of this server's layout.", body = crate::error::ErrorBody)))]
pub(crate) async fn decode(
    State(state): State<AppState>,
    Name(id): Name,
) -> ApiResult<Json<DecodedId>> {
    Ok(Json(state.shared().ids_config.layout.decode_str(&id)?))
}
