//! A model of leader-ordered sequences (`keysmith-core/src/sequence/leader.rs`),
//! checked exhaustively with [`stateright`] for small bounds.
//!
//! Processes acquire the sequence's leader lease, renew it, reserve blocks
//! and confirm each with a checked renewal, take values from the confirmed
//! blocks and return them only after the deadline check. Every store call
//! is three steps, so that time passes between them: the process reads its
//! clock and sends ([`LeaderAction::Send`]), the store applies the call at
//! its own time ([`LeaderAction::Land`]), the answer reaches the process
//! ([`LeaderAction::Reply`]). Time is ticks ([`LeaderAction::Tick`]); any
//! process may stay idle for any number of ticks (a pause, SIGSTOP, a slow
//! network). Each step names the function of the store contract or of
//! `leader.rs` it mirrors ([`LeaderAction::mirrors`]; `tests/contract.rs`
//! fails when a name is no longer there).
//!
//! The properties: no value is returned twice ([`LEADER_NO_VALUE_TWICE`]),
//! and a value returned before another call was made is smaller than that
//! call's ([`IN_ORDER`]), whichever processes serve the two calls. A call is
//! made when its value is taken (the latest moment it can be made: the
//! strongest form of the claim).
//!
//! # Not modelled
//!
//! Clock drift: the store's clock and the processes' clocks are the same
//! ticks, so the margin `2 x MAX_CLOCK_DRIFT x ttl` is 0 here; its
//! arithmetic is checked by `leader.rs`'s unit test
//! `the_issue_deadline_ends_before_the_lease_by_any_clock_within_the_drift`.
//! Failover of the store, several names, `close` (a release is an expiry
//! that comes early, which the model's expiries cover).
//!
//! # Found
//!
//! Each of the argument's steps 1-4 is needed: measuring the deadline from
//! the answer instead of `t0`, a renewal that ignores the fence, a store
//! that grants a held lease, or no deadline check before a value is
//! returned each break order ([`LeaderMutation`]; the tests show the
//! counterexamples). Step 5, the checked renewal after each reservation,
//! is not needed within the model: with clocks within the drift, a paused
//! leader's late block reaches it after its deadline, so the deadline
//! check refuses its values. It stays in `leader.rs` as a second line
//! against a clock stepped past the bound.

use std::collections::BTreeSet;

use stateright::{Model, Property};

/// The property: no value is returned twice.
pub const LEADER_NO_VALUE_TWICE: &str = "no value is returned twice";

/// The property: a value returned before another call was made is smaller.
pub const IN_ORDER: &str = "a value returned before a call was made is smaller than its value";

/// An example the check must reach: values returned by two processes (a
/// takeover), so the properties are not checked on one leader only.
pub const TAKEOVER: &str = "two processes return values";

/// The lease's time to live, in ticks.
pub const TTL: u8 = 2;

/// A known bug put back into the leader model; its test expects a
/// counterexample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaderMutation {
    /// The model as `leader.rs` is.
    None,
    /// The deadline measured from the answer instead of `t0`, the clock
    /// read before the request was sent: the store measured the lease from
    /// an earlier moment, so the deadline can fall after the lease expired.
    DeadlineFromReply,
    /// The store renews a lease whatever its fence: a leader paused past
    /// its lease renews over the next leader's term.
    RenewIgnoresFence,
    /// The store grants the lease while it is held and unexpired.
    AcquireWhileHeld,
    /// The deadline is not checked before a value is returned.
    NoIssueCheck,
    /// A reserved block is used without the checked renewal after it
    /// (step 5 of `leader.rs`'s argument). Not a bug the model finds: with
    /// clocks within the drift the deadline alone keeps order (its test
    /// says so); kept to show it.
    NoConfirm,
}

/// The bounds of one check.
#[derive(Debug, Clone, Copy)]
pub struct LeaderBounds {
    /// Processes competing for the lease.
    pub processes: usize,
    /// The last tick.
    pub max_time: u8,
    /// Blocks reserved in all (each of [`LEADER_BLOCK`] values).
    pub reservations: u8,
    /// Values returned in all.
    pub returns: u8,
}

/// Values per reservation.
pub const LEADER_BLOCK: i64 = 2;

