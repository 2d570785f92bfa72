//! `keysmith-bench compare`: keysmith beside what a user would pick instead,
//! and beside the limit (a bare atomic), in one process run.
//!
//! Every row runs for the same time, one after the other, on the same
//! machine; each says what it guarantees. Rows whose server is not given
//! (`--postgres`, `--mysql`, `--etcd`, `--redis`) are kept in the table as
//! skipped, with the reason.

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keysmith::sequence::{self, Sequence, Strategy};
use keysmith::store::{MAX_VALUE, SequenceSpec, Store};

use super::http;
use super::redis::Redis;

mod native;
mod over_http;
mod timing;

use super::rows::*;
use native::*;
use over_http::*;
pub(crate) use timing::*;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    pub seconds: f64,
    /// Block sizes of the keysmith rows.
    pub blocks: Vec<i64>,
    /// SQLite file directory (a fresh file each run).
    pub dir: std::path::PathBuf,
    pub postgres: Option<String>,
    /// A MySQL/MariaDB database (`mysql://`, feature `mysql`).
    pub mysql: Option<String>,
    pub etcd: Option<String>,
    pub redis: Option<String>,
    /// Run the HTTP rows (an in-process server on 127.0.0.1).
    pub http: bool,
    /// Connections of the saturation HTTP rows.
    pub conns: usize,
    /// Request rate of the fixed-rate latency rows.
    pub rate: f64,
}

/// Runs the comparison. Prints each row to stderr as it is measured.
///
/// # Errors
/// Bad options, or a store or server that fails mid-run.
pub async fn run(o: &Options) -> anyhow::Result<Report> {
    check(o)?;
    let d = Duration::from_secs_f64(o.seconds);
    let mut rows = Rows::default();
    limit_rows(d, &mut rows).await?;
    in_process_rows(d, &mut rows);
    let sqlite_path = o.dir.join(format!(
        "keysmith-compare-{:016x}.db",
        rand::random::<u64>()
    ));
    let stores = stores(o, &format!("sqlite://{}", sqlite_path.display()));
    let result = async {
        store_rows(&stores, o, d, &mut rows).await?;
        native_rows(o, d, &mut rows).await?;
        if o.http {
            http_section(&stores, o, d, &mut rows).await
        } else {
            Ok(Vec::new())
        }
    }
    .await;
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", sqlite_path.display()));
    }
    Ok(Report {
        seconds: o.seconds,
        rows: rows.0,
        latency: result?,
    })
}

/// The rows so far; each is printed to stderr as it comes, with the load.
#[derive(Default)]
struct Rows(Vec<Row>);

impl Rows {
    fn push(&mut self, mut r: Row) {
        if r.values_per_sec.is_some() {
            r.load = loadavg();
        }
        eprintln!("  {}: {}", r.name, fmt_rate(&r));
        self.0.push(r);
    }
}

/// The stores of the keysmith rows: name, URL (none: skipped) and why.
type Stores = Vec<(&'static str, Option<String>, &'static str)>;

fn check(o: &Options) -> anyhow::Result<()> {
    if !(o.seconds > 0.0 && o.seconds <= 600.0) {
        anyhow::bail!(
            "--seconds must be above 0 and at most 600, got {}",
            o.seconds
        );
    }
    if o.blocks.is_empty() {
        anyhow::bail!("--block needs at least one block size");
    }
    for &b in &o.blocks {
        if !(1..=keysmith::store::MAX_RESERVATION).contains(&b) {
            anyhow::bail!(
                "--block must be between 1 and {}, got {b}",
                keysmith::store::MAX_RESERVATION
            );
        }
    }
    if !(o.rate > 0.0 && o.rate <= 1e6) {
        anyhow::bail!("--rate must be above 0 and at most 1000000, got {}", o.rate);
    }
    if !(1..=1024).contains(&o.conns) {
        anyhow::bail!("--conns must be between 1 and 1024, got {}", o.conns);
    }
    if let Some(url) = &o.redis {
        super::redis::parse_url(url)?;
    }
    Ok(())
}

