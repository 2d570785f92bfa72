//! `keysmith bench compare`: keysmith beside what a user would pick instead,
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
use serde::Serialize;

use super::http;
use super::redis::Redis;

/// The bare atomic on a cache line of its own, as keysmith's cursor is.
#[repr(align(128))]
pub(crate) struct Padded(pub(crate) AtomicU64);

/// What a row's values are guaranteed to be.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Guarantees {
    /// A value is on disk (committed) before it is returned: a crash never
    /// hands it out again.
    pub durable: bool,
    /// Unique across processes and hosts (not only in this process).
    pub unique_across_processes: Unique,
    /// How values are ordered.
    pub ordered: Order,
}

/// How unique across processes.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Unique {
    /// Only within one process.
    No,
    /// With overwhelming probability (random bits).
    Probably,
    /// Yes, by a store.
    Yes,
    /// Yes, until a crash (then a value may come again).
    UntilCrash,
}

/// How ordered.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Increasing in time order across all callers.
    Global,
    /// Increasing per handle (or session / process).
    PerHandle,
    /// Sorted by the millisecond of creation; random within one.
    Millisecond,
}

impl Guarantees {
    const fn new(durable: bool, unique: Unique, ordered: Order) -> Self {
        Guarantees {
            durable,
            unique_across_processes: unique,
            ordered,
        }
    }
}

/// One line of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// "limit", "in process", "HTTP", "PostgreSQL", "Redis".
    pub group: String,
    pub name: String,
    pub guarantees: Guarantees,
    /// `None` when skipped.
    pub values_per_sec: Option<f64>,
    /// For HTTP rows: requests per second.
    pub requests_per_sec: Option<f64>,
    /// The row measured against, and this row's share of it.
    pub baseline: Option<(String, f64)>,
    /// Why skipped, or what else to know.
    pub note: String,
    /// The machine's 1-minute load average when the row was done (Linux).
    pub load: Option<f64>,
}

/// The 1-minute load average, from `/proc/loadavg` (Linux); `None` elsewhere.
pub fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A latency line measured at a fixed request rate.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    pub name: String,
    pub rate: f64,
    pub achieved: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// The 1-minute load average when the row was done.
    pub load: Option<f64>,
}

impl LatencyRow {
    /// The percentiles of `l`, a load sent at `rate` requests a second.
    pub fn of(name: String, rate: f64, l: &super::http::Load) -> LatencyRow {
        LatencyRow {
            name,
            rate,
            achieved: l.per_sec(),
            p50_us: us_f(l.pct(0.5)),
            p99_us: us_f(l.pct(0.99)),
            p999_us: us_f(l.pct(0.999)),
            max_us: us_f(l.latencies.last().copied()),
            load: loadavg(),
        }
    }
}

/// What `bench compare` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub seconds: f64,
    pub rows: Vec<Row>,
    pub latency: Vec<LatencyRow>,
}

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

const KS_DURABLE: Guarantees = Guarantees::new(true, Unique::Yes, Order::PerHandle);
pub(crate) const KS_STRICT: Guarantees = Guarantees::new(true, Unique::Yes, Order::Global);
const LOCAL: Guarantees = Guarantees::new(false, Unique::No, Order::PerHandle);

fn row(group: &str, name: impl Into<String>, g: Guarantees) -> Row {
    Row {
        group: group.into(),
        name: name.into(),
        guarantees: g,
        values_per_sec: None,
        requests_per_sec: None,
        baseline: None,
        note: String::new(),
        load: None,
    }
}

pub(crate) fn skipped(group: &str, name: impl Into<String>, g: Guarantees, why: &str) -> Row {
    Row {
        note: format!("skipped: {why}"),
        ..row(group, name, g)
    }
}

pub(crate) fn measured(group: &str, name: impl Into<String>, g: Guarantees, per_sec: f64) -> Row {
    Row {
        values_per_sec: Some(per_sec),
        ..row(group, name, g)
    }
}

/// Calls `op` on `threads` threads for `d`; returns calls per second, all threads together.
fn on_threads(threads: usize, d: Duration, op: impl Fn() + Sync) -> f64 {
    on_threads_overlap(threads, d, op).0
}

/// The CPU time this thread has run, from the kernel's scheduler
/// statistics (Linux); `None` elsewhere.
fn thread_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        s.split_whitespace().next()?.parse().ok()?,
    ))
}

