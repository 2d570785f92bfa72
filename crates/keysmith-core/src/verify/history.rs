//! Histories of concurrent clients, checked the way Jepsen checks a store's:
//! every client writes down, per operation, when it invoked it, when it
//! completed, and the values it got; after the run [`check`] reads all the
//! histories together.
//!
//! What it checks, in this order, and the first violation it finds is the
//! answer ([`HistoryViolation`], naming both operations):
//!
//! 1. Each operation completed no earlier than it was invoked, and one
//!    client's operations do not overlap in time (a client is one caller
//!    doing one thing at a time: a handle, a connection, a task).
//! 2. Uniqueness: no value appears twice, in one operation or two. The first
//!    violation is the duplicate whose second operation was invoked first.
//! 3. Per-client (per-handle) order: the values of one operation increase,
//!    and every value of a client's operation is above every value of its
//!    earlier operations.
//! 4. With [`Order::RealTime`] (strict sequences, block 1, or all the
//!    clients of one server): an operation that completed before another
//!    was invoked got smaller values than it. Operations that overlap in
//!    time may take their values in either order.
//!
//! Operations with no values (a 503, a refusal, a timeout) take part in
//! check 1 only: a failed call hands out nothing. Operations whose outcome
//! is unknown (a call that timed out may still have taken values) should be
//! left out of the history: nothing about their values is known.
//!
//! Times are nanoseconds from any fixed instant shared by all clients
//! ([`History::record`] counts from the history's creation).

use std::collections::HashMap;
use std::fmt;
use std::time::Instant;

use serde::Serialize;

/// One operation of one client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Op {
    /// Who invoked it: one caller doing one thing at a time.
    pub client: u32,
    /// When it was invoked, in nanoseconds from the history's start.
    pub invoke_ns: u64,
    /// When it completed (its answer was seen), likewise.
    pub complete_ns: u64,
    /// The values it got, in the order it got them; empty when it failed.
    pub values: Vec<i64>,
}

impl fmt::Display for Op {
    /// `client 3 [1.204 ms .. 1.998 ms] got [5, 6]` (at most 8 values shown).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client {} [{:.3} ms .. {:.3} ms] got ",
            self.client,
            self.invoke_ns as f64 / 1e6,
            self.complete_ns as f64 / 1e6
        )?;
        if self.values.len() <= 8 {
            write!(f, "{:?}", self.values)
        } else {
            write!(
                f,
                "{} values {}..={}",
                self.values.len(),
                self.values[0],
                self.values[self.values.len() - 1]
            )
        }
    }
}

impl Op {
    fn min(&self) -> Option<i64> {
        self.values.iter().copied().min()
    }

    fn max(&self) -> Option<i64> {
        self.values.iter().copied().max()
    }
}

/// Which order the values must keep beyond uniqueness and per-client order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Per client only (cached blocks across handles or servers; time-ordered
    /// ids of several workers).
    PerClient,
    /// Also across clients in real time: what completed first got less.
    RealTime,
}

/// The first thing [`check`] found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HistoryViolation {
    /// An operation completed before it was invoked.
    Malformed {
        /// The operation.
        op: Op,
    },
    /// Two operations of one client overlap in time.
    Overlap {
        /// The one invoked first.
        first: Op,
        /// The one invoked while the first was in flight.
        then: Op,
    },
    /// A value was handed out twice.
    Duplicate {
        /// The value.
        value: i64,
        /// The operation that got it first (invoked first).
        first: Op,
        /// The operation that got it again (the same one when one operation
        /// got it twice).
        again: Op,
    },
    /// A client got a value not above one it got before.
    ClientOrder {
        /// The earlier operation (the same one when its own values do not
        /// increase).
        first: Op,
        /// The later one.
        then: Op,
    },
    /// An operation that began after another completed got a value not
    /// above that one's.
    RealTime {
        /// The operation that completed first (the one with the largest
        /// value of those that completed before `later` was invoked).
        earlier: Op,
        /// The operation invoked after `earlier` completed.
        later: Op,
    },
}

