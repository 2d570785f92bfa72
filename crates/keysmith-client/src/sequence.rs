//! [`Sequence`]: values from blocks leased from the server, handed out
//! locally, the next block fetched in the background.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::client::{Client, LeaseToken};
use crate::{Error, Result};

/// The default number of values one lease reserves.
pub const DEFAULT_BLOCK: i64 = 100;

/// A handle on one sequence, shaped as the library's `Sequence`: `next`,
/// `next_n`, `close`. Values come from blocks the server reserved for this
/// handle alone (`POST .../reserve`): within a block `next` touches no
/// network; when a fifth of the block is left the next block is reserved
/// in the background. `Send + Sync`, cheap to clone (clones share blocks).
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
    state: Mutex<State>,
    refill: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    cur: Option<Block>,
    spare: Option<Block>,
    prefetching: bool,
    closed: bool,
}

struct Block {
    next: i64,
    end: i64,
    step: i64,
    token: LeaseToken,
}

impl Block {
    fn left(&self) -> i64 {
        if self.next >= self.end {
            0
        } else {
            (self.end - self.next + self.step - 1) / self.step
        }
    }
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
                state: Mutex::new(State::default()),
                refill: tokio::sync::Mutex::new(()),
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

    /// Takes up to `n` values from the blocks held, starting a prefetch
    /// when the block runs low.
    fn take(&self, n: i64, out: &mut Vec<i64>) -> Result<()> {
        let mut st = self.state();
        if st.closed {
            return Err(Error::Closed(self.inner.name.clone()));
        }
        let mut want = n - out.len() as i64;
        while want > 0 {
            let cur = match st.cur.as_mut() {
                Some(b) if b.left() > 0 => b,
                _ => match st.spare.take() {
                    Some(b) => {
                        st.cur = Some(b);
                        continue;
                    }
                    None => break,
                },
            };
            let k = want.min(cur.left());
            for _ in 0..k {
                out.push(cur.next);
                cur.next += cur.step;
            }
            want -= k;
        }
        let low = st
            .cur
            .as_ref()
            .is_none_or(|b| b.left() * 5 <= self.inner.block);
        if low
            && st.spare.is_none()
            && !st.prefetching
            && !out.is_empty()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            st.prefetching = true;
            let me = self.clone();
            rt.spawn(async move { me.prefetch().await });
        }
        Ok(())
    }

    /// The next value.
    ///
    /// # Errors
    /// [`Error::Closed`] after [`Sequence::close`]; the errors of
    /// [`Client::reserve`] when a block is needed (the sequence is
    /// exhausted, missing, numbered, or no server answered in time).
    pub async fn next(&self) -> Result<i64> {
        let mut out = Vec::with_capacity(1);
        loop {
            self.take(1, &mut out)?;
            if let Some(v) = out.pop() {
                return Ok(v);
            }
            self.refill().await?;
        }
    }

    /// The next `n` values, increasing (they may span blocks).
    ///
    /// # Errors
    /// As [`Sequence::next`]; values taken before an error are handed
    /// back with the blocks at [`Sequence::close`] only if unused, else lost.
    pub async fn next_n(&self, n: i64) -> Result<Vec<i64>> {
        if n < 1 {
            return Err(Error::Setup(format!("n must be at least 1, got {n}")));
        }
        let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
        loop {
            self.take(n, &mut out)?;
            if out.len() as i64 >= n {
                return Ok(out);
            }
            self.refill().await?;
        }
    }

    /// Reserves a block unless another caller just did.
    async fn refill(&self) -> Result<()> {
        let _one = self.inner.refill.lock().await;
        {
            let st = self.state();
            if st.closed {
                return Err(Error::Closed(self.inner.name.clone()));
            }
            if st.cur.as_ref().is_some_and(|b| b.left() > 0) || st.spare.is_some() {
                return Ok(());
            }
        }
        let lease = self
            .inner
            .client
            .reserve(&self.inner.name, self.inner.block)
            .await?;
        self.install(Block {
            next: lease.start,
            end: lease.end,
            step: lease.step,
            token: lease.token,
        })
        .await;
        Ok(())
    }

    /// Puts a reserved block where it is needed; after `close`, hands it back.
    async fn install(&self, b: Block) {
        let back = {
            let mut st = self.state();
            if st.closed {
                Some(b)
            } else if st.cur.as_ref().is_none_or(|c| c.left() == 0) {
                st.cur = Some(b);
                None
            } else if st.spare.is_none() {
                st.spare = Some(b);
                None
            } else {
                Some(b)
            }
        };
        if let Some(b) = back {
            let _ = self
                .inner
                .client
                .release(&self.inner.name, &b.token, b.next)
                .await;
        }
    }

    async fn prefetch(&self) {
        let _one = self.inner.refill.lock().await;
        let needed = {
            let st = self.state();
            !st.closed && st.spare.is_none()
        };
        if needed
            && let Ok(lease) = self
                .inner
                .client
                .reserve(&self.inner.name, self.inner.block)
                .await
        {
            self.install(Block {
                next: lease.start,
                end: lease.end,
                step: lease.step,
                token: lease.token,
            })
            .await;
        }
        self.state().prefetching = false;
    }

    /// Closes the handle: hands the unused rest of its blocks back (taken
    /// again only when no one reserved after them; else a gap). Later calls
    /// fail with [`Error::Closed`]; closing twice does nothing.
    ///
    /// # Errors
    /// The first error of a hand-back (the values stay a gap).
    pub async fn close(&self) -> Result<()> {
        let _one = self.inner.refill.lock().await;
        let blocks: Vec<Block> = {
            let mut st = self.state();
            st.closed = true;
            [st.spare.take(), st.cur.take()]
                .into_iter()
                .flatten()
                .filter(|b| b.left() > 0)
                .collect()
        };
        let mut first = Ok(());
        for b in blocks {
            if let Err(e) = self
                .inner
                .client
                .release(&self.inner.name, &b.token, b.next)
                .await
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }
}
