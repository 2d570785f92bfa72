//! The blocking facade, for code without an async runtime.

use std::ops::Range;

use super::{Sequence, SequenceBuilder, SequenceStats};
use crate::{Error, Result};

/// A [`Sequence`] with blocking methods and a small runtime of its own
/// (one worker thread, which runs the background prefetch).
///
/// Inside a block, [`BlockingSequence::next`] does not touch the runtime at
/// all. Do not call its methods from inside an async runtime: they block.
#[derive(Debug)]
pub struct BlockingSequence {
    seq: Sequence,
    runtime: tokio::runtime::Runtime,
}

impl BlockingSequence {
    pub(super) fn build(builder: SequenceBuilder) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("keysmith-prefetch")
            .enable_time()
            .build()
            .map_err(|e| Error::Unavailable(format!("cannot start a runtime: {e}")))?;
        let seq = runtime.block_on(builder.build())?;
        Ok(BlockingSequence { seq, runtime })
    }

    /// See [`Sequence::next`].
    ///
    /// # Errors
    /// As [`Sequence::next`].
    #[inline]
    pub fn next(&self) -> Result<i64> {
        match self.seq.try_next_cached() {
            Some(v) => Ok(v),
            None => self.runtime.block_on(self.seq.next_slow()),
        }
    }

    /// See [`Sequence::next_n`].
    ///
    /// # Errors
    /// As [`Sequence::next_n`].
    pub fn next_n(&self, n: i64) -> Result<Vec<i64>> {
        self.runtime.block_on(self.seq.next_n(n))
    }

    /// See [`Sequence::close`].
    ///
    /// # Errors
    /// As [`Sequence::close`].
    pub fn close(&self) -> Result<Option<Range<i64>>> {
        self.runtime.block_on(self.seq.close())
    }

    /// See [`Sequence::stats`].
    pub fn stats(&self) -> SequenceStats {
        self.seq.stats()
    }

    /// The async handle underneath (shares this one's cache).
    pub fn as_async(&self) -> &Sequence {
        &self.seq
    }
}
