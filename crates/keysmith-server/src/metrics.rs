//! Prometheus metrics: values handed out and latency per sequence and pool,
//! errors by code, requests by route template and status, the build and
//! the process, and the handles' own counters (refills, conflicts, block
//! size) read when scraped. Times are in seconds.
//!
//! Per-name series are capped per principal ([`Metrics::series`]): each
//! principal's first `max_names` names with an open handle (the principal
//! whose request opened it) get series of their own, so one team's names
//! cannot take every place; a name past its principal's share is counted
//! under `name="_other"` (summed; gauges such as the block size are not
//! given for it) until one of that principal's names with series of its own
//! is closed and frees a place.
//!
//! What a scrape shows depends on who asks ([`Metrics::render`]): series of
//! a name (or worker group) only to a caller that may `read` it; the
//! server-wide ones (requests by route and status, errors, open handles,
//! the process, `name="_other"`) only to a caller with `read` on `"*"`.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::access::ObjectKind;

use prometheus::{
    CounterVec, Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// The `name` label of the series shared by names past the cap.
pub(crate) const OTHER: &str = "_other";

/// Latency buckets, in seconds: 50 µs to 5 s.
const BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
];

/// The metrics of one server. Each server has its own registry (nothing
/// global), so several servers in one process keep apart.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    /// Values handed out, by kind ("sequence", "pool", "counter") and name.
    pub(crate) values: IntCounterVec,
    /// Allocation requests answered, by kind and name.
    pub(crate) requests: IntCounterVec,
    /// Time to answer an allocation request, by kind and name.
    pub(crate) latency: HistogramVec,
    /// Error responses, by code.
    pub(crate) errors: IntCounterVec,
    /// Requests being answered now.
    pub(crate) in_flight: IntGauge,
    /// Requests answered, by route template, method and status.
    pub(crate) http_requests: IntCounterVec,
    /// Time to answer a request, by route template and method.
    pub(crate) http_duration: HistogramVec,
    /// The `(kind, name)`s with series of their own, and whose share each
    /// takes.
    named: Mutex<Named>,
    /// The most names with series of their own, per principal.
    max_names: usize,
}

/// The names with series of their own, by the principal whose share each
/// takes (`""`: opened outside a request).
#[derive(Debug, Default)]
struct Named {
    owner: HashMap<(ObjectKind, String), String>,
    per_owner: HashMap<String, usize>,
}

/// The series a handle records into.
pub(crate) struct Series {
    pub(crate) values: IntCounter,
    pub(crate) requests: IntCounter,
    pub(crate) latency: Histogram,
    /// Whether they are the name's own (else `name="_other"`).
    pub(crate) named: bool,
}

/// What the server counts of its own memory, read when scraped.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gauges {
    /// Open handles of plain sequences, numbered sequences and pools.
    pub(crate) sequences: usize,
    pub(crate) numbered: usize,
    pub(crate) pools: usize,
    /// Names with a high-water mark.
    pub(crate) high_waters: usize,
}

/// What a handle reports when scraped.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HandleCounters {
    /// Reservations in the store (sequence refills) or pool swaps attempted.
    pub(crate) refills: u64,
    /// Conflicts with other writers, each followed by a retry.
    pub(crate) conflicts: u64,
    /// Current block size (sequences) or pool size (pools).
    pub(crate) size: i64,
    /// Values the store skipped at generation changes (sequences).
    pub(crate) skipped_at_failover: i64,
    /// Time spent in the reservations counted in `refills`, in seconds
    /// (sequences).
    pub(crate) refill_seconds: f64,
}