/// As [`on_threads`], and how many of the threads were on a CPU at once on
/// average (their CPU time over the wall time; 2.0 for two threads that ran
/// together throughout), if the kernel says.
pub(crate) fn on_threads_overlap(
    threads: usize,
    d: Duration,
    op: impl Fn() + Sync,
) -> (f64, Option<f64>) {
    let barrier = std::sync::Barrier::new(threads);
    let start = Instant::now();
    let per: Vec<(u64, Option<Duration>)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let cpu0 = thread_cpu();
                    let t = Instant::now();
                    let mut n = 0u64;
                    while t.elapsed() < d {
                        for _ in 0..4096 {
                            op();
                        }
                        n += 4096;
                    }
                    let cpu = cpu0.zip(thread_cpu()).map(|(a, b)| b.saturating_sub(a));
                    (n, cpu)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or((0, None)))
            .collect()
    });
    let wall = start.elapsed().as_secs_f64();
    let total: u64 = per.iter().map(|p| p.0).sum();
    let cpu: Option<f64> = per
        .iter()
        .map(|p| p.1.map(|c| c.as_secs_f64()))
        .sum::<Option<f64>>();
    (total as f64 / wall, cpu.map(|c| c / wall))
}

/// Rates and overlaps of equal slices, averaged.
#[derive(Default)]
struct Slices {
    rate: f64,
    overlap: Option<f64>,
    n: u32,
    all_overlaps: bool,
}

impl Slices {
    fn add(&mut self, _slice: Duration, (rate, overlap): (f64, Option<f64>)) {
        if self.n == 0 {
            self.all_overlaps = true;
        }
        self.n += 1;
        self.rate += rate;
        match overlap {
            Some(o) => *self.overlap.get_or_insert(0.0) += o,
            None => self.all_overlaps = false,
        }
    }

    fn get(&self) -> (f64, Option<f64>) {
        let n = f64::from(self.n.max(1));
        let o = self.overlap.filter(|_| self.all_overlaps).map(|o| o / n);
        (self.rate / n, o)
    }
}

/// Calls `op` on one task for `d`; returns calls per second.
async fn async_rate<F, Fut>(d: Duration, mut op: F) -> anyhow::Result<f64>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed() < d {
        op().await?;
        n += 1;
    }
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

pub(crate) fn with_baseline(mut r: Row, base: &Row) -> Row {
    if let (Some(v), Some(b)) = (r.values_per_sec, base.values_per_sec) {
        r.baseline = Some((base.name.clone(), v / b));
    }
    r
}

