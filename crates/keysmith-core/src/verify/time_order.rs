//! Real-time order of a strict sequence's calls: [`check_time_order`].

use super::*;

/// One call to a strict sequence as its caller saw it: when it was sent,
/// when its answer came back (any clock all callers share, e.g. `Instant`s
/// of one test process), and the lowest and highest value it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimedCall<T> {
    /// When the call was sent.
    pub invoked: T,
    /// When its answer came back.
    pub completed: T,
    /// Its lowest value.
    pub first: i64,
    /// Its highest value.
    pub last: i64,
}

/// Two calls out of time order: `earlier` completed before `later` was
/// invoked, yet `later` got a value not above all of `earlier`'s. Indices
/// into the slice given to [`check_time_order`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OrderViolation {
    /// The call that completed first.
    pub earlier: usize,
    /// The call sent after it, with a value not above it.
    pub later: usize,
}

/// Checks the strict column's time order over every pair of `calls`: a
/// value returned before another call was sent is smaller than every value
/// of that call. Returns how many ordered pairs (one completed before the
/// other was sent) were checked, or the first violation found (the
/// offending earlier call is the one with the highest value among those that
/// completed before `later` was sent). Calls that overlap in time may come
/// in any order. `O(n log n)`.
///
/// # Errors
/// The violation, naming both calls.
pub fn check_time_order<T: Ord + Copy>(
    calls: &[TimedCall<T>],
) -> std::result::Result<u64, OrderViolation> {
    let mut by_completed: Vec<usize> = (0..calls.len()).collect();
    by_completed.sort_by_key(|&i| calls[i].completed);
    let mut by_invoked: Vec<usize> = (0..calls.len()).collect();
    by_invoked.sort_by_key(|&i| calls[i].invoked);
    let mut done = 0;
    // The call with the highest value among those completed so far.
    let mut highest: Option<usize> = None;
    let mut pairs = 0u64;
    for &b in &by_invoked {
        while done < by_completed.len() && calls[by_completed[done]].completed < calls[b].invoked {
            let a = by_completed[done];
            if highest.is_none_or(|h| calls[a].last > calls[h].last) {
                highest = Some(a);
            }
            done += 1;
        }
        pairs += done as u64;
        if let Some(a) = highest
            && calls[a].last >= calls[b].first
        {
            return Err(OrderViolation {
                earlier: a,
                later: b,
            });
        }
    }
    Ok(pairs)
}