impl Metrics {
    /// A registry with at most `max_names` names' own series.
    pub(crate) fn new(max_names: usize) -> Metrics {
        let registry = Registry::new();
        let values = IntCounterVec::new(
            Opts::new("keysmith_values_total", "Values handed out."),
            &["kind", "name"],
        )
        .expect("valid metric");
        let requests = IntCounterVec::new(
            Opts::new(
                "keysmith_allocation_requests_total",
                "Allocation requests answered with values.",
            ),
            &["kind", "name"],
        )
        .expect("valid metric");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "keysmith_allocation_seconds",
                "Time from request to response of allocation requests that succeeded.",
            )
            .buckets(BUCKETS.to_vec()),
            &["kind", "name"],
        )
        .expect("valid metric");
        let errors = IntCounterVec::new(
            Opts::new("keysmith_http_errors_total", "Error responses, by code."),
            &["code"],
        )
        .expect("valid metric");
        let in_flight = IntGauge::new(
            "keysmith_http_requests_in_flight",
            "Requests being answered now (this scrape included).",
        )
        .expect("valid metric");
        registry
            .register(Box::new(in_flight.clone()))
            .expect("unique metric");
        for c in [&values, &requests, &errors] {
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
        }
        registry
            .register(Box::new(latency.clone()))
            .expect("unique metric");
        let http_requests = IntCounterVec::new(
            Opts::new(
                "keysmith_http_requests_total",
                "Requests answered, by route template (\"unmatched\" for a path that names no route), method and status.",
            ),
            &["route", "method", "status"],
        )
        .expect("valid metric");
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "keysmith_http_request_duration_seconds",
                "Time from request to response, by route template and method.",
            )
            .buckets(BUCKETS.to_vec()),
            &["route", "method"],
        )
        .expect("valid metric");
        let build = IntGaugeVec::new(
            Opts::new(
                "keysmith_build_info",
                "Always 1; the labels say which build of keysmith-server this is.",
            ),
            &["version"],
        )
        .expect("valid metric");
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        registry
            .register(Box::new(http_requests.clone()))
            .expect("unique metric");
        registry
            .register(Box::new(http_duration.clone()))
            .expect("unique metric");
        registry.register(Box::new(build)).expect("unique metric");
        // CPU seconds, resident memory, open fds, start time (Linux only).
        #[cfg(target_os = "linux")]
        registry
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .expect("unique metric");
        Metrics {
            registry,
            values,
            requests,
            latency,
            errors,
            in_flight,
            http_requests,
            http_duration,
            named: Mutex::new(Named::default()),
            max_names,
        }
    }

    /// The series of handle `name` of `kind`: its own while the principal
    /// of the request opening it has fewer than the cap of names with their
    /// own, else the shared `name="_other"` ones.
    pub(crate) fn series(&self, kind: ObjectKind, name: &str) -> Series {
        let named = {
            let mut set = self.named.lock().unwrap_or_else(|p| p.into_inner());
            let key = (kind, name.to_owned());
            if set.owner.contains_key(&key) {
                true
            } else {
                let owner = crate::access::caller_name().unwrap_or_default();
                let have = set.per_owner.entry(owner.clone()).or_default();
                if *have < self.max_names {
                    *have += 1;
                    set.owner.insert(key, owner);
                    true
                } else {
                    false
                }
            }
        };
        let labels = [kind.as_str(), if named { name } else { OTHER }];
        Series {
            values: self.values.with_label_values(&labels),
            requests: self.requests.with_label_values(&labels),
            latency: self.latency.with_label_values(&labels),
            named,
        }
    }

    /// Drops the series of a name that no longer has a handle (`named`: it
    /// had series of its own; the `_other` series stay).
    pub(crate) fn forget(&self, kind: ObjectKind, name: &str, named: bool) {
        if !named {
            return;
        }
        {
            let mut set = self.named.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(owner) = set.owner.remove(&(kind, name.to_owned()))
                && let Some(n) = set.per_owner.get_mut(&owner)
            {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    set.per_owner.remove(&owner);
                }
            }
        }
        let labels = [kind.as_str(), name];
        let _ = self.values.remove_label_values(&labels);
        let _ = self.requests.remove_label_values(&labels);
        let _ = self.latency.remove_label_values(&labels);
    }

    /// Counts a request answered: `route` its template (`None`: no route
    /// matched), `seconds` how long it took.
    pub(crate) fn observe_request(
        &self,
        route: Option<&str>,
        method: &axum::http::Method,
        status: axum::http::StatusCode,
        seconds: f64,
    ) {
        use axum::http::Method as M;
        let route = route.unwrap_or("unmatched");
        // Only the methods the API knows: any other is one label, so that
        // clients cannot make series at will.
        let method = match *method {
            M::GET => "GET",
            M::POST => "POST",
            M::PATCH => "PATCH",
            M::DELETE => "DELETE",
            M::PUT => "PUT",
            M::HEAD => "HEAD",
            M::OPTIONS => "OPTIONS",
            _ => "other",
        };
        self.http_requests
            .with_label_values(&[route, method, status.as_str()])
            .inc();
        self.http_duration
            .with_label_values(&[route, method])
            .observe(seconds);
    }

    /// The Prometheus text exposition: the registry, plus the handles'
    /// counters as they are now.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn render(
        &self,
        sequences: &[(String, HandleCounters)],
        went_back: &[(String, u64)],
        pools: &[(String, HandleCounters)],
        leaders: &[(String, keysmith::sequence::LeaderStats)],
        usage: &[(String, keysmith::sequence::SequenceUsage, f64)],
        pool_runways: &[(String, f64)],
        ids: Option<&keysmith::ids::IdStatus>,
        ids_runway: Option<&crate::runway::IdsRunway>,
        uptime_seconds: f64,
        held: Gauges,
    ) -> String {
        let scrape = Registry::new();
        let open = IntGaugeVec::new(
            Opts::new(
                "keysmith_open_handles",
                "Handles the server holds open, by kind (sequence, numbered_sequence, pool); a handle being closed counts until its close is done.",
            ),
            &["kind"],
        )
        .expect("valid metric");
        for (kind, n) in [
            ("sequence", held.sequences),
            ("numbered_sequence", held.numbered),
            ("pool", held.pools),
        ] {
            open.with_label_values(&[kind])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        scrape.register(Box::new(open)).expect("unique metric");
        let marks = IntGauge::new(
            "keysmith_high_water_entries",
            "Sequences whose reserved ranges the server remembers (to refuse a store that went back).",
        )
        .expect("valid metric");
        marks.set(i64::try_from(held.high_waters).unwrap_or(i64::MAX));
        scrape.register(Box::new(marks)).expect("unique metric");
        let gauge = |name: &str, help: &str| {
            let g = IntGaugeVec::new(Opts::new(name, help), &["name"]).expect("valid metric");
            scrape.register(Box::new(g.clone())).expect("unique metric");
            g
        };
        let counter = |name: &str, help: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &["name"]).expect("valid metric");
            scrape.register(Box::new(c.clone())).expect("unique metric");
            c
        };
        let seq_refills = counter(
            "keysmith_sequence_refills_total",
            "Blocks reserved in the store by the server's handle (refills and prefetches).",
        );
        let refill_seconds = CounterVec::new(
            Opts::new(
                "keysmith_sequence_refill_seconds_total",
                "Time the server's handle spent reserving blocks in the store (retries included); \
                 divided by keysmith_sequence_refills_total, the mean time a refill takes.",
            ),
            &["name"],
        )
        .expect("valid metric");
        scrape
            .register(Box::new(refill_seconds.clone()))
            .expect("unique metric");
        let seq_conflicts = counter(
            "keysmith_sequence_conflicts_total",
            "Optimistic reservations that lost to another writer and were retried.",
        );
        let seq_block = gauge(
            "keysmith_sequence_block_size",
            "Current block size of the server's handle.",
        );
        let skips = counter(
            "keysmith_failover_skips_total",
            "Values the store skipped before a reservation of the server's handle because it was in a \
             new generation (a failover to a replica, a restore).",
        );
        for (name, c) in sequences {
            seq_refills.with_label_values(&[name]).inc_by(c.refills);
            refill_seconds
                .with_label_values(&[name])
                .inc_by(c.refill_seconds.max(0.0));
            seq_conflicts.with_label_values(&[name]).inc_by(c.conflicts);
            if name != OTHER {
                seq_block.with_label_values(&[name]).set(c.size);
            }
            skips
                .with_label_values(&[name])
                .inc_by(c.skipped_at_failover.max(0) as u64);
        }
        let leading = gauge(
            "keysmith_leader_leading",
            "1 while the server's handle of a leader-ordered sequence holds its leader lease (leads), else 0.",
        );
        let terms = counter(
            "keysmith_leader_terms_total",
            "Terms the server's handle of a leader-ordered sequence began (acquisitions of its leader lease).",
        );
        let terms_lost = counter(
            "keysmith_leader_terms_lost_total",
            "Terms the server's handle of a leader-ordered sequence found taken by another process at renewal.",
        );
        for (name, l) in leaders {
            leading.with_label_values(&[name]).set(i64::from(l.leading));
            terms.with_label_values(&[name]).inc_by(l.terms_begun);
            terms_lost.with_label_values(&[name]).inc_by(l.terms_lost);
        }
        let went_back_total = counter(
            "keysmith_store_went_back_total",
            "Ranges refused because the store returned values this server had already reserved \
             (the store went back in time without a new generation).",
        );
        // Every open sequence at 0 too: a counter that exists before it
        // first moves.
        for (name, _) in sequences {
            went_back_total.with_label_values(&[name]).inc_by(0);
        }
        for (name, n) in went_back {
            went_back_total.with_label_values(&[name]).inc_by(*n);
        }
        let runway = GaugeVec::new(
            Opts::new(
                "keysmith_sequence_runway_seconds",
                "Seconds until the sequence reaches its maximum at the reservation rate of the last minutes \
                 (all servers and processes); absent until there is a rate.",
            ),
            &["name"],
        )
        .expect("valid metric");
        scrape
            .register(Box::new(runway.clone()))
            .expect("unique metric");
        let unaccounted = gauge(
            "keysmith_sequence_unaccounted_values",
            "Reserved values no clean close accounted for: in open handles, or lost by handles that died.",
        );
        let left = GaugeVec::new(
            Opts::new(
                "keysmith_sequence_range_left_ratio",
                "The share of the sequence's range (start to max) not yet reserved, 0 to 1.",
            ),
            &["name"],
        )
        .expect("valid metric");
        scrape
            .register(Box::new(left.clone()))
            .expect("unique metric");
        let warn = GaugeVec::new(
            Opts::new(
                "keysmith_sequence_range_warning",
                "1 when less than the warning share (10 %) of the sequence's range is left, else 0.",
            ),
            &["name"],
        )
        .expect("valid metric");
        scrape
            .register(Box::new(warn.clone()))
            .expect("unique metric");
        for (name, u, share) in usage {
            if let Some(secs) = u.runway_seconds {
                runway.with_label_values(&[name]).set(secs);
            }
            unaccounted.with_label_values(&[name]).set(u.unaccounted);
            left.with_label_values(&[name]).set(*share);
            let below = *share < keysmith::sequence::DEFAULT_RANGE_WARNING_SHARE;
            warn.with_label_values(&[name])
                .set(if below { 1.0 } else { 0.0 });
        }
        let pool_runway = GaugeVec::new(
            Opts::new(
                "keysmith_pool_runway_seconds",
                "Seconds until every number of the pool is taken, at the rate between its last two rate marks.",
            ),
            &["name"],
        )
        .expect("valid metric");
        scrape
            .register(Box::new(pool_runway.clone()))
            .expect("unique metric");
        for (name, secs) in pool_runways {
            pool_runway.with_label_values(&[name]).set(*secs);
        }
        let pool_attempts = counter(
            "keysmith_pool_attempts_total",
            "Attempts to take a pool member (one per member tried).",
        );
        let pool_conflicts = counter(
            "keysmith_pool_conflicts_total",
            "Pool members taken by someone else first; each is retried with another member.",
        );
        let pool_size = gauge("keysmith_pool_size", "Members a pool holds.");
        for (name, c) in pools {
            pool_attempts.with_label_values(&[name]).inc_by(c.refills);
            pool_conflicts
                .with_label_values(&[name])
                .inc_by(c.conflicts);
            if name != OTHER {
                pool_size.with_label_values(&[name]).set(c.size);
            }
        }
        let uptime = Gauge::new(
            "keysmith_uptime_seconds",
            "Seconds since the server started.",
        )
        .expect("valid metric");
        uptime.set(uptime_seconds);
        scrape.register(Box::new(uptime)).expect("unique metric");

        if let Some(st) = ids {
            register_ids(&scrape, st);
        }
        if let Some(r) = ids_runway {
            register_ids_runway(&scrape, r);
        }

        let mut families = self.registry.gather();
        families.extend(scrape.gather());
        // A name's (or group's) series only for a caller that may read it;
        // the server-wide ones (no name: routes, errors, the process; and
        // the `_other` sums of many principals' names) only for a caller
        // that may read every name (`"*"`, which only a `names = "*"` grant
        // covers).
        let everything = crate::access::visible("*");
        for f in &mut families {
            f.mut_metric().retain(|m| {
                let mut named = m
                    .get_label()
                    .iter()
                    .filter(|l| matches!(l.name(), "name" | "group"))
                    .peekable();
                if named.peek().is_none() {
                    return everything;
                }
                named.all(|l| {
                    if l.value() == OTHER {
                        everything
                    } else {
                        crate::access::visible(l.value())
                    }
                })
            });
        }
        families.retain(|f| !f.get_metric().is_empty());
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            tracing::warn!("cannot encode metrics: {e}");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The runway of the server's ids, labelled by group (and the layout's
/// bits): seconds until the time bits run out, worker ids free and the
/// group's size, and a 0/1 gauge for each warning.
fn register_ids_runway(scrape: &Registry, r: &crate::runway::IdsRunway) {
    let g = GaugeVec::new(
        Opts::new(
            "keysmith_ids_runway_seconds",
            "Seconds until the time bits of the server's id layout run out (0 once they have).",
        ),
        &["group", "layout"],
    )
    .expect("valid metric");
    g.with_label_values(&[r.group.as_str(), r.layout.as_str()])
        .set(r.runway.seconds_left);
    scrape.register(Box::new(g)).expect("unique metric");
    let mut ints: Vec<(&str, &str, i64)> = vec![(
        "keysmith_ids_runway_warning",
        "1 when the id layout's time bits run out within the warning threshold (5 years), else 0.",
        i64::from(r.runway.warning),
    )];
    if let Some(w) = &r.workers {
        ints.extend([
            (
                "keysmith_ids_workers_free",
                "Worker ids of the id generators' group free to lease now.",
                w.free,
            ),
            (
                "keysmith_ids_workers_size",
                "Worker ids in the id generators' group (0..size).",
                w.size,
            ),
            (
                "keysmith_ids_workers_free_warning",
                "1 when a tenth or less of the group's worker ids are free, else 0.",
                i64::from(w.warning),
            ),
        ]);
    }
    for (name, help, value) in ints {
        let g = IntGaugeVec::new(Opts::new(name, help), &["group"]).expect("valid metric");
        g.with_label_values(&[r.group.as_str()]).set(value);
        scrape.register(Box::new(g)).expect("unique metric");
    }
}

