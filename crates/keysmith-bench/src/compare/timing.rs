//! How rows are timed: threads in a loop for a while, alternating slices,
//! the hot handle every in-process row shares.

use super::*;

/// The bare atomic on a cache line of its own, as keysmith's cursor is.
#[repr(align(128))]
pub(crate) struct Padded(pub(crate) AtomicU64);

/// Calls `op` on `threads` threads for `d`; returns calls per second, all threads together.
pub(super) fn on_threads(threads: usize, d: Duration, op: impl Fn() + Sync) -> f64 {
    on_threads_overlap(threads, d, op).0
}

/// The CPU time this thread has run, from the kernel's scheduler
/// statistics (Linux); `None` elsewhere.
pub(super) fn thread_cpu() -> Option<Duration> {
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
pub(super) struct Slices {
    rate: f64,
    overlap: Option<f64>,
    n: u32,
    all_overlaps: bool,
}

impl Slices {
    pub(super) fn add(&mut self, _slice: Duration, (rate, overlap): (f64, Option<f64>)) {
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

    pub(super) fn get(&self) -> (f64, Option<f64>) {
        let n = f64::from(self.n.max(1));
        let o = self.overlap.filter(|_| self.all_overlaps).map(|o| o / n);
        (self.rate / n, o)
    }
}

/// Calls `op` on one task for `d`; returns calls per second.
pub(super) async fn async_rate<F, Fut>(d: Duration, mut op: F) -> anyhow::Result<f64>
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

/// A blocking handle whose one block never runs out.
pub(crate) async fn cached_handle() -> anyhow::Result<Arc<keysmith::sequence::BlockingSequence>> {
    tokio::task::spawn_blocking(|| {
        let rt = tokio::runtime::Builder::new_current_thread().build()?;
        let store: Arc<dyn Store> = Arc::new(keysmith::store::memory::MemoryStore::new());
        let spec = SequenceSpec {
            start: 1,
            max: MAX_VALUE,
            block: 1 << 40,
            ..SequenceSpec::new("hot")
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
pub(super) trait TryNext {
    fn try_next(&self) -> i64;
}

impl TryNext for Arc<keysmith::sequence::BlockingSequence> {
    #[inline]
    fn try_next(&self) -> i64 {
        self.next().unwrap_or(-1)
    }
}

pub(super) async fn throwaway(
    store: &Arc<dyn Store>,
    block: i64,
    strategy: Option<Strategy>,
) -> anyhow::Result<Sequence> {
    let name = super::super::rate::bench_sequence(&**store).await?;
    let mut b = Sequence::builder()
        .store(store.clone())
        .name(&name)
        .block(block);
    if let Some(st) = strategy {
        b = b.strategy(st);
    }
    Ok(b.build().await?)
}