/// Runs the comparison. Prints each row to stderr as it is measured.
///
/// # Errors
/// Bad options, or a store or server that fails mid-run.
pub async fn run(o: &Options) -> anyhow::Result<Report> {
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
    let d = Duration::from_secs_f64(o.seconds);
    let mut rows = Vec::new();
    let mut push = |mut r: Row| {
        if r.values_per_sec.is_some() {
            r.load = loadavg();
        }
        eprintln!("  {}: {}", r.name, fmt_rate(&r));
        rows.push(r);
    };

    // The limit, and keysmith's cached next() against it, 1 and 2 threads.
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
        push(base);
        push(ks);
    }
    // Its runtime is dropped off the async threads.
    tokio::task::block_in_place(|| drop(cached));

    // What a user might use instead, in process.
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
    push(Row {
        note: "128 bits, random within a millisecond: not an integer key".into(),
        ..uuid
    });
    push(Row {
        note: "128 bits, random within a millisecond: not an integer key".into(),
        ..ulid
    });

    // keysmith on each store, in process.
    let sqlite_path = o.dir.join(format!(
        "keysmith-compare-{:016x}.db",
        rand::random::<u64>()
    ));
    let sqlite_url = format!("sqlite://{}", sqlite_path.display());
    let stores: Vec<(&str, Option<String>, &str)> = vec![
        ("SQLite", Some(sqlite_url.clone()), ""),
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
    ];
    for (store_name, url, why) in &stores {
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
                    push(skipped("in process", name, g, why));
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
                push(measured("in process", name, g, rate));
            }
        }
    }

    // PostgreSQL's own ways.
    match &o.postgres {
        Some(url) => {
            for r in postgres_rows(url, d).await? {
                push(r);
            }
        }
        None => {
            for (name, g) in postgres_names() {
                push(skipped("PostgreSQL", name, g, "no --postgres URL given"));
            }
        }
    }

    // MySQL's own ways.
    match o.mysql.as_ref().filter(|_| cfg!(feature = "mysql")) {
        #[cfg(feature = "mysql")]
        Some(url) => {
            for r in mysql_rows(url, d).await? {
                push(r);
            }
        }
        _ => {
            let why = if cfg!(feature = "mysql") {
                "no --mysql URL given"
            } else {
                "built without the mysql feature"
            };
            for (name, g) in mysql_names() {
                push(skipped("MySQL", name, g, why));
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
            let rows = redis_rows(&url, d).await;
            drop(own_redis);
            for r in rows? {
                push(r);
            }
        }
        None => {
            for (name, g) in redis_names() {
                push(skipped(
                    "Redis",
                    name,
                    g,
                    "no --redis URL given and no redis-server on the PATH",
                ));
            }
        }
    }

    // Over HTTP: an in-process server per store, its own no-op route as the baseline.
    let mut latency = Vec::new();
    if o.http {
        for (store_name, url, why) in &stores {
            let usable = url.as_ref().filter(|_| built_in(store_name));
            let Some(url) = usable else {
                for &block in &o.blocks {
                    let g = if block == 1 { KS_STRICT } else { KS_DURABLE };
                    push(skipped(
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
                push(r);
            }
            latency.extend(l);
        }
        // Strict over HTTP at 1 to 64 connections, beside each store's bare
        // fsync loop (one durable write per value).
        for (store_name, url, why) in &stores {
            let usable = url
                .as_ref()
                .filter(|_| store_name != &"etcd" || cfg!(feature = "etcd"));
            let rows = match usable {
                Some(url) => super::strict::rows(store_name, url, &o.dir, d).await?,
                None => super::strict::skipped_rows(store_name, why),
            };
            for r in rows {
                push(r);
            }
        }
    }
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", sqlite_path.display()));
    }
    Ok(Report {
        seconds: o.seconds,
        rows,
        latency,
    })
}

/// A blocking handle whose one block never runs out.
pub(crate) async fn cached_handle() -> anyhow::Result<Arc<keysmith::sequence::BlockingSequence>> {
    tokio::task::spawn_blocking(|| {
        let rt = tokio::runtime::Builder::new_current_thread().build()?;
        let store: Arc<dyn Store> = Arc::new(keysmith::store::memory::MemoryStore::new());
        let spec = SequenceSpec {
            name: "hot".into(),
            start: 1,
            max: MAX_VALUE,
            block: 1 << 40,
            failover_skip: None,
        };
        rt.block_on(sequence::create(&*store, &spec))?;
        drop(rt);
        let seq = Sequence::builder()
            .store(store)
            .name("hot")
            .build_blocking()?;
        seq.next()?; // the first block
        Ok(Arc::new(seq))
    })
    .await?
}

/// Extension so the hot loop reads plainly.
trait TryNext {
    fn try_next(&self) -> i64;
}

impl TryNext for Arc<keysmith::sequence::BlockingSequence> {
    #[inline]
    fn try_next(&self) -> i64 {
        self.next().unwrap_or(-1)
    }
}

async fn throwaway(
    store: &Arc<dyn Store>,
    block: i64,
    strategy: Option<Strategy>,
) -> anyhow::Result<Sequence> {
    let name = super::rate::bench_sequence(&**store).await?;
    let mut b = Sequence::builder()
        .store(store.clone())
        .name(&name)
        .block(block);
    if let Some(st) = strategy {
        b = b.strategy(st);
    }
    Ok(b.build().await?)
}

/// Whether this build has the store's backend (etcd and MySQL are features).
fn built_in(store_name: &str) -> bool {
    (store_name != "etcd" || cfg!(feature = "etcd"))
        && (store_name != "MySQL" || cfg!(feature = "mysql"))
}

fn mysql_names() -> Vec<(String, Guarantees)> {
    vec![
        (
            "UPDATE ... SET v = LAST_INSERT_ID(v + 1) per value".into(),
            Guarantees::new(true, Unique::Yes, Order::Global),
        ),
        (
            "INSERT into an AUTO_INCREMENT table per value".into(),
            Guarantees::new(true, Unique::Yes, Order::PerHandle),
        ),
    ]
}

/// MySQL's own ways of numbering, on one connection with the store's TLS,
/// credentials and session (autocommit: each statement a durable commit).
#[cfg(feature = "mysql")]
async fn mysql_rows(url: &str, d: Duration) -> anyhow::Result<Vec<Row>> {
    use keysmith::store::mysql::mysql_async::prelude::Queryable;
    let mut conn = keysmith::store::mysql::connect(url).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot connect to MySQL at {}: {e}",
            keysmith::store::redact_url(url)
        )
    })?;
    let tag = format!("{:016x}", rand::random::<u64>());
    let (t, a) = (
        format!("ks_cmp_counter_{tag}"),
        format!("ks_cmp_auto_{tag}"),
    );
    conn.query_drop(format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB"
    ))
    .await?;
    conn.query_drop(format!("INSERT INTO {t} VALUES (1, 0)"))
        .await?;
    conn.query_drop(format!(
        "CREATE TABLE {a} (id BIGINT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB"
    ))
    .await?;
    let stmts = [
        format!("UPDATE {t} SET v = LAST_INSERT_ID(v + 1) WHERE id = 1"),
        format!("INSERT INTO {a} () VALUES ()"),
    ];
    let notes = [
        "the MySQL sequence-table idiom: one durable commit per value, the value from the OK packet",
        "one durable commit per value (and a row per value); the counter survives restarts since MySQL 8 and MariaDB 10.2",
    ];
    let conn = tokio::sync::Mutex::new(conn);
    let mut out = Vec::new();
    for (((name, g), sql), note) in mysql_names().into_iter().zip(stmts).zip(notes) {
        let rate = async_rate(d, || async {
            let mut c = conn.lock().await;
            c.exec_drop(&sql, ()).await?;
            black_box(c.last_insert_id());
            Ok(())
        })
        .await?;
        out.push(Row {
            note: note.into(),
            ..measured("MySQL", name, g, rate)
        });
    }
    let mut conn = conn.into_inner();
    conn.query_drop(format!("DROP TABLE {t}, {a}")).await?;
    let _ = conn.disconnect().await;
    Ok(out)
}

