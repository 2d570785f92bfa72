//! Time-ordered ids per second, on one thread and on two, against UUID v7
//! (`uuid`), ULID (`ulid`) and a Snowflake generator (`snowflaked`).
//!
//! keysmith's generator runs on the in-memory store: after the lease is
//! taken no id touches the store (renewals run every third of the TTL in
//! the background), so the figure is the generator's own cost, as it would
//! be on any store.
//!
//! The `ids/format` group: the cost per id of handing out UUIDv7s
//! (`next_uuids`) beside the integers (`next_n`) of the same generator
//! kind, in the same run, and of the bare bit packing.
//!
//! `cargo bench -p keysmith --bench ids` (`-- ids/format` for that group)

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keysmith::ids::{IdConfig, IdGenerator, Layout};

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap()
}

fn generator(rt: &tokio::runtime::Runtime) -> Arc<IdGenerator> {
    rt.block_on(async {
        let store = keysmith::store::open("memory://").await.unwrap();
        Arc::new(
            IdGenerator::builder()
                .store(store)
                .layout(Layout::snowflake())
                .build()
                .await
                .unwrap(),
        )
    })
}

/// Runs `f` `iters` times split over two OS threads; the wall time.
fn two_threads(iters: u64, f: impl Fn() + Send + Sync + 'static) -> Duration {
    let f = Arc::new(f);
    let start = Instant::now();
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let f = f.clone();
            std::thread::spawn(move || {
                for _ in 0..iters / 2 {
                    f();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    start.elapsed()
}

fn one_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("ids/1 thread");
    g.throughput(Throughput::Elements(1));
    let rt = runtime(1);
    let ids = generator(&rt);
    g.bench_function("keysmith next()", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(ids.next().await.unwrap()) })
    });
    g.bench_function("keysmith next_n(1000) per id", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let ids = ids.clone();
            async move {
                let start = Instant::now();
                let mut left = iters as i64;
                while left > 0 {
                    let n = left.min(1000);
                    black_box(ids.next_n(n).await.unwrap());
                    left -= n;
                }
                start.elapsed()
            }
        })
    });
    g.bench_function("uuid v7", |b| b.iter(|| black_box(uuid::Uuid::now_v7())));
    g.bench_function("ulid", |b| b.iter(|| black_box(ulid::Ulid::new())));
    let sf = snowflaked::sync::Generator::new(1);
    g.bench_function("snowflaked", |b| b.iter(|| black_box(sf.generate::<u64>())));
    g.finish();
}

fn two(c: &mut Criterion) {
    let mut g = c.benchmark_group("ids/2 threads");
    g.throughput(Throughput::Elements(1));
    let rt = runtime(2);
    let ids = generator(&rt);
    g.bench_function("keysmith next()", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                let tasks: Vec<_> = (0..2)
                    .map(|_| {
                        let ids = ids.clone();
                        tokio::spawn(async move {
                            for _ in 0..iters / 2 {
                                black_box(ids.next().await.unwrap());
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    g.bench_function("uuid v7", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, || {
                black_box(uuid::Uuid::now_v7());
            })
        })
    });
    g.bench_function("ulid", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, || {
                black_box(ulid::Ulid::new());
            })
        })
    });
    let sf = Arc::new(snowflaked::sync::Generator::new(1));
    g.bench_function("snowflaked", |b| {
        b.iter_custom(|iters| {
            let sf = sf.clone();
            two_threads(iters, move || {
                black_box(sf.generate::<u64>());
            })
        })
    });
    g.finish();
}

/// A generator that may run an hour ahead of the clock: a tight loop makes
/// more than the 4096 ids per ms of the layout, and the figure is to be the
/// cost of making an id, not the pace of the clock.
fn unpaced(rt: &tokio::runtime::Runtime) -> Arc<IdGenerator> {
    rt.block_on(async {
        let store = keysmith::store::open("memory://").await.unwrap();
        let config = IdConfig {
            max_borrow: Duration::from_secs(3600),
            ..IdConfig::new(Layout::snowflake())
        };
        Arc::new(
            IdGenerator::builder()
                .store(store)
                .config(config)
                .build()
                .await
                .unwrap(),
        )
    })
}

/// Integers and UUIDv7s from one kind of generator, a batch of 1000 a call.
fn format(c: &mut Criterion) {
    let mut g = c.benchmark_group("ids/format");
    g.throughput(Throughput::Elements(1));
    let rt = runtime(1);
    let per_id = |ids: Arc<IdGenerator>, uuids: bool, strings: bool| {
        move |iters: u64| {
            let ids = ids.clone();
            async move {
                let start = Instant::now();
                let mut left = iters as i64;
                while left > 0 {
                    let n = left.min(1000);
                    if uuids {
                        let v = ids.next_uuids(n).await.unwrap();
                        if strings {
                            for u in &v {
                                black_box(u.hyphenated().to_string());
                            }
                        }
                        black_box(v);
                    } else {
                        let v = ids.next_n(n).await.unwrap();
                        if strings {
                            for i in &v {
                                black_box(i.to_string());
                            }
                        }
                        black_box(v);
                    }
                    left -= n;
                }
                start.elapsed()
            }
        }
    };
    let a = unpaced(&rt);
    g.bench_function("integer next_n(1000) per id", |b| {
        b.to_async(&rt).iter_custom(per_id(a.clone(), false, false))
    });
    let u = unpaced(&rt);
    g.bench_function("uuidv7 next_uuids(1000) per id", |b| {
        b.to_async(&rt).iter_custom(per_id(u.clone(), true, false))
    });
    let a = unpaced(&rt);
    g.bench_function("integer next_n(1000) + decimal string per id", |b| {
        b.to_async(&rt).iter_custom(per_id(a.clone(), false, true))
    });
    let u = unpaced(&rt);
    g.bench_function("uuidv7 next_uuids(1000) + canonical string per id", |b| {
        b.to_async(&rt).iter_custom(per_id(u.clone(), true, true))
    });
    g.bench_function("uuidv7_from_parts alone", |b| {
        let mut i = 0i64;
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(
                keysmith::ids::uuidv7_from_parts(
                    black_box(1_795_000_000_000),
                    black_box(7),
                    i,
                    black_box(0x1234_5678),
                )
                .unwrap(),
            )
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = one_thread, two, format
}
criterion_main!(benches);