/// The id generator's gauges and counters, labelled by its group.
fn register_ids(scrape: &Registry, st: &keysmith::ids::IdStatus) {
    let gauges: [(&str, &str, i64); 3] = [
        (
            "keysmith_ids_worker",
            "The worker id the server's id generator holds; -1 when it holds none.",
            st.worker.unwrap_or(-1),
        ),
        (
            "keysmith_ids_lease_held",
            "1 while the worker lease is held, 0 otherwise.",
            i64::from(st.lease == "held"),
        ),
        (
            "keysmith_ids_lease_fence",
            "The fence of the worker lease held.",
            st.fence,
        ),
    ];
    let ms = |v: i64| v as f64 / 1000.0;
    let seconds: [(&str, &str, f64); 3] = [
        (
            "keysmith_ids_floor_timestamp_seconds",
            "The time floor in the store: ids are issued below it (seconds since 1970).",
            ms(st.until_ms),
        ),
        (
            "keysmith_ids_clock_skew_seconds",
            "How far the last id ran ahead of the local clock (the clock went back), seconds.",
            ms(st.clock_behind_ms),
        ),
        (
            "keysmith_ids_max_clock_skew_seconds",
            "The most ids ever ran ahead of the local clock, seconds.",
            ms(st.max_clock_behind_ms),
        ),
    ];
    let counters: [(&str, &str, u64); 3] = [
        ("keysmith_ids_issued_total", "Ids issued.", st.issued),
        (
            "keysmith_ids_leases_lost_total",
            "Worker leases found taken by another holder at renewal.",
            st.leases_lost,
        ),
        (
            "keysmith_ids_clock_back_total",
            "Times the local clock was seen going back.",
            st.clock_back_events,
        ),
    ];
    for (name, help, value) in gauges {
        let g = IntGaugeVec::new(Opts::new(name, help), &["group"]).expect("valid metric");
        g.with_label_values(&[st.group.as_str()]).set(value);
        scrape.register(Box::new(g)).expect("unique metric");
    }
    for (name, help, value) in seconds {
        let g = GaugeVec::new(Opts::new(name, help), &["group"]).expect("valid metric");
        g.with_label_values(&[st.group.as_str()]).set(value);
        scrape.register(Box::new(g)).expect("unique metric");
    }
    for (name, help, value) in counters {
        let c = IntCounterVec::new(Opts::new(name, help), &["group"]).expect("valid metric");
        c.with_label_values(&[st.group.as_str()]).inc_by(value);
        scrape.register(Box::new(c)).expect("unique metric");
    }
}
