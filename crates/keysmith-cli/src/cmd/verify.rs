//! `keysmith verify`: worker processes of this same binary allocate from a
//! scratch sequence and pool while some are killed with SIGKILL; the
//! library's [`Ledger`] checks what they report. This file only starts,
//! kills and reads the processes, and prints.
//!
//! Workers (`keysmith verify-worker --name NAME`, hidden) print one value a
//! line (`s N` or `p N`, see [`Value`]) and stop cleanly when their stdin
//! closes, so a parent that dies takes its workers with it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use keysmith::verify::{self, Ledger, Report, Value, Worker};
use rand::RngExt;

use crate::Global;

/// The longest run `--seconds` and `--kill-every` accept: a day.
const MAX_SECONDS: f64 = 86_400.0;

/// The shortest `--kill-every` other than 0: a worker has to get going.
const MIN_KILL_EVERY: f64 = 0.1;

/// How long workers may take to stop once told to, before they are killed
/// and the run fails.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// How often the progress bar and ctrl-c are looked at.
const TICK: Duration = Duration::from_millis(100);

/// `keysmith verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// How long to run, in seconds (more than 0, at most 86400).
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = seconds, allow_negative_numbers = true)]
    seconds: f64,
    /// Worker processes running at once (1 to 256).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    procs: u16,
    /// Seconds between SIGKILLs of a random worker, which is then replaced
    /// (0: never kill; else at least 0.1).
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = kill_every, allow_negative_numbers = true)]
    kill_every: f64,
    /// Deprecated: the network-partition scenario moved to the repository's
    /// lab binary, `keysmith-bench partitions`. Says how to run it there,
    /// starts nothing, and exits 2.
    #[arg(long, hide = true)]
    partitions: bool,
}

/// `keysmith verify-worker` (hidden): what each worker process runs.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The scratch sequence and pool.
    #[arg(long)]
    name: String,
}

fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v > 0.0 && v <= MAX_SECONDS {
        Ok(v)
    } else {
        Err(format!("must be more than 0 and at most {MAX_SECONDS}"))
    }
}

fn kill_every(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v == 0.0 || (MIN_KILL_EVERY..=MAX_SECONDS).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "must be 0 (never kill) or between {MIN_KILL_EVERY} and {MAX_SECONDS}"
        ))
    }
}

/// Runs `keysmith verify`: prints violations to stderr, the summary as the
/// last line of stdout, and fails when the run did not pass.
pub async fn run(args: VerifyArgs, global: &Global) -> anyhow::Result<()> {
    if args.partitions {
        return Err(super::moved::verify_partitions(args.seconds).into());
    }
    let url = global.store_url();
    if url.starts_with("memory:") {
        anyhow::bail!(
            "verify needs a store its worker processes share; {url} lives in one process only"
        );
    }
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find the keysmith binary to start workers: {e}"))?;
    let store = global.open().await?;
    let scratch = verify::create_scratch(&*store).await?;

    let interrupted = Arc::new(AtomicBool::new(false));
    let on_ctrl_c = {
        let flag = interrupted.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                flag.store(true, Relaxed);
            }
        })
    };
    let plan = Plan {
        exe,
        url,
        name: scratch.name.clone(),
        procs: usize::from(args.procs),
        run_for: Duration::from_secs_f64(args.seconds),
        kill_every: (args.kill_every > 0.0).then(|| Duration::from_secs_f64(args.kill_every)),
    };
    let stopped_early = interrupted.clone();
    let supervised = tokio::task::spawn_blocking(move || {
        let mut ledger = Ledger::new();
        if let Err(e) = supervise(&plan, &mut ledger, &interrupted) {
            ledger.error(format!("cannot run the workers: {e}"));
        }
        ledger
    })
    .await;
    on_ctrl_c.abort();
    if stopped_early.load(Relaxed) {
        eprintln!("interrupted: the workers were stopped early; checking what they did");
    }
    let mut ledger = supervised.unwrap_or_else(|e| {
        let mut l = Ledger::new();
        l.error(format!("the supervisor failed: {e}"));
        l
    });

    verify::check_after_run(store.clone(), &scratch, &mut ledger).await;
    let removed = verify::remove_scratch(&*store, &scratch).await;
    let report = ledger.finish();
    print_report(&report, global.json)?;
    let removed = removed.map_err(|e| {
        format!(
            "cannot remove the scratch sequence and pool {:?}: {e}",
            scratch.name
        )
    });
    match (report.summary.ok, removed) {
        (true, Ok(())) => Ok(()),
        (true, Err(e)) => anyhow::bail!("{e}"),
        (false, Ok(())) => anyhow::bail!("verification FAILED"),
        (false, Err(e)) => anyhow::bail!("verification FAILED; {e}"),
    }
}

