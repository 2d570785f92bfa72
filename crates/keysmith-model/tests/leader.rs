//! The leader model (`keysmith_model::leader`), checked exhaustively
//! (breadth first): no value returned twice, and order across terms; each
//! known bug put back is found.

use keysmith_model::leader::{
    IN_ORDER, LEADER_NO_VALUE_TWICE, LeaderAction, LeaderBounds, LeaderMutation, LeaderProtocol,
};
use stateright::{Checker, HasDiscoveries, Model};

/// Two processes, time for a lease to expire twice over, two blocks.
const SMALL: LeaderBounds = LeaderBounds {
    processes: 2,
    max_time: 4,
    reservations: 2,
    returns: 2,
};

/// Every state for the model as it is; for a mutation, breadth first up to
/// the first counterexample (the shortest).
fn check(mutation: LeaderMutation) -> impl Checker<LeaderProtocol> {
    let model = LeaderProtocol {
        bounds: SMALL,
        mutation,
    };
    let checker = model.checker();
    let checker = match mutation {
        LeaderMutation::None => checker,
        _ => checker.finish_when(HasDiscoveries::AnyOf(
            [IN_ORDER, LEADER_NO_VALUE_TWICE].into_iter().collect(),
        )),
    };
    checker.spawn_bfs().join()
}

/// A mutation breaks order; uniqueness does not rest on the lease (every
/// value comes from a block reservation), so it holds even then.
fn breaks_order(mutation: LeaderMutation) -> Vec<LeaderAction> {
    let checker = check(mutation);
    let actions = checker.assert_any_discovery(IN_ORDER).into_actions();
    eprintln!("{mutation:?}: counterexample {actions:?}");
    assert!(
        checker.discovery(LEADER_NO_VALUE_TWICE).is_none(),
        "{mutation:?} returned a value twice"
    );
    // Order across terms: both processes returned values.
    for p in 0..2 {
        assert!(
            actions.contains(&LeaderAction::Return(p)),
            "{mutation:?}: process {p} returned nothing in {actions:?}"
        );
    }
    actions
}

#[test]
fn values_are_unique_and_in_order_across_terms() {
    let checker = check(LeaderMutation::None);
    eprintln!(
        "{} states, {} unique, depth {}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth()
    );
    // Both safety properties hold in every state, and a state where two
    // processes returned values (a takeover) was reached.
    checker.assert_properties();
    assert!(
        checker.unique_state_count() > 10_000,
        "the model explored little"
    );
}

/// Measured from the answer, the deadline can outlast the lease (the store
/// started it when the call landed): the old leader returns a small value
/// after the next leader returned a larger one.
#[test]
fn a_deadline_from_the_answer_breaks_order() {
    breaks_order(LeaderMutation::DeadlineFromReply);
}

/// A renewal that ignores the fence lets a paused leader lead again over
/// the next term.
#[test]
fn a_renewal_without_the_fence_breaks_order() {
    breaks_order(LeaderMutation::RenewIgnoresFence);
}

/// Two leaders at once, if the store granted a held lease.
#[test]
fn an_acquisition_of_a_held_lease_breaks_order() {
    breaks_order(LeaderMutation::AcquireWhileHeld);
}

/// Values taken under a term and returned after its deadline.
#[test]
fn no_issue_check_breaks_order() {
    breaks_order(LeaderMutation::NoIssueCheck);
}

/// What the model found about step 5 of `leader.rs`'s argument (a block is
/// used only after a checked renewal that follows its reservation): with
/// every clock within the drift bound, the deadline check alone keeps
/// order; no interleaving within these bounds breaks it without step 5. A
/// late reservation of a paused leader reaches it only after its deadline.
/// Step 5 is defence in depth against what the model leaves out (a clock
/// stepped past the drift bound, where it turns a wrong order into a gap).
#[test]
fn without_the_checked_renewal_after_a_reservation_order_still_holds_on_good_clocks() {
    let checker = check(LeaderMutation::NoConfirm);
    assert!(
        checker.discovery(IN_ORDER).is_none(),
        "{:?}",
        checker.discovery(IN_ORDER).map(|p| p.into_actions())
    );
    assert!(checker.discovery(LEADER_NO_VALUE_TWICE).is_none());
}
