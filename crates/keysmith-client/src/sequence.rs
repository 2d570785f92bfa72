//! [`Sequence`]: values from blocks leased from the server, handed out
//! locally, the next block fetched in the background.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use keysmith_core::sequence::cache::{BlockCache, Next};

use crate::client::{Client, Lease, LeaseToken};
use crate::{Error, Result};

/// The default number of values one lease reserves.
pub const DEFAULT_BLOCK: i64 = 100;

/// A handle on one sequence, shaped as the library's `Sequence`: `next`,
/// `next_n`, `close`. Values come from blocks the server reserved for this
/// handle alone (`POST .../reserve`): within a block `next` touches no
/// network and takes no lock (the library's own lock-free block cache, one
/// atomic add per value); when a fifth of the block is left the next block
/// is reserved in the background. `Send + Sync`, cheap to clone (clones
/// share blocks).
///
/// Every value is handed out at most once, across handles, processes and
/// servers of one store; values of one handle increase. A handle that is
/// dropped without [`Sequence::close`] leaves the rest of its blocks as a
/// gap. Plain sequences and residue classes only: numbered ones (gap-free,
/// opaque, encoded, formatted, bit-reversed) answer
/// [`Error::Conflict`] `wrong_kind`; take their values with
/// [`Client::next_values`].
#[derive(Clone)]
pub struct Sequence {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    name: String,
    block: i64,
    /// The current block, in slots: slot `q` is the value `q * step +
    /// offset` of the sequence's residue class `(step, offset)` (`(1, 0)`
    /// for a plain sequence), set by the first lease before any slot is
    /// installed.
    cache: BlockCache,
    class: OnceLock<(i64, i64)>,
    state: Mutex<State>,
    /// Held by whoever installs a block, prefetches or closes.
    refill: tokio::sync::Mutex<()>,
    /// Where prefetches run: the runtime the handle was made in, or the
    /// blocking client's ([`Sequence::spawn_on`]); else the caller's.
    spawner: std::sync::OnceLock<tokio::runtime::Handle>,
}

#[derive(Default)]
struct State {
    /// The lease of the block in the cache (for its hand-back at close).
    current: Option<LeaseToken>,
    /// A block reserved ahead, not yet installed.
    spare: Option<Lease>,
    prefetching: bool,
    closed: bool,
}

impl std::fmt::Debug for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequence")
            .field("name", &self.inner.name)
            .field("block", &self.inner.block)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A handle on sequence `name` leasing blocks of `block` values
    /// ([`DEFAULT_BLOCK`] with `None`; the server may cap it at its
    /// `--max-count`). Makes no request until the first value.
    ///
    /// # Errors
    /// [`Error::Setup`] for a block below 1.
    pub fn sequence(&self, name: &str, block: Option<i64>) -> Result<Sequence> {
        let block = block.unwrap_or(DEFAULT_BLOCK);
        if block < 1 {
            return Err(Error::Setup(format!(
                "block must be at least 1, got {block}"
            )));
        }
        Ok(Sequence {
            inner: Arc::new(Inner {
                client: self.clone(),
                name: name.to_owned(),
                block,
                cache: BlockCache::new(),
                class: OnceLock::new(),
                state: Mutex::new(State::default()),
                refill: tokio::sync::Mutex::new(()),
                spawner: tokio::runtime::Handle::try_current()
                    .map(std::sync::OnceLock::from)
                    .unwrap_or_default(),
            }),
        })
    }
}

impl Sequence {
    /// The sequence's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs this handle's prefetches on `rt` (the blocking client's
    /// runtime), unless it was made inside one.
    pub(crate) fn spawn_on(&self, rt: tokio::runtime::Handle) {
        let _ = self.inner.spawner.set(rt);
    }

    /// The value of slot `q`.
    #[inline]
    fn value(&self, q: i64) -> i64 {
        // Set before the first install published any slot.
        let (step, offset) = self.inner.class.get().copied().unwrap_or((1, 0));
        q * step + offset
    }

    /// The next value if the current block has one: no await, no lock, no
    /// request (a reached prefetch mark starts the next block's lease in
    /// the background, when a tokio runtime runs). `None` when the block is
    /// used up, the handle has none yet, or it is closed: then
    /// [`Sequence::next`] reserves a block (or fails).
    #[inline]
    pub fn try_next(&self) -> Option<i64> {
        match self.inner.cache.next() {
            Next::Value(q, mark) => {
                if mark {
                    self.start_prefetch();
                }
                Some(self.value(q))
            }
            Next::Empty => None,
        }
    }

    /// The next value.
    ///
    /// # Errors
    /// [`Error::Closed`] after [`Sequence::close`]; the errors of
    /// [`Client::reserve`] when a block is needed (the sequence is
    /// exhausted, missing, numbered, or no server answered in time).
    #[inline]
    pub async fn next(&self) -> Result<i64> {
        match self.try_next() {
            Some(v) => Ok(v),
            None => self.next_slow().await,
        }
    }

    #[cold]
    async fn next_slow(&self) -> Result<i64> {
        let mut out = Vec::with_capacity(1);
        self.fill(1, &mut out).await?;
        Ok(out[0])
    }