fn postgres_names() -> Vec<(String, Guarantees)> {
    let nextval = Guarantees::new(false, Unique::UntilCrash, Order::Global);
    vec![
        ("nextval, no cache".into(), nextval),
        (
            "nextval, CACHE 1000".into(),
            Guarantees::new(false, Unique::UntilCrash, Order::PerHandle),
        ),
        (
            "UPDATE ... RETURNING per value".into(),
            Guarantees::new(true, Unique::Yes, Order::Global),
        ),
    ]
}

async fn postgres_rows(url: &str, d: Duration) -> anyhow::Result<Vec<Row>> {
    // The store's own connector: the URL's TLS settings and credentials.
    let client = keysmith::store::postgres::connect(url).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot connect to PostgreSQL at {}: {e}",
            keysmith::store::redact_url(url)
        )
    })?;
    let tag = format!("{:016x}", rand::random::<u64>());
    let (s0, s1, t) = (
        format!("ks_cmp_nocache_{tag}"),
        format!("ks_cmp_cache_{tag}"),
        format!("ks_cmp_counter_{tag}"),
    );
    client
        .batch_execute(&format!(
            "CREATE SEQUENCE {s0}; CREATE SEQUENCE {s1} CACHE 1000;
             CREATE TABLE {t} (id int PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO {t} VALUES (1, 0);"
        ))
        .await?;
    let mut out = Vec::new();
    let names = postgres_names();
    let stmts = [
        format!("SELECT nextval('{s0}')"),
        format!("SELECT nextval('{s1}')"),
        format!("UPDATE {t} SET v = v + 1 WHERE id = 1 RETURNING v"),
    ];
    for ((name, g), sql) in names.into_iter().zip(stmts) {
        let stmt = client.prepare(&sql).await?;
        let rate = async_rate(d, || async {
            let r = client.query_one(&stmt, &[]).await?;
            black_box(r.get::<_, i64>(0));
            Ok(())
        })
        .await?;
        let note = if g.durable {
            "one synchronously committed UPDATE per value"
        } else {
            "WAL written once per 32 values (or per cache refill), commit waits for nothing: see BENCHMARKS.md"
        };
        out.push(Row {
            note: note.into(),
            ..measured("PostgreSQL", name, g, rate)
        });
    }
    client
        .batch_execute(&format!(
            "DROP SEQUENCE {s0}; DROP SEQUENCE {s1}; DROP TABLE {t};"
        ))
        .await?;
    drop(client);
    Ok(out)
}

