//! `/v1/sequences`: create, list, show, drop, next, reserve, release.

use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use keysmith::numbers::{self, Numbering, Period};
use keysmith::sequence::{self, AlterSpec, DEFAULT_RANGE_WARNING_SHARE, Sequence, SequenceInfo};
use keysmith::store::{DEFAULT_BLOCK, DEFAULT_START, MAX_VALUE, SequenceSpec, js_safe_max};
use keysmith::{AnySequence, Values};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Int, NextQuery, Started, ValuesBody};
use crate::AppState;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, Name, QueryParams};
use crate::handles::Entry;

/// The body of `POST /v1/sequences`. start must not be above max.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateSequence)]
pub(crate) struct CreateBody {
    #[schema(schema_with = crate::schemas::name_schema)]
    name: String,
    /// The first value.
    #[serde(default = "default_start")]
    #[schema(default = 1, minimum = 0, maximum = 9223372036854775806_i64)]
    start: i64,
    /// The last value it may hand out (default 9223372036854775806, or
    /// 2^53-1 with `js_safe`).
    #[serde(default)]
    #[schema(
        default = 9223372036854775806_i64,
        minimum = 0,
        maximum = 9223372036854775806_i64
    )]
    max: Option<i64>,
    /// JavaScript-safe: max is 2^53-1 (9007199254740991), the largest
    /// integer a JavaScript number holds exactly; a larger max is a 400.
    #[serde(default)]
    #[schema(default = false)]
    js_safe: bool,
    /// Opaque values: a keyed permutation of an internal counter (the key
    /// is secret and never shown), values 1 to max, the counter to a
    /// sixteenth of max (at least 16). Not with gapless, period, format,
    /// bit_reversed or increment; start at least 0. Decode with
    /// POST .../decode.
    #[serde(default)]
    #[schema(default = false)]
    opaque: bool,
    /// Values are fixed-width strings that sort as the numbers do, with a
    /// check character: Crockford base32 or base62. `next` answers with
    /// strings. Not with gapless, period, format or increment.
    #[serde(default)]
    #[schema(value_type = Option<EncodingName>)]
    encoding: Option<String>,
    /// With `encoding`: a typed prefix, 1 to 16 lower-case letters and
    /// digits starting with a letter (`ord` writes ord_...).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 17, pattern = "^[a-z][a-z0-9]{0,15}_?$")]
    prefix: Option<String>,
    /// The default block size.
    #[serde(default = "default_block")]
    #[schema(default = 100, minimum = 1, maximum = 1099511627776_i64)]
    block: i64,
    /// Gap-free numbers: taken with tickets (POST .../tickets), then
    /// committed or released; `next` is a 409 `wrong_kind`.
    #[serde(default)]
    #[schema(default = false)]
    gapless: bool,
    /// Numbers restart every UTC day, month or year, by the store's clock;
    /// the period is part of every number.
    #[serde(default)]
    #[schema(value_type = Option<PeriodName>)]
    period: Option<String>,
    /// How numbers are printed: literal text with {n} (or {n:04},
    /// zero-padded) exactly once, and {period} exactly once with a period
    /// (never without), e.g. INV-{period}-{n:04}; no whitespace, no other
    /// braces. A bad template is a 400 and creates nothing. Default with a
    /// period: {period}-{n}. Formatted sequences answer `next` with strings.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128)]
    format: Option<String>,
    /// How far next moves forward when a reservation finds the store in a
    /// new generation (a failover, a restore). Default (absent or null):
    /// automatic.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1099511627776_i64)]
    failover_skip: Option<i64>,
    /// Values are the bit reversal of an internal counter: positive,
    /// unique, spread over the whole range. Not with gapless, period or
    /// format; start at least 1.
    #[serde(default)]
    #[schema(default = false)]
    bit_reversed: bool,
    /// With `bit_reversed`: values never handed out, `{"start", "end"}`
    /// (half-open).
    #[serde(default)]
    #[schema(value_type = Option<crate::schemas::library::SkipRange>)]
    skip_range: Option<numbers::SkipRange>,
    /// Values are all offset modulo increment (a residue class). Handed out
    /// in blocks like any sequence; not with gapless, period, format or
    /// bit_reversed. start and max are rounded into the class; none of its
    /// values between them is a 400.
    #[serde(default)]
    #[schema(schema_with = crate::schemas::library::increment)]
    increment: Option<i64>,
    /// With `increment`: every value's remainder (default 0).
    #[serde(default)]
    #[schema(schema_with = crate::schemas::library::offset)]
    offset: Option<i64>,
    /// Creating a dropped name continues above the values it handed out:
    /// the start is raised above them (the response's
    /// continued_above_dropped says to what). true starts at start even
    /// below them; only when none of those values is in use any more. A
    /// max that leaves no room above them is a 400 naming this field.
    #[serde(default, deserialize_with = "start_below_dropped")]
    #[schema(default = false)]
    start_below_dropped: bool,
    /// The order values are handed out in: `cached` (the default: blocks
    /// per server, increasing per server) or `leader` (one leased leader
    /// hands every value out, in the order calls arrive; other servers
    /// answer `next` with a 421 `not_leader` naming it). `leader` goes with
    /// no numbering option.
    #[serde(default)]
    #[schema(value_type = Option<OrderName>)]
    order: Option<String>,
}

