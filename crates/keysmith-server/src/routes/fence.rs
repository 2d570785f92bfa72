//! `POST /v1/fence`: the operator's fence over HTTP (see
//! [`keysmith::fence`]): moves one sequence, or every block-based one,
//! forward after the store went back in a way keysmith cannot see. A skip
//! above the server's `max_fence_skip` is a 413 and moves nothing.

use axum::Json;
use axum::extract::State;
use keysmith::fence::{FenceReport, FenceTarget, fence};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;

/// The body: `{"name": "orders"}` or `{"all": true}`, with `skip` and an
/// optional `dry_run`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Fence)]
pub(crate) struct FenceBody {
    /// The one sequence to move (a null name is no name).
    #[serde(default)]
    #[schema(schema_with = name_or_null)]
    name: Option<String>,
    /// Every sequence.
    #[serde(default)]
    #[schema(default = false)]
    all: bool,
    /// How far to move each. Above this server's limit
    /// (`--max-fence-skip`) is a 413.
    #[schema(minimum = 1, maximum = 1000000000)]
    skip: i64,
    /// Say what would move; write nothing.
    #[serde(default)]
    #[schema(default = false)]
    dry_run: bool,
}

/// A name, or null.
fn name_or_null() -> utoipa::openapi::schema::Schema {
    utoipa::openapi::schema::OneOfBuilder::new()
        .item(crate::schemas::name_schema())
        .item(utoipa::openapi::schema::Object::with_type(
            utoipa::openapi::schema::Type::Null,
        ))
        .into()
}

#[utoipa::path(post, path = "/v1/fence", summary = "Move sequences forward after the store went back unseen",
    description = "For a restore keysmith cannot detect (a file copy put back, a backup restored into the same generation). \
        Every move is a conditional write, safe while values are handed out; dry_run writes nothing. Exactly one of name and all (true).",
    request_body = FenceBody,
    responses((status = 200, description = "What moved, or would move.", body = crate::schemas::library::FenceReport),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "A numbered sequence (`wrong_kind`).", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit, or skip over the server's largest fence skip.", body = crate::error::ErrorBody)))]
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
