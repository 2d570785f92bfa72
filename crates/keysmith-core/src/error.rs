//! The one error type of keysmith.
//!
//! Every variant is something a caller can act on; every message names the
//! object concerned and says what to do next.

use std::fmt;

/// The result type used throughout keysmith.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in keysmith, by what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The named object does not exist. `similar` lists existing names that
    /// look alike, closest first (it may be empty).
    #[error("{kind} {name:?} does not exist{}", Suggest(similar, kind))]
    NotFound {
        /// What kind of object: "sequence", "pool", ...
        kind: &'static str,
        /// The name that was asked for.
        name: String,
        /// Existing names that look alike, closest first.
        similar: Vec<String>,
    },

    /// An object with that name exists already.
    #[error("{kind} {name:?} already exists; pick another name or drop it first")]
    AlreadyExists {
        /// What kind of object.
        kind: &'static str,
        /// The name.
        name: String,
    },

    /// The sequence (or pool) has handed out every value up to its maximum.
    /// Values never wrap.
    #[error(
        "{name:?} is exhausted: every value up to its maximum {max} is taken, and values never wrap; create a new sequence or pool"
    )]
    Exhausted {
        /// The sequence or pool.
        name: String,
        /// Its maximum.
        max: i64,
    },

    /// Allocation lost races to concurrent writers until its retry budget
    /// (time, or a count if one was set) was spent.
    #[error(
        "{name:?}: gave up after {attempts} attempts lost to concurrent writers within the retry budget; retry later, allow a longer retry budget, or lower the contention (a sequence: a larger block, or the atomic strategy; a pool: a larger sample)"
    )]
    Contention {
        /// The sequence or pool.
        name: String,
        /// How many attempts were lost.
        attempts: u32,
    },

    /// A name is not acceptable.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name (possibly truncated for display).
        name: String,
        /// What is wrong with it and what would be accepted.
        reason: String,
    },

    /// An argument (count, block size, URL, string to decode...) is not acceptable.
    #[error("{0}")]
    InvalidArgument(String),

    /// The store cannot be reached, is locked, or timed out. Retrying may help.
    #[error("store unavailable: {0}")]
    Unavailable(String),

    /// The store holds something keysmith did not write or cannot read.
    #[error("store corrupt: {0}")]
    Corrupt(String),

    /// Time-ordered ids cannot be issued now: every worker id of the group
    /// is held by a live lease, or the clock is further behind the last id
    /// than the generator may borrow. The message says which and what to do;
    /// retrying later may help.
    #[error("{0}")]
    IdsUnavailable(String),

    /// A gap-free number's ticket was refused by a commit or release: the
    /// number was committed or released already, or its ticket expired and
    /// another holder took it. Nothing changed; the message says which.
    #[error("{0}")]
    TicketRefused(String),

    /// A worker-id lease was refused a renewal: it expired, or another
    /// holder leased the worker id since. Stop issuing ids with it and lease
    /// a new one; the message says which.
    #[error("{0}")]
    LeaseRefused(String),

    /// The sequence is of another kind than the call needs: `next` or a
    /// block handle on a numbered sequence, tickets on one that is not
    /// gap-free. Nothing changed; the message says what to use instead.
    #[error("{0}")]
    WrongKind(String),

    /// The store handed back values at or below ones this process already
    /// reserved: it went back in time (a failover to a lagging replica, a
    /// restore from backup) without keysmith noticing a new generation.
    /// Nothing of the range was handed out. Move the object forward with a
    /// fence whose skip is above `held - got` ([`Error::fence_advice`]),
    /// then retry.
    #[error(
        "{kind} {name:?}: the store went back: it returned {got} but this process already reserved up to {held}; nothing was handed out. The store lost writes (failover to a lagging replica, restore from backup): fence {name:?} with a skip of at least {gap}, then retry",
        gap = held.saturating_sub(*got).saturating_add(1)
    )]
    StoreWentBack {
        /// What kind of object: "sequence", "pool", "worker group", "numbered sequence".
        kind: &'static str,
        /// Its name.
        name: String,
        /// The end (exclusive) of the highest range, or the highest value,
        /// this process had already reserved.
        held: i64,
        /// What the store returned: the first value of the refused range.
        got: i64,
    },

    /// A gap-free sequence after its store changed generation (a failover
    /// to a replica, a restore): committed numbers may have been lost, and a
    /// number must never be committed twice, so nothing is taken until an
    /// operator checks and fences it ([`Error::fence_advice`]).
    #[error(
        "gap-free sequence {name:?}: the store is in a new generation (a failover or a restore) and may have lost committed numbers; nothing is taken until an operator checks the numbers committed so far and fences {name:?} with a skip of the numbers lost (0 when none were)"
    )]
    FenceNeeded {
        /// The sequence.
        name: String,
    },

    /// The sequence is leader-ordered ([`crate::store::Order::Leader`]) and
    /// another process holds its leader lease: send the call to the leader's
    /// advertised address (`leader`), or retry later when no address is
    /// known (a leader without one, or none at the moment).
    #[error("{}", not_leader(name, leader.as_deref(), holder.as_deref()))]
    NotLeader {
        /// The sequence.
        name: String,
        /// The address the leader advertises (`http://host:port`), if any.
        leader: Option<String>,
        /// Who holds the lease, as the store records it, if known.
        holder: Option<String>,
    },

    /// The handle was closed; open a new one.
    #[error("{name:?}: this handle was closed; open a new one")]
    Closed {
        /// The sequence.
        name: String,
    },

    /// The object was dropped (and perhaps created again) since this
    /// handle, lease or ticket was taken: it belongs to an earlier life of
    /// the name and writes nothing into a later one. Nothing changed; take
    /// a new one from the name as it is now.
    #[error(
        "{kind} {name:?} was dropped and created again since this {held} was taken; nothing was written: take a new {held}"
    )]
    Dropped {
        /// What kind of object: "sequence", "pool", "numbered sequence".
        kind: &'static str,
        /// Its name.
        name: String,
        /// What the caller held: "handle", "lease", "ticket".
        held: &'static str,
    },
}