/// The order of a sequence, as a create body names it.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // Only its schema is used: the library parses the text.
#[schema(as = Order)]
pub(crate) enum OrderName {
    /// Blocks per handle (per server): the default.
    Cached,
    /// One leased leader per sequence, values in arrival order.
    Leader,
}

/// A period of numbered sequences, as a create body names it.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // Only its schema is used: the library parses the text.
#[schema(as = Period)]
pub(crate) enum PeriodName {
    /// Numbers restart every UTC day.
    Day,
    /// Every UTC month.
    Month,
    /// Every UTC year.
    Year,
}

/// An encoding of a create body.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // Only its schema is used: the library parses the text.
#[schema(as = EncodingName)]
pub(crate) enum EncodingName {
    /// Crockford's base32 with its mod-37 check symbol.
    Base32,
    /// 0-9A-Za-z with a Luhn mod 62 check character.
    Base62,
}

/// Reads `start_below_dropped` of a create body (sequences and pools): a
/// boolean, else an error that names the field.
pub(crate) fn start_below_dropped<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<bool, D::Error> {
    <bool as Deserialize>::deserialize(d).map_err(|e| {
        serde::de::Error::custom(format!("start_below_dropped must be true or false: {e}"))
    })
}

fn default_start() -> i64 {
    DEFAULT_START
}
fn default_block() -> i64 {
    DEFAULT_BLOCK
}

/// A sequence as the API shows it: the stored row, and what this server's
/// handle is doing with it (if it has one open).
#[derive(Debug, Serialize)]
pub(crate) struct SequenceView {
    #[serde(flatten)]
    info: SequenceInfo,
    /// This server's handle; `null` until a value was asked for.
    server: Option<HandleView>,
    /// How a numbered sequence hands out numbers (in `show` and `create`),
    /// without secrets.
    #[serde(skip_serializing_if = "Option::is_none")]
    numbering: Option<Numbering>,
    /// The share of the range not yet reserved, 0 to 1.
    range_left_share: f64,
    /// Present when less than the warning share (10 %) of the range is left.
    #[serde(skip_serializing_if = "Option::is_none")]
    range_warning: Option<String>,
}