fn print_report(report: &Report, json: bool) -> anyhow::Result<()> {
    for v in &report.violations {
        eprintln!("violation: {v}");
    }
    if report.more > 0 {
        eprintln!("... and {} more violations", report.more);
    }
    if json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        println!("{}", report.summary);
    }
    Ok(())
}

/// Runs `keysmith verify-worker`: takes values and prints each as soon as it
/// is durable (flushed once per step), until stdin closes; then closes its
/// handle.
pub async fn worker(args: WorkerArgs, global: &Global) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            stop.store(true, Relaxed);
        });
    }
    let store = global.open().await?;
    let w = Worker::open(store, &args.name).await?;
    // Flushed once per step, after its pool number: a kill loses at most the
    // lines of one step (gaps, never a repeat) and at most one pool number.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut result = Ok(());
    while !stop.load(Relaxed) && result.is_ok() {
        result = w
            .step(|v| {
                writeln!(out, "{v}")?;
                Ok::<(), anyhow::Error>(())
            })
            .await;
        if result.is_ok() {
            result = out.flush().map_err(Into::into);
        }
    }
    out.flush()?;
    let closed = w.close().await;
    result?;
    closed?;
    Ok(())
}

/// What the supervisor runs.
struct Plan {
    exe: PathBuf,
    url: String,
    name: String,
    procs: usize,
    run_for: Duration,
    kill_every: Option<Duration>,
}

/// What a worker's reader thread sends.
enum Event {
    /// A complete line of output.
    Line(u32, String),
    /// Its stdout closed (a line cut short by a kill is dropped).
    Closed(u32),
}

/// A worker process and the threads reading it.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: JoinHandle<String>,
    killed: bool,
}

/// Starts the workers, kills one at random every `kill_every` (starting a
/// replacement), feeds every line they print to `ledger`, and tells them all
/// to stop after `run_for` (or at ctrl-c, or when one fails). Returns when
/// every worker has ended and all their output is in the ledger.
fn supervise(plan: &Plan, ledger: &mut Ledger, interrupted: &AtomicBool) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel();
    let mut running: HashMap<u32, Running> = HashMap::new();
    let progress = progress_bar(plan.run_for);
    let started = Instant::now();
    let mut result = Ok(());
    for _ in 0..plan.procs {
        if let Err(e) = spawn(plan, ledger, &tx, &mut running) {
            result = Err(e);
            break;
        }
    }
    let end = started + plan.run_for;
    let mut next_kill = plan.kill_every.map(|k| started + k);
    let mut stop_by: Option<Instant> = result.is_err().then(|| Instant::now() + STOP_GRACE);
    if stop_by.is_some() {
        stop_all(&mut running);
    }
    let mut rng = rand::rng();
    while !running.is_empty() {
        let now = Instant::now();
        match stop_by {
            None if now >= end || interrupted.load(Relaxed) => {
                stop_by = Some(now + STOP_GRACE);
                stop_all(&mut running);
            }
            None => {
                if let (Some(at), Some(every)) = (next_kill, plan.kill_every)
                    && now >= at
                {
                    kill_one(&mut running, ledger, &mut rng);
                    if let Err(e) = spawn(plan, ledger, &tx, &mut running) {
                        ledger.error(format!("cannot start a replacement worker: {e}"));
                        stop_by = Some(now + STOP_GRACE);
                        stop_all(&mut running);
                    }
                    // Never fall behind into a burst of kills.
                    next_kill = Some((at + every).max(now));
                }
            }
            Some(deadline) if now >= deadline => {
                for (id, r) in running.iter_mut().filter(|(_, r)| !r.killed) {
                    ledger.error(format!(
                        "worker {id} (pid {}) did not stop within {} s of being told to; killed",
                        r.child.id(),
                        STOP_GRACE.as_secs()
                    ));
                    r.killed = true;
                    let _ = r.child.kill();
                }
                // Their readers see the pipes close and send Closed.
            }
            Some(_) => {}
        }
        let mut wake = now + TICK;
        if stop_by.is_none() {
            wake = wake.min(end);
            if let Some(at) = next_kill {
                wake = wake.min(at);
            }
        }
        match rx.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(Event::Line(id, line)) => match line.parse::<Value>() {
                Ok(v) => ledger.record(id, v),
                Err(_) => {
                    ledger.error(format!("worker {id} printed {line:?}, not a value"));
                    if stop_by.is_none() {
                        stop_by = Some(Instant::now() + STOP_GRACE);
                        stop_all(&mut running);
                    }
                }
            },
            Ok(Event::Closed(id)) => {
                let Some(mut r) = running.remove(&id) else {
                    continue;
                };
                // Its output is all read: reap it and see how it ended.
                let status = match r.child.wait() {
                    Ok(s) => s,
                    Err(e) => {
                        ledger.error(format!("cannot wait for worker {id}: {e}"));
                        continue;
                    }
                };
                let err = r.stderr.join().unwrap_or_default();
                if !r.killed && (stop_by.is_none() || !status.success()) {
                    let how = if status.success() {
                        "stopped by itself".to_owned()
                    } else {
                        format!("failed ({status})")
                    };
                    ledger.error(format!(
                        "worker {id} (pid {}) {how}: {}",
                        r.child.id(),
                        err.trim()
                    ));
                    if stop_by.is_none() {
                        stop_by = Some(Instant::now() + STOP_GRACE);
                        stop_all(&mut running);
                    }
                }
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
        let s = ledger.summary();
        progress.set_position(started.elapsed().as_millis().min(u128::from(u64::MAX)) as u64);
        progress.set_message(format!(
            "seq {} pool {} kills {}{}",
            s.sequence_values,
            s.pool_values,
            s.kills,
            if stop_by.is_some() { ", stopping" } else { "" }
        ));
    }
    progress.finish_and_clear();
    result
}

