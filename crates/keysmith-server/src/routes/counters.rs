//! `POST /v1/counters/next`: `<hostname>/<n>` names from this host's counter.

use std::fmt::Write;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use keysmith::names::HostCounter;

use super::{NextQuery, json_text};
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
    let names = tokio::task::spawn_blocking(move || counter.next_n(count as u64))
        .await
        .map_err(|e| keysmith::Error::Unavailable(format!("host counter task failed: {e}")))??;

    let labels = ["counter", names.host()];
    let m = &s.metrics;
    m.values.with_label_values(&labels).inc_by(names.len());
    m.requests.with_label_values(&labels).inc();
    m.latency
        .with_label_values(&labels)
        .observe(started.elapsed().as_secs_f64());

    let host = serde_json::to_string(names.host()).unwrap_or_default();
    let mut body = String::with_capacity(64 + names.len() as usize * (host.len() + 12));
    let _ = write!(body, "{{\"host\":{host},");
    if as_strings {
        let _ = write!(
            body,
            "\"first\":\"{}\",\"last\":\"{}\",",
            names.first(),
            names.last()
        );
    } else {
        let _ = write!(
            body,
            "\"first\":{},\"last\":{},",
            names.first(),
            names.last()
        );
    }
    body.push_str("\"names\":[");
    let bare = &host[1..host.len() - 1];
    for (i, v) in names.values().enumerate() {
        if i > 0 {
            body.push(',');
        }
        let _ = write!(body, "\"{bare}/{v}\"");
    }
    body.push_str("]}");
    Ok(json_text(body))
}