/// What the server's handle of a sequence has done.
#[derive(Debug, Serialize)]
pub(crate) struct HandleView {
    /// The handle's current block size.
    pub(crate) block: i64,
    /// Values handed out by this server.
    pub(crate) served: u64,
    /// The greatest value handed out by this server, if any.
    pub(crate) last_served: Option<i64>,
    /// Values per second over the last ten seconds.
    pub(crate) rate: f64,
    /// Blocks reserved in the store.
    pub(crate) refills: u64,
    /// Reservations that lost to another writer and were retried.
    pub(crate) conflicts: u64,
}

impl HandleView {
    /// The view of a plain sequence's handle; `None` for a numbered one
    /// (it holds no block).
    pub(crate) fn of(e: &Entry<AnySequence>) -> Option<HandleView> {
        let AnySequence::Plain(seq) = &e.handle else {
            return None;
        };
        let stats = seq.stats();
        let last = e.last.load(std::sync::atomic::Ordering::Relaxed);
        Some(HandleView {
            block: seq.block(),
            served: e.served.load(std::sync::atomic::Ordering::Relaxed),
            last_served: (last >= 0).then_some(last),
            rate: e.rate(),
            refills: stats.reservations,
            conflicts: stats.conflicts,
        })
    }
}

pub(crate) fn view(state: &AppState, info: SequenceInfo) -> SequenceView {
    let server = state
        .shared()
        .sequences
        .get(&info.row.name)
        .and_then(|e| HandleView::of(&e));
    SequenceView {
        range_left_share: info.range_left_share(),
        range_warning: info
            .range_warning(DEFAULT_RANGE_WARNING_SHARE)
            .map(|w| w.to_string()),
        info,
        server,
        numbering: None,
    }
}

#[utoipa::path(post, path = "/v1/sequences", summary = "Create a sequence", description = "",
    request_body = CreateBody,
    responses((status = 201, description = "Created.", body = crate::schemas::library::Sequence),
        (status = 409, description = "A sequence of that name exists.", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    JsonBody(b): JsonBody<CreateBody>,
) -> ApiResult<Response> {
    let max = match b.js_safe {
        true => js_safe_max(b.max, b.bit_reversed)?,
        false => b.max.unwrap_or(MAX_VALUE),
    };
    if b.prefix.is_some() && b.encoding.is_none() {
        return Err(ApiError::bad_request(
            "prefix goes with encoding: \"base32\" or \"base62\"",
        ));
    }
    let encoding = b
        .encoding
        .as_deref()
        .map(|e| numbers::Encoding::new(e.parse()?, b.prefix.as_deref()))
        .transpose()?;
    let spec = SequenceSpec {
        name: b.name,
        start: b.start,
        max,
        block: b.block,
        failover_skip: b.failover_skip,
        start_below_dropped: b.start_below_dropped,
    };
    let store = &*state.shared().store;
    let noted = |info: &SequenceInfo| {
        if let Some(first) = info.continued_above_dropped {
            tracing::info!(sequence = %info.row.name, start = first, "created a dropped sequence name again: continues above the values it handed out");
        }
    };
    if b.skip_range.is_some() && !b.bit_reversed {
        return Err(ApiError::bad_request(
            "skip_range goes with bit_reversed: true",
        ));
    }
    let residue = super::residue_of(b.increment, b.offset)?;
    let order = b
        .order
        .as_deref()
        .map(str::parse::<keysmith::store::Order>)
        .transpose()?
        .unwrap_or_default();
    if b.gapless
        || b.period.is_some()
        || b.format.is_some()
        || b.bit_reversed
        || residue.is_some()
        || b.opaque
        || encoding.is_some()
        || !order.is_cached()
    {
        let numbering = Numbering {
            gapless: b.gapless,
            period: b.period.as_deref().map(str::parse::<Period>).transpose()?,
            template: b.format,
            bit_reversed: b
                .bit_reversed
                .then_some(numbers::BitReversed { skip: b.skip_range }),
            residue,
            opaque: b.opaque.then(numbers::Opaque::default),
            encoding,
            order,
        };
        let info = numbers::create(store, &spec, &numbering).await?;
        noted(&info);
        let mut v = view(&state, info);
        // As stored (an opaque key's id, an encoding's width), without secrets.
        v.numbering = match numbering.opaque.is_some() || numbering.encoding.is_some() {
            true => numbers::numbering(store, &spec.name).await?,
            false => Some(numbering),
        };
        return Ok((StatusCode::CREATED, Json(v)).into_response());
    }
    let info = sequence::create(store, &spec).await?;
    noted(&info);
    Ok((StatusCode::CREATED, Json(view(&state, info))).into_response())
}

#[derive(Serialize)]
pub(crate) struct List {
    sequences: Vec<SequenceView>,
}

#[utoipa::path(get, path = "/v1/sequences", summary = "List sequences", description = "",
    responses((status = 200, description = "Every sequence, by name.", body = crate::schemas::library::SequenceList)))]
