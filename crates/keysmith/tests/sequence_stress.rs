//! The `fetch_add` fast path of `next()` under load: OS threads (not tasks)
//! on one handle with tiny blocks, so nearly every few values cross a block
//! boundary and values taken past a block end are settled as claims; mixed
//! with `next_n`. No value twice, each thread's values increase, and, with a
//! store that never fails, no value is lost: what the threads got plus what
//! `close()` hands back is every value from the start on.
//! (Speed is measured in benches, never here.)

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};

use keysmith::sequence::{self, BlockingSequence, Sequence};
use keysmith::store::{MAX_VALUE, SequenceSpec, Store, memory::MemoryStore};

fn handle(block: i64, prefetch: f64) -> (Arc<dyn Store>, BlockingSequence) {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let spec = SequenceSpec {
        name: "s".into(),
        start: 1,
        max: MAX_VALUE,
        block,
        failover_skip: None,
        start_below_dropped: false,
    };
    rt.block_on(sequence::create(&*store, &spec)).unwrap();
    let seq = Sequence::builder()
        .store(store.clone())
        .name("s")
        .prefetch(prefetch)
        .build_blocking()
        .unwrap();
    (store, seq)
}

fn hammer(threads: usize, per_thread: usize, block: i64, prefetch: f64, bulk: bool) {
    let (store, seq) = handle(block, prefetch);
    let seq = Arc::new(seq);
    let barrier = Barrier::new(threads);
    let got: Vec<Vec<i64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (seq, barrier) = (seq.clone(), &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let mut got = Vec::with_capacity(per_thread);
                    let mut i = 0;
                    while got.len() < per_thread {
                        i += 1;
                        if bulk && (i + t) % 7 == 0 {
                            got.extend(seq.next_n(1 + (i % 5) as i64).unwrap());
                        } else {
                            got.push(seq.next().unwrap());
                        }
                    }
                    got
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = BTreeSet::new();
    let mut count = 0;
    for g in &got {
        assert!(
            g.windows(2).all(|w| w[0] < w[1]),
            "a thread's values must increase"
        );
        count += g.len();
        all.extend(g.iter().copied());
    }
    assert_eq!(count, all.len(), "a value was handed out twice");
    let back = seq.close().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let next = rt.block_on(sequence::describe(&*store, "s")).unwrap().next;
    // The row's next value: after a hand-back, the start of what came back.
    let from = next;
    if let Some(r) = back {
        assert_eq!(r.start, next, "the tail handed back is the row's next");
    }
    let expected: BTreeSet<i64> = (1..from).collect();
    let lost: Vec<_> = expected.difference(&all).take(10).collect();
    assert!(
        lost.is_empty(),
        "values lost (neither handed out nor handed back): {lost:?}..."
    );
    assert_eq!(all.len() as i64, from - 1, "a value outside the blocks");
}

#[test]
fn threads_on_tiny_blocks_share_nothing_and_lose_nothing() {
    for (threads, block, prefetch) in [(2, 1, 0.0), (2, 2, 0.0), (4, 3, 0.2), (3, 16, 0.5)] {
        // Block 1 is strict mode (no cache): the check's baseline.
        hammer(threads, 3_000, block, prefetch, false);
    }
}

#[test]
fn next_and_next_n_mixed_share_nothing_and_lose_nothing() {
    for (threads, block, prefetch) in [(2, 4, 0.0), (4, 5, 0.2), (3, 64, 0.2)] {
        hammer(threads, 3_000, block, prefetch, true);
    }
}
