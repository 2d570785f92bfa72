//! Many `keysmith` processes run back to back with default settings, as an
//! operator's scripts would: how many runs failed, and how fair the store was.
//!
//! Used by `tests/contention.rs` (a fixed number of runs per slot: not one may
//! fail) and by `benches/contention.rs` (a fixed time: the slowest slot's
//! share of the values is the fairness figure in BENCHMARKS.md).

use std::collections::HashSet;
use std::process::Output;
use std::time::{Duration, Instant};

use super::{assert_increasing, complete_values, keysmith};

/// What one slot runs, again and again: `keysmith --store URL ARGS...`,
/// printing one value a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// `next NAME --count COUNT` with the default retry budget and the
    /// default strategy, or this one.
    Next {
        count: usize,
        strategy: Option<&'static str>,
    },
    /// `pool take NAME --count COUNT` with the default sample and budget.
    PoolTake { count: usize },
}

impl Job {
    fn args(self, name: &str) -> Vec<String> {
        match self {
            Job::Next { count, strategy } => {
                let mut a = vec![
                    "next".into(),
                    name.into(),
                    "--count".into(),
                    count.to_string(),
                ];
                if let Some(s) = strategy {
                    a.extend(["--strategy".into(), s.into()]);
                }
                a
            }
            Job::PoolTake { count } => vec![
                "pool".into(),
                "take".into(),
                name.into(),
                "--count".into(),
                count.to_string(),
            ],
        }
    }

    fn count(self) -> usize {
        match self {
            Job::Next { count, .. } | Job::PoolTake { count } => count,
        }
    }
}

/// When each slot stops starting new runs.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// After this many runs.
    Runs(usize),
    /// When this much time has passed since the start (a run in flight then
    /// finishes).
    Elapsed(Duration),
}

/// What a load produced.
#[derive(Debug, Default)]
pub struct Report {
    /// Runs that exited 0 and printed every value, per slot.
    pub ok_runs: Vec<usize>,
    /// Values printed, per slot.
    pub values: Vec<usize>,
    /// Runs that failed: (slot, exit status, stderr).
    pub failures: Vec<(usize, String, String)>,
    /// Every value printed, to check uniqueness.
    pub all: Vec<i64>,
    pub elapsed: Duration,
}

impl Report {
    pub fn runs(&self) -> usize {
        self.ok_runs.iter().sum::<usize>() + self.failures.len()
    }

    /// The slot with the fewest values, as a share of the mean per slot
    /// (1.0 = perfectly fair).
    pub fn slowest_share(&self) -> f64 {
        let total: usize = self.values.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let mean = total as f64 / self.values.len() as f64;
        *self.values.iter().min().unwrap_or(&0) as f64 / mean
    }

    pub fn values_per_second(&self) -> f64 {
        self.all.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// Panics unless every value is unique.
    pub fn assert_unique(&self, what: &str) {
        let set: HashSet<_> = self.all.iter().collect();
        assert_eq!(
            set.len(),
            self.all.len(),
            "{what}: a value was handed out twice"
        );
    }

    /// Panics, quoting the first errors, if any run failed.
    pub fn assert_no_failures(&self, what: &str) {
        if let Some((slot, status, stderr)) = self.failures.first() {
            panic!(
                "{what}: {} of {} runs failed; first: slot {slot}, {status}: {stderr}",
                self.failures.len(),
                self.runs()
            );
        }
    }
}

/// Runs `procs` slots at once, each starting `job` on `name` again as soon as
/// its previous run exits, until `until`. Each run's values are checked to
/// increase (sequence runs) and to be complete.
pub fn back_to_back(url: &str, name: &str, job: Job, procs: usize, until: Until) -> Report {
    let start = Instant::now();
    let slots: Vec<_> = (0..procs)
        .map(|slot| {
            let (url, name) = (url.to_owned(), name.to_owned());
            std::thread::spawn(move || {
                let mut ok = 0;
                let mut values = Vec::new();
                let mut failures = Vec::new();
                let mut run = 0;
                loop {
                    let more = match until {
                        Until::Runs(n) => run < n,
                        Until::Elapsed(d) => start.elapsed() < d,
                    };
                    if !more {
                        break;
                    }
                    run += 1;
                    let out: Output = keysmith(&url).args(job.args(&name)).output().unwrap();
                    let got = complete_values(&out.stdout);
                    if out.status.success() && got.len() == job.count() {
                        if matches!(job, Job::Next { .. }) {
                            assert_increasing(&got, &format!("slot {slot}"));
                        }
                        ok += 1;
                    } else {
                        failures.push((
                            slot,
                            out.status.to_string(),
                            String::from_utf8_lossy(&out.stderr).into_owned(),
                        ));
                    }
                    // Values printed by a failed run were handed out too.
                    values.extend(got);
                }
                (ok, values, failures)
            })
        })
        .collect();
    let mut report = Report::default();
    for s in slots {
        let (ok, values, failures) = s.join().unwrap();
        report.ok_runs.push(ok);
        report.values.push(values.len());
        report.all.extend(values);
        report.failures.extend(failures);
    }
    report.elapsed = start.elapsed();
    report
}
