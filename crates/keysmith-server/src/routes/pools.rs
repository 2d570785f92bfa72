//! `/v1/pools`: create, list, show, drop, next.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use keysmith::pool::{self, PoolInfo, ValuePool};
use keysmith::store::{DEFAULT_POOL_START, PoolRow, PoolSpec};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Ints, NextQuery, Partial, ValuesBody};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, Name, QueryParams};
use crate::handles::Entry;

/// The body of `POST /v1/pools`. start must be at most 2^63 - 2 * size, so
/// that every first member can be taken once. With increment, in values of
/// the class: the value 2 * size - 1 places of the class above the first
/// value at or above start must fit in a 64-bit integer.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreatePool)]
pub(crate) struct CreateBody {
    #[schema(schema_with = crate::schemas::name_schema)]
    name: String,
    /// The first number; with increment, rounded up to the first value of
    /// the class at or above it.
    #[serde(default = "default_start")]
    #[schema(default = 1, minimum = 0, maximum = 9223372036854775806_i64)]
    start: i64,
    /// How many members. Above this server's limit (`--max-pool-size`) is
    /// a 413.
    #[schema(minimum = 1, maximum = 1000000)]
    size: i64,
    /// Every number the pool hands out is offset modulo increment.
    #[serde(default)]
    #[schema(schema_with = crate::schemas::library::increment)]
    increment: Option<i64>,
    /// With `increment`: every value's remainder (default 0).
    #[serde(default)]
    #[schema(schema_with = crate::schemas::library::offset)]
    offset: Option<i64>,
    /// Creating a dropped name continues above the numbers it handed out:
    /// the start is raised above them (the response's
    /// continued_above_dropped says to what). true starts at start even
    /// below them; only when none of those numbers is in use any more.
    #[serde(default, deserialize_with = "super::sequences::start_below_dropped")]
    #[schema(default = false)]
    start_below_dropped: bool,
}

fn default_start() -> i64 {
    DEFAULT_POOL_START
}

/// What the server's handle of a pool has done.
#[derive(Debug, Serialize)]
pub(crate) struct PoolHandleView {
    /// Numbers handed out by this server.
    pub(crate) served: u64,
    /// Numbers per second over the last ten seconds.
    pub(crate) rate: f64,
    /// Conditional swaps sent to the store.
    pub(crate) attempts: u64,
    /// Swaps that found their number taken by someone else first.
    pub(crate) conflicts: u64,
    /// `conflicts / attempts` (0 before the first attempt).
    pub(crate) conflict_rate: f64,
}

impl PoolHandleView {
    pub(crate) fn of(e: &Entry<ValuePool>) -> PoolHandleView {
        let st = e.handle.stats();
        PoolHandleView {
            served: e.served.load(Relaxed),
            rate: e.rate(),
            attempts: st.attempts,
            conflicts: st.conflicts,
            conflict_rate: if st.attempts == 0 {
                0.0
            } else {
                st.conflicts as f64 / st.attempts as f64
            },
        }
    }
}

/// A pool as `list` and `create` show it: its row in values (with
/// `increment` and `offset` of a pool in a residue class) and this server's
/// handle.
#[derive(Debug, Serialize)]
pub(crate) struct PoolView {
    #[serde(flatten)]
    row: PoolRow,
    server: Option<PoolHandleView>,
}

/// A pool as `show` shows it: its state (from every member, in values) and
/// this server's handle.
#[derive(Debug, Serialize)]
pub(crate) struct PoolDetail {
    #[serde(flatten)]
    info: PoolInfo,
    server: Option<PoolHandleView>,
}

fn server_view(state: &AppState, name: &str) -> Option<PoolHandleView> {
    state
        .shared()
        .pools
        .get(name)
        .map(|e| PoolHandleView::of(&e))
}

