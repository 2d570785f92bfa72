//! Does the value pool collide less than a hot row?
//!
//! With 1, 4 and 16 concurrent takers, each wanting one value per store
//! round trip, for a fixed time window each:
//!
//! - `pool`: a [`ValuePool`] of size 100, sample 5, a fresh sample per take
//!   (the pattern as described);
//! - `pool+reuse`: the same with `reuse_sample(true)`;
//! - `seq strict`: a [`Sequence`] with `block(1)` and [`Strategy::Optimistic`].
//!
//! Every taker is a tokio task with its own store connection
//! (`keysmith::store::open(url)`). Prints values per second, conflicts per
//! value, store round trips per value, give-ups (`Contention` errors,
//! after which the taker just tries again) and the slowest taker's share
//! (the fewest values one taker got, as a share of the average, worst
//! round), and checks that no value was handed out twice and, for pools,
//! that no number was lost.
//!
//! Run: `cargo bench -p keysmith --bench pool_contention`. Environment:
//! `KEYSMITH_BENCH_STORE` (a store URL; default a fresh SQLite file in a
//! temporary directory), `KEYSMITH_BENCH_SECS` (window per cell, default 3),
//! `KEYSMITH_BENCH_TAKERS` (comma-separated, default `1,4,16`),
//! `KEYSMITH_BENCH_REPEAT` (rounds over all cells, interleaved so that a
//! noisy neighbour hits every cell alike; default 3).

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use keysmith::Error;
use keysmith::pool::{self, PoolSpec, ValuePool};
use keysmith::sequence::{self, Sequence, Strategy};
use keysmith::store::{SequenceSpec, Store};
use tokio::sync::Barrier;

const POOL_SIZE: i64 = 100;
const SAMPLE: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Pool,
    PoolReuse,
    SeqStrict,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Pool => "pool (N=100, k=5)",
            Kind::PoolReuse => "pool+reuse (N=100, k=5)",
            Kind::SeqStrict => "seq strict optimistic",
        }
    }
}

/// One taker's handle.
enum Taker {
    Pool(ValuePool),
    Seq(Sequence),
}

/// What one taker did in the window.
#[derive(Default)]
struct Tally {
    values: Vec<i64>,
    conflicts: u64,
    round_trips: u64,
    gave_up: u64,
    /// Values of the taker that got the fewest (filled in for a whole cell).
    fewest: usize,
}

/// The store each taker uses: its own connection, except for `memory://`,
/// where a new connection would be a new, empty store.
struct Stores {
    url: String,
    shared: Option<Arc<dyn Store>>,
}

impl Stores {
    async fn connect(&self) -> Arc<dyn Store> {
        match &self.shared {
            Some(s) => Arc::clone(s),
            None => keysmith::store::open(&self.url)
                .await
                .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.url)),
        }
    }
}

