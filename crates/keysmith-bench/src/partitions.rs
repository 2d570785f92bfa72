//! `keysmith-bench partitions` (once `keysmith verify --partitions`): one
//! network-partition scenario of the partition tests, run by hand. The
//! scenario (namespaces, a throwaway PostgreSQL, three `keysmith serve` of
//! the product binary, the load, the cut and the heal) is
//! `keysmith_testsupport::partitions`, the same code the tests run, and so is
//! the checking of its calls (`check_loads`, through the library's
//! `keysmith::verify::history`). This file only checks that the machine
//! allows it, calls, and prints.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use keysmith::verify::history::HistoryViolation;
use keysmith_testsupport::netns::{self, Net, PostgresNet};
use keysmith_testsupport::partitions::{self, Call, CutRun, REQUEST_TIMEOUT_MS, Timing};
use serde::Serialize;

/// The exit status when the machine does not allow the run.
const NOT_HERE: i32 = 2;

/// The longest partition `--seconds` accepts: a day.
const MAX_SECONDS: f64 = 86_400.0;

/// `--seconds`: more than 0, at most [`MAX_SECONDS`].
pub fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v > 0.0 && v <= MAX_SECONDS {
        Ok(v)
    } else {
        Err(format!("must be more than 0 and at most {MAX_SECONDS}"))
    }
}

/// The `keysmith` binary whose `create` and `serve` the scenario runs:
/// `given`, else `keysmith` beside this binary. `Err` says why there is none
/// that runs.
pub(crate) fn keysmith_binary(given: Option<PathBuf>) -> Result<PathBuf, String> {
    let path = match given {
        Some(p) => p,
        None => std::env::current_exe()
            .ok()
            .and_then(|e| Some(e.parent()?.join("keysmith")))
            .filter(|p| p.is_file())
            .ok_or(
                "no keysmith binary beside keysmith-bench: build both \
                 (cargo build --release -p keysmith-cli -p keysmith-bench) or give --keysmith PATH",
            )?,
    };
    let out = Command::new(&path)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run the keysmith binary {}: {e}", path.display()))?;
    let version = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && version.starts_with("keysmith ") {
        Ok(path)
    } else {
        Err(format!(
            "{} is not a keysmith binary (`--version` printed {:?})",
            path.display(),
            version.trim()
        ))
    }
}

/// Runs the scenario with PostgreSQL cut off for `seconds`, its servers
/// the `keysmith` binary `keysmith` (see [`keysmith_binary`]); prints the
/// report (JSON with `json`); fails when the history checker finds a
/// violation. Exits 2, having started nothing, when the machine does not
/// allow it.
pub async fn run(seconds: f64, keysmith: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let exe = keysmith_binary(keysmith);
    let missing: Vec<String> = [
        netns::unavailable(),
        netns::postgres_unavailable(),
        exe.as_ref().err().cloned(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let exe = match exe {
        Ok(exe) if missing.is_empty() => exe,
        _ => {
            eprintln!(
                "keysmith-bench partitions cannot run on this machine:\n  - {}\n\
                 It needs Linux, root (it makes network namespaces), `ip` from iproute2 \
                 with `ip netns` working, PostgreSQL's server binaries (initdb, postgres) \
                 with a user other than root to run them as (default postgres, or \
                 KEYSMITH_PG_USER), and the keysmith binary. As root, on Debian: apt-get \
                 install iproute2 postgresql; then, in a clone of the repository, as root: \
                 cargo build --release -p keysmith-cli -p keysmith-bench && \
                 target/release/keysmith-bench partitions. Nothing was started.",
                missing.join("\n  - ")
            );
            std::process::exit(NOT_HERE);
        }
    };
    let partition = Duration::from_secs_f64(seconds);
    // ctrl-c or SIGTERM: the scenario stops at its next wait, and the
    // network is torn down as it returns.
    let on_ctrl_c = tokio::spawn(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).ok();
        let terminated = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => if r.is_err() { std::future::pending::<()>().await },
            () = terminated => {}
        }
        partitions::interrupt();
    });
    eprintln!(
        "partitions: starting PostgreSQL and 3 servers in network namespaces; \
         PostgreSQL will be cut off from server s0 for {seconds} s"
    );
    let ran = tokio::task::spawn_blocking(move || {
        // A panic of the network's helpers (a failed `ip` command) unwinds
        // through the network, which tears it down.
        std::panic::catch_unwind(|| scenario(&exe, partition))
    })
    .await;
    on_ctrl_c.abort();
    let run = match ran {
        Ok(Ok(Ok(run))) => run,
        Ok(Ok(Err(e))) => {
            anyhow::bail!("the partition run failed: {e}; everything it started was torn down")
        }
        Ok(Err(panic)) => anyhow::bail!(
            "the partition run failed: {}; everything it started was torn down",
            panic_message(&*panic)
        ),
        Err(e) => anyhow::bail!("the partition run failed: {e}"),
    };
    let report = Report::of(&run, partition);
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        report.print();
    }
    match &report.violation {
        None => Ok(()),
        Some(v) => {
            eprintln!("violation: {v}");
            anyhow::bail!("verification FAILED")
        }
    }
}

/// The network, PostgreSQL and the scenario; everything is torn down when
/// this returns (or unwinds).
fn scenario(exe: &Path, partition: Duration) -> Result<CutRun, String> {
    let net = Net::new().ok_or("network namespaces are not available")?;
    let client = net.add_host("c");
    let pg = PostgresNet::start(&net, "pg").ok_or("PostgreSQL cannot be started")?;
    partitions::postgres_cut_off_from_one_of_three(&net, &client, &pg, exe, partition)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_owned()
    }
}

