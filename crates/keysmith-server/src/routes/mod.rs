//! The routes. Handlers parse, call the library, and answer; errors map to
//! statuses in [`crate::error`].

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::error::{ApiError, ApiResult};

pub(crate) mod counters;
pub(crate) mod fence;
pub(crate) mod ids;
pub(crate) mod pools;
pub(crate) mod sequences;
pub(crate) mod shard_keys;
pub(crate) mod tickets;
pub(crate) mod workers;

/// The query of the `next` routes: `?count=N&as=number|string`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct NextQuery {
    /// How many values. Above this server's maximum (`--max-count`) is a
    /// 413; a bad `as` is a 400 first.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000, default = 1)]
    count: Option<String>,
    /// `string` sends values as JSON strings, for clients whose numbers
    /// lose precision above 2^53.
    #[serde(rename = "as")]
    #[param(value_type = Option<As>, inline)]
    as_: Option<String>,
}

/// How values go out (`?as=`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // Only its schema is used: `NextQuery::as_strings` reads the text.
pub(crate) enum As {
    /// JSON numbers.
    Number,
    /// JSON strings.
    String,
}

impl NextQuery {
    /// The count asked for: 1 by default.
    ///
    /// # Errors
    /// 400 for a count that is not an integer of at least 1, 413 above `max`.
    pub(crate) fn count(&self, max: i64) -> ApiResult<i64> {
        let Some(raw) = &self.count else {
            return Ok(1);
        };
        let n: i64 = raw.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "count must be a whole number from 1 to {max}, got {raw:?}"
            ))
        })?;
        if n < 1 {
            return Err(ApiError::bad_request(format!(
                "count must be at least 1, got {n}"
            )));
        }
        if n > max {
            return Err(ApiError::too_large(format!(
                "count {n} is above this server's limit of {max} values a request; ask in several requests"
            )));
        }
        Ok(n)
    }

    /// Whether values go out as JSON strings (`as=string`), for clients whose
    /// numbers lose precision above 2^53.
    ///
    /// # Errors
    /// 400 for any other `as` than `number` or `string`.
    pub(crate) fn as_strings(&self) -> ApiResult<bool> {
        match self.as_.as_deref() {
            None | Some("number") => Ok(false),
            Some("string") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "as must be \"number\" or \"string\", got {other:?}"
            ))),
        }
    }
}

/// The answer to a DELETE of a sequence or pool.
#[derive(Serialize, ToSchema)]
pub(crate) struct Dropped {
    /// The name dropped.
    pub(crate) dropped: String,
}

/// The residue class a create body's `increment` and `offset` ask for
/// (sequences and pools alike): `None` without an increment, the offset 0
/// by default. Checked by the library's create.
///
/// # Errors
/// [`keysmith::Error::InvalidArgument`] (a 400) for an offset without an
/// increment.
pub(crate) fn residue_of(
    increment: Option<i64>,
    offset: Option<i64>,
) -> keysmith::Result<Option<keysmith::store::Residue>> {
    if offset.is_some() && increment.is_none() {
        return Err(keysmith::Error::InvalidArgument(
            "offset goes with increment: give both (values are offset modulo increment)".into(),
        ));
    }
    Ok(increment.map(|increment| keysmith::store::Residue {
        increment,
        offset: offset.unwrap_or(0),
    }))
}

/// When a `next` request stops taking values: a tenth of the request
/// timeout (at most a second) before it, so that the answer, with what was
/// taken, leaves in time.
pub(crate) fn deadline(started: Instant, request_timeout: Duration) -> Instant {
    started + request_timeout - (request_timeout / 10).min(Duration::from_secs(1))
}

/// Present when `values` holds fewer than asked for: a pool request stops at
/// its deadline (a little before the request timeout) or when a take fails
/// after others succeeded, and answers with every number it took. Ask again
/// for the rest.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Partial {
    /// The count asked for.
    pub(crate) requested: i64,
    /// `deadline`, or the code of the error that stopped it (`exhausted`,
    /// `contention`, ...).
    #[schema(examples("deadline", "exhausted", "contention", "unavailable"))]
    pub(crate) reason: &'static str,
    /// What happened and what to do.
    pub(crate) message: String,
}

/// The answer of a route that takes values: `{"values": [...]}`, with
/// `"partial": {...}` when fewer values than asked for are in it.
#[derive(Debug, Serialize)]
pub(crate) struct ValuesBody<'a, T> {
    pub(crate) values: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) partial: Option<&'a Partial>,
}

/// The values a request took (the schema of `ValuesBody`): integers, or
/// strings (with `as=string`, or a formatted sequence's numbers).
#[derive(ToSchema)]
#[schema(as = Values)]
#[allow(dead_code)] // Only its schema is used.
pub(crate) struct ValuesSchema {
    #[schema(value_type = Vec<crate::schemas::library::IntOrString>)]
    values: (),
    partial: Option<Partial>,
}

