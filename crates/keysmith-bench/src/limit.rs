//! `keysmith-bench limit`: cached `next()` against a bare
//! `AtomicU64::fetch_add` (the limit), on one thread and on two, in short
//! alternating slices (keysmith, atomic, keysmith, atomic, ...).
//!
//! On a shared machine two threads are often not on a CPU at once: then they
//! take turns and never contend for the cache line, and the figure is not a
//! two-thread figure. So every slice records, besides its rate, how many of
//! its threads were on a CPU at once on average (their CPU time, from the
//! kernel's per-thread scheduler statistics, over the wall time: 2.00 for
//! two threads that ran together throughout) and the load average; the
//! summary gives the median over all slices and over the slices whose
//! threads ran together (overlap at least [`TOGETHER`] of the thread count).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::compare::{Padded, cached_handle, on_threads_overlap};
use super::rows::loadavg;

/// A slice counts as "together" when its threads were on a CPU at once at
/// least this share of the wall time, per thread.
pub const TOGETHER: f64 = 0.95;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Seconds per slice.
    pub slice: f64,
    /// Slices of each kind per thread count.
    pub rounds: u32,
    /// Thread counts.
    pub threads: Vec<usize>,
}

/// One measured slice.
#[derive(Debug, Clone, Serialize)]
pub struct Slice {
    /// `keysmith` or `atomic`.
    pub what: &'static str,
    /// Threads calling at once.
    pub threads: usize,
    /// Calls per second, all threads together.
    pub per_sec: f64,
    /// Threads on a CPU at once, on average (CPU time over wall time).
    pub overlap: Option<f64>,
    /// Nanoseconds of CPU per call (all threads' CPU time over all calls).
    pub cpu_ns_per_call: Option<f64>,
    /// The 1-minute load average after the slice.
    pub load: Option<f64>,
}

/// Every slice, in the order run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub slices: Vec<Slice>,
}

/// Runs the slices.
///
/// # Errors
/// Bad options, or the in-memory handle cannot be opened.
pub async fn run(o: &Options) -> anyhow::Result<Report> {
    if !(o.slice > 0.0 && o.slice <= 60.0) {
        anyhow::bail!("--slice must be above 0 and at most 60, got {}", o.slice);
    }
    if !(1..=1000).contains(&o.rounds) {
        anyhow::bail!("--rounds must be between 1 and 1000, got {}", o.rounds);
    }
    if o.threads.is_empty() || o.threads.iter().any(|&t| !(1..=64).contains(&t)) {
        anyhow::bail!("--threads must be between 1 and 64");
    }
    let seq = cached_handle().await?;
    let d = Duration::from_secs_f64(o.slice);
    let mut slices = Vec::new();
    tokio::task::block_in_place(|| {
        for &threads in &o.threads {
            let atomic = Padded(AtomicU64::new(0));
            for _ in 0..o.rounds {
                for what in ["keysmith", "atomic"] {
                    let (per_sec, overlap) = if what == "keysmith" {
                        on_threads_overlap(threads, d, || {
                            black_box(seq.next().unwrap_or(-1));
                        })
                    } else {
                        on_threads_overlap(threads, d, || {
                            black_box(atomic.0.fetch_add(1, Ordering::AcqRel));
                        })
                    };
                    let s = Slice {
                        what,
                        threads,
                        per_sec,
                        overlap,
                        // CPU seconds per wall second over calls per wall second.
                        cpu_ns_per_call: overlap.map(|ov| ov / per_sec * 1e9),
                        load: loadavg(),
                    };
                    eprintln!(
                        "  {what:8} {threads} thread(s): {:7.1} M/s, on a CPU at once {}, load {}",
                        per_sec / 1e6,
                        s.overlap.map_or("?".into(), |v| format!("{v:.2}")),
                        s.load.map_or("?".into(), |v| format!("{v:.2}")),
                    );
                    slices.push(s);
                }
            }
        }
    });
    tokio::task::block_in_place(|| drop(seq));
    Ok(Report { slices })
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn together(s: &Slice) -> bool {
    s.overlap.is_some_and(|o| o >= TOGETHER * s.threads as f64)
}

/// The summary as a Markdown table: per thread count, the median rate of
/// each over all slices and over the slices whose threads ran together, and
/// keysmith's share of the atomic's.
pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let loads: Vec<f64> = r.slices.iter().filter_map(|s| s.load).collect();
    let (lo, hi) = loads
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), &l| (a.min(l), b.max(l)));
    out.push_str(&format!(
        "{} slices, alternating keysmith / atomic; load average {lo:.2}–{hi:.2}; \"together\": \
         slices whose threads were on a CPU at once at least {TOGETHER} of the time each.\n\n",
        r.slices.len()
    ));
    out.push_str(
        "| threads | slices | atomic, median M/s | keysmith, median M/s | keysmith / atomic | \
         together: slices (atomic / keysmith) | together: atomic M/s | together: keysmith M/s | \
         together: keysmith / atomic | CPU ns per call (atomic / keysmith, together) |\n",
    );
    out.push_str("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    let mut threads: Vec<usize> = r.slices.iter().map(|s| s.threads).collect();
    threads.dedup();
    let m = |what: &str, t: usize, only_together: bool, f: fn(&Slice) -> Option<f64>| {
        median(
            r.slices
                .iter()
                .filter(|s| s.what == what && s.threads == t && (!only_together || together(s)))
                .filter_map(f)
                .collect(),
        )
    };
    let rate = |s: &Slice| Some(s.per_sec / 1e6);
    let fmt = |v: Option<f64>, p: usize| v.map_or("–".into(), |v| format!("{v:.p$}"));
    for t in threads {
        let n = |what: &str, tg: bool| {
            r.slices
                .iter()
                .filter(|s| s.what == what && s.threads == t && (!tg || together(s)))
                .count()
        };
        let (a, k) = (m("atomic", t, false, rate), m("keysmith", t, false, rate));
        let (ta, tk) = (m("atomic", t, true, rate), m("keysmith", t, true, rate));
        let ratio = |k: Option<f64>, a: Option<f64>| k.zip(a).map(|(k, a)| k / a);
        out.push_str(&format!(
            "| {t} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} / {} |\n",
            n("atomic", false) + n("keysmith", false),
            fmt(a, 1),
            fmt(k, 1),
            fmt(ratio(k, a), 2),
            n("atomic", true),
            n("keysmith", true),
            fmt(ta, 1),
            fmt(tk, 1),
            fmt(ratio(tk, ta), 2),
            fmt(m("atomic", t, true, |s| s.cpu_ns_per_call), 2),
            fmt(m("keysmith", t, true, |s| s.cpu_ns_per_call), 2),
        ));
    }
    out
}
