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
#[derive(Debug, serde::Serialize)]
pub(crate) struct IdsBody<'a> {
    ids: super::Ints<'a>,
}

/// `?from=T&to=T`: RFC 3339 or ms since 1970.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoundsQuery {
    from: Option<String>,
    to: Option<String>,
}

/// `GET /v1/ids/bounds?from=T&to=T` -> the smallest and largest id of this
/// server's layout made in the window (both ends included); 400 for a
/// missing or bad time or an empty window.
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
pub(crate) async fn decode(
    State(state): State<AppState>,
    Name(id): Name,
) -> ApiResult<Json<DecodedId>> {
    Ok(Json(state.shared().ids_config.layout.decode_str(&id)?))
}