/// The model.
#[derive(Debug, Clone)]
pub struct LeaderProtocol {
    /// The bounds.
    pub bounds: LeaderBounds,
    /// The bug put back, or [`LeaderMutation::None`].
    pub mutation: LeaderMutation,
}

/// The leader lease as the store holds it (a worker lease of group
/// `leader/NAME`, one worker id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The process holding it.
    pub holder: usize,
    /// Its fence: the term.
    pub fence: u8,
    /// The store's tick at which it expires.
    pub expires: u8,
}

/// A store call in flight.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Call {
    /// `acquire_worker`, sent at `t0`.
    Acquire {
        /// The process's clock when it sent the call.
        t0: u8,
    },
    /// `renew_worker` of `fence`, sent at `t0`, confirming `block` if it
    /// follows a reservation.
    Renew {
        /// The process's clock when it sent the call.
        t0: u8,
        /// The term renewed.
        fence: u8,
        /// The block the renewal confirms.
        block: Option<(i64, i64)>,
    },
    /// A block reservation (`reserve_locked_in` through the allocator).
    Reserve,
}

/// What the store answered.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Answer {
    /// The lease was granted with this fence.
    Acquired(u8),
    /// The renewal of a term succeeded.
    Renewed,
    /// Refused: held by another (acquire), or another acquired since (renew).
    Refused,
    /// A block `start..end`.
    Reserved(i64, i64),
}

/// A process's term: its fence and the tick its issue checks must precede.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Term {
    /// The lease's fence when acquired.
    pub fence: u8,
    /// Issue checks pass only before this tick.
    pub deadline: u8,
}

/// One process's `LeaderSequence`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Leader {
    /// Its term, while it leads.
    pub term: Option<Term>,
    /// Confirmed blocks, increasing; values are taken from the front.
    pub blocks: Vec<(i64, i64)>,
    /// The store call in flight and, once landed, the answer.
    pub call: Option<(Call, Option<Answer>)>,
    /// A value taken and not yet returned: the value, the tick the call
    /// was made, and the deadline of the term it was taken in (`try_take`
    /// reads the term and takes under one lock; the check may come later).
    pub taken: Option<(i64, u8, u8)>,
}

/// The whole system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaderState {
    /// Real time, which is also the store's clock and every process's.
    pub now: u8,
    /// The sequence row's `next`.
    pub next: i64,
    /// The lease, once acquired (it stays after expiry until acquired again).
    pub lease: Option<Lease>,
    /// Fences handed out so far.
    pub fences: u8,
    /// Reservations so far.
    pub reservations: u8,
    /// The processes.
    pub leaders: Vec<Leader>,
    /// Every value returned.
    pub returned: BTreeSet<i64>,
    /// Which processes returned a value.
    pub returned_by: Vec<bool>,
    /// The largest value returned at each tick (-1: none).
    pub largest_at: Vec<i64>,
    /// A value was returned twice.
    pub twice: bool,
    /// A value was returned that is not above one returned before its call
    /// was made.
    pub out_of_order: bool,
}

/// One step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaderAction {
    /// Time passes.
    Tick,
    /// Process `p` reads its clock and sends a call: an acquisition when it
    /// does not lead, else a renewal or a reservation ([`LeaderAction::SendReserve`]).
    Send(usize),
    /// Process `p`, leading, sends a block reservation.
    SendReserve(usize),
    /// The store applies process `p`'s call at its tick.
    Land(usize),
    /// The answer reaches process `p`.
    Reply(usize),
    /// Process `p` takes the next value for a call made now.
    Take(usize),
    /// Process `p` checks its deadline and returns the value taken (or
    /// drops it: a gap).
    Return(usize),
}

impl LeaderAction {
    /// Every kind of action, one each (for the drift test).
    pub const KINDS: [LeaderAction; 7] = [
        LeaderAction::Tick,
        LeaderAction::Send(0),
        LeaderAction::SendReserve(0),
        LeaderAction::Land(0),
        LeaderAction::Reply(0),
        LeaderAction::Take(0),
        LeaderAction::Return(0),
    ];