#[utoipa::path(post, path = "/v1/pools", summary = "Create a value pool holding start..start+size (with increment, size values of its residue class from start on)", description = "",
    request_body = CreateBody,
    responses((status = 201, description = "Created.", body = crate::schemas::library::Pool),
        (status = 409, description = "A pool of that name exists.", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit, or size over this server's maximum.", body = crate::error::ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    JsonBody(b): JsonBody<CreateBody>,
) -> ApiResult<Response> {
    let max = state.shared().options.max_pool_size;
    if b.size > max {
        keysmith::validate_name(&b.name)?;
        return Err(ApiError::too_large(format!(
            "pool size {} is above this server's limit of {max} members (a create writes every \
             member within the request timeout); a few hundred members already make collisions rare",
            b.size
        )));
    }
    let spec = PoolSpec {
        residue: super::residue_of(b.increment, b.offset)?,
        name: b.name,
        start: b.start,
        size: b.size,
        start_below_dropped: b.start_below_dropped,
    };
    let created = pool::create(&*state.shared().store, &spec).await?;
    let row = created.row;
    let server = server_view(&state, &row.name);
    let mut body = serde_json::to_value(PoolView { row, server })
        .map_err(|e| ApiError::from(keysmith::Error::Corrupt(e.to_string())))?;
    if let (Some(first), Some(obj)) = (created.continued_above_dropped, body.as_object_mut()) {
        tracing::info!(pool = %spec.name, start = first, "created a dropped pool name again: continues above the values it handed out");
        obj.insert("continued_above_dropped".into(), first.into());
    }
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

#[derive(Serialize)]
pub(crate) struct List {
    pools: Vec<PoolView>,
}

#[utoipa::path(get, path = "/v1/pools", summary = "List pools", description = "",
    responses((status = 200, description = "Every pool, by name.", body = crate::schemas::library::PoolList)))]
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult<Json<List>> {
    let rows = pool::list(&*state.shared().store).await?;
    Ok(Json(List {
        pools: rows
            .into_iter()
            .filter(|row| crate::access::visible(&row.name))
            .map(|row| PoolView {
                server: server_view(&state, &row.name),
                row,
            })
            .collect(),
    }))
}

#[utoipa::path(get, path = "/v1/pools/{name}", summary = "Show a pool (reads every member)", description = "",
    params(crate::schemas::NameParam),
    responses((status = 200, description = "The pool.", body = crate::schemas::library::Pool),
        (status = 404, description = "No such pool.", body = crate::error::ErrorBody)))]
pub(crate) async fn show(
    State(state): State<AppState>,
    Name(name): Name,
) -> ApiResult<Json<PoolDetail>> {
    let info = pool::describe(&*state.shared().store, &name).await?;
    Ok(Json(PoolDetail {
        server: server_view(&state, &name),
        info,
    }))
}

#[utoipa::path(delete, path = "/v1/pools/{name}", summary = "Drop a pool for good", description = "",
    params(crate::schemas::NameParam),
    responses((status = 200, description = "Dropped.", body = super::Dropped),
        (status = 404, description = "No such pool.", body = crate::error::ErrorBody)))]
pub(crate) async fn drop(
    State(state): State<AppState>,
    Name(name): Name,
) -> ApiResult<Json<super::Dropped>> {
    let s = state.shared();
    pool::remove(&*s.store, &name).await?;
    s.pools.remove(&name, &s.metrics).await;
    Ok(Json(super::Dropped { dropped: name }))
}

async fn handle(state: &AppState, name: &str) -> keysmith::Result<Arc<Entry<ValuePool>>> {
    let s = state.shared();
    s.pools
        .get_or_open(name, &s.metrics, || {
            ValuePool::builder()
                .store(s.store.clone())
                .name(name)
                .retry_budget(s.options.retry_budget)
                .build()
        })
        .await
}

/// Why a pool request stopped taking numbers before it had all.
enum Halt {
    /// Its deadline came.
    Deadline,
    /// Its client is gone (the handler was dropped).
    Gone,
    /// A take failed.
    Failed(keysmith::Error),
}