/// Runs `takers` tasks of one kind for `window`; returns their sum and how
/// long the window really was.
async fn run_cell(
    stores: Arc<Stores>,
    kind: Kind,
    takers: usize,
    window: Duration,
) -> (Tally, Duration) {
    let admin = stores.connect().await;
    let name = format!("bench-{}-{:?}-{takers}", std::process::id(), kind);
    match kind {
        Kind::Pool | Kind::PoolReuse => {
            pool::create(&*admin, &PoolSpec::new(&name, POOL_SIZE))
                .await
                .unwrap();
        }
        Kind::SeqStrict => {
            sequence::create(&*admin, &SequenceSpec::new(&name))
                .await
                .unwrap();
        }
    }
    let barrier = Arc::new(Barrier::new(takers + 1));
    // One deadline for all, set by whoever passes the barrier first: a task
    // scheduled late does not get a late deadline.
    let deadline = Arc::new(OnceLock::new());
    let mut tasks = Vec::new();
    for _ in 0..takers {
        let stores = Arc::clone(&stores);
        let barrier = Arc::clone(&barrier);
        let deadline = Arc::clone(&deadline);
        let name = name.clone();
        tasks.push(tokio::spawn(async move {
            let store = stores.connect().await;
            let taker = match kind {
                Kind::Pool | Kind::PoolReuse => Taker::Pool(
                    ValuePool::builder()
                        .store(store)
                        .name(&name)
                        .sample(SAMPLE)
                        .reuse_sample(kind == Kind::PoolReuse)
                        .build()
                        .await
                        .unwrap(),
                ),
                Kind::SeqStrict => Taker::Seq(
                    Sequence::builder()
                        .store(store)
                        .name(&name)
                        .block(1)
                        .strategy(Strategy::Optimistic)
                        .build()
                        .await
                        .unwrap(),
                ),
            };
            barrier.wait().await;
            let deadline = *deadline.get_or_init(|| Instant::now() + window);
            let mut tally = Tally::default();
            while Instant::now() < deadline {
                let got = match &taker {
                    Taker::Pool(p) => p.take().await,
                    Taker::Seq(s) => s.next().await,
                };
                match got {
                    Ok(v) => tally.values.push(v),
                    Err(Error::Contention { .. }) => tally.gave_up += 1,
                    Err(e) => panic!("{name}: {e}"),
                }
            }
            match &taker {
                Taker::Pool(p) => {
                    let s = p.stats();
                    tally.conflicts = s.conflicts;
                    tally.round_trips = s.samples + s.attempts;
                }
                Taker::Seq(s) => {
                    let st = s.stats();
                    tally.conflicts = st.conflicts;
                    // Each conflict is one failed conditional put; reads are
                    // only needed when the remembered row is missing.
                    tally.round_trips = st.reservations + st.conflicts;
                }
            }
            tally
        }));
    }
    barrier.wait().await;
    let started = *deadline.get_or_init(|| Instant::now() + window) - window;
    let mut total = Tally::default();
    let mut fewest = usize::MAX;
    for t in tasks {
        let t = t.await.unwrap();
        fewest = fewest.min(t.values.len());
        total.values.extend(t.values);
        total.conflicts += t.conflicts;
        total.round_trips += t.round_trips;
        total.gave_up += t.gave_up;
    }
    let elapsed = started.elapsed();
    let unique: HashSet<i64> = total.values.iter().copied().collect();
    assert_eq!(
        unique.len(),
        total.values.len(),
        "{name}: a value was handed out twice"
    );
    match kind {
        Kind::Pool | Kind::PoolReuse => {
            let info = pool::describe(&*admin, &name).await.unwrap();
            assert_eq!(info.taken as usize, total.values.len(), "{name}: holes");
            pool::remove(&*admin, &name).await.unwrap();
        }
        Kind::SeqStrict => sequence::remove(&*admin, &name).await.unwrap(),
    }
    total.fewest = fewest;
    (total, elapsed)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let url = std::env::var("KEYSMITH_BENCH_STORE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("bench.db").display()));
    let secs: f64 = std::env::var("KEYSMITH_BENCH_SECS")
        .ok()
        .map(|s| s.parse().expect("KEYSMITH_BENCH_SECS: a number of seconds"))
        .unwrap_or(3.0);
    let takers: Vec<usize> = std::env::var("KEYSMITH_BENCH_TAKERS")
        .ok()
        .map(|s| {
            s.split(',')
                .map(|t| {
                    t.trim()
                        .parse()
                        .expect("KEYSMITH_BENCH_TAKERS: e.g. 1,4,16")
                })
                .collect()
        })
        .unwrap_or_else(|| vec![1, 4, 16]);
    let window = Duration::from_secs_f64(secs);

    let repeat: usize = std::env::var("KEYSMITH_BENCH_REPEAT")
        .ok()
        .map(|s| s.parse().expect("KEYSMITH_BENCH_REPEAT: a count"))
        .unwrap_or(3)
        .max(1);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let shared = if url.starts_with("memory://") {
            Some(keysmith::store::open(&url).await.unwrap())
        } else {
            None
        };
        let stores = Arc::new(Stores {
            url: url.clone(),
            shared,
        });
        println!(
            "store: {url}\nwindow: {secs} s per cell, {repeat} rounds (cells interleaved, figures summed over rounds); \
             each taker a tokio task with its own connection; {} cores\n",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        let kinds = [Kind::Pool, Kind::PoolReuse, Kind::SeqStrict];
        // (values, seconds, conflicts, round trips, gave up, per-round rates,
        // fewest values of one taker as a share of the average)
        let mut sums = vec![
            (0usize, 0f64, 0u64, 0u64, 0u64, Vec::new(), f64::INFINITY);
            takers.len() * kinds.len()
        ];
        for _ in 0..repeat {
            for (ti, &t) in takers.iter().enumerate() {
                for (ki, &kind) in kinds.iter().enumerate() {
                    let (tally, elapsed) = run_cell(Arc::clone(&stores), kind, t, window).await;
                    let cell = &mut sums[ti * kinds.len() + ki];
                    cell.0 += tally.values.len();
                    cell.1 += elapsed.as_secs_f64();
                    cell.2 += tally.conflicts;
                    cell.3 += tally.round_trips;
                    cell.4 += tally.gave_up;
                    cell.5
                        .push(tally.values.len() as f64 / elapsed.as_secs_f64());
                    let avg = tally.values.len() as f64 / t as f64;
                    cell.6 = cell.6.min(tally.fewest as f64 / avg.max(1.0));
                }
            }
        }
        println!(
            "| takers | what | values | values/s | values/s per round (min-max) | conflicts/value | round trips/value | gave up | slowest taker |"
        );
        println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
        for (ti, &t) in takers.iter().enumerate() {
            for (ki, &kind) in kinds.iter().enumerate() {
                let (values, secs, conflicts, trips, gave_up, rates, fewest) =
                    &sums[ti * kinds.len() + ki];
                let n = (*values).max(1) as f64;
                let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = rates.iter().copied().fold(0.0, f64::max);
                println!(
                    "| {t} | {} | {values} | {:.0} | {lo:.0}-{hi:.0} | {:.3} | {:.2} | {gave_up} | {:.0}% |",
                    kind.label(),
                    *values as f64 / secs,
                    *conflicts as f64 / n,
                    *trips as f64 / n,
                    fewest * 100.0,
                );
            }
        }
    });
}
