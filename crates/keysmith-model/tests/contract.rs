//! The model and the store contract must not drift: every action names a
//! method of the contract (read from `crates/keysmith-core/src/store/*.rs`),
//! and every method of `SequenceStore` that moves `next` or the life of a
//! name is mirrored by an action or listed here as left out, with why.

use std::collections::BTreeSet;
use std::path::Path;

use keysmith_model::{Action, Mirrors};

/// Methods of `SequenceStore` the model leaves out, and why.
const LEFT_OUT: &[(&str, &str)] = &[
    ("reserve_locked", "reserve_locked_in with life 0"),
    (
        "reserve_atomic",
        "the same reservation in one server-side step",
    ),
    (
        "reserve_atomic_in",
        "the same reservation in one server-side step",
    ),
    ("atomic_reserve", "the capability behind reserve_atomic"),
    (
        "alter_if_version",
        "an operator's put_if_version, with more fields",
    ),
    (
        "alter_checked",
        "what backends implement for alter_if_version",
    ),
    (
        "raise_failover_skip",
        "changes the margin only, not next or the version",
    ),
    ("record_counts", "counters, no values"),
    ("read_counts", "counters, no values"),
    ("list_sequences", "reads only"),
    (
        "sequence_names_near",
        "reads names for a not-found hint only",
    ),
    (
        "count_sequences_with_prefix",
        "counts names for a quota only",
    ),
];

fn store_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../keysmith-core/src/store")
}

/// `fn NAME` of every function in `text`.
fn functions(text: &str) -> BTreeSet<String> {
    text.split("fn ")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty() && rest[name.len()..].starts_with(['(', '<'])).then_some(name)
        })
        .collect()
}

/// The methods of trait `name` in `text` (its body up to the first line
/// that is a lone `}`).
fn trait_methods(text: &str, name: &str) -> BTreeSet<String> {
    let start = text
        .find(&format!("pub trait {name}"))
        .unwrap_or_else(|| panic!("no trait {name}"));
    let body = &text[start..];
    let end = body.find("\n}\n").expect("the trait ends");
    functions(&body[..end])
}

/// The methods of the store contract's traits `traits`, read from
/// `crates/keysmith-core/src/store/*.rs`.
fn contract_methods(traits: &[&str]) -> BTreeSet<String> {
    let mut contract = BTreeSet::new();
    for entry in std::fs::read_dir(store_dir()).expect("the store contract's files") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for trait_name in traits {
                if text.contains(&format!("pub trait {trait_name}")) {
                    contract.extend(trait_methods(&text, trait_name));
                }
            }
        }
    }
    contract
}

#[test]
fn every_action_names_a_method_of_the_contract() {
    let contract = contract_methods(&["SequenceStore", "Store"]);
    assert!(contract.contains("put_if_version"), "{contract:?}");
    for action in Action::KINDS {
        if let Mirrors::Contract(method) = action.mirrors() {
            assert!(
                contract.contains(method),
                "{action:?} mirrors `{method}`, which the store contract no longer has: {contract:?}"
            );
        }
    }
}

#[test]
fn every_sequence_method_is_mirrored_or_left_out_with_a_reason() {
    let text = std::fs::read_to_string(store_dir().join("sequences.rs")).unwrap();
    let methods = trait_methods(&text, "SequenceStore");
    let mirrored: BTreeSet<&str> = Action::KINDS
        .iter()
        .filter_map(|a| match a.mirrors() {
            Mirrors::Contract(m) => Some(m),
            Mirrors::Outside(_) => None,
        })
        .collect();
    let left_out: BTreeSet<&str> = LEFT_OUT.iter().map(|(m, _)| *m).collect();
    for m in &methods {
        assert!(
            mirrored.contains(m.as_str()) || left_out.contains(m.as_str()),
            "SequenceStore::{m} is new: model it in keysmith-model or add it to LEFT_OUT with a reason"
        );
    }
    for m in &left_out {
        assert!(
            methods.contains(*m),
            "LEFT_OUT names `{m}`, which SequenceStore no longer has"
        );
    }
}

#[test]
fn the_fence_raises_the_version_as_the_contract_does() {
    let text = std::fs::read_to_string(store_dir().join("sequences.rs")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("pub const FENCE_VERSION_STEP: u64 = "))
        .expect("the contract's FENCE_VERSION_STEP");
    let value = line.trim_end_matches(';').rsplit("= ").next().unwrap();
    assert_eq!(value, "1 << 32");
    assert_eq!(keysmith_model::FENCE_VERSION_STEP, 1 << 32);
}

/// The leader model (`keysmith_model::leader`) mirrors `leader.rs` and the
/// worker-lease contract: the store methods its `Land` applies still exist,
/// the functions its steps name are still there, and a term's deadline is
/// still measured from `t0`, the clock read before the request (the model
/// shows what breaks when it is not: `a_deadline_from_the_answer_breaks_order`).
#[test]
fn the_leader_model_names_what_leader_rs_and_the_contract_have() {
    use keysmith_model::leader::LeaderAction;
    let contract = contract_methods(&["SequenceStore", "WorkerStore"]);
    for method in LeaderAction::LANDS {
        assert!(
            contract.contains(method),
            "the leader model's Land applies `{method}`, which the store contract no longer has"
        );
    }
    let leader = std::fs::read_to_string(store_dir().join("../sequence/leader.rs")).unwrap();
    let functions = functions(&leader);
    for f in ["acquire", "renew", "make_ready", "try_take", "take", "lose"] {
        assert!(
            functions.contains(f),
            "the leader model names `{f}`, which leader.rs no longer has"
        );
    }
    assert_eq!(
        leader
            .matches("deadline: t0 + self.options.safe_for()")
            .count(),
        2,
        "acquire and renew measure a term's deadline from t0, as the model does"
    );
}