pub(crate) async fn list(State(state): State<AppState>) -> ApiResult<Json<List>> {
    let all = sequence::list(&*state.shared().store).await?;
    Ok(Json(List {
        sequences: all
            .into_iter()
            .filter(|i| crate::access::visible(&i.row.name))
            .map(|i| view(&state, i))
            .collect(),
    }))
}

#[utoipa::path(get, path = "/v1/sequences/{name}", summary = "Show a sequence", description = "",
    params(crate::schemas::NameParam),
    responses((status = 200, description = "The sequence.", body = crate::schemas::library::Sequence),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody)))]
pub(crate) async fn show(
    State(state): State<AppState>,
    Name(name): Name,
) -> ApiResult<Json<SequenceView>> {
    let store = &*state.shared().store;
    let info = sequence::show(store, &name).await?;
    let mut v = view(&state, info);
    v.numbering = numbers::numbering(store, &name).await?;
    Ok(Json(v))
}

/// `PATCH /v1/sequences/{name}`: [`sequence::alter`]. The server's own
/// handle keeps its block and cache: the change applies to the values it
/// reserves from now on.
#[utoipa::path(patch, path = "/v1/sequences/{name}", summary = "Alter a sequence's next value, maximum or block size",
    description = "Safe while values are handed out: next only moves forward (the values skipped are never handed out), \
        max never goes below the values reserved so far. A change the sequence does not allow is a 400 and changes nothing.",
    params(crate::schemas::NameParam),
    request_body = crate::schemas::library::AlterSequence,
    responses((status = 200, description = "The sequence after the change.", body = crate::schemas::library::Sequence),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "A numbered sequence (`wrong_kind`): it has no next value to alter.", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn alter(
    State(state): State<AppState>,
    Name(name): Name,
    JsonBody(change): JsonBody<AlterSpec>,
) -> ApiResult<Json<SequenceView>> {
    let info = sequence::alter(&*state.shared().store, &name, &change).await?;
    Ok(Json(view(&state, info)))
}

#[utoipa::path(delete, path = "/v1/sequences/{name}", summary = "Drop a sequence for good", description = "",
    params(crate::schemas::NameParam),
    responses((status = 200, description = "Dropped.", body = super::Dropped),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody)))]
pub(crate) async fn drop(
    State(state): State<AppState>,
    Name(name): Name,
) -> ApiResult<Json<super::Dropped>> {
    let s = state.shared();
    sequence::remove(&*s.store, &name).await?;
    // After the store forgot it: a request racing with this one cannot
    // reopen a handle on it.
    s.sequences.remove(&name, &s.metrics).await;
    s.high_waters.forget(&name);
    Ok(Json(super::Dropped { dropped: name }))
}