    /// What the action mirrors: store contract methods it calls, or the
    /// `leader.rs` function whose step it is.
    pub fn mirrors(self) -> crate::Mirrors {
        use crate::Mirrors::Outside;
        match self {
            LeaderAction::Tick => Outside("time passing"),
            LeaderAction::Send(_) => {
                Outside("Inner::acquire / Inner::renew: t0 read, then the call")
            }
            LeaderAction::SendReserve(_) => Outside("Inner::make_ready: the reservation"),
            // The store's side of the three calls: see `LANDS`.
            LeaderAction::Land(_) => {
                Outside("the store applies acquire_worker, renew_worker or reserve_locked_in")
            }
            LeaderAction::Reply(_) => {
                Outside("Inner::acquire / Inner::renew / Inner::make_ready: the answer")
            }
            LeaderAction::Take(_) => Outside("LeaderSequence::try_take: State::take"),
            LeaderAction::Return(_) => Outside("LeaderSequence::try_take: the deadline check"),
        }
    }

    /// The store contract methods [`LeaderAction::Land`] applies, one per
    /// [`Call`]: `tests/contract.rs` checks the contract still has them.
    pub const LANDS: [&'static str; 3] = ["acquire_worker", "renew_worker", "reserve_locked_in"];
}

impl LeaderProtocol {
    fn deadline(&self, t0: u8, now: u8) -> u8 {
        match self.mutation {
            LeaderMutation::DeadlineFromReply => now + TTL,
            // `t0 + ttl x (1 - 2 x MAX_CLOCK_DRIFT)`: no drift here.
            _ => t0 + TTL,
        }
    }

    fn land(&self, s: &mut LeaderState, p: usize, call: &Call) -> Answer {
        match *call {
            Call::Acquire { .. } => {
                let free = match &s.lease {
                    None => true,
                    Some(l) => {
                        s.now >= l.expires || self.mutation == LeaderMutation::AcquireWhileHeld
                    }
                };
                if !free {
                    return Answer::Refused;
                }
                s.fences += 1;
                s.lease = Some(Lease {
                    holder: p,
                    fence: s.fences,
                    expires: s.now + TTL,
                });
                Answer::Acquired(s.fences)
            }
            Call::Renew { fence, .. } => match &mut s.lease {
                Some(l)
                    if l.fence == fence || self.mutation == LeaderMutation::RenewIgnoresFence =>
                {
                    l.expires = s.now + TTL;
                    l.holder = p;
                    Answer::Renewed
                }
                _ => Answer::Refused,
            },
            Call::Reserve => {
                let start = s.next;
                s.next += LEADER_BLOCK;
                s.reservations += 1;
                Answer::Reserved(start, start + LEADER_BLOCK)
            }
        }
    }
}

impl Model for LeaderProtocol {
    type State = LeaderState;
    type Action = LeaderAction;

    fn init_states(&self) -> Vec<LeaderState> {
        vec![LeaderState {
            now: 0,
            next: 1,
            lease: None,
            fences: 0,
            reservations: 0,
            leaders: vec![Leader::default(); self.bounds.processes],
            returned: BTreeSet::new(),
            returned_by: vec![false; self.bounds.processes],
            largest_at: vec![-1; usize::from(self.bounds.max_time) + 1],
            twice: false,
            out_of_order: false,
        }]
    }

    fn actions(&self, s: &LeaderState, actions: &mut Vec<LeaderAction>) {
        if s.twice || s.out_of_order {
            return;
        }
        if s.now < self.bounds.max_time {
            actions.push(LeaderAction::Tick);
        }
        for (p, l) in s.leaders.iter().enumerate() {
            match &l.call {
                None => {
                    actions.push(LeaderAction::Send(p));
                    let room = s.reservations
                        + s.leaders
                            .iter()
                            .filter(|o| matches!(o.call, Some((Call::Reserve, _))))
                            .count() as u8;
                    if l.term.is_some() && room < self.bounds.reservations {
                        actions.push(LeaderAction::SendReserve(p));
                    }
                }
                Some((_, None)) => actions.push(LeaderAction::Land(p)),
                Some((_, Some(_))) => actions.push(LeaderAction::Reply(p)),
            }
            let returns = s.returned.len() as u8;
            if l.taken.is_none()
                && l.term.is_some()
                && !l.blocks.is_empty()
                && returns < self.bounds.returns
            {
                actions.push(LeaderAction::Take(p));
            }
            if l.taken.is_some() {
                actions.push(LeaderAction::Return(p));
            }
        }
    }

