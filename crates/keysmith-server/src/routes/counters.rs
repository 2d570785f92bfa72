//! `POST /v1/counters/next`: `<hostname>/<n>` names from this host's counter.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use keysmith::names::{CounterNames, HostCounter};
use serde::Serialize;
use utoipa::ToSchema;

use super::NextQuery;
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::QueryParams;

/// Opens the host counter (on first use, so a server that never hands out
/// counter names never touches the counter directory).
async fn open(cfg: crate::CounterConfig) -> ApiResult<Arc<HostCounter>> {
    let opened = tokio::task::spawn_blocking(move || {
        let dir = match cfg.dir {
            Some(d) => d,
            None => HostCounter::default_dir()?,
        };
        match cfg.host {
            Some(h) => HostCounter::open_with_host(dir, &h),
            None => HostCounter::open(dir),
        }
    })
    .await
    .map_err(|e| keysmith::Error::Unavailable(format!("host counter task failed: {e}")))?;
    opened.map(Arc::new).map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_counter",
            format!(
                "this server cannot open its host counter: {e}; start it with --counter-dir DIR \
                 (or set $KEYSMITH_COUNTER_DIR)"
            ),
        )
    })
}

/// Takes `count` names. The counter file is written and synced before the
/// names leave, on a blocking thread (the counter locks and syncs a file).
#[utoipa::path(post, path = "/v1/counters/next", summary = "Take `<hostname>/<n>` names from this host's counter",
    description = "Names are unique across a cluster as long as host names are; numbers increase per host.",
    params(NextQuery),
    responses((status = 200, description = "The names, ascending; `first`/`last` are strings with as=string.", body = CounterBody),
        (status = 413, description = "Count over the server's maximum.", body = crate::error::ErrorBody)))]
pub(crate) async fn next(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<NextQuery>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let s = state.shared();
    let as_strings = q.as_strings()?;
    let count = q.count(s.options.max_count)?;
    let counter = s
        .counter
        .get_or_try_init(|| open(s.options.counter.clone()))
        .await?
        .clone();
    crate::auth::still_granted(&state)?;
    let names = tokio::task::spawn_blocking(move || counter.next_n(count as u64))
        .await
        .map_err(|e| keysmith::Error::Unavailable(format!("host counter task failed: {e}")))??;

    let labels = [crate::access::ObjectKind::Counter.as_str(), names.host()];
    let m = &s.metrics;
    m.values.with_label_values(&labels).inc_by(names.len());
    m.requests.with_label_values(&labels).inc();
    m.latency
        .with_label_values(&labels)
        .observe(started.elapsed().as_secs_f64());

    Ok(Json(CounterBody {
        host: names.host(),
        first: U64(names.first(), as_strings),
        last: U64(names.last(), as_strings),
        names: NameList(&names),
    })
    .into_response())
}

/// The answer of `POST /v1/counters/next`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CounterNames)]
pub(crate) struct CounterBody<'a> {
    /// This host's name.
    host: &'a str,
    /// The first number taken (a string with as=string).
    #[schema(value_type = crate::schemas::library::IntOrString)]
    first: U64,
    /// The last number taken (a string with as=string).
    #[schema(value_type = crate::schemas::library::IntOrString)]
    last: U64,
    /// `<host>/<n>` for each, ascending.
    #[schema(value_type = Vec<String>)]
    names: NameList<'a>,
}

/// A counter value: a number, or (`.1`) a string of it.
#[derive(Debug, Clone, Copy)]
struct U64(u64, bool);

impl Serialize for U64 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.1 {
            s.collect_str(&self.0)
        } else {
            s.serialize_u64(self.0)
        }
    }
}

/// `<host>/<n>` for every name taken, written as the list is serialized.
#[derive(Debug)]
struct NameList<'a>(&'a CounterNames);

impl Serialize for NameList<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let host = self.0.host();
        s.collect_seq(self.0.values().map(|v| format!("{host}/{v}")))
    }
}