/// `POST /v1/sequences/{name}/rotate-key`: [`numbers::rotate_key`]. The
/// server's own handle is opened again, so it maps with the new key.
#[utoipa::path(post, path = "/v1/sequences/{name}/rotate-key", summary = "Rotate an opaque sequence's key",
    description = "A new key maps the values handed out from now on, into their own part of the range; values handed out before keep decoding. \
        At most 16 keys over a sequence's life (a 400 after). The answer shows the key ids, never a key.",
    params(crate::schemas::NameParam),
    responses((status = 200, description = "The sequence after the rotation.", body = crate::schemas::library::Sequence),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 409, description = "Not an opaque sequence (`wrong_kind`).", body = crate::error::ErrorBody)))]
pub(crate) async fn rotate_key(
    State(state): State<AppState>,
    Name(name): Name,
) -> ApiResult<Json<SequenceView>> {
    let s = state.shared();
    let numbering = numbers::rotate_key(&*s.store, &name).await?;
    s.sequences.remove(&name, &s.metrics).await;
    let info = sequence::show(&*s.store, &name).await?;
    let mut v = view(&state, info);
    v.numbering = Some(numbering);
    Ok(Json(v))
}

/// How the server opens a plain sequence's handle.
fn builder(state: &AppState, name: &str) -> keysmith::sequence::SequenceBuilder {
    let s = state.shared();
    let mut b = Sequence::builder()
        .strategy(s.options.strategy)
        .retry_budget(s.options.retry_budget)
        .high_water(s.high_waters.get(name));
    if let Some(policy) = s.options.adaptive {
        b = b.adaptive_policy(policy);
    }
    b
}

/// The handle `next` uses: the one open already, else one opened by
/// [`AnySequence::open`] (two store calls whatever the kind) and kept.
async fn handle(state: &AppState, name: &str) -> keysmith::Result<Arc<Entry<AnySequence>>> {
    let s = state.shared();
    if let Some(e) = s.sequences.get_to_use(name) {
        return Ok(e);
    }
    let leader = keysmith::sequence::LeaderOptions {
        advertise: s.options.advertise.clone(),
        ttl: s.options.leader_ttl,
        strategy: s.options.strategy,
        retry_budget: s.options.retry_budget,
        ..Default::default()
    };
    let opened = AnySequence::open_with(s.store.clone(), name, builder(state, name), leader).await;
    if !matches!(opened, Ok(AnySequence::Plain(_))) {
        // Nothing holds the mark the builder made (a name that does not
        // exist, or a numbered sequence): released, so that names without
        // values take no memory.
        s.high_waters.release(name);
    }
    let opened = opened?;
    s.sequences
        .get_or_open(name, &s.metrics, || async { Ok(opened) })
        .await
}

/// `POST /v1/sequences/{name}/next`: [`AnySequence::next_n`], for either
/// kind. The values come from one reservation (or a plain handle's cache),
/// taken by [`detached_until`]: a client that hangs up cannot cut a
/// reservation off after the store committed it (which would drop a
/// block), and a store that does not answer (cut off, paused) gets a 503
/// `timeout` by the route's [`super::deadline`], a little before the
/// request timeout, while the reservation goes on in the background and
/// fills the handle for the requests after it. Formatted numbers go out as
/// strings.
#[utoipa::path(post, path = "/v1/sequences/{name}/next", summary = "Take values",
    description = "Values are unique forever and increase in the order this server answers requests. \
        A periodic or formatted sequence answers with its numbers (as strings when formatted), from the store on every request; \
        a gap-free one is a 409 `wrong_kind` (take tickets).",
    params(crate::schemas::NameParam, NextQuery),
    responses((status = 200, description = "The values, ascending.", body = super::ValuesSchema),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 408, description = "The body did not arrive by the route's deadline.", body = crate::error::ErrorBody),
        (status = 409, description = "The sequence is exhausted, or gap-free (`wrong_kind`: take tickets).", body = crate::error::ErrorBody),
        (status = 413, description = "Count over the server's maximum.", body = crate::error::ErrorBody),
        (status = 421, description = "A leader-ordered sequence that another server leads (`not_leader`): error.leader and the Keysmith-Leader header give its address; send the same request there.", body = crate::error::ErrorBody),
        (status = 503, description = "The store is unavailable, or a leader-ordered sequence has no reachable leader now (`no_leader`): retry after Retry-After.", body = crate::error::ErrorBody)))]
