//! `POST /v1/fence`: the operator's fence over HTTP (see
//! [`keysmith::fence`]): moves one sequence, or every block-based one,
//! forward after the store went back in a way keysmith cannot see. A skip
//! above the server's `max_fence_skip` is a 413 and moves nothing.

use axum::Json;
use axum::extract::State;
use keysmith::fence::{FenceReport, FenceTarget, fence};
use serde::Deserialize;

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;

/// The body: `{"name": "orders"}` or `{"all": true}`, with `skip` and an
/// optional `dry_run`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FenceBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    all: bool,
    skip: i64,
    #[serde(default)]
    dry_run: bool,
}

pub(crate) async fn post(
    State(state): State<AppState>,
    JsonBody(b): JsonBody<FenceBody>,
) -> ApiResult<Json<FenceReport>> {
    let target = match (b.name, b.all) {
        (Some(name), false) => FenceTarget::One(name),
        (None, true) => FenceTarget::All,
        _ => {
            return Err(ApiError::bad_request(
                "give either \"name\" (one sequence) or \"all\": true, not both and not neither",
            ));
        }
    };
    let s = state.shared();
    let max = s.options.max_fence_skip;
    if b.skip > max {
        return Err(ApiError::too_large(format!(
            "skip {} is above this server's limit of {max} values a fence; fence in several steps, \
             or raise the server's max_fence_skip (`keysmith serve --max-fence-skip`)",
            b.skip
        )));
    }
    Ok(Json(fence(&*s.store, &target, b.skip, b.dry_run).await?))
}