    /// The next `n` values, increasing (they may span blocks).
    ///
    /// # Errors
    /// As [`Sequence::next`]; values taken before an error are lost (a
    /// gap).
    pub async fn next_n(&self, n: i64) -> Result<Vec<i64>> {
        if n < 1 {
            return Err(Error::Setup(format!("n must be at least 1, got {n}")));
        }
        let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
        self.fill(n, &mut out).await?;
        Ok(out)
    }

    /// Takes what the current block has of the `n - out.len()` values
    /// still wanted; `true` when `out` holds `n`.
    fn take_into(&self, n: i64, out: &mut Vec<i64>) -> bool {
        while (out.len() as i64) < n {
            match self.inner.cache.take(n - out.len() as i64) {
                Some((slots, mark)) => {
                    if mark {
                        self.start_prefetch();
                    }
                    out.extend(slots.map(|q| self.value(q)));
                }
                None => return false,
            }
        }
        true
    }

    /// Fills `out` up to `n` values, installing the spare block or leasing
    /// one whenever the current block is used up.
    async fn fill(&self, n: i64, out: &mut Vec<i64>) -> Result<()> {
        loop {
            if self.take_into(n, out) {
                return Ok(());
            }
            let _one = self.inner.refill.lock().await;
            // Another caller may have installed a block meanwhile.
            if self.take_into(n, out) {
                return Ok(());
            }
            let spare = {
                let mut st = self.state();
                if st.closed {
                    return Err(Error::Closed(self.inner.name.clone()));
                }
                st.spare.take()
            };
            let lease = match spare {
                Some(l) => l,
                None => {
                    self.inner
                        .client
                        .reserve(&self.inner.name, self.inner.block)
                        .await?
                }
            };
            self.install(lease).await?;
        }
    }

    /// Makes `lease` the cache's block (its rest is handed back if the
    /// sequence's class changed under it). Caller holds the refill lock and
    /// the current block is used up.
    async fn install(&self, lease: Lease) -> Result<()> {
        let class = (lease.step.max(1), lease.start.rem_euclid(lease.step.max(1)));
        let known = *self.inner.class.get_or_init(|| class);
        if known != class {
            let _ = self
                .inner
                .client
                .release(&self.inner.name, &lease.token, lease.start)
                .await;
            return Err(Error::Conflict {
                code: "class_changed".into(),
                message: format!(
                    "sequence {:?} now hands out values {} apart from {}, this handle's were {} apart from {}: open a new handle",
                    self.inner.name, class.0, class.1, known.0, known.1
                ),
            });
        }
        let (step, offset) = class;
        let from = (lease.start - offset) / step;
        let len = (i128::from(lease.end) - i128::from(lease.start) + i128::from(step) - 1)
            / i128::from(step);
        let to = from + i64::try_from(len.max(0)).unwrap_or(i64::MAX - from);
        let prefetch_at = to - (to - from) / 5;
        self.inner.cache.install(from..to, prefetch_at);
        self.state().current = Some(lease.token);
        Ok(())
    }

    /// Reserves the next block in the background (once at a time, when a
    /// tokio runtime runs and none is reserved ahead).
    fn start_prefetch(&self) {
        let Some(rt) = self
            .inner
            .spawner
            .get()
            .cloned()
            .or_else(|| tokio::runtime::Handle::try_current().ok())
        else {
            return;
        };
        {
            let mut st = self.state();
            if st.prefetching || st.spare.is_some() || st.closed {
                return;
            }
            st.prefetching = true;
        }
        let me = self.clone();
        rt.spawn(async move { me.prefetch().await });
    }

    async fn prefetch(&self) {
        let _one = self.inner.refill.lock().await;
        let needed = {
            let st = self.state();
            !st.closed && st.spare.is_none()
        };
        let lease = if needed {
            self.inner
                .client
                .reserve(&self.inner.name, self.inner.block)
                .await
                .ok()
        } else {
            None
        };
        // A lease that came back after a close goes back at once.
        let late = {
            let mut st = self.state();
            st.prefetching = false;
            match lease {
                Some(l) if st.closed => Some(l),
                Some(l) => {
                    st.spare = Some(l);
                    None
                }
                None => None,
            }
        };
        if let Some(l) = late {
            let _ = self
                .inner
                .client
                .release(&self.inner.name, &l.token, l.start)
                .await;
        }
    }

    /// Closes the handle: hands the unused rest of its blocks back (taken
    /// again only when no one reserved after them; else a gap). Later calls
    /// fail with [`Error::Closed`]; closing twice does nothing.
    ///
    /// # Errors
    /// The first error of a hand-back (the values stay a gap).
    pub async fn close(&self) -> Result<()> {
        let _one = self.inner.refill.lock().await;
        let (current, spare) = {
            let mut st = self.state();
            if st.closed {
                return Ok(());
            }
            st.closed = true;
            (st.current.take(), st.spare.take())
        };
        // No value of the block is handed out after the seal.
        let rest = self.inner.cache.seal();
        // The spare first: it was reserved last, and a hand-back is taken
        // only while nothing was reserved after it.
        let mut back = Vec::new();
        if let Some(l) = spare {
            back.push((l.token, l.start));
        }
        if let Some(token) = current
            && !rest.is_empty()
        {
            back.push((token, self.value(rest.start)));
        }
        let mut first = Ok(());
        for (token, from) in back {
            if let Err(e) = self
                .inner
                .client
                .release(&self.inner.name, &token, from)
                .await
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}