/// What the run did and what the checker found.
#[derive(Debug, Serialize)]
struct Report {
    /// How long PostgreSQL was cut off from s0, seconds.
    partition_s: f64,
    /// Values of sequence `s` (block 20), of the strict `t` (block 1) and
    /// ids, each checked.
    sequence_values: usize,
    strict_values: usize,
    ids: usize,
    /// Calls made, by HTTP status (0: no answer).
    statuses: BTreeMap<u16, usize>,
    /// The slowest call, seconds.
    slowest_call_s: f64,
    /// From the cut to s0's first 503, seconds (`None`: no 503).
    first_503_after_cut_s: Option<f64>,
    /// From the heal to s0's first value, seconds.
    first_value_after_heal_s: Option<f64>,
    /// Values s0 served from its cache while cut off.
    served_while_cut: usize,
    /// Calls s1 and s2 answered with values during the cut.
    others_during_cut: usize,
    /// 0 or 1: the checker stops at the first violation.
    duplicates: usize,
    order_violations: usize,
    /// The first violation, with both operations.
    violation: Option<String>,
    #[serde(skip)]
    timing: String,
}

impl Report {
    fn of(run: &CutRun, partition: Duration) -> Report {
        let checked = partitions::check_loads(run.start, &run.seq, &run.ids, &run.strict);
        // The report names the load, not the server of a per-server one.
        let violation = checked.violation.map(|(what, v)| (what, v.violation));
        let all: Vec<&Call> = run.seq.iter().chain(&run.ids).chain(&run.strict).collect();
        let mut statuses = BTreeMap::new();
        for c in &all {
            *statuses.entry(c.status).or_insert(0) += 1;
        }
        let slowest = partitions::slowest(all.iter().copied())
            .map(Call::took)
            .unwrap_or_default();
        let t = Timing::of(&run.seq, 0, run.cut, run.heal);
        let duplicates = usize::from(matches!(
            violation,
            Some((_, HistoryViolation::Duplicate { .. }))
        ));
        Report {
            partition_s: partition.as_secs_f64(),
            sequence_values: checked.seq,
            ids: checked.ids,
            strict_values: checked.strict,
            statuses,
            slowest_call_s: slowest.as_secs_f64(),
            first_503_after_cut_s: t.to_503.map(|d| d.as_secs_f64()),
            first_value_after_heal_s: t.to_value.map(|d| d.as_secs_f64()),
            served_while_cut: t.served_while_cut,
            others_during_cut: run.others_during,
            duplicates,
            order_violations: usize::from(violation.is_some()) - duplicates,
            violation: violation.map(|(what, v)| format!("{what}: {v}")),
            timing: t.line(),
        }
    }

    fn print(&self) {
        println!(
            "PostgreSQL cut off from server s0 of 3 for {:.1} s",
            self.partition_s
        );
        println!("  s0: {}", self.timing);
        println!(
            "  s1 and s2 answered {} calls during the cut; calls by status {:?}; slowest {:.2} s \
             (server request timeout {REQUEST_TIMEOUT_MS} ms)",
            self.others_during_cut, self.statuses, self.slowest_call_s
        );
        println!(
            "  values {} (sequence s, block 20), {} (strict t, block 1, real-time order across \
             servers), ids {}",
            self.sequence_values, self.strict_values, self.ids
        );
        let verdict = if self.violation.is_none() {
            "ok"
        } else {
            "FAILED"
        };
        if self.violation.is_some() {
            println!("  the checker stops at the first violation (on stderr)");
        }
        println!(
            "duplicates {} order violations {} {verdict}",
            self.duplicates, self.order_violations
        );
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn call(client: u32, server: usize, at_ms: u64, values: Vec<i64>) -> Call {
        let sent = Instant::now() + Duration::from_millis(at_ms);
        Call::ok(
            client,
            server,
            sent,
            sent + Duration::from_millis(1),
            values,
        )
    }

    /// A value answered twice (by two servers) fails the run, and the
    /// report names it with both operations.
    #[test]
    fn a_duplicate_is_reported_with_both_operations() {
        let start = Instant::now();
        let run = CutRun {
            start,
            cut: start,
            heal: start,
            seq: vec![call(0, 0, 0, vec![1, 2]), call(2, 1, 5, vec![2, 3])],
            ids: Vec::new(),
            strict: Vec::new(),
            others_during: 0,
        };
        let report = Report::of(&run, Duration::from_secs(1));
        assert_eq!((report.duplicates, report.order_violations), (1, 0));
        let v = report.violation.expect("a violation");
        assert!(
            v.starts_with("sequence s: duplicate: 2 handed out twice"),
            "{v}"
        );
        assert!(v.contains("client 0") && v.contains("client 2"), "{v}");
    }

    /// The strict sequence's values go back in real time: an order
    /// violation.
    #[test]
    fn strict_values_out_of_real_time_order_are_a_violation() {
        let start = Instant::now();
        let run = CutRun {
            start,
            cut: start,
            heal: start,
            seq: Vec::new(),
            ids: Vec::new(),
            strict: vec![call(200, 0, 0, vec![5]), call(201, 1, 10, vec![4])],
            others_during: 0,
        };
        let report = Report::of(&run, Duration::from_secs(1));
        assert_eq!((report.duplicates, report.order_violations), (0, 1));
        assert!(
            report
                .violation
                .as_deref()
                .is_some_and(|v| v.starts_with("strict sequence t: real-time order")),
            "{:?}",
            report.violation
        );
    }
}
