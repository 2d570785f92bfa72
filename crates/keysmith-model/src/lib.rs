//! A model of keysmith's store protocol for one sequence name, checked
//! exhaustively with [`stateright`] for small bounds (the lab: no product
//! crate depends on it).
//!
//! What is modelled, each step an [`Action`] that names the function of the
//! store contract (`crates/keysmith-core/src/store/`) it mirrors
//! ([`Action::mirrors`]; `tests/contract.rs` fails when a name is no longer
//! a method of the contract):
//!
//! - processes that open a handle (`read_sequence`: the life it is of),
//!   reserve a block (`reserve_locked_in`: fence, check the life, plan),
//!   hand values out of it (local), hand the rest back on close
//!   (`put_if_version` on the version their reservation left) and crash
//!   (local: a block lost, a gap);
//! - each process keeps what it reserved (`sequence/high_water.rs`) and
//!   refuses a range below it that it did not hand back;
//! - an admin that drops the name (`drop_sequence`: the tombstone's high
//!   water and version) and creates it again (`create_sequence`: start at
//!   the high water, incarnation and first version one above the
//!   tombstone's version);
//! - a store with a replica that lags (`Replicate` copies the primary) and
//!   one failover to it (`generation`: a new generation, the writes the
//!   replica missed are gone); every write first fences a row of another
//!   generation (`SequenceRow::fence`: `next` forward by the failover
//!   margin, the version raised by [`FENCE_VERSION_STEP`]).
//!
//! The invariant, [`NO_VALUE_TWICE`]: no value is handed out twice.
//!
//! # Not modelled
//!
//! A failover to a replica that holds no row of the name: the create (or a
//! drop and create) was lost with the writes it missed. The checker finds
//! that the name then created again starts where the lost life started, in
//! the same incarnation, and hands out the values the lost life's handles
//! hold (found with the failover allowed there: `Create, Open(0),
//! Reserve(0), HandOut(0), Open(1), Failover, Create, Reserve(1),
//! HandOut(1)`). No row is there to fence; only a process's own
//! `high_water.rs` refuses such values. The model allows a failover only
//! to a replica that holds a row of the name.
//!
//! A failover margin below what the lost writes reserved (the margin here
//! exceeds every value the bounds can reserve), pools, worker leases and
//! numbered sequences.
//! [`Mutation`]s put back known bugs; their tests expect a counterexample.

use std::collections::BTreeSet;

use stateright::{Model, Property};

pub mod leader;

/// Values a reservation asks for.
pub const BLOCK: i64 = 2;

/// The property every run checks: no value is handed out twice.
pub const NO_VALUE_TWICE: &str = "no value is handed out twice";

/// A known bug put back into the model, to show the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The protocol as keysmith implements it.
    None,
    /// Before issue #43: every life of a name starts at version 1 and
    /// incarnation 1 (the tombstone's version is not carried), so a hand-back
    /// planned in an earlier life can match a version of the next one.
    LivesNotKept,
    /// Failover without the fence: a row of an older generation is written
    /// as it is.
    NoFence,
    /// The fence as it was before this model found its bug: the version
    /// raised by one, so a hand-back planned on a lost reservation (whose
    /// version is the old one plus one) matches the fenced row.
    FenceVersionPlusOne,
}

/// `keysmith_core::store::FENCE_VERSION_STEP`: how far the fence raises a
/// row's version (`tests/contract.rs` checks the two are the same).
pub const FENCE_VERSION_STEP: u64 = 1 << 32;

/// The bounds of one check.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Processes using the name.
    pub processes: usize,
    /// Lives of the name (creates).
    pub lives: u8,
    /// Failovers of the store.
    pub failovers: u8,
    /// Reservations in all (bounds the values).
    pub reservations: u8,
    /// Crashes in all.
    pub crashes: u8,
}

/// The model: [`Bounds`] and the [`Mutation`] (if any).
#[derive(Debug, Clone)]
pub struct StoreProtocol {
    /// The bounds.
    pub bounds: Bounds,
    /// The bug put back, or [`Mutation::None`].
    pub mutation: Mutation,
}

/// A sequence row (`SequenceRow`): the fields the protocol reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Row {
    /// The next value to reserve.
    pub next: i64,
    /// Bumped by every write of `next`.
    pub version: u64,
    /// The life of the name the row is of: its first version.
    pub incarnation: u64,
    /// The store generation the row was last written in.
    pub generation: u8,
}

