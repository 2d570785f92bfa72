//! Property test: Sequence handles against a simple model of blocks.
//!
//! The model is a store counter plus, per handle, the unused part of its
//! current block. Random operations (next, next_n, close-and-reopen, a
//! foreign reservation by "another process") run on both; every returned
//! value, error and hand-back must agree, and no value may appear twice.
//! Prefetch is off so the model is deterministic.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use keysmith::Error;
use keysmith::sequence::{self, Sequence};
use keysmith::store::{SequenceSpec, Store, memory::MemoryStore};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Next(usize),
    NextN(usize, i64),
    CloseAndReopen(usize),
    Foreign(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize).prop_map(Op::Next),
        2 => (0..3usize, 1..25i64).prop_map(|(h, n)| Op::NextN(h, n)),
        1 => (0..3usize).prop_map(Op::CloseAndReopen),
        1 => (1..15i64).prop_map(Op::Foreign),
    ]
}

struct Model {
    next: i64,
    max: i64,
    version: u64,
    handles: Vec<ModelHandle>,
}

struct ModelHandle {
    block: i64,
    unused: Range<i64>,
    /// Store version right after this handle's newest reservation.
    last_version: Option<u64>,
}

impl Model {
    fn reserve(&mut self, n: i64) -> Result<Range<i64>, ()> {
        if self.next > self.max {
            return Err(());
        }
        let end = self.next + n.min(self.max + 1 - self.next);
        let r = self.next..end;
        self.next = end;
        self.version += 1;
        Ok(r)
    }

    /// Mirrors `Sequence::next_n`: take from the block, refill with
    /// `max(block, still wanted)`; strict handles reserve exactly what they want.
    fn take(&mut self, h: usize, n: i64) -> Result<Vec<i64>, ()> {
        let mut out = Vec::new();
        while (out.len() as i64) < n {
            let want = n - out.len() as i64;
            let block = self.handles[h].block;
            if block == 1 {
                out.extend(self.reserve(want)?);
                continue;
            }
            if self.handles[h].unused.is_empty() {
                let r = self.reserve(want.max(block))?;
                self.handles[h].unused = r;
                self.handles[h].last_version = Some(self.version);
            }
            let u = &mut self.handles[h].unused;
            let to = (u.start + want).min(u.end);
            out.extend(u.start..to);
            u.start = to;
        }
        Ok(out)
    }

    fn close(&mut self, h: usize) -> Option<Range<i64>> {
        let hd = &mut self.handles[h];
        let unused = std::mem::replace(&mut hd.unused, 0..0);
        let last = hd.last_version.take()?;
        if unused.is_empty() || last != self.version {
            return None;
        }
        self.next = unused.start;
        self.version += 1;
        Some(unused)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn handles_agree_with_the_model(
        start in 0..5i64,
        len in 20..300i64,
        blocks in proptest::collection::vec(1..12i64, 3),
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
            let max = start + len - 1;
            let spec = SequenceSpec { name: "m".into(), start, max, block: 10 };
            sequence::create(&*store, &spec).await.unwrap();
            let open = |block: i64| {
                Sequence::builder().store(store.clone()).name("m").block(block).prefetch(0.0).build()
            };
            let mut handles = Vec::new();
            for &b in &blocks {
                handles.push(open(b).await.unwrap());
            }
            let mut model = Model {
                next: start,
                max,
                version: 1,
                handles: blocks.iter().map(|&block| ModelHandle { block, unused: 0..0, last_version: None }).collect(),
            };
            let mut seen = HashSet::new();
            let mut last_of = [i64::MIN; 3];
            for op in ops {
                let (got, want) = match op {
                    Op::Next(h) => (handles[h].next().await.map(|v| vec![v]), model.take(h, 1)),
                    Op::NextN(h, n) => (handles[h].next_n(n).await, model.take(h, n)),
                    Op::CloseAndReopen(h) => {
                        let back = handles[h].close().await.unwrap();
                        prop_assert_eq!(back, model.close(h));
                        handles[h] = open(blocks[h]).await.unwrap();
                        last_of[h] = i64::MIN;
                        continue;
                    }
                    Op::Foreign(n) => {
                        let got = store.reserve_atomic("m", n).await.map(|r| (r.start..r.end).collect());
                        (got, model.reserve(n).map(|r| r.collect()))
                    }
                };
                match (got, want) {
                    (Ok(got), Ok(want)) => {
                        prop_assert_eq!(&got, &want);
                        for v in got {
                            prop_assert!(seen.insert(v), "{} handed out twice", v);
                            prop_assert!((start..=max).contains(&v));
                            if let Op::Next(h) | Op::NextN(h, _) = op {
                                prop_assert!(v > last_of[h], "handle {} went backwards", h);
                                last_of[h] = v;
                            }
                        }
                    }
                    (Err(Error::Exhausted { .. }), Err(())) => {}
                    (got, want) => prop_assert!(false, "store said {:?}, model said {:?}", got, want),
                }
            }
            prop_assert_eq!(store.read("m").await.unwrap().unwrap().next, model.next);
            Ok(())
        })?;
    }
}
