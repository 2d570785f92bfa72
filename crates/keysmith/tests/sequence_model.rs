//! Property test: Sequence handles against a simple model of blocks.
//!
//! The model is a store counter plus, per handle, the unused part of its
//! current block and the blocks it reserved ahead. Random operations (next,
//! next_n, close-and-reopen, a foreign reservation by "another process") run
//! on both; every returned value, error and hand-back must agree, and no
//! value may appear twice. A failed call hands out nothing and loses nothing
//! (the store's counter agrees at the end); so does a call dropped while it
//! waits for the store (polled once, then dropped) and a call whose
//! reservation fails (the handles' store fails or holds reservations on
//! demand). Prefetch is off so the model is deterministic.

mod faulty;
mod pass_through;

use std::collections::{HashSet, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use faulty::{Faulty, poll_once};
use keysmith::Error;
use keysmith::sequence::{self, Sequence};
use keysmith::store::{SequenceSpec, Store, memory::MemoryStore};
use proptest::prelude::*;
use std::sync::atomic::Ordering::SeqCst;

#[derive(Debug, Clone)]
enum Op {
    Next(usize),
    NextN(usize, i64),
    CloseAndReopen(usize),
    Foreign(i64),
    /// `next` (1) or `next_n`, polled once while the store holds
    /// reservations, and dropped if not ready.
    Dropped(usize, i64),
    /// `next` (1) or `next_n` while every reservation fails.
    Failing(usize, i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize).prop_map(Op::Next),
        2 => (0..3usize, 1..25i64).prop_map(|(h, n)| Op::NextN(h, n)),
        1 => (0..3usize).prop_map(Op::CloseAndReopen),
        1 => (1..15i64).prop_map(Op::Foreign),
        1 => (0..3usize, prop_oneof![Just(1i64), 1..25i64]).prop_map(|(h, n)| Op::Dropped(h, n)),
        1 => (0..3usize, prop_oneof![Just(1i64), 1..25i64]).prop_map(|(h, n)| Op::Failing(h, n)),
    ]
}

struct Model {
    /// Reservations fail (the store is down).
    failing: bool,
    next: i64,
    max: i64,
    version: u64,
    handles: Vec<ModelHandle>,
}

struct ModelHandle {
    block: i64,
    unused: Range<i64>,
    /// Blocks reserved but not yet started, in order.
    spare: VecDeque<Range<i64>>,
    /// End and store version of this handle's newest reservation.
    last: Option<(i64, u64)>,
}

impl Model {
    fn reserve(&mut self, n: i64) -> Result<Range<i64>, ()> {
        if self.failing || self.next > self.max {
            return Err(());
        }
        let end = self.next + n.min(self.max + 1 - self.next);
        let r = self.next..end;
        self.next = end;
        self.version += 1;
        Ok(r)
    }

    /// Whether taking `n` from handle `h` asks the store.
    fn needs_store(&self, h: usize, n: i64) -> bool {
        let hd = &self.handles[h];
        let spare: i64 = hd.spare.iter().map(|r| r.end - r.start).sum();
        hd.block == 1 || hd.unused.end - hd.unused.start + spare < n
    }

