//! `/v1/workers/{group}/lease...`: worker-id leases for generators other
//! than keysmith's own (sonyflake, bwmarrin/snowflake), and `GET
//! /v1/workers/{group}`, the group's worker ids as the store holds them. The
//! library does the work ([`keysmith::ids::WorkerLeases`],
//! [`keysmith::ids::list_workers`]); tokens are signed with the server's
//! lease key (`KEYSMITH_LEASE_SECRET`, shared by the servers of one store),
//! and a listing shows none.

use std::time::Duration;

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use keysmith::ids::{DEFAULT_GROUP_SIZE, DEFAULT_LEASE_TTL, HeldWorker, WorkerLeases, WorkerList};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, Name, QueryParams};

/// The longest TTL, ms (a day).
pub(crate) const MAX_TTL_MS: u64 = keysmith::store::MAX_WORKER_TTL.as_millis() as u64;

/// `{group}` and `{token}` of a lease's path.
#[derive(Debug)]
pub(crate) struct GroupToken(String, String);

impl<S: Send + Sync> FromRequestParts<S> for GroupToken {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map(|Path((g, t))| GroupToken(g, t))
            .map_err(|e| ApiError::bad_request(format!("bad path: {}", e.body_text())))
    }
}

/// `?ttl_ms=T&max=N`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct LeaseQuery {
    /// The lease's time to live, ms (default 10000, or this server's limit
    /// if lower). Above this server's limit (`--max-worker-ttl-ms`) is a
    /// 413.
    #[param(value_type = Option<u64>, minimum = 1, maximum = 86400000)]
    ttl_ms: Option<String>,
    /// Worker ids are 0..max.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1024, default = 1024)]
    max: Option<String>,
}

/// `?ttl_ms=T`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct RenewQuery {
    /// The lease's new time to live, ms (default: the lease's own). Above
    /// this server's limit (`--max-worker-ttl-ms`) is a 413.
    #[param(value_type = Option<u64>, minimum = 1, maximum = 86400000)]
    ttl_ms: Option<String>,
}

/// The `ttl_ms` asked for: 400 when it is not a whole number from 1 to
/// [`MAX_TTL_MS`], 413 above the server's `max_worker_ttl`.
fn ttl(state: &AppState, raw: Option<&String>) -> ApiResult<Option<Duration>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let t = raw
        .parse::<u64>()
        .ok()
        .filter(|t| (1..=MAX_TTL_MS).contains(t))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "ttl_ms must be a whole number of milliseconds from 1 to {MAX_TTL_MS}, got {raw:?}"
            ))
        })?;
    let most = state.shared().options.max_worker_ttl.as_millis();
    if u128::from(t) > most {
        return Err(ApiError::too_large(format!(
            "ttl_ms {t} is above this server's limit of {most} ms; renew the lease more often, \
             or raise the server's max_worker_ttl (`keysmith serve --max-worker-ttl-ms`)"
        )));
    }
    Ok(Some(Duration::from_millis(t)))
}

fn leases(state: &AppState) -> WorkerLeases {
    let s = state.shared();
    WorkerLeases::new(s.store.clone(), (*s.lease_key.get()).clone())
}

/// `POST /v1/workers/{group}/lease?ttl_ms=T&max=N`: the lowest free worker
/// id of `0..N`; 409 when all are held.
#[utoipa::path(post, path = "/v1/workers/{group}/lease", summary = "Lease a worker id for another generator (sonyflake, bwmarrin/snowflake)",
    description = "The lowest worker id of 0..max without a live lease. Use it only for ids with times in \
        not_before_ms..until_ms, renew every third of the TTL, stop when a renewal is refused. Every holder of a group uses the same max.",
    params(crate::schemas::GroupParam, LeaseQuery),
    responses((status = 200, description = "The lease.", body = crate::schemas::library::HeldWorker),
        (status = 409, description = "Every worker id of the group is held (`lease_refused`, naming the group and its size).", body = crate::error::ErrorBody),
        (status = 413, description = "ttl_ms or max above this server's limits (`--max-worker-ttl-ms`, `--max-worker-group`).", body = crate::error::ErrorBody)))]
pub(crate) async fn lease(
    State(state): State<AppState>,
    Name(group): Name,
    QueryParams(q): QueryParams<LeaseQuery>,
) -> ApiResult<Json<HeldWorker>> {
    let ttl = ttl(&state, q.ttl_ms.as_ref())?
        .unwrap_or(DEFAULT_LEASE_TTL.min(state.shared().options.max_worker_ttl));
    let most = keysmith::store::MAX_WORKERS;
    let limit = state.shared().options.max_worker_group;
    let max = match &q.max {
        None => DEFAULT_GROUP_SIZE.min(limit),
        Some(raw) => raw
            .parse::<i64>()
            .ok()
            .filter(|m| (1..=most).contains(m))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "max must be a whole number of worker ids from 1 to {most}, got {raw:?}"
                ))
            })?,
    };
    if max > limit {
        return Err(ApiError::too_large(format!(
            "max {max} is above this server's limit of {limit} worker ids a group; \
             raise the server's max_worker_group (`keysmith serve --max-worker-group`)"
        )));
    }
    Ok(Json(leases(&state).lease(&group, ttl, max).await?))
}