fn redis_names() -> Vec<(String, Guarantees)> {
    vec![
        (
            "INCR, appendfsync always".into(),
            Guarantees::new(true, Unique::Yes, Order::Global),
        ),
        (
            "INCR, no persistence".into(),
            Guarantees::new(false, Unique::UntilCrash, Order::Global),
        ),
    ]
}

/// Sets the server's persistence for each row and puts it back afterwards:
/// give a throwaway server.
async fn redis_rows(url: &str, d: Duration) -> anyhow::Result<Vec<Row>> {
    let mut r = Redis::connect(url).await?;
    let before_aof = r.config_get("appendonly").await?;
    let before_fsync = r.config_get("appendfsync").await?;
    let before_save = r.config_get("save").await?;
    let key = format!("keysmith-compare-{:016x}", rand::random::<u64>());
    let mut out = Vec::new();
    for (i, (name, g)) in redis_names().into_iter().enumerate() {
        if i == 0 {
            r.call(&["CONFIG", "SET", "appendonly", "yes"]).await?;
            r.call(&["CONFIG", "SET", "appendfsync", "always"]).await?;
            // Enabling the log rewrites it in the background first.
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) {
                let info = r.call(&["INFO", "persistence"]).await?;
                let busy = matches!(&info, super::redis::Reply::Bulk(Some(b))
                    if String::from_utf8_lossy(b).contains("aof_rewrite_in_progress:1"));
                if !busy {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        } else {
            r.call(&["CONFIG", "SET", "appendonly", "no"]).await?;
            r.call(&["CONFIG", "SET", "save", ""]).await?;
        }
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed() < d {
            black_box(r.incr(&key).await?);
            n += 1;
        }
        let note = if g.durable {
            "every write fsynced before the reply"
        } else {
            "memory only: a restart starts the counter again"
        };
        out.push(Row {
            note: note.into(),
            ..measured("Redis", name, g, n as f64 / t.elapsed().as_secs_f64())
        });
    }
    r.call(&["DEL", &key]).await?;
    if let Some(v) = before_save {
        r.call(&["CONFIG", "SET", "save", &v]).await?;
    }
    if let Some(v) = before_aof {
        r.call(&["CONFIG", "SET", "appendonly", &v]).await?;
    }
    if let Some(v) = before_fsync {
        r.call(&["CONFIG", "SET", "appendfsync", &v]).await?;
    }
    Ok(out)
}

/// Starts a server over `url` on 127.0.0.1:0 (no adaptive block: each
/// sequence keeps its block), measures its no-op route and `next` per block,
/// `next?count=1000` and `reserve`, and (`latency`) latencies at a fixed rate.
async fn http_rows(
    url: &str,
    store_name: &str,
    blocks: &[i64],
    d: Duration,
    o: &Options,
    latency: bool,
) -> anyhow::Result<(Vec<Row>, Vec<LatencyRow>)> {
    let config = keysmith_server::Config {
        listen: "127.0.0.1:0".parse()?,
        store_url: url.to_owned(),
        adaptive: None,
        ..keysmith_server::Config::default()
    };
    let server = keysmith_server::Server::bind(config).await?;
    let addr = server.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.run(async {
        let _ = stop_rx.await;
    }));
    let result = http_measure(addr, store_name, blocks, d, o, latency).await;
    let _ = stop_tx.send(());
    serving.await??;
    result
}