    /// Mirrors `Sequence::next_n`, all or nothing. Cached: from the block if
    /// it holds `n`; else reserve `max(block, still missing)` until the
    /// block and the spare blocks hold `n` (a failure keeps what was
    /// reserved, takes nothing), then take in order. Strict: reserve exactly
    /// what is wanted; on a failure hand the reservations back if no one
    /// reserved since.
    fn take(&mut self, h: usize, n: i64) -> Result<Vec<i64>, ()> {
        if self.handles[h].block == 1 {
            let mut got: Vec<(Range<i64>, u64)> = Vec::new();
            let mut have = 0;
            while have < n {
                match self.reserve(n - have) {
                    Ok(r) => {
                        have += r.end - r.start;
                        got.push((r, self.version));
                    }
                    Err(()) => {
                        if let Some((last, v)) = got.last().cloned() {
                            let mut from = last.start;
                            for pair in got.windows(2).rev() {
                                let ((a, va), (b, vb)) = (&pair[0], &pair[1]);
                                if a.end == b.start && va + 1 == *vb && b.start == from {
                                    from = a.start;
                                } else {
                                    break;
                                }
                            }
                            if v == self.version {
                                self.next = from;
                                self.version += 1;
                            }
                        }
                        return Err(());
                    }
                }
            }
            return Ok(got.into_iter().flat_map(|(r, _)| r).collect());
        }
        let u = &self.handles[h].unused;
        if u.end - u.start >= n {
            let r = u.start..u.start + n;
            self.handles[h].unused.start += n;
            return Ok(r.collect());
        }
        let spare_len: i64 = self.handles[h].spare.iter().map(|r| r.end - r.start).sum();
        let mut have = u.end - u.start + spare_len;
        while have < n {
            let r = self.reserve((n - have).max(self.handles[h].block))?;
            have += r.end - r.start;
            self.handles[h].last = Some((r.end, self.version));
            self.handles[h].spare.push_back(r);
        }
        let hd = &mut self.handles[h];
        let mut out: Vec<i64> = std::mem::replace(&mut hd.unused, 0..0).collect();
        while (out.len() as i64) < n {
            let b = hd.spare.pop_front().unwrap();
            let take = (b.end - b.start).min(n - out.len() as i64);
            out.extend(b.start..b.start + take);
            hd.unused = b.start + take..b.end;
        }
        Ok(out)
    }

    fn close(&mut self, h: usize) -> Option<Range<i64>> {
        let hd = &mut self.handles[h];
        let unused = std::mem::replace(&mut hd.unused, 0..0);
        let spare = std::mem::take(&mut hd.spare);
        let (last_end, last_version) = hd.last.take()?;
        if last_version != self.version {
            return None;
        }
        let mut from = last_end;
        for piece in std::iter::once(unused)
            .chain(spare)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if piece.is_empty() || piece.end != from {
                break;
            }
            from = piece.start;
        }
        if from == last_end {
            return None;
        }
        self.next = from;
        self.version += 1;
        Some(from..last_end)
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
            let spec = SequenceSpec { start, max, block: 10, ..SequenceSpec::new("m") };
            sequence::create(&*store, &spec).await.unwrap();
            let inner: Arc<dyn Store> = store.clone();
            let faulty = Faulty::new(inner);
            let open = |block: i64| {
                Sequence::builder().store(faulty.clone()).name("m").block(block).prefetch(0.0).build()
            };
            let mut handles = Vec::new();
            for &b in &blocks {
                handles.push(open(b).await.unwrap());
            }
            let mut model = Model {
                failing: false,
                next: start,
                max,
                version: 1,
                handles: blocks.iter().map(|&block| ModelHandle { block, unused: 0..0, spare: VecDeque::new(), last: None }).collect(),
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
                    Op::Dropped(h, n) => {
                        faulty.hold.store(true, SeqCst);
                        let got = if n == 1 {
                            poll_once(handles[h].next()).map(|r| r.map(|v| vec![v]))
                        } else {
                            poll_once(handles[h].next_n(n))
                        };
                        faulty.hold.store(false, SeqCst);
                        prop_assert_eq!(got.is_none(), model.needs_store(h, n), "{:?}", op);
                        match got {
                            Some(got) => (got, model.take(h, n)),
                            None => continue, // dropped: the model is unchanged
                        }
                    }
                    Op::Failing(h, n) => {
                        faulty.fail.store(true, SeqCst);
                        let got = if n == 1 {
                            handles[h].next().await.map(|v| vec![v])
                        } else {
                            handles[h].next_n(n).await
                        };
                        faulty.fail.store(false, SeqCst);
                        model.failing = true;
                        let want = model.take(h, n);
                        model.failing = false;
                        (got, want)
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
                            if let Op::Next(h) | Op::NextN(h, _) | Op::Dropped(h, _) | Op::Failing(h, _) = op {
                                prop_assert!(v > last_of[h], "handle {} went backwards", h);
                                last_of[h] = v;
                            }
                        }
                    }
                    (Err(Error::Exhausted { .. }), Err(())) => {}
                    (Err(Error::Unavailable(_)), Err(())) if matches!(op, Op::Failing(..)) => {}
                    (got, want) => prop_assert!(false, "store said {:?}, model said {:?}", got, want),
                }
            }
            prop_assert_eq!(store.read_sequence("m").await.unwrap().unwrap().next, model.next);
            Ok(())
        })?;
    }
}