/// What a store holds of the name: its row and its tombstone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Stored {
    /// The row, while the name exists.
    pub row: Option<Row>,
    /// Every value of a dropped life is below it.
    pub high_water: i64,
    /// The largest version a dropped life reached.
    pub dropped_version: u64,
}

/// A block a process holds: values `start..end`, reserved by a write that
/// left the row at `version`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Block {
    /// The next value to hand out.
    pub start: i64,
    /// One past the last.
    pub end: i64,
    /// The row version the reservation left.
    pub version: u64,
}

/// One process's handle of the name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Process {
    /// The life its open handle is of (`None`: no handle open).
    pub life: Option<u64>,
    /// The block it holds.
    pub block: Option<Block>,
    /// Every value it reserved and did not hand back is below it
    /// (`high_water.rs`); reset by a crash.
    pub high: i64,
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The store being written.
    pub primary: Stored,
    /// The replica a failover promotes: what the primary held when last
    /// replicated.
    pub replica: Stored,
    /// The primary's generation.
    pub generation: u8,
    /// Creates so far.
    pub lives: u8,
    /// Failovers so far.
    pub failovers: u8,
    /// Reservations so far.
    pub reservations: u8,
    /// Crashes so far.
    pub crashes: u8,
    /// The processes.
    pub processes: Vec<Process>,
    /// Every value handed out.
    pub handed_out: BTreeSet<i64>,
    /// Whether a value was handed out twice.
    pub twice: bool,
}

/// One step; [`Action::mirrors`] names the contract function it models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The admin creates the name.
    Create,
    /// The admin drops the name.
    Drop,
    /// Process `p` opens a handle.
    Open(usize),
    /// Process `p` reserves a block.
    Reserve(usize),
    /// Process `p` hands out the next value of its block.
    HandOut(usize),
    /// Process `p` closes its handle, handing back the rest of its block.
    HandBack(usize),
    /// Process `p` crashes: its handle and block are gone.
    Crash(usize),
    /// The replica catches up with the primary.
    Replicate,
    /// The store fails over to its replica: a new generation.
    Failover,
}

