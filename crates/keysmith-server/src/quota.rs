//! Quotas on what a principal makes beside its live sequences and pools
//! (those are counted in the store, `auth::owned`): each a key of its
//! `[[principal]]` with a default ([`crate::access::Limits`]).
//!
//! - `max_drops_per_hour`: drops of sequences and pools in a rolling hour.
//!   A drop leaves the name's tombstone for ever (creating the name again
//!   must continue above what it handed out), and the store contract has no
//!   list of tombstones to count, nor may a tombstone be counted against
//!   `max_sequences` without a drop never making room again. So the churn is
//!   bounded instead: tombstones grow by at most this many an hour.
//! - `max_worker_leases`: worker leases held at once over every group. The
//!   server remembers the `(group, worker, fence)` of each lease a principal
//!   took through it, and before another asks the store which of them still
//!   hold (a released, lapsed or taken-over lease no longer counts).
//! - `max_pool_members`: the members of every pool the principal may admin,
//!   counted in the store at create (`auth::authorize`).
//! - `max_open_tickets`: tickets taken and not yet committed, released or
//!   past their time to live.
//!
//! Drops, leases and tickets are counted in this process's memory: servers
//! sharing a store each count for themselves, and a restart forgets (the
//! leases and tickets it forgot still expire). A refusal is a 403
//! `quota_exceeded`, as the create quotas answer, naming the key and how to
//! raise it; it changes nothing.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::access::{Action, ObjectKind, Principal};
use crate::audit;
use crate::error::ApiError;

/// The window of `max_drops_per_hour`.
const HOUR: Duration = Duration::from_secs(3600);

/// The route that leases a worker id.
pub(crate) const LEASE_ROUTE: &str = "/v1/workers/{group}/lease";

/// The route that takes a ticket.
pub(crate) const TICKETS_ROUTE: &str = "/v1/sequences/{name}/tickets";

/// The worker leases one principal took through this server:
/// `(group, worker)` -> fence.
type Leases = HashMap<(String, i64), i64>;

/// The open tickets of one principal.
#[derive(Debug, Default)]
struct Tickets {
    /// `(sequence, ticket)` -> when it expires.
    open: HashMap<(String, String), Instant>,
    /// Takes under way: each holds a place until its ticket is recorded or
    /// it failed, so that takes at once cannot pass the bound together.
    taking: u64,
}

/// What the server counts per principal (by name).
#[derive(Debug, Default)]
pub(crate) struct Quotas {
    /// When each of its drops in the last hour succeeded, oldest first.
    drops: Mutex<HashMap<String, VecDeque<Instant>>>,
    /// Its leases; the lock also makes its leases one at a time.
    leases: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Leases>>>>,
    /// Its open tickets.
    tickets: Mutex<HashMap<String, Tickets>>,
}

/// A 403 `quota_exceeded`.
pub(crate) fn refusal(why: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "quota_exceeded", why)
}

/// How a bound is written in a message: `max_x = N` and whether that is the
/// default.
fn bound(key: &str, max: u64, principal: &Principal) -> String {
    let default = crate::access::Limits::DEFAULT;
    let is_default = match key {
        "max_drops_per_hour" => principal.limits.max_drops_per_hour == default.max_drops_per_hour,
        "max_worker_leases" => principal.limits.max_worker_leases == default.max_worker_leases,
        "max_pool_members" => principal.limits.max_pool_members == default.max_pool_members,
        "max_open_tickets" => principal.limits.max_open_tickets == default.max_open_tickets,
        _ => false,
    };
    if is_default {
        format!("{key} = {max}, the default")
    } else {
        format!("{key} = {max}")
    }
}