impl From<keysmith::Error> for Halt {
    fn from(e: keysmith::Error) -> Self {
        Halt::Failed(e)
    }
}

/// Sets its flag when dropped: the handler tells its task the client is gone.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// `POST /v1/pools/{name}/next`: takes numbers one after another until it
/// has `count` or its [`deadline`](super::deadline) comes; a take that fails
/// after others succeeded also ends it. Either way the numbers taken are
/// the answer, with `"partial"` saying why there are fewer: a number, once
/// taken, is never dropped. Only a request that took nothing fails.
///
/// The takes run in their own task, so neither a timeout nor a client that
/// hangs up can cut one off between its swap in the store and the answer.
#[utoipa::path(post, path = "/v1/pools/{name}/next", summary = "Take numbers from a pool",
    description = "Numbers are unique forever, in no particular order.",
    params(crate::schemas::NameParam, NextQuery),
    responses((status = 200, description = "The numbers, in the order taken; `partial` when fewer than asked for.", body = super::ValuesSchema),
        (status = 404, description = "No such pool.", body = crate::error::ErrorBody),
        (status = 408, description = "The body did not arrive by the route's deadline.", body = crate::error::ErrorBody),
        (status = 409, description = "The pool is exhausted: no member can be taken.", body = crate::error::ErrorBody),
        (status = 413, description = "Count over the server's maximum.", body = crate::error::ErrorBody)))]
pub(crate) async fn next(
    State(state): State<AppState>,
    Extension(super::Started(started)): Extension<super::Started>,
    Name(name): Name,
    QueryParams(q): QueryParams<NextQuery>,
) -> ApiResult<Response> {
    let s = state.shared();
    let as_strings = q.as_strings()?;
    let count = q.count(s.options.max_count)?;
    keysmith::validate_name(&name)?;
    let deadline = super::deadline(started, s.options.request_timeout);
    let entry = handle(&state, &name).await?;
    crate::auth::still_granted(&state)?;
    let gone = Arc::new(AtomicBool::new(false));
    let _tell = SetOnDrop(gone.clone());
    let task = tokio::spawn({
        let entry = entry.clone();
        async move {
            let mut values = Vec::with_capacity(usize::try_from(count.min(4096)).unwrap_or(0));
            let r = entry
                .handle
                .take_each(count, |v| {
                    values.push(v);
                    if gone.load(Relaxed) {
                        Err(Halt::Gone)
                    } else if Instant::now() >= deadline && (values.len() as i64) < count {
                        Err(Halt::Deadline)
                    } else {
                        Ok(())
                    }
                })
                .await;
            (values, r)
        }
    });
    let (values, result) = task.await.map_err(|e| {
        ApiError::from(keysmith::Error::Unavailable(format!(
            "the task taking numbers failed: {e}"
        )))
    })?;
    let partial = match result {
        Ok(()) => None,
        Err(Halt::Deadline) => Some(Partial {
            requested: count,
            reason: "deadline",
            message: format!(
                "took {} of {count} numbers before the server's time limit of {} ms; ask again for the rest",
                values.len(),
                s.options.request_timeout.as_millis()
            ),
        }),
        Err(Halt::Gone) => None,
        Err(Halt::Failed(e)) if values.is_empty() => {
            if matches!(e, keysmith::Error::NotFound { .. }) {
                s.pools.evict(&name, &entry, &s.metrics).await;
            }
            return Err(e.into());
        }
        Err(Halt::Failed(e)) => {
            let api = ApiError::from(e);
            Some(Partial {
                requested: count,
                reason: api.code,
                message: format!(
                    "took {} of {count} numbers, then: {}",
                    values.len(),
                    api.message
                ),
            })
        }
    };
    entry.record(&values, started);
    Ok(Json(ValuesBody {
        values: Ints {
            values: &values,
            as_strings,
        },
        partial: partial.as_ref(),
    })
    .into_response())
}