pub(crate) async fn next(
    State(state): State<AppState>,
    Extension(Started(started)): Extension<Started>,
    Name(name): Name,
    QueryParams(q): QueryParams<NextQuery>,
) -> ApiResult<Response> {
    let s = state.shared();
    let as_strings = q.as_strings()?;
    let count = q.count(s.options.max_count)?;
    // Checked before the store is asked, so a bad name is a 400 whether or not
    // a handle is open.
    keysmith::validate_name(&name)?;
    // A handle closed under us (its sequence dropped by another request), or
    // whose sequence is gone (dropped, or made again of the other kind or
    // in a new life, behind the server's back: another server, the CLI), is
    // retried once with a fresh handle, which then says what is there now.
    // The caller held nothing of the old life: the server's handle did.
    let mut retried = false;
    loop {
        let entry = handle(&state, &name).await?;
        crate::auth::still_granted(&state)?;
        let deadline = super::deadline(started, s.options.request_timeout);
        // The entry goes into the future and comes back with the values: no
        // second reference count to bump on the hot path.
        let taken = detached_until(
            deadline,
            async move {
                let r = entry.handle.next_n(count).await;
                (entry, r)
            },
            late_values,
        )
        .await
        .map_err(|e| keysmith::Error::Unavailable(format!("the task taking values failed: {e}")))?;
        let Some((entry, result)) = taken else {
            return Err(ApiError::timeout(s.options.request_timeout));
        };
        match result {
            Ok(values) => {
                match &values {
                    Values::Plain(v) => entry.record(v, started),
                    Values::Numbers { numbers, .. } => {
                        let ns: Vec<i64> = numbers.iter().map(|f| f.number.n).collect();
                        entry.record(&ns, started);
                    }
                }
                return Ok(Json(ValuesBody {
                    values: values.json_values(as_strings),
                    partial: None,
                })
                .into_response());
            }
            Err(
                e @ (keysmith::Error::Closed { .. }
                | keysmith::Error::NotFound { .. }
                | keysmith::Error::Dropped { .. }),
            ) => {
                s.sequences.evict(&name, &entry, &s.metrics).await;
                if retried {
                    return Err(e.into());
                }
                retried = true;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// What becomes of values a `next` took after its request gave up at the
/// deadline: skipped, never handed out (a gap, as a crash leaves), and
/// said in the log. A plain function: nothing is cloned for the requests
/// served at once.
fn late_values((entry, r): (Arc<Entry<AnySequence>>, keysmith::Result<Values>)) {
    let name = entry.handle.name();
    match r {
        Ok(values) => tracing::warn!(
            sequence = %name,
            skipped = values.len(),
            "values taken after their request timed out are skipped"
        ),
        Err(e) => tracing::debug!(sequence = %name, "a next that timed out failed later: {e}"),
    }
}

/// Runs `fut` to the end even if the caller is dropped, and waits for it
/// until `deadline`: `None` past it. Polled here first: most calls are
/// served from the handle's block at once and cost no task. One that has to
/// wait (for the store, or the refill mutex) moves to a task of its own
/// before the caller can be dropped (no await in between), so neither the
/// deadline nor a client that hangs up can cut a reservation off after the
/// store committed it. What the task returns after the deadline goes to
/// `late`; what it returned before is never lost to the race (the channel
/// is closed, then read once more).
async fn detached_until<T: Send + 'static>(
    deadline: Instant,
    fut: impl Future<Output = T> + Send + 'static,
    late: impl FnOnce(T) + Send + 'static,
) -> Result<Option<T>, tokio::task::JoinError> {
    let mut fut = Box::pin(fut);
    if let Poll::Ready(v) = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
        return Ok(Some(v));
    }
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        if let Err(v) = tx.send(fut.await) {
            late(v);
        }
    });
    match tokio::time::timeout_at(deadline.into(), &mut rx).await {
        Ok(Ok(v)) => Ok(Some(v)),
        // The sender went without sending: the task panicked.
        Ok(Err(_)) => task.await.map(|()| None),
        Err(_) => {
            rx.close();
            Ok(rx.try_recv().ok())
        }
    }
}

