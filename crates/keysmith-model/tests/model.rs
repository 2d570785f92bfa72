//! The store protocol model, checked exhaustively (breadth first, every
//! state within the bounds): no value is handed out twice; and each known
//! bug put back into the model ([`Mutation`]) is found.

use keysmith_model::{Action, Bounds, Mutation, NO_VALUE_TWICE, StoreProtocol};
use stateright::{Checker, Model};

/// 2 processes, 2 lives of the name, one failover, a crash.
const SMALL: Bounds = Bounds {
    processes: 2,
    lives: 2,
    failovers: 1,
    reservations: 3,
    crashes: 1,
};

fn check(bounds: Bounds, mutation: Mutation) -> impl Checker<StoreProtocol> {
    StoreProtocol { bounds, mutation }
        .checker()
        .spawn_bfs()
        .join()
}

#[test]
fn no_value_is_handed_out_twice() {
    let checker = check(SMALL, Mutation::None);
    eprintln!(
        "{} states, {} unique, depth {}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth()
    );
    checker.assert_properties();
    assert!(
        checker.unique_state_count() > 1000,
        "the model explored little"
    );
}

/// Before #43 every life started at version 1: a process that held a block
/// of the dropped life hands its rest back into the new life, whose values
/// above it are handed out again.
#[test]
fn lives_not_kept_hand_out_a_value_twice() {
    let checker = check(SMALL, Mutation::LivesNotKept);
    let path = checker.assert_any_discovery(NO_VALUE_TWICE);
    let actions = path.into_actions();
    eprintln!("counterexample: {actions:?}");
    assert!(actions.contains(&Action::Drop), "{actions:?}");
    assert!(
        actions.iter().any(|a| matches!(a, Action::HandBack(_))),
        "{actions:?}"
    );
}

/// Without the fence, a failover to a replica that missed a reservation
/// hands that reservation's values out again.
#[test]
fn a_failover_without_the_fence_hands_out_a_value_twice() {
    let checker = check(SMALL, Mutation::NoFence);
    let actions = checker.assert_any_discovery(NO_VALUE_TWICE).into_actions();
    eprintln!("counterexample: {actions:?}");
    assert!(actions.contains(&Action::Failover), "{actions:?}");
}

/// The bug this model found in the fence: with the version raised by one,
/// a handle whose reservation the failover lost hands its block's rest back
/// into the fenced row (the versions match), and the values another lost
/// reservation handed out are reserved again.
#[test]
fn a_fence_raising_the_version_by_one_hands_out_a_value_twice() {
    let checker = check(SMALL, Mutation::FenceVersionPlusOne);
    let actions = checker.assert_any_discovery(NO_VALUE_TWICE).into_actions();
    eprintln!("counterexample: {actions:?}");
    let failover = actions.iter().position(|a| *a == Action::Failover);
    let hand_back = actions
        .iter()
        .rposition(|a| matches!(a, Action::HandBack(_)));
    assert!(failover < hand_back && failover.is_some(), "{actions:?}");
}