fn raise(key: &str, principal: &Principal) -> String {
    format!(
        "ask the server's operator to raise `{key}` in principal {:?}'s [[principal]] of the access file",
        principal.name
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Quotas {
    /// `Err(why)` when `principal` has used its `max_drops_per_hour`.
    pub(crate) fn may_drop(&self, principal: &Principal) -> Result<(), String> {
        let Some(max) = principal.limits.max_drops_per_hour else {
            return Ok(());
        };
        let now = Instant::now();
        let mut all = lock(&self.drops);
        let times = all.entry(principal.name.clone()).or_default();
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) >= HOUR)
        {
            times.pop_front();
        }
        if (times.len() as u64) < max {
            return Ok(());
        }
        let wait = times
            .front()
            .map_or(HOUR, |t| HOUR.saturating_sub(now.duration_since(*t)))
            .as_secs()
            + 1;
        Err(format!(
            "principal {:?} dropped {} sequences and pools in the last hour, its quota ({}): each drop keeps the name's tombstone for ever; \
             retry in {wait} s, create a dropped name again instead of a new one, or {}",
            principal.name,
            times.len(),
            bound("max_drops_per_hour", max, principal),
            raise("max_drops_per_hour", principal)
        ))
    }

    /// A drop by `principal` succeeded.
    pub(crate) fn dropped(&self, principal: &Principal) {
        if principal.limits.max_drops_per_hour.is_none() {
            return;
        }
        lock(&self.drops)
            .entry(principal.name.clone())
            .or_default()
            .push_back(Instant::now());
    }

    /// A place for one more ticket of `principal` (given back by
    /// [`Quotas::end_take`]); `Err(why)` when it holds `max_open_tickets`
    /// open tickets.
    fn begin_take(&self, principal: &Principal) -> Result<(), String> {
        let Some(max) = principal.limits.max_open_tickets else {
            return Ok(());
        };
        let now = Instant::now();
        let mut all = lock(&self.tickets);
        let t = all.entry(principal.name.clone()).or_default();
        t.open.retain(|_, until| *until > now);
        let held = t.open.len() as u64 + t.taking;
        if held < max {
            t.taking += 1;
            return Ok(());
        }
        Err(format!(
            "principal {:?} holds {held} open tickets, its quota ({}); commit or release them \
             (POST /v1/sequences/{{name}}/tickets/commit or .../release), let them expire, or {}",
            principal.name,
            bound("max_open_tickets", max, principal),
            raise("max_open_tickets", principal)
        ))
    }

    /// `principal` took `ticket` of sequence `name`, open for `ttl`.
    pub(crate) fn took_ticket(
        &self,
        principal: &Principal,
        name: &str,
        ticket: &str,
        ttl: Duration,
    ) {
        if principal.limits.max_open_tickets.is_none() {
            return;
        }
        lock(&self.tickets)
            .entry(principal.name.clone())
            .or_default()
            .open
            .insert((name.to_owned(), ticket.to_owned()), Instant::now() + ttl);
    }

    /// Gives back the place of [`Quotas::begin_take`].
    fn end_take(&self, principal: &str) {
        if let Some(t) = lock(&self.tickets).get_mut(principal) {
            t.taking = t.taking.saturating_sub(1);
        }
    }

    /// `ticket` of sequence `name` was committed or released (by anyone).
    pub(crate) fn settled_ticket(&self, name: &str, ticket: &str) {
        let key = (name.to_owned(), ticket.to_owned());
        for t in lock(&self.tickets).values_mut() {
            t.open.remove(&key);
        }
    }

    fn leases_of(&self, principal: &Principal) -> Arc<tokio::sync::Mutex<Leases>> {
        lock(&self.leases)
            .entry(principal.name.clone())
            .or_default()
            .clone()
    }
}

/// How many of `held` still hold a worker id in the store (those that do
/// not are forgotten).
async fn still_held(state: &AppState, held: &mut Leases) -> keysmith::Result<u64> {
    let store = &*state.shared().store;
    let mut groups: Vec<String> = held.keys().map(|(g, _)| g.clone()).collect();
    groups.sort();
    groups.dedup();
    for group in groups {
        let listed = keysmith::ids::list_workers(store, &group).await?;
        held.retain(|(g, worker), fence| {
            g != &group
                || listed
                    .workers
                    .iter()
                    .any(|w| w.worker == *worker && w.held && w.fence == *fence)
        });
    }
    Ok(held.len() as u64)
}

/// Refuses with a 403, `refused` written to the audit trail.
fn refuse(state: &AppState, refused: audit::Line, why: String) -> Response {
    let mut l = refused;
    l.status = Some(403);
    l.reason = Some(why.clone());
    state.shared().audit.write(l);
    refusal(why).into_response()
}