/// `POST /v1/sequences/{name}/reserve`: a block of at most the server's
/// `max_count` values reserved for the caller, who hands its values out
/// itself (the clients in `clients/`). Reserved by [`detached_until`], like
/// `next`: a client that hangs up cannot cut it off after the store
/// committed it, and a reservation that completes after the route's
/// deadline is answered with a 503 `timeout` while its values become a gap
/// (no one ever gets its lease).
#[utoipa::path(post, path = "/v1/sequences/{name}/reserve", summary = "Reserve a block for the caller to hand out itself",
    description = "The values are reserved durably for this caller only, never handed to anyone else. \
        Fewer than asked for only near the sequence's maximum.",
    params(crate::schemas::NameParam, NextQuery),
    responses((status = 200, description = "The reserved ranges and a lease token.", body = LeaseBody),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 408, description = "The body did not arrive by the route's deadline.", body = crate::error::ErrorBody),
        (status = 409, description = "The sequence is exhausted, or numbered (`wrong_kind`: its numbers come from next or tickets).", body = crate::error::ErrorBody),
        (status = 413, description = "Count over the server's limit of values a request.", body = crate::error::ErrorBody)))]
pub(crate) async fn reserve(
    State(state): State<AppState>,
    Extension(Started(started)): Extension<Started>,
    Name(name): Name,
    QueryParams(q): QueryParams<NextQuery>,
) -> ApiResult<Response> {
    let s = state.shared();
    let as_strings = q.as_strings()?;
    let count = q.count(s.options.max_count)?;
    keysmith::validate_name(&name)?;
    let (store, strategy, budget) = (s.store.clone(), s.options.strategy, s.options.retry_budget);
    let n = name.clone();
    let mark = s.high_waters.get(&name);
    let deadline = super::deadline(started, s.options.request_timeout);
    let taken =
        detached_until(
            deadline,
            async move {
                sequence::lease::lease_guarded(store, &n, count, strategy, budget, mark).await
            },
            late_lease,
        )
        .await
        .unwrap_or_else(|e| {
            Some(Err(keysmith::Error::Unavailable(format!(
                "the task reserving values failed: {e}"
            ))))
        });
    let Some(lease) = taken else {
        return Err(ApiError::timeout(s.options.request_timeout));
    };
    let lease = lease.inspect_err(|_| s.high_waters.release(&name))?;
    let token = s.lease_key.get().seal(&lease);
    Ok(Json(LeaseBody {
        ranges: [LeaseRange {
            start: Int(lease.start, as_strings),
            end: Int(lease.end, as_strings),
        }],
        step: lease.step,
        lease: token,
    })
    .into_response())
}

/// The answer of `POST /v1/sequences/{name}/reserve`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Lease)]
pub(crate) struct LeaseBody {
    /// The reserved values, in one range.
    #[schema(min_items = 1)]
    ranges: [LeaseRange; 1],
    /// The distance between two values of a range: 1, or a residue class's
    /// increment (values start, start + step, ... below end).
    #[schema(minimum = 1, maximum = 1000000)]
    step: i64,
    /// A signed token naming this reservation, for the release route.
    lease: String,
}

/// A reserved range, half-open: start is the first value, end one past the
/// last (strings with `as=string`).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LeaseRange {
    #[schema(value_type = crate::schemas::library::IntOrString)]
    start: Int,
    #[schema(value_type = crate::schemas::library::IntOrString)]
    end: Int,
}

