//! A sequence of any kind behind one name: the one place that decides
//! whether `next` takes plain values from a [`Sequence`] handle's blocks,
//! from the leader of a leader-ordered sequence ([`LeaderSequence`]), or
//! numbers from [`Numbers`], so the CLI and the server call one function.

use std::sync::Arc;

use crate::Result;
use crate::numbers::{Formatted, Numbers};
use crate::sequence::{LeaderOptions, LeaderSequence, Opened, Sequence, SequenceBuilder};
use crate::store::Store;

/// An open sequence of either kind.
///
/// # Round trips
/// [`AnySequence::open`] costs two store calls whatever the kind (the row,
/// the numbering). Then [`AnySequence::next_n`] costs, on a numbered
/// sequence, one store call per call (two with a period: the store's clock,
/// then the reservation); on a plain one, none while its block lasts, else
/// one reservation (and its retries under contention).
#[derive(Debug)]
pub enum AnySequence {
    /// An ordinary sequence: values from cached blocks.
    Plain(Sequence),
    /// A numbered sequence (period, format, bit-reversed, gap-free): numbers
    /// from the store, one reservation per call.
    Numbered(Numbers),
    /// A leader-ordered sequence: values from this process while it holds
    /// the leader lease, else [`crate::Error::NotLeader`] naming the leader.
    Leader(LeaderSequence),
}

/// What [`AnySequence::next_n`] handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Values {
    /// Plain values, increasing.
    Plain(Vec<i64>),
    /// Numbers, with their text; `formatted` when the sequence prints them
    /// with a template (so they are text, not integers, to a caller).
    Numbers {
        /// The numbers, in the order handed out.
        numbers: Vec<Formatted>,
        /// Whether the numbers are text rather than integers.
        formatted: bool,
    },
}

impl AnySequence {
    /// Opens `name` in `store` with `builder`'s settings for a plain
    /// sequence (its store and name are set here); a numbered sequence
    /// ignores them.
    ///
    /// # Errors
    /// As [`SequenceBuilder::build`] and [`Numbers::with_numbering`]:
    /// [`crate::Error::NotFound`] (with similar names),
    /// [`crate::Error::InvalidName`], [`crate::Error::Unavailable`].
    pub async fn open(
        store: Arc<dyn Store>,
        name: &str,
        builder: SequenceBuilder,
    ) -> Result<AnySequence> {
        Self::open_with(store, name, builder, LeaderOptions::default()).await
    }

    /// [`Self::open`], with `leader`'s settings for a leader-ordered
    /// sequence (a server passes the address it advertises).
    ///
    /// # Errors
    /// As [`Self::open`]; [`crate::Error::InvalidArgument`] for bad
    /// `leader` options when the sequence is leader-ordered.
    pub async fn open_with(
        store: Arc<dyn Store>,
        name: &str,
        builder: SequenceBuilder,
        leader: LeaderOptions,
    ) -> Result<AnySequence> {
        let opened = builder
            .store(store.clone())
            .name(name)
            .build_or_numbering()
            .await?;
        match opened {
            Opened::Blocks(sequence) => Ok(AnySequence::Plain(sequence)),
            Opened::Numbered {
                name, numbering, ..
            } if numbering.is_leader() => Ok(AnySequence::Leader(
                LeaderSequence::open(store, &name, leader).await?,
            )),
            Opened::Numbered {
                name,
                numbering,
                incarnation,
            } => Ok(AnySequence::Numbered(
                Numbers::with_numbering(store, &name, numbering)?.in_life(incarnation),
            )),
        }
    }

    /// `n` values (`1..=MAX_RESERVATION`).
    ///
    /// # Errors
    /// As [`Sequence::next_n`], [`LeaderSequence::next_n`] or
    /// [`Numbers::next_n`]: a gap-free sequence is
    /// [`crate::Error::WrongKind`] (take tickets); a leader-ordered one led
    /// by another process is [`crate::Error::NotLeader`].
    pub async fn next_n(&self, n: i64) -> Result<Values> {
        match self {
            AnySequence::Plain(s) => s.next_n(n).await.map(Values::Plain),
            AnySequence::Leader(s) => s.next_n(n).await.map(Values::Plain),
            AnySequence::Numbered(h) => Ok(Values::Numbers {
                numbers: h.next_n(n).await?,
                formatted: h.is_formatted(),
            }),
        }
    }

    /// How many values one call should ask for at most, so that a long run
    /// goes in batches: a plain sequence's block, else `max`.
    pub fn batch(&self, max: i64) -> i64 {
        match self {
            AnySequence::Plain(s) => s.block().clamp(1, max),
            AnySequence::Leader(s) => s.block().clamp(1, max),
            AnySequence::Numbered(_) => max,
        }
    }

    /// The sequence's name.
    pub fn name(&self) -> &str {
        match self {
            AnySequence::Plain(s) => s.name(),
            AnySequence::Leader(s) => s.name(),
            AnySequence::Numbered(n) => n.name(),
        }
    }

    /// Hands a plain handle's unused values back (see [`Sequence::close`]);
    /// releases a leader's lease (see [`LeaderSequence::close`]); nothing
    /// to do for a numbered one.
    ///
    /// # Errors
    /// As [`Sequence::close`] and [`LeaderSequence::close`].
    pub async fn close(self) -> Result<()> {
        match self {
            AnySequence::Plain(s) => s.close().await.map(drop),
            AnySequence::Leader(s) => s.close().await,
            AnySequence::Numbered(_) => Ok(()),
        }
    }
}

impl Values {
    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            Values::Plain(v) => v.len(),
            Values::Numbers { numbers, .. } => numbers.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each value as JSON: an integer (a string with `as_strings`, for
    /// JavaScript callers, whose numbers stop being exact above 2^53), or a
    /// formatted number's text.
    pub fn json_values(&self, as_strings: bool) -> Vec<serde_json::Value> {
        let int = |v: i64| {
            if as_strings {
                serde_json::Value::from(v.to_string())
            } else {
                serde_json::Value::from(v)
            }
        };
        match self {
            Values::Plain(v) => v.iter().map(|v| int(*v)).collect(),
            Values::Numbers {
                numbers,
                formatted: true,
            } => numbers
                .iter()
                .map(|f| serde_json::Value::from(f.text.as_str()))
                .collect(),
            Values::Numbers { numbers, .. } => numbers.iter().map(|f| int(f.number.n)).collect(),
        }
    }

    /// Each value as text, as the CLI prints it, one per line.
    pub fn texts(&self) -> Vec<String> {
        match self {
            Values::Plain(v) => v.iter().map(i64::to_string).collect(),
            Values::Numbers { numbers, .. } => numbers.iter().map(|f| f.text.clone()).collect(),
        }
    }
}
