//! A cached `Sequence::next()` of keysmith-client against a bare
//! `AtomicU64::fetch_add`, in the same run: what handing a value out of a
//! leased block costs beyond the counter itself. The server (in process,
//! SQLite in a temporary directory, plain HTTP on 127.0.0.1) reserves
//! blocks of 100 000 values; the prefetch keeps the next block ready, so
//! the figure is the local path. `try_next` is the same take without a
//! future (what the blocking client's `next` calls first).
//!
//! `cargo bench -p keysmith-client --bench next`

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use keysmith_server::{Config, Server};

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop) = rt.block_on(async {
        let config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            store_url: format!("sqlite://{}", dir.path().join("k.db").display()),
            insecure_no_auth: true,
            max_count: 100_000,
            ..Config::default()
        };
        let server = Server::bind(config).await.unwrap();
        let addr = server.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        (addr, tx)
    });
    let client = keysmith_client::Client::builder()
        .url(format!("http://{addr}"))
        .build()
        .unwrap();
    let seq = rt.block_on(async {
        client
            .create_sequence(serde_json::json!({ "name": "bench" }))
            .await
            .unwrap();
        client.sequence("bench", Some(100_000)).unwrap()
    });
    let mut g = c.benchmark_group("next");
    let counter = AtomicU64::new(0);
    g.bench_function("AtomicU64::fetch_add (baseline)", |b| {
        b.iter(|| black_box(counter.fetch_add(1, Ordering::Relaxed)))
    });
    g.bench_function("keysmith_client::Sequence::next (cached)", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(seq.next().await.unwrap()) })
    });
    g.bench_function(
        "keysmith_client::Sequence::try_next (cached, no await)",
        |b| {
            // As the blocking client's `next`: the runtime only when the block
            // is used up (to install the next one).
            b.iter(|| {
                black_box(
                    seq.try_next()
                        .unwrap_or_else(|| rt.block_on(seq.next()).unwrap()),
                )
            })
        },
    );
    g.finish();
    rt.block_on(seq.close()).unwrap();
    let _ = stop.send(());
}

criterion_group!(benches, bench);
criterion_main!(benches);