/// A range handed back, half-open: start is the first value, end one past
/// the last.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ValueRange {
    start: i64,
    end: i64,
}

/// What becomes of a lease reserved after its request gave up at the
/// deadline: no one gets it, its values are a gap; said in the log.
fn late_lease(r: keysmith::Result<sequence::lease::Lease>) {
    match r {
        Ok(lease) => tracing::warn!(
            sequence = %lease.name,
            skipped = lease.end - lease.start,
            "a lease reserved after its request timed out is skipped"
        ),
        Err(e) => tracing::debug!("a reserve that timed out failed later: {e}"),
    }
}

/// The body of `POST /v1/sequences/{name}/release`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Release)]
pub(crate) struct ReleaseBody {
    /// The token a reserve call returned.
    lease: String,
    /// The first value of the lease not handed out (a number or a string of
    /// one); from..end goes back.
    #[schema(value_type = crate::schemas::library::IntOrString)]
    from: serde_json::Value,
}

/// `POST /v1/sequences/{name}/release`: hands the unused tail of a lease
/// back, under the rule of `Sequence::close` (only if no one reserved since).
/// Sent by [`detached_until`]: a hand-back the store has not answered by the
/// route's deadline is a 503 `timeout` and goes on in the background (the
/// caller hands out nothing from `from` on either way).
#[utoipa::path(post, path = "/v1/sequences/{name}/release", summary = "Hand the unused tail of a lease back",
    description = "Only if no one reserved since the lease (the rule of closing a handle); otherwise the values stay a gap, never reused.",
    params(crate::schemas::NameParam),
    request_body = ReleaseBody,
    responses((status = 200, description = "What was handed back.", body = ReleasedBody),
        (status = 404, description = "No such sequence.", body = crate::error::ErrorBody),
        (status = 408, description = "The body did not arrive by the route's deadline.", body = crate::error::ErrorBody),
        (status = 410, description = "The sequence was dropped and created again since the lease was made (`dropped`): nothing was handed back; the lease's values stay a gap of the old life.", body = crate::error::ErrorBody),
        (status = 413, description = "Body over the limit.", body = crate::error::ErrorBody)))]
pub(crate) async fn release(
    State(state): State<AppState>,
    Extension(Started(started)): Extension<Started>,
    Name(name): Name,
    JsonBody(b): JsonBody<ReleaseBody>,
) -> ApiResult<Response> {
    let s = state.shared();
    keysmith::validate_name(&name)?;
    let from = match &b.from {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(t) => t.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| {
        crate::error::ApiError::bad_request(format!(
            "from must be a whole number (or a string of one): the first value of the lease not handed out, got {}",
            b.from
        ))
    })?;
    let lease = s.lease_key.get().open(&name, &b.lease)?;
    let mark = s.high_waters.get(&name);
    let store = s.store.clone();
    let deadline = super::deadline(started, s.options.request_timeout);
    let taken = detached_until(
        deadline,
        async move { sequence::lease::release_guarded(&*store, &lease, from, &mark).await },
        |r| {
            if let Err(e) = r {
                tracing::debug!("a release that timed out failed later: {e}");
            }
        },
    )
    .await
    .unwrap_or_else(|e| {
        Some(Err(keysmith::Error::Unavailable(format!(
            "the task releasing values failed: {e}"
        ))))
    });
    let Some(released) = taken else {
        return Err(ApiError::timeout(s.options.request_timeout));
    };
    let released = released.inspect_err(|_| s.high_waters.release(&name))?;
    Ok(Json(ReleasedBody {
        released: released.map(|r| ValueRange {
            start: r.start,
            end: r.end,
        }),
    })
    .into_response())
}

/// The answer of `POST /v1/sequences/{name}/release`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Released)]
pub(crate) struct ReleasedBody {
    /// The range handed back, or null when someone reserved since (the
    /// values stay a gap).
    released: Option<ValueRange>,
}