async fn http_measure(
    addr: SocketAddr,
    store_name: &str,
    blocks: &[i64],
    d: Duration,
    o: &Options,
    latency: bool,
) -> anyhow::Result<(Vec<Row>, Vec<LatencyRow>)> {
    let mut rows = Vec::new();
    let mut lat = Vec::new();
    let livez_req = http::request("GET", "/livez");
    // Warm-up, then the baseline.
    http::load(
        addr,
        &livez_req,
        o.conns,
        d.min(Duration::from_millis(300)),
        None,
    )
    .await?;
    let livez = http::load(addr, &livez_req, o.conns, d, None).await?;
    let base = Row {
        requests_per_sec: Some(livez.per_sec()),
        note: format!(
            "the server's no-op route: the HTTP ceiling; {} connections",
            o.conns
        ),
        ..measured(
            "HTTP",
            format!("GET /livez ({store_name} server)"),
            LOCAL,
            livez.per_sec(),
        )
    };
    let tag = format!("{:08x}", rand::random::<u32>());
    let mut created = Vec::new();
    let mut rows_next = Vec::new();
    for &block in blocks {
        let name = format!("cmp-{tag}-{block}");
        // A fresh connection per admin call: the server closes idle ones.
        let mut admin = http::Conn::open(addr).await?;
        let (status, body) = admin
            .call(&http::json_request(
                "POST",
                "/v1/sequences",
                &format!(r#"{{"name":"{name}","block":{block}}}"#),
            ))
            .await?;
        if status != 201 {
            anyhow::bail!(
                "creating {name} over HTTP: {status} {}",
                String::from_utf8_lossy(body)
            );
        }
        created.push(name.clone());
        let req = http::request("POST", &format!("/v1/sequences/{name}/next"));
        // Slices of this route and of /livez in turn, so a change in the
        // machine's load during the row weighs on both alike.
        let (l, paired) = interleaved(addr, &req, &livez_req, o.conns, d).await?;
        check_failed(&l, &name)?;
        let g = if block == 1 { KS_STRICT } else { KS_DURABLE };
        let r = Row {
            requests_per_sec: Some(l.per_sec()),
            note: format!(
                "count=1; p50 {} us, p99.9 {} us at saturation; /livez in the slices between: {}/s",
                us(l.pct(0.5)),
                us(l.pct(0.999)),
                human(paired.per_sec())
            ),
            baseline: Some((
                "GET /livez, interleaved".into(),
                l.per_sec() / paired.per_sec(),
            )),
            ..measured(
                "HTTP",
                format!("POST next, {store_name}, block {block}"),
                g,
                l.per_sec(),
            )
        };
        rows_next.push(r);
    }
    let big = *blocks.iter().max().unwrap_or(&10_000);
    let bulk_name = created.last().cloned().unwrap_or_default();
    let req = http::request(
        "POST",
        &format!("/v1/sequences/{bulk_name}/next?count=1000"),
    );
    let l = http::load(addr, &req, o.conns, d, None).await?;
    check_failed(&l, &bulk_name)?;
    let bulk = Row {
        requests_per_sec: Some(l.per_sec()),
        note: format!("block {big}; a JSON array of 1000 values per answer"),
        ..measured(
            "HTTP",
            format!("POST next?count=1000, {store_name}"),
            KS_DURABLE,
            l.per_sec() * 1000.0,
        )
    };
    let reserve_n: i64 = 1_000_000;
    let req = http::request(
        "POST",
        &format!("/v1/sequences/{bulk_name}/reserve?count={reserve_n}"),
    );
    let l = http::load(addr, &req, o.conns, d, None).await?;
    check_failed(&l, &bulk_name)?;
    let reserve = Row {
        requests_per_sec: Some(l.per_sec()),
        note: format!(
            "a leased range of {reserve_n} values per answer, one store reservation each; the client hands them out"
        ),
        ..measured(
            "HTTP",
            format!("POST reserve?count={reserve_n}, {store_name}"),
            KS_DURABLE,
            l.per_sec() * reserve_n as f64,
        )
    };
    if latency {
        let next_req = http::request("POST", &format!("/v1/sequences/{bulk_name}/next"));
        for (label, req) in [
            ("GET /livez".to_string(), &livez_req),
            (format!("POST next, {store_name}, block {big}"), &next_req),
        ] {
            let l = http::load(addr, req, o.conns, d, Some(o.rate)).await?;
            check_failed(&l, &label)?;
            lat.push(LatencyRow::of(label, o.rate, &l));
        }
    }
    rows.push(base);
    rows.extend(rows_next);
    rows.push(bulk);
    rows.push(reserve);
    for name in created {
        http::Conn::open(addr)
            .await?
            .call(&http::request("DELETE", &format!("/v1/sequences/{name}")))
            .await?;
    }
    Ok((rows, lat))
}

/// `req` and `base` in alternating slices (six each) for `d` in all; the
/// loads of each, summed.
async fn interleaved(
    addr: SocketAddr,
    req: &[u8],
    base: &[u8],
    conns: usize,
    d: Duration,
) -> anyhow::Result<(http::Load, http::Load)> {
    const SLICES: u32 = 6;
    let slice = d / (2 * SLICES);
    let (mut a, mut b) = (http::Load::default(), http::Load::default());
    for _ in 0..SLICES {
        for (load, r) in [(&mut a, req), (&mut b, base)] {
            let l = http::load(addr, r, conns, slice, None).await?;
            load.requests += l.requests;
            load.seconds += l.seconds;
            load.failed += l.failed;
            load.latencies.extend(l.latencies);
        }
    }
    a.latencies.sort_unstable();
    b.latencies.sort_unstable();
    Ok((a, b))
}

fn check_failed(l: &http::Load, what: &str) -> anyhow::Result<()> {
    if l.failed > 0 {
        anyhow::bail!("{what}: {} of {} requests failed", l.failed, l.requests);
    }
    Ok(())
}

fn us(ns: Option<u64>) -> String {
    format!("{:.0}", us_f(ns))
}

fn us_f(ns: Option<u64>) -> f64 {
    ns.unwrap_or(0) as f64 / 1000.0
}

/// `1.23 M/s`, or the skip note.
pub fn fmt_rate(r: &Row) -> String {
    match r.values_per_sec {
        Some(v) => format!("{}/s", human(v)),
        None => r.note.clone(),
    }
}

/// 3 significant digits with k/M/G.
pub fn human(v: f64) -> String {
    let (d, unit) = if v >= 1e9 {
        (v / 1e9, " G")
    } else if v >= 1e6 {
        (v / 1e6, " M")
    } else if v >= 1e3 {
        (v / 1e3, " k")
    } else {
        (v, " ")
    };
    let s = if d >= 100.0 {
        format!("{d:.0}")
    } else if d >= 10.0 {
        format!("{d:.1}")
    } else {
        format!("{d:.2}")
    };
    format!("{s}{unit}").trim_end().to_owned()
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

impl Unique {
    fn label(self) -> &'static str {
        match self {
            Unique::No => "no (one process)",
            Unique::Probably => "probably (random bits)",
            Unique::Yes => "yes",
            Unique::UntilCrash => "until a crash",
        }
    }
}

impl Order {
    fn label(self) -> &'static str {
        match self {
            Order::Global => "increasing, time order",
            Order::PerHandle => "increasing per handle",
            Order::Millisecond => "by millisecond",
        }
    }
}

