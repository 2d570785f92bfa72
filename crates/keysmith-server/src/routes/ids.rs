//! `POST /v1/ids/next`, `GET /v1/ids/{id}` and `GET /v1/ids/bounds`:
//! time-ordered ids.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};

use super::NextQuery;
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Name, QueryParams};
use keysmith::ids::{DecodedId, IdBounds, IdGenerator, parse_time_ms};

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

/// `POST /v1/ids/next?count=N&as=number|string` -> `{"ids":[...]}`,
/// increasing.
#[utoipa::path(post, path = "/v1/ids/next", summary = "Take time-ordered 64-bit ids (time, worker, sequence bits)",
    description = "Ids increase per server and are unique across every server of the store: the worker id is leased from the store, and the time is kept above a floor stored with the lease.",
    params(NextQuery),
    responses((status = 200, description = "The ids, ascending.", body = IdsBody),
        (status = 413, description = "Count over the server's maximum.", body = crate::error::ErrorBody),
        (status = 503, description = "Every worker id is held, or the clock is too far behind; retry later.", body = crate::error::ErrorBody)))]
pub(crate) async fn next(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<NextQuery>,
) -> ApiResult<Response> {
    let n = q.count(state.shared().options.max_count)?;
    let as_strings = q.as_strings()?;
    let ids = generator(&state).await?.next_n(n).await?;
    Ok(Json(IdsBody {
        ids: super::Ints {
            values: &ids,
            as_strings,
        },
    })
    .into_response())
}

/// The answer of `POST /v1/ids/next`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = Ids)]
pub(crate) struct IdsBody<'a> {
    #[schema(value_type = Vec<crate::schemas::library::IntOrString>)]
    ids: super::Ints<'a>,
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