impl fmt::Display for HistoryViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HistoryViolation::Malformed { op } => {
                write!(f, "malformed: {op} completed before it was invoked")
            }
            HistoryViolation::Overlap { first, then } => write!(
                f,
                "overlap: one client had two operations in flight at once: {first}; {then}"
            ),
            HistoryViolation::Duplicate {
                value,
                first,
                again,
            } => write!(
                f,
                "duplicate: {value} handed out twice: first {first}; again {again}"
            ),
            HistoryViolation::ClientOrder { first, then } => write!(
                f,
                "client order: values of one client do not increase: {first}; then {then}"
            ),
            HistoryViolation::RealTime { earlier, later } => write!(
                f,
                "real-time order: {later} began after {earlier} completed, but did not get larger values"
            ),
        }
    }
}

impl std::error::Error for HistoryViolation {}

/// What a passing [`check`] looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Checked {
    /// Operations.
    pub ops: usize,
    /// Operations that got values.
    pub with_values: usize,
    /// Values, all distinct.
    pub values: usize,
    /// Distinct clients.
    pub clients: usize,
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} operations of {} clients, {} with values, {} values: none twice, in order",
            self.ops, self.clients, self.with_values, self.values
        )
    }
}

/// The operations of many clients, timed from one start.
#[derive(Debug, Clone)]
pub struct History {
    start: Instant,
    ops: Vec<Op>,
}

impl Default for History {
    fn default() -> Self {
        History::new()
    }
}

impl History {
    /// An empty history whose times count from now.
    pub fn new() -> History {
        History::starting_at(Instant::now())
    }

    /// An empty history whose times count from `start` (which must not be
    /// after any instant recorded).
    pub fn starting_at(start: Instant) -> History {
        History {
            start,
            ops: Vec::new(),
        }
    }

    /// Nanoseconds from the start to `at` (0 for an instant before it).
    pub fn ns(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.start).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Records an operation `client` invoked at `invoked`, whose answer it saw
    /// at `completed`, with the values it got.
    pub fn record(&mut self, client: u32, invoked: Instant, completed: Instant, values: Vec<i64>) {
        let op = Op {
            client,
            invoke_ns: self.ns(invoked),
            complete_ns: self.ns(completed),
            values,
        };
        self.ops.push(op);
    }

    /// Adds an operation already timed.
    pub fn push(&mut self, op: Op) {
        self.ops.push(op);
    }

    /// Adds every operation of `other` (timed from the same start).
    pub fn extend(&mut self, other: History) {
        self.ops.extend(other.ops);
    }

    /// The operations, in the order recorded.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// [`check`] of these operations.
    ///
    /// # Errors
    /// The first violation found.
    pub fn check(&self, order: Order) -> Result<Checked, HistoryViolation> {
        check(&self.ops, order)
    }
}