/// What an action mirrors: a function of the store contract, or a step of
/// the process or the deployment that calls none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mirrors {
    /// A method of the contract in `crates/keysmith-core/src/store/`.
    Contract(&'static str),
    /// Outside the store: a process's own step, or the store's operator.
    Outside(&'static str),
}

impl Action {
    /// Every kind of action, one each (for the drift test).
    pub const KINDS: [Action; 9] = [
        Action::Create,
        Action::Drop,
        Action::Open(0),
        Action::Reserve(0),
        Action::HandOut(0),
        Action::HandBack(0),
        Action::Crash(0),
        Action::Replicate,
        Action::Failover,
    ];

    /// The function of the store contract this action mirrors.
    pub fn mirrors(self) -> Mirrors {
        match self {
            Action::Create => Mirrors::Contract("create_sequence"),
            Action::Drop => Mirrors::Contract("drop_sequence"),
            Action::Open(_) => Mirrors::Contract("read_sequence"),
            Action::Reserve(_) => Mirrors::Contract("reserve_locked_in"),
            Action::HandOut(_) => Mirrors::Outside("Sequence::next, from the cached block"),
            Action::HandBack(_) => Mirrors::Contract("put_if_version"),
            Action::Crash(_) => Mirrors::Outside("a process killed"),
            Action::Replicate => Mirrors::Outside("the store's replication"),
            Action::Failover => Mirrors::Contract("generation"),
        }
    }
}

impl StoreProtocol {
    /// The failover margin: more than every value the reservations can
    /// take, so a failover loses none (a margin below what the lost writes
    /// reserved is the documented limit of the fence, not modelled).
    pub fn failover_skip(&self) -> i64 {
        i64::from(self.bounds.reservations) * BLOCK
    }

    /// `SequenceRow::fence`: the row a write in generation `current` starts
    /// from.
    fn fenced(&self, row: &Row, current: u8) -> Row {
        if row.generation == current || self.mutation == Mutation::NoFence {
            return Row {
                generation: current,
                ..row.clone()
            };
        }
        Row {
            next: row.next + self.failover_skip(),
            version: match self.mutation {
                Mutation::FenceVersionPlusOne => row.version + 1,
                _ => row.version + FENCE_VERSION_STEP,
            },
            generation: current,
            ..row.clone()
        }
    }

    /// `Tombstone::incarnation`.
    fn incarnation(&self, stored: &Stored) -> u64 {
        match self.mutation {
            Mutation::LivesNotKept => 1,
            _ => stored.dropped_version + 1,
        }
    }
}

impl Model for StoreProtocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            primary: Stored::default(),
            replica: Stored::default(),
            generation: 0,
            lives: 0,
            failovers: 0,
            reservations: 0,
            crashes: 0,
            processes: vec![Process::default(); self.bounds.processes],
            handed_out: BTreeSet::new(),
            twice: false,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let b = &self.bounds;
        match s.primary.row {
            None if s.lives < b.lives => actions.push(Action::Create),
            Some(_) => actions.push(Action::Drop),
            None => {}
        }
        for (i, p) in s.processes.iter().enumerate() {
            match (&p.life, &p.block) {
                (None, _) if s.primary.row.is_some() => actions.push(Action::Open(i)),
                (Some(_), None) if s.reservations < b.reservations => {
                    actions.push(Action::Reserve(i))
                }
                (Some(_), Some(block)) if block.start < block.end => {
                    actions.push(Action::HandOut(i))
                }
                (Some(_), Some(_)) if s.reservations < b.reservations => {
                    actions.push(Action::Reserve(i))
                }
                _ => {}
            }
            if p.life.is_some() {
                actions.push(Action::HandBack(i));
                if s.crashes < b.crashes {
                    actions.push(Action::Crash(i));
                }
            }
        }
        if s.replica != s.primary {
            actions.push(Action::Replicate);
            // A failover to a replica that holds no row of the name (the
            // create was lost) is out of reach of the protocol: see
            // "Not modelled" in the crate docs.
            if s.failovers < b.failovers && s.replica.row.is_some() {
                actions.push(Action::Failover);
            }
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut s = s.clone();
        let generation = s.generation;
        match action {
            Action::Create => {
                let incarnation = self.incarnation(&s.primary);
                s.primary.row = Some(Row {
                    next: s.primary.high_water,
                    version: incarnation,
                    incarnation,
                    generation,
                });
                s.lives += 1;
            }
            Action::Drop => {
                let row = self.fenced(s.primary.row.as_ref()?, generation);
                s.primary.high_water = s.primary.high_water.max(row.next);
                s.primary.dropped_version = s.primary.dropped_version.max(row.version);
                s.primary.row = None;
            }
            Action::Open(i) => {
                s.processes[i].life = Some(s.primary.row.as_ref()?.incarnation);
            }
            Action::Reserve(i) => {
                s.reservations += 1;
                let life = s.processes[i].life?;
                let Some(row) = s.primary.row.as_ref() else {
                    // NotFound: the handle fails.
                    s.processes[i].life = None;
                    s.processes[i].block = None;
                    return Some(s);
                };
                // check_life (the mutated model's lives are all 1).
                if row.incarnation != life {
                    s.processes[i].life = None;
                    s.processes[i].block = None;
                    return Some(s);
                }
                let row = self.fenced(row, generation);
                let (start, end) = (row.next, row.next + BLOCK);
                let version = row.version + 1;
                s.primary.row = Some(Row {
                    next: end,
                    version,
                    ..row
                });
                let p = &mut s.processes[i];
                if start < p.high {
                    // high_water.rs: StoreWentBack, nothing handed out.
                    p.block = None;
                } else {
                    p.block = Some(Block {
                        start,
                        end,
                        version,
                    });
                    p.high = end;
                }
            }
            Action::HandOut(i) => {
                let block = s.processes[i].block.as_mut()?;
                let v = block.start;
                block.start += 1;
                if !s.handed_out.insert(v) {
                    s.twice = true;
                }
            }
            Action::HandBack(i) => {
                let p = std::mem::take(&mut s.processes[i]);
                let high = p.high;
                s.processes[i].high = high;
                if let (Some(block), Some(row)) = (p.block, s.primary.row.as_ref())
                    && block.start < block.end
                {
                    let row = self.fenced(row, generation);
                    if row.version == block.version {
                        s.primary.row = Some(Row {
                            next: block.start,
                            version: row.version + 1,
                            ..row
                        });
                        s.processes[i].high = high.min(block.start);
                    } else {
                        s.primary.row = Some(row);
                    }
                }
            }
            Action::Crash(i) => {
                s.processes[i] = Process::default();
                s.crashes += 1;
            }
            Action::Replicate => s.replica = s.primary.clone(),
            Action::Failover => {
                s.primary = s.replica.clone();
                s.generation += 1;
                s.failovers += 1;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![Property::always(NO_VALUE_TWICE, |_, s: &State| !s.twice)]
    }
}