/// The limit, and keysmith's cached next() against it, 1 and 2 threads.
async fn limit_rows(d: Duration, rows: &mut Rows) -> anyhow::Result<()> {
    let cached = cached_handle().await?;
    let overlap = |o: Option<f64>| match o {
        Some(o) => format!("; threads on a CPU at once: {o:.2} on average"),
        None => String::new(),
    };
    for threads in [1usize, 2] {
        let atomic = Padded(AtomicU64::new(0));
        let seq = cached.clone();
        // Six slices of each in turn, so a change in the machine's load
        // weighs on both alike.
        let ((rate, o_base), (ks_rate, o_ks)) = tokio::task::block_in_place(|| {
            let slice = d / 12;
            let (mut a, mut b) = (Slices::default(), Slices::default());
            for _ in 0..6 {
                a.add(
                    slice,
                    on_threads_overlap(threads, slice, || {
                        black_box(atomic.0.fetch_add(1, Ordering::AcqRel));
                    }),
                );
                b.add(
                    slice,
                    on_threads_overlap(threads, slice, || {
                        black_box(seq.try_next());
                    }),
                );
            }
            (a.get(), b.get())
        });
        let base = Row {
            note: format!("on a cache line of its own{}", overlap(o_base)),
            ..measured(
                "limit",
                format!("bare AtomicU64::fetch_add, {threads} thread(s)"),
                LOCAL,
                rate,
            )
        };
        let ks = measured(
            "limit",
            format!("keysmith next(), cached block, {threads} thread(s)"),
            KS_DURABLE,
            ks_rate,
        );
        let ks = Row {
            note: format!(
                "memory store, one block of 2^40: the hot path alone{}",
                overlap(o_ks)
            ),
            ..with_baseline(ks, &base)
        };
        rows.push(base);
        rows.push(ks);
    }
    // Its runtime is dropped off the async threads.
    tokio::task::block_in_place(|| drop(cached));

    Ok(())
}

/// What a user might use instead, in process.
fn in_process_rows(d: Duration, rows: &mut Rows) {
    let uuid = measured(
        "in process",
        "uuid v7 (Uuid::now_v7)",
        Guarantees::new(false, Unique::Probably, Order::Millisecond),
        tokio::task::block_in_place(|| {
            on_threads(1, d, || {
                black_box(uuid::Uuid::now_v7());
            })
        }),
    );
    let ulid = measured(
        "in process",
        "ULID (Ulid::new)",
        Guarantees::new(false, Unique::Probably, Order::Millisecond),
        tokio::task::block_in_place(|| {
            on_threads(1, d, || {
                black_box(ulid::Ulid::new());
            })
        }),
    );
    rows.push(Row {
        note: "128 bits, random within a millisecond: not an integer key".into(),
        ..uuid
    });
    rows.push(Row {
        note: "128 bits, random within a millisecond: not an integer key".into(),
        ..ulid
    });
}

fn stores(o: &Options, sqlite_url: &str) -> Stores {
    vec![
        ("SQLite", Some(sqlite_url.to_owned()), ""),
        ("PostgreSQL", o.postgres.clone(), "no --postgres URL given"),
        (
            "MySQL",
            o.mysql.clone(),
            if cfg!(feature = "mysql") {
                "no --mysql URL given"
            } else {
                "built without the mysql feature"
            },
        ),
        (
            "etcd",
            o.etcd.clone(),
            if cfg!(feature = "etcd") {
                "no --etcd URL given"
            } else {
                "built without the etcd feature"
            },
        ),
    ]
}