    fn next_state(&self, last: &LeaderState, action: LeaderAction) -> Option<LeaderState> {
        let mut s = last.clone();
        match action {
            LeaderAction::Tick => s.now += 1,
            LeaderAction::Send(p) => {
                let l = &mut s.leaders[p];
                l.call = Some((
                    match l.term {
                        None => Call::Acquire { t0: s.now },
                        Some(t) => Call::Renew {
                            t0: s.now,
                            fence: t.fence,
                            block: None,
                        },
                    },
                    None,
                ));
            }
            LeaderAction::SendReserve(p) => s.leaders[p].call = Some((Call::Reserve, None)),
            LeaderAction::Land(p) => {
                let (call, _) = s.leaders[p].call.clone()?;
                let answer = self.land(&mut s, p, &call);
                s.leaders[p].call = Some((call, Some(answer)));
            }
            LeaderAction::Reply(p) => {
                let now = s.now;
                let (call, answer) = s.leaders[p].call.take()?;
                let l = &mut s.leaders[p];
                // Whether the term the call was made in is still this
                // process's (it may have ended here meanwhile).
                let current = |l: &Leader, fence: u8| l.term.is_some_and(|t| t.fence == fence);
                match (call, answer?) {
                    (Call::Acquire { t0 }, Answer::Acquired(fence)) => {
                        l.blocks.clear();
                        l.term = Some(Term {
                            fence,
                            deadline: self.deadline(t0, now),
                        });
                    }
                    (Call::Renew { t0, fence, block }, Answer::Renewed) if current(l, fence) => {
                        l.term = Some(Term {
                            fence,
                            deadline: self.deadline(t0, now),
                        });
                        l.blocks.extend(block);
                    }
                    // `State::lose`: the term's values are a gap.
                    (Call::Renew { fence, .. }, Answer::Refused) if current(l, fence) => {
                        l.term = None;
                        l.blocks.clear();
                    }
                    (Call::Reserve, Answer::Reserved(start, end))
                        if self.mutation == LeaderMutation::NoConfirm && l.term.is_some() =>
                    {
                        l.blocks.push((start, end));
                    }
                    // A checked renewal confirms the block before use.
                    (Call::Reserve, Answer::Reserved(start, end))
                        if self.mutation != LeaderMutation::NoConfirm =>
                    {
                        if let Some(t) = l.term {
                            l.call = Some((
                                Call::Renew {
                                    t0: now,
                                    fence: t.fence,
                                    block: Some((start, end)),
                                },
                                None,
                            ));
                        }
                    }
                    _ => {}
                }
            }
            LeaderAction::Take(p) => {
                let now = s.now;
                let l = &mut s.leaders[p];
                let deadline = l.term?.deadline;
                let front = l.blocks.first_mut()?;
                let v = front.0;
                front.0 += 1;
                if front.0 == front.1 {
                    l.blocks.remove(0);
                }
                l.taken = Some((v, now, deadline));
            }
            LeaderAction::Return(p) => {
                let now = s.now;
                let l = &mut s.leaders[p];
                let (v, made, deadline) = l.taken.take()?;
                let passes = self.mutation == LeaderMutation::NoIssueCheck || now < deadline;
                if passes {
                    s.twice |= !s.returned.insert(v);
                    s.returned_by[p] = true;
                    // Every value returned at a tick before the call was made.
                    s.out_of_order |= s.largest_at[..usize::from(made)].iter().any(|&a| a >= v);
                    let at = &mut s.largest_at[usize::from(now)];
                    *at = (*at).max(v);
                }
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(LEADER_NO_VALUE_TWICE, |_, s: &LeaderState| !s.twice),
            Property::always(IN_ORDER, |_, s: &LeaderState| !s.out_of_order),
            Property::sometimes(TAKEOVER, |_, s: &LeaderState| {
                s.returned_by.iter().filter(|b| **b).count() >= 2
            }),
        ]
    }
}
