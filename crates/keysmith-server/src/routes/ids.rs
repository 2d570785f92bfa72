//! `POST /v1/ids/next` and `GET /v1/ids/{id}`: time-ordered ids.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::Response;

use super::NextQuery;
use crate::AppState;
use crate::error::ApiResult;
use crate::extract::{Name, QueryParams};
use keysmith::ids::{DecodedId, IdGenerator};

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
    Ok(super::list_response("ids", &ids, as_strings, None))
}

/// `GET /v1/ids/{id}` -> its time, worker and sequence, by this server's
/// layout; 400 for text that is not an id of it.
pub(crate) async fn decode(
    State(state): State<AppState>,
    Name(id): Name,
) -> ApiResult<Json<DecodedId>> {
    Ok(Json(state.shared().ids_config.layout.decode_str(&id)?))
}