/// Starts one worker and the threads that read its stdout and stderr.
fn spawn(
    plan: &Plan,
    ledger: &mut Ledger,
    tx: &mpsc::Sender<Event>,
    running: &mut HashMap<u32, Running>,
) -> std::io::Result<()> {
    let mut child = Command::new(&plan.exe)
        .args(["verify-worker", "--name", &plan.name])
        // The URL may hold a password: pass it in the environment, not on
        // a command line anyone can read.
        .env("KEYSMITH_STORE", &plan.url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: ctrl-c at the terminal reaches only this
        // process, which then stops the workers cleanly.
        .process_group(0)
        .spawn()?;
    let id = ledger.process_started();
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let tx = tx.clone();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match lines.read_until(b'\n', &mut line) {
                Ok(n) if n > 0 && line.ends_with(b"\n") => {
                    let text = String::from_utf8_lossy(&line[..n - 1]).into_owned();
                    if tx.send(Event::Line(id, text)).is_err() {
                        return;
                    }
                }
                _ => break,
            }
        }
        let _ = tx.send(Event::Closed(id));
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    running.insert(
        id,
        Running {
            stdin: child.stdin.take(),
            child,
            stderr,
            killed: false,
        },
    );
    Ok(())
}

/// SIGKILLs a random worker that is still running. One that has just
/// exited by itself is left alone: its end is reported when its output
/// closes.
fn kill_one(running: &mut HashMap<u32, Running>, ledger: &mut Ledger, rng: &mut impl rand::Rng) {
    let mut alive: Vec<u32> = running
        .iter_mut()
        .filter_map(|(&id, r)| (!r.killed && matches!(r.child.try_wait(), Ok(None))).then_some(id))
        .collect();
    if alive.is_empty() {
        return;
    }
    alive.sort_unstable();
    let id = alive[rng.random_range(0..alive.len())];
    let r = running.get_mut(&id).expect("listed");
    if r.child.kill().is_ok() {
        // SIGKILL on Unix
        r.killed = true;
        ledger.killed();
    }
}

/// Tells every worker to stop: closes its stdin.
fn stop_all(running: &mut HashMap<u32, Running>) {
    for r in running.values_mut() {
        r.stdin = None;
    }
}

/// A bar over the run's length in milliseconds, on stderr, hidden when
/// stderr is not a terminal.
fn progress_bar(run_for: Duration) -> ProgressBar {
    let bar = ProgressBar::new(run_for.as_millis().min(u128::from(u64::MAX)) as u64);
    if let Ok(style) = ProgressStyle::with_template("verify {elapsed_precise} [{bar:30}] {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}