/// keysmith on each store, in process.
async fn store_rows(
    stores: &Stores,
    o: &Options,
    d: Duration,
    rows: &mut Rows,
) -> anyhow::Result<()> {
    for (store_name, url, why) in stores {
        // MySQL gets a row per strategy (issue 27); the others the default.
        let strategies: &[Option<Strategy>] = if store_name == &"MySQL" {
            &[
                Some(Strategy::Atomic),
                Some(Strategy::Locked),
                Some(Strategy::Optimistic),
            ]
        } else {
            &[None]
        };
        for &block in &o.blocks {
            for &strategy in strategies {
                let g = if block == 1 { KS_STRICT } else { KS_DURABLE };
                let name = match strategy {
                    Some(st) => format!("keysmith on {store_name}, block {block}, {}", st),
                    None => format!("keysmith on {store_name}, block {block}"),
                };
                let Some(url) = url.as_ref().filter(|_| built_in(store_name)) else {
                    rows.push(skipped("in process", name, g, why));
                    continue;
                };
                let store = keysmith::store::open(url).await?;
                let seq = throwaway(&store, block, strategy).await?;
                let rate = async_rate(d, || async {
                    seq.next().await?;
                    Ok(())
                })
                .await?;
                seq.close().await?;
                sequence::remove(&*store, seq.name()).await?;
                rows.push(measured("in process", name, g, rate));
            }
        }
    }

    Ok(())
}

/// PostgreSQL's, MySQL's and Redis's own ways.
async fn native_rows(o: &Options, d: Duration, rows: &mut Rows) -> anyhow::Result<()> {
    // PostgreSQL.
    match &o.postgres {
        Some(url) => {
            for r in postgres_rows(url, d).await? {
                rows.push(r);
            }
        }
        None => {
            for (name, g) in postgres_names() {
                rows.push(skipped("PostgreSQL", name, g, "no --postgres URL given"));
            }
        }
    }

    // MySQL's own ways.
    match o.mysql.as_ref().filter(|_| cfg!(feature = "mysql")) {
        #[cfg(feature = "mysql")]
        Some(url) => {
            for r in mysql_rows(url, d).await? {
                rows.push(r);
            }
        }
        _ => {
            let why = if cfg!(feature = "mysql") {
                "no --mysql URL given"
            } else {
                "built without the mysql feature"
            };
            for (name, g) in mysql_names() {
                rows.push(skipped("MySQL", name, g, why));
            }
        }
    }

    // Redis INCR: the server given, else a throwaway one if redis-server is installed.
    let mut own_redis = None;
    let redis_url = match &o.redis {
        Some(url) => Some(url.clone()),
        None => match super::redis::Throwaway::start(&o.dir).await? {
            Some(t) => {
                let url = t.url();
                own_redis = Some(t);
                Some(url)
            }
            None => None,
        },
    };
    match redis_url {
        Some(url) => {
            let measured = redis_rows(&url, d).await;
            drop(own_redis);
            for r in measured? {
                rows.push(r);
            }
        }
        None => {
            for (name, g) in redis_names() {
                rows.push(skipped(
                    "Redis",
                    name,
                    g,
                    "no --redis URL given and no redis-server on the PATH",
                ));
            }
        }
    }

    Ok(())
}

/// Over HTTP: an in-process server per store, its own no-op route as the
/// baseline; then strict over HTTP beside each store's bare fsync loop.
async fn http_section(
    stores: &Stores,
    o: &Options,
    d: Duration,
    rows: &mut Rows,
) -> anyhow::Result<Vec<LatencyRow>> {
    let mut latency = Vec::new();
    for (store_name, url, why) in stores {
        let usable = url.as_ref().filter(|_| built_in(store_name));
        let Some(url) = usable else {
            for &block in &o.blocks {
                let g = if block == 1 { KS_STRICT } else { KS_DURABLE };
                rows.push(skipped(
                    "HTTP",
                    format!("POST next, {store_name}, block {block}"),
                    g,
                    why,
                ));
            }
            continue;
        };
        let first = store_name == &"SQLite";
        let (r, l) = http_rows(url, store_name, &o.blocks, d, o, first).await?;
        for r in r {
            rows.push(r);
        }
        latency.extend(l);
    }
    // Strict over HTTP at 1 to 64 connections, beside each store's bare
    // fsync loop (one durable write per value).
    for (store_name, url, why) in stores {
        let usable = url
            .as_ref()
            .filter(|_| store_name != &"etcd" || cfg!(feature = "etcd"));
        let strict = match usable {
            Some(url) => super::strict::rows(store_name, url, &o.dir, d).await?,
            None => super::strict::skipped_rows(store_name, why),
        };
        for r in strict {
            rows.push(r);
        }
    }
    Ok(latency)
}