/// Integers as JSON: numbers, or strings of them with `as=string` (for
/// clients whose numbers lose precision above 2^53).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ints<'a> {
    pub(crate) values: &'a [i64],
    pub(crate) as_strings: bool,
}

impl Serialize for Ints<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.as_strings {
            s.collect_seq(self.values.iter().map(|v| Int(*v, true)))
        } else {
            s.collect_seq(self.values)
        }
    }
}

/// One integer as JSON: a number, or (`.1`) a string of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Int(pub(crate) i64, pub(crate) bool);

impl Serialize for Int {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.1 {
            s.collect_str(&self.0)
        } else {
            s.serialize_i64(self.0)
        }
    }
}

/// What a probe answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct Health {
    /// `ok`.
    status: &'static str,
    /// `ok` when the store answered (`/healthz` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<&'static str>,
}

/// `GET /healthz`: 200 when the store answers, else 503. Needs a principal
/// when the server has tokens (the open probes are `/livez`, `/readyz`).
#[utoipa::path(get, path = "/healthz", summary = "Checks the store; needs a token when the server has tokens", description = "",
    responses((status = 200, description = "The store answers.", body = Health),
        (status = 503, description = "The store does not answer.", body = crate::error::ErrorBody)))]
pub(crate) async fn healthz(State(state): State<AppState>) -> ApiResult<Json<Health>> {
    state.shared().store.ping().await?;
    Ok(Json(Health {
        status: "ok",
        store: Some("ok"),
    }))
}

/// `GET /livez`: 200 while the process answers; touches nothing (the HTTP
/// ceiling in the benchmarks).
#[utoipa::path(get, path = "/livez", summary = "Answers while the process runs; touches nothing; needs no token", description = "",
    responses((status = 200, description = "Alive.", body = Health)))]
pub(crate) async fn livez() -> Json<Health> {
    Json(Health {
        status: "ok",
        store: None,
    })
}

/// `GET /readyz`: 200 while the server takes requests, 503 `draining` once
/// the shutdown signal came (it still serves during
/// [`crate::Config::shutdown_delay`], so that a load balancer that reads
/// this stops sending first). Needs no token; touches nothing.
#[utoipa::path(get, path = "/readyz", summary = "Ready for requests; 503 while the server drains after its shutdown signal; needs no token", description = "",
    responses((status = 200, description = "Ready.", body = Health),
        (status = 503, description = "Draining (`draining`): send requests to another server.", body = crate::error::ErrorBody)))]
pub(crate) async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Health>> {
    if state
        .shared()
        .draining
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "draining",
            "this server is shutting down; send requests to another one",
        ));
    }
    Ok(Json(Health {
        status: "ok",
        store: None,
    }))
}

/// When a request of a route that takes values reached it: its deadline
/// ([`deadline`]) counts from here, the reading of its body included.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started(pub(crate) Instant);

/// Middleware of the routes that take values (which keep their own
/// deadline, not cut off by the request timeout): reads the whole body by
/// the route's [`deadline`], so that a body that trickles is answered with
/// a 408 before the timeout, and records when the request started
/// ([`Started`]). Over the body limit is a 413.
pub(crate) async fn body_by_deadline(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let started = Instant::now();
    let options = &state.shared().options;
    let by = deadline(started, options.request_timeout);
    let (mut parts, body) = req.into_parts();
    let read = axum::body::to_bytes(body, options.body_limit);
    let bytes = match tokio::time::timeout_at(by.into(), read).await {
        Err(_) => {
            return ApiError::new(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                format!(
                    "the request body did not arrive within the server's limit of {} ms; send it at once",
                    by.duration_since(started).as_millis()
                ),
            )
            .into_response();
        }
        Ok(Err(e)) => return crate::extract::read_error(e).into_response(),
        Ok(Ok(b)) => b,
    };
    parts.extensions.insert(Started(started));
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

/// `GET /metrics`: Prometheus text.
#[utoipa::path(get, path = "/metrics", summary = "Prometheus metrics", description = "",
    responses((status = 200, description = "Prometheus text format.", content_type = "text/plain")))]
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let text = state.render_metrics().await;
    let mut res = text.into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    res
}

/// Any path that names no route.
pub(crate) async fn no_route(uri: Uri) -> ApiError {
    ApiError::no_route(uri.path())
}

/// A route called with a method it does not take.
pub(crate) async fn wrong_method(uri: Uri) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} does not take this method; GET /openapi.json lists the routes",
            uri.path()
        ),
    )
}