/// What an operator should fence after [`Error::StoreWentBack`] or
/// [`Error::FenceNeeded`]: each front end turns it into its own command
/// (`keysmith fence NAME --skip N`, `POST /v1/fence`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceAdvice<'a> {
    /// The object to fence.
    pub name: &'a str,
    /// The least skip that covers what the store lost, when it is known
    /// (`None`: the operator counts the numbers lost; 0 when none were).
    pub min_skip: Option<i64>,
}

impl Error {
    /// The fence this error asks for, if it asks for one.
    pub fn fence_advice(&self) -> Option<FenceAdvice<'_>> {
        match self {
            Error::StoreWentBack {
                name, held, got, ..
            } => Some(FenceAdvice {
                name,
                min_skip: Some(held.saturating_sub(*got).saturating_add(1)),
            }),
            Error::FenceNeeded { name } => Some(FenceAdvice {
                name,
                min_skip: None,
            }),
            _ => None,
        }
    }

    /// Whether trying again later could succeed (store down, contention).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Unavailable(_)
                | Error::Contention { .. }
                | Error::IdsUnavailable(_)
                | Error::NotLeader { leader: None, .. }
        )
    }

    /// `self` with `prefix` in front of its message, for the variants that
    /// carry a free message (the others already name their object).
    pub fn context(self, prefix: &str) -> Self {
        match self {
            Error::InvalidArgument(m) => Error::InvalidArgument(format!("{prefix}: {m}")),
            Error::Unavailable(m) => Error::Unavailable(format!("{prefix}: {m}")),
            Error::Corrupt(m) => Error::Corrupt(format!("{prefix}: {m}")),
            other => other,
        }
    }

    /// [`Error::InvalidArgument`] with `msg`, which says what was wrong and
    /// what to do.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// [`Error::NotFound`] of a `kind` (`"sequence"`, `"pool"`) and name,
    /// with no similar names.
    pub fn not_found(kind: &'static str, name: &str) -> Self {
        Error::NotFound {
            kind,
            name: name.to_owned(),
            similar: Vec::new(),
        }
    }
}

fn not_leader(name: &str, leader: Option<&str>, holder: Option<&str>) -> String {
    match (leader, holder) {
        (Some(url), _) => format!(
            "sequence {name:?} is leader-ordered and served by its leader at {url}: send the call there (POST {url}/v1/sequences/{name}/next); keysmith servers and clients follow it"
        ),
        (None, Some(h)) => format!(
            "sequence {name:?} is leader-ordered and its leader lease is held by {h}, which advertises no address: call that process, stop it (its lease then expires), or give the leading server an address to advertise"
        ),
        (None, None) => {
            format!("sequence {name:?} is leader-ordered and has no leader at the moment: retry")
        }
    }
}

struct Suggest<'a>(&'a [String], &'a str);

impl fmt::Display for Suggest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [] => write!(f, "; create it first"),
            names => {
                write!(f, "; did you mean ")?;
                for (i, n) in names.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{n:?}")?;
                }
                write!(f, "? (or create the {} first)", self.1)
            }
        }
    }
}

/// How many existing names a "did you mean" hint scores at most: those next
/// to the missing name in name order
/// ([`crate::store::SequenceStore::sequence_names_near`]), so that a miss
/// costs the same with ten names as with a million.
pub const HINT_CANDIDATES: usize = 32;

/// An error and the errors it wraps, in one line (a TLS failure is often
/// only visible deep in the chain), each text once.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        source = s.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Existing names that look like `wanted`, closest first, at most three.
pub(crate) fn closest_names<'a>(
    wanted: &str,
    existing: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut scored: Vec<(f64, &str)> = existing
        .into_iter()
        .map(|n| (strsim::jaro_winkler(wanted, n), n))
        .filter(|(s, _)| *s >= 0.75)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_closest() {
        let e = Error::NotFound {
            kind: "sequence",
            name: "oders".into(),
            similar: closest_names("oders", ["orders", "users", "invoices"]),
        };
        assert_eq!(
            e.to_string(),
            "sequence \"oders\" does not exist; did you mean \"orders\"? (or create the sequence first)"
        );
    }

    #[test]
    fn closest_names_drops_unrelated() {
        assert!(closest_names("zzz", ["orders", "users"]).is_empty());
    }
}