/// The report as Markdown tables.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{} s per row, one after the other in one process; load: the machine's 1-minute load average when the row was done.\n\n",
        r.seconds
    ));
    s.push_str("| group | what | values/s | share of baseline | durable before returned | unique across processes | ordered | load | note |\n");
    s.push_str("| --- | --- | ---: | ---: | --- | --- | --- | ---: | --- |\n");
    for row in &r.rows {
        let v = row.values_per_sec.map(human).unwrap_or_else(|| "–".into());
        let share = row
            .baseline
            .as_ref()
            .map(|(b, x)| format!("{x:.2} of {b}"))
            .unwrap_or_default();
        let load = row.load.map(|l| format!("{l:.2}")).unwrap_or_default();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.group,
            row.name,
            v,
            share,
            yes_no(row.guarantees.durable),
            row.guarantees.unique_across_processes.label(),
            row.guarantees.ordered.label(),
            load,
            row.note
        ));
    }
    if !r.latency.is_empty() {
        s.push_str("\nLatency at a fixed request rate (open loop over the same connections; a request held up by the answer before it counts from when it was due):\n\n");
        s.push_str("| route | rate asked | rate served | p50 | p99 | p99.9 | max | load |\n");
        s.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for l in &r.latency {
            s.push_str(&format!(
                "| {} | {:.0}/s | {:.0}/s | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {} |\n",
                l.name,
                l.rate,
                l.achieved,
                l.p50_us,
                l.p99_us,
                l.p999_us,
                l.max_us,
                l.load.map(|x| format!("{x:.2}")).unwrap_or_default()
            ));
        }
    }
    s
}