/// `POST /v1/workers/{group}/lease/{token}/renew?ttl_ms=T`: the lease with a
/// new token; 409 when it expired or another holder took the worker id.
#[utoipa::path(post, path = "/v1/workers/{group}/lease/{token}/renew", summary = "Renew a worker lease; answers with a new token",
    description = "Deprecated: the token in the URL reaches proxies' and access logs; use `POST /v1/workers/{group}/lease/renew` with the token in the body.",
    params(crate::schemas::GroupParam, crate::schemas::TokenParam, RenewQuery),
    responses((status = 200, description = "The lease, renewed.", body = crate::schemas::library::HeldWorker),
        (status = 409, description = "The lease expired, or another holder leased the worker id since (`lease_refused`): stop issuing ids with it.", body = crate::error::ErrorBody),
        (status = 413, description = "ttl_ms above this server's limit (`--max-worker-ttl-ms`).", body = crate::error::ErrorBody)))]
#[deprecated = "the token or ticket in the URL reaches logs; use POST /v1/workers/{group}/lease/renew with it in the body"]
pub(crate) async fn renew(
    State(state): State<AppState>,
    GroupToken(group, token): GroupToken,
    QueryParams(q): QueryParams<RenewQuery>,
) -> ApiResult<Json<HeldWorker>> {
    let ttl = ttl(&state, q.ttl_ms.as_ref())?;
    Ok(Json(leases(&state).renew(&group, &token, ttl).await?))
}

/// What a release answers.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WorkerReleased)]
pub(crate) struct Released {
    /// false: the lease was lost already (another holder leased the worker
    /// id).
    released: bool,
}

/// `POST /v1/workers/{group}/lease/{token}/release` -> `{"released": bool}`
/// (`false`: the lease was lost already).
#[utoipa::path(post, path = "/v1/workers/{group}/lease/{token}/release", summary = "Release a worker lease: the worker id is free at once, its time floor stays",
    description = "Deprecated: the token in the URL reaches proxies' and access logs; use `POST /v1/workers/{group}/lease/release` with the token in the body.",
    params(crate::schemas::GroupParam, crate::schemas::TokenParam),
    responses((status = 200, description = "Whether it was released.", body = Released)))]
#[deprecated = "the token or ticket in the URL reaches logs; use POST /v1/workers/{group}/lease/release with it in the body"]
pub(crate) async fn release(
    State(state): State<AppState>,
    GroupToken(group, token): GroupToken,
) -> ApiResult<Json<Released>> {
    let released = leases(&state).release(&group, &token).await?;
    Ok(Json(Released { released }))
}

/// The body of the renew and release routes that keep the token out of the
/// URL: `{"token": "..."}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = LeaseTokenBody)]
pub(crate) struct TokenBody {
    /// The token the lease (or its last renewal) answered with.
    token: String,
}

/// `POST /v1/workers/{group}/lease/renew?ttl_ms=T` with `{"token": ...}`:
/// [`renew`] with the token in the body, where no proxy or access log
/// records it.
#[utoipa::path(post, path = "/v1/workers/{group}/lease/renew", summary = "Renew a worker lease; answers with a new token",
    description = "The token travels in the body, never in the URL, so proxies and access logs do not record it.",
    params(crate::schemas::GroupParam, RenewQuery),
    request_body = TokenBody,
    responses((status = 200, description = "The lease, renewed.", body = crate::schemas::library::HeldWorker),
        (status = 400, description = "No token, or not one this server signed.", body = crate::error::ErrorBody),
        (status = 409, description = "The lease expired, or another holder leased the worker id since (`lease_refused`): stop issuing ids with it.", body = crate::error::ErrorBody),
        (status = 413, description = "ttl_ms above this server's limit (`--max-worker-ttl-ms`), or the body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn renew_body(
    State(state): State<AppState>,
    Name(group): Name,
    QueryParams(q): QueryParams<RenewQuery>,
    JsonBody(b): JsonBody<TokenBody>,
) -> ApiResult<Json<HeldWorker>> {
    let ttl = ttl(&state, q.ttl_ms.as_ref())?;
    Ok(Json(leases(&state).renew(&group, &b.token, ttl).await?))
}

/// `POST /v1/workers/{group}/lease/release` with `{"token": ...}`:
/// [`release`] with the token in the body.
#[utoipa::path(post, path = "/v1/workers/{group}/lease/release", summary = "Release a worker lease: the worker id is free at once, its time floor stays",
    description = "The token travels in the body, never in the URL, so proxies and access logs do not record it.",
    params(crate::schemas::GroupParam),
    request_body = TokenBody,
    responses((status = 200, description = "Whether it was released.", body = Released),
        (status = 400, description = "No token, or not one this server signed.", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn release_body(
    State(state): State<AppState>,
    Name(group): Name,
    JsonBody(b): JsonBody<TokenBody>,
) -> ApiResult<Json<Released>> {
    let released = leases(&state).release(&group, &b.token).await?;
    Ok(Json(Released { released }))
}

/// `GET /v1/workers/{group}` -> `{"group", "workers": [{"worker", "held",
/// "holder", "fence", "until_ms", "expires_ms", "expires_in_ms"}]}`, ordered
/// by worker id; a group no one leased from is an empty list, not a 404
/// (groups are not created: a lease of any group succeeds).
#[utoipa::path(get, path = "/v1/workers/{group}", summary = "List a group's worker ids: held or free, by whom, until when, fence and time floor", description = "",
    params(crate::schemas::GroupParam),
    responses((status = 200, description = "The group's worker ids (never a lease token).", body = crate::schemas::library::WorkerList)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Name(group): Name,
) -> ApiResult<Json<WorkerList>> {
    let store = &*state.shared().store;
    Ok(Json(keysmith::ids::list_workers(store, &group).await?))
}