/// Runs a `use` request: a worker lease under `max_worker_leases`, a
/// ticket's take under `max_open_tickets` (refused with a 403 and `refused`
/// written to the audit trail when used up); any other request as it is.
pub(crate) async fn run_use(
    state: &AppState,
    principal: &Principal,
    template: &str,
    refused: audit::Line,
    req: Request,
    next: Next,
) -> Response {
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    if template == TICKETS_ROUTE && principal.limits.max_open_tickets.is_some() {
        // The take records its ticket (routes::tickets::take) before its
        // place is given back, also when the client hangs up.
        struct Place(AppState, String);
        impl Drop for Place {
            fn drop(&mut self) {
                self.0.shared().quotas.end_take(&self.1);
            }
        }
        if let Err(why) = state.shared().quotas.begin_take(principal) {
            return refuse(state, refused, why);
        }
        let _place = Place(state.clone(), principal.name.clone());
        return next.run(req).await;
    }
    let Some(max) = principal.limits.max_worker_leases else {
        return next.run(req).await;
    };
    if template != LEASE_ROUTE {
        return next.run(req).await;
    }
    let limit = state.shared().options.request_timeout;
    let leases = state.shared().quotas.leases_of(principal);
    let mut held = match tokio::time::timeout(limit, leases.lock_owned()).await {
        Ok(g) => g,
        Err(_) => return ApiError::timeout(limit).into_response(),
    };
    match tokio::time::timeout(limit, still_held(state, &mut held)).await {
        Err(_) => return ApiError::timeout(limit).into_response(),
        Ok(Err(e)) => return ApiError::from(e).into_response(),
        Ok(Ok(have)) if have >= max => {
            let why = format!(
                "principal {:?} holds {have} worker leases, its quota ({}); release one \
                 (POST /v1/workers/{{group}}/lease/release), let one lapse, or {}",
                principal.name,
                bound("max_worker_leases", max, principal),
                raise("max_worker_leases", principal)
            );
            return refuse(state, refused, why);
        }
        Ok(Ok(_)) => {}
    }
    let res = next.run(req).await;
    if !res.status().is_success() {
        return res;
    }
    // Remember the lease: its group, worker id and fence.
    let (head, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes)
        && let (Some(group), Some(worker), Some(fence)) = (
            v.get("group").and_then(|g| g.as_str()),
            v.get("worker").and_then(|w| w.as_i64()),
            v.get("fence").and_then(|f| f.as_i64()),
        )
    {
        held.insert((group.to_owned(), worker), fence);
    }
    Response::from_parts(head, axum::body::Body::from(bytes))
}

/// How many sequences or pools `principal` may admin: a count per prefix
/// of its scope and a read per exact name ([`NameScope`]), never a listing
/// of every name (issue 50).
pub(crate) async fn owned(
    state: &AppState,
    principal: &Principal,
    kind: ObjectKind,
) -> keysmith::Result<u64> {
    let store = &*state.shared().store;
    let scope = principal.scope(Action::Admin);
    match kind {
        ObjectKind::Pool => Ok(scope.pool_totals(store).await?.pools),
        _ => scope.count_sequences(store).await,
    }
}

/// The members of every pool `principal` may admin.
pub(crate) async fn pool_members(state: &AppState, principal: &Principal) -> keysmith::Result<u64> {
    let scope = principal.scope(Action::Admin);
    Ok(scope.pool_totals(&*state.shared().store).await?.members)
}

/// `Err(why)` when a pool of `size` members would take `principal` over its
/// `max_pool_members` (it has `have`).
pub(crate) fn may_add_members(principal: &Principal, have: u64, size: u64) -> Result<(), String> {
    let Some(max) = principal.limits.max_pool_members else {
        return Ok(());
    };
    if have.saturating_add(size) <= max {
        return Ok(());
    }
    Err(format!(
        "principal {:?} has {have} pool members and asks for {size} more, over its quota ({}); \
         make a smaller pool, drop one, or {}",
        principal.name,
        bound("max_pool_members", max, principal),
        raise("max_pool_members", principal)
    ))
}