/// Checks the operations of all clients; see the module's header.
///
/// # Errors
/// The first violation found, with both operations.
pub fn check(ops: &[Op], order: Order) -> Result<Checked, HistoryViolation> {
    // Invocation order, ties by completion, then by client: deterministic.
    let mut by_invoke: Vec<&Op> = ops.iter().collect();
    by_invoke.sort_by_key(|o| (o.invoke_ns, o.complete_ns, o.client));

    // 1. Well-formed, and one operation at a time per client.
    if let Some(op) = by_invoke.iter().find(|o| o.complete_ns < o.invoke_ns) {
        return Err(HistoryViolation::Malformed { op: (*op).clone() });
    }
    let mut per_client: HashMap<u32, Vec<&Op>> = HashMap::new();
    for op in &by_invoke {
        per_client.entry(op.client).or_default().push(op);
    }
    let mut overlap: Option<(&Op, &Op)> = None;
    for list in per_client.values() {
        for w in list.windows(2) {
            if w[1].invoke_ns < w[0].complete_ns
                && overlap.is_none_or(|(_, then)| w[1].invoke_ns < then.invoke_ns)
            {
                overlap = Some((w[0], w[1]));
            }
        }
    }
    if let Some((first, then)) = overlap {
        return Err(HistoryViolation::Overlap {
            first: first.clone(),
            then: then.clone(),
        });
    }

    // 2. Uniqueness.
    let mut seen: HashMap<i64, &Op> = HashMap::new();
    let mut values = 0;
    for op in &by_invoke {
        for &v in &op.values {
            values += 1;
            if let Some(first) = seen.insert(v, op) {
                return Err(HistoryViolation::Duplicate {
                    value: v,
                    first: first.clone(),
                    again: (*op).clone(),
                });
            }
        }
    }

    // 3. Per-client order: the first break in invocation order.
    let mut broken: Option<(&Op, &Op)> = None;
    for list in per_client.values() {
        let mut last: Option<&Op> = None;
        for op in list.iter().filter(|o| !o.values.is_empty()) {
            let found = if op.values.windows(2).any(|w| w[1] <= w[0]) {
                Some((*op, *op))
            } else {
                last.filter(|l| op.min() <= l.max()).map(|l| (l, *op))
            };
            if let Some((first, then)) = found {
                if broken.is_none_or(|(_, b)| then.invoke_ns < b.invoke_ns) {
                    broken = Some((first, then));
                }
                break;
            }
            last = Some(op);
        }
    }
    if let Some((first, then)) = broken {
        return Err(HistoryViolation::ClientOrder {
            first: first.clone(),
            then: then.clone(),
        });
    }

    // 4. Real-time order: sweep in invocation order, folding in every
    // operation that completed strictly before the current one began.
    if order == Order::RealTime {
        let mut by_complete: Vec<&Op> = by_invoke
            .iter()
            .copied()
            .filter(|o| !o.values.is_empty())
            .collect();
        by_complete.sort_by_key(|o| (o.complete_ns, o.invoke_ns, o.client));
        let mut done = 0;
        let mut largest: Option<(i64, &Op)> = None;
        for op in by_invoke.iter().filter(|o| !o.values.is_empty()) {
            while done < by_complete.len() && by_complete[done].complete_ns < op.invoke_ns {
                let c = by_complete[done];
                let m = c.max().expect("has values");
                if largest.is_none_or(|(l, _)| m > l) {
                    largest = Some((m, c));
                }
                done += 1;
            }
            if let (Some((l, earlier)), Some(min)) = (largest, op.min())
                && min <= l
            {
                return Err(HistoryViolation::RealTime {
                    earlier: earlier.clone(),
                    later: (*op).clone(),
                });
            }
        }
    }

    Ok(Checked {
        ops: ops.len(),
        with_values: ops.iter().filter(|o| !o.values.is_empty()).count(),
        values,
        clients: per_client.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: u32, invoke: u64, complete: u64, values: &[i64]) -> Op {
        Op {
            client,
            invoke_ns: invoke,
            complete_ns: complete,
            values: values.to_vec(),
        }
    }

    /// Three clients of a strict sequence, some calls overlapping, one
    /// failed call (no values).
    fn clean() -> Vec<Op> {
        vec![
            op(0, 0, 10, &[1]),
            op(1, 5, 20, &[3]), // overlaps client 0's and 2's: any order
            op(2, 8, 15, &[2]),
            op(0, 21, 30, &[4, 5]),
            op(1, 22, 40, &[]), // a 503
            op(2, 25, 35, &[6]),
            op(1, 41, 50, &[7]),
        ]
    }

    #[test]
    fn a_clean_history_passes_both_orders() {
        for order in [Order::PerClient, Order::RealTime] {
            let c = check(&clean(), order).unwrap();
            assert_eq!(
                c,
                Checked {
                    ops: 7,
                    with_values: 6,
                    values: 7,
                    clients: 3
                }
            );
        }
        assert!(check(&[], Order::RealTime).is_ok());
    }

    #[test]
    fn a_planted_duplicate_is_caught_with_both_operations() {
        let mut h = clean();
        h.push(op(3, 60, 70, &[9, 4])); // 4 was client 0's
        let err = check(&h, Order::PerClient).unwrap_err();
        assert_eq!(
            err,
            HistoryViolation::Duplicate {
                value: 4,
                first: op(0, 21, 30, &[4, 5]),
                again: op(3, 60, 70, &[9, 4]),
            }
        );
        let text = err.to_string();
        assert!(text.contains("4 handed out twice"), "{text}");
        assert!(
            text.contains("client 0") && text.contains("client 3"),
            "{text}"
        );
        // Within one operation too.
        let err = check(&[op(0, 0, 1, &[5, 5])], Order::PerClient).unwrap_err();
        assert!(matches!(err, HistoryViolation::Duplicate { value: 5, .. }));
    }

    #[test]
    fn a_planted_real_time_inversion_is_caught() {
        let mut h = clean();
        // Client 3 begins after client 2's [6] completed (35) and gets 0: a
        // new value (unique), but below one handed out before it began.
        h.retain(|o| o.values != [7]);
        h.push(op(3, 36, 38, &[0]));
        // Per client it is fine: client 3 has one operation.
        assert!(check(&h, Order::PerClient).is_ok());
        let err = check(&h, Order::RealTime).unwrap_err();
        assert_eq!(
            err,
            HistoryViolation::RealTime {
                earlier: op(2, 25, 35, &[6]),
                later: op(3, 36, 38, &[0]),
            }
        );
        assert!(err.to_string().contains("real-time order"), "{err}");
    }

    #[test]
    fn overlapping_operations_may_take_values_in_either_order() {
        // b began before a completed: b's smaller value is fine.
        let h = [op(0, 0, 10, &[5]), op(1, 9, 12, &[4])];
        assert!(check(&h, Order::RealTime).is_ok());
        // One nanosecond later it is not.
        let h = [op(0, 0, 10, &[5]), op(1, 11, 12, &[4])];
        assert!(matches!(
            check(&h, Order::RealTime),
            Err(HistoryViolation::RealTime { .. })
        ));
    }

    #[test]
    fn a_client_going_backwards_is_caught() {
        let h = [op(0, 0, 10, &[5]), op(1, 0, 10, &[1]), op(0, 11, 12, &[3])];
        assert_eq!(
            check(&h, Order::PerClient).unwrap_err(),
            HistoryViolation::ClientOrder {
                first: op(0, 0, 10, &[5]),
                then: op(0, 11, 12, &[3]),
            }
        );
        let h = [op(0, 0, 10, &[5, 3])];
        assert!(matches!(
            check(&h, Order::PerClient),
            Err(HistoryViolation::ClientOrder { .. })
        ));
    }

    #[test]
    fn malformed_and_overlapping_operations_are_caught() {
        assert!(matches!(
            check(&[op(0, 10, 9, &[1])], Order::PerClient),
            Err(HistoryViolation::Malformed { .. })
        ));
        assert!(matches!(
            check(&[op(0, 0, 10, &[1]), op(0, 5, 12, &[2])], Order::PerClient),
            Err(HistoryViolation::Overlap { .. })
        ));
    }

    #[test]
    fn the_first_violation_is_reported() {
        // Two duplicates: 8 (second seen at 40) and 2 (second seen at 30).
        let h = [
            op(0, 0, 1, &[8]),
            op(1, 2, 3, &[2]),
            op(2, 30, 31, &[2]),
            op(3, 40, 41, &[8]),
        ];
        assert!(matches!(
            check(&h, Order::PerClient),
            Err(HistoryViolation::Duplicate { value: 2, .. })
        ));
    }

    #[test]
    fn record_times_from_the_start() {
        let start = Instant::now();
        let mut h = History::starting_at(start);
        let a = start + std::time::Duration::from_millis(2);
        let b = start + std::time::Duration::from_millis(3);
        h.record(7, a, b, vec![1, 2]);
        assert_eq!(h.ops(), &[op(7, 2_000_000, 3_000_000, &[1, 2])]);
        assert!(h.check(Order::RealTime).is_ok());
    }

    #[test]
    fn a_large_history_is_checked_quickly() {
        // 200 000 operations of 50 clients, one value each, strictly in
        // time order: a quadratic check would not finish.
        let h: Vec<Op> = (0..200_000u64)
            .map(|i| op((i % 50) as u32, i * 10, i * 10 + 5, &[i as i64]))
            .collect();
        let c = check(&h, Order::RealTime).unwrap();
        assert_eq!(c.values, 200_000);
    }
}
