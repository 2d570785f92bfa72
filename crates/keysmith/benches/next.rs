//! Cached `next()` against a bare `AtomicU64::fetch_add`, on one thread and
//! on two, in the same run; and durable allocation on SQLite by block size.
//!
//! `cargo bench -p keysmith --bench next`

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keysmith::sequence::{self, BlockingSequence, Sequence};
use keysmith::store::{MAX_VALUE, SequenceSpec, Store, memory::MemoryStore, sqlite::SqliteStore};

/// A blocking handle whose blocks are so large that the benchmark never
/// leaves the cache: this measures the hot path alone.
fn cached_handle() -> BlockingSequence {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let spec = SequenceSpec {
        name: "b".into(),
        start: 1,
        max: MAX_VALUE,
        block: 1 << 40,
        failover_skip: None,
        start_below_dropped: false,
    };
    rt.block_on(sequence::create(&*store, &spec)).unwrap();
    Sequence::builder()
        .store(store)
        .name("b")
        .build_blocking()
        .unwrap()
}

/// Runs `op` `iters` times split over `threads` threads; returns wall time.
fn on_threads(threads: u64, iters: u64, op: impl Fn() + Sync) -> Duration {
    let barrier = Barrier::new(threads as usize);
    let per = iters / threads;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let t = Instant::now();
                    for _ in 0..per {
                        op();
                    }
                    t.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    })
}

/// The bare atomic on a cache line of its own (128 bytes, as the cache's
/// cursor): unpadded, it shares a line with what the threads read on every
/// call (the closure's captures), and two threads then slow each other more
/// than the atomic alone would.
#[repr(align(128))]
struct Padded(AtomicU64);

fn hot_path(c: &mut Criterion) {
    let seq = cached_handle();
    let atomic = Padded(AtomicU64::new(0));
    for threads in [1u64, 2] {
        let mut g = c.benchmark_group(format!("next_{threads}_thread"));
        g.throughput(Throughput::Elements(1));
        g.bench_function("bare_atomic_fetch_add", |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, || {
                    black_box(atomic.0.fetch_add(1, Ordering::AcqRel));
                })
            })
        });
        g.bench_function("sequence_next_cached", |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, || {
                    black_box(seq.next().unwrap());
                })
            })
        });
        g.finish();
    }
}

fn durable_sqlite(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        rt.block_on(SqliteStore::open(dir.path().join("b.db")))
            .unwrap(),
    );
    let mut g = c.benchmark_group("sqlite_durable_next");
    g.throughput(Throughput::Elements(1));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for block in [1i64, 100, 10_000] {
        let name = format!("block-{block}");
        let spec = SequenceSpec {
            name: name.clone(),
            start: 1,
            max: MAX_VALUE,
            block,
            failover_skip: None,
            start_below_dropped: false,
        };
        rt.block_on(sequence::create(&*store, &spec)).unwrap();
        let seq = rt
            .block_on(Sequence::builder().store(store.clone()).name(&name).build())
            .unwrap();
        g.bench_function(format!("block_{block}"), |b| {
            b.to_async(&rt)
                .iter(|| async { black_box(seq.next().await.unwrap()) })
        });
    }
    g.finish();
}

criterion_group!(benches, hot_path, durable_sqlite);
criterion_main!(benches);
