//! The parsers of issue 29's inputs never panic: times (`ids bounds`), skip
//! ranges (`create --bit-reversed`), windows of any layout, and worker-lease
//! tokens, on random and near-valid text.

use std::time::Duration;

use keysmith::ids::{Layout, WorkerLeases, parse_time_ms};
use keysmith::numbers::{BitReversal, BitReversed, SkipRange};
use keysmith::sequence::lease::LeaseKey;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn times_and_skip_ranges_parse_or_fail_cleanly(
        s in prop_oneof![
            "[0-9T:.Z+-]{0,40}",
            "-?[0-9]{1,25}",
            "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})",
            "-?[0-9]{1,20}\\.\\.-?[0-9]{1,20}",
            "\\PC{0,30}",
        ],
    ) {
        let _ = parse_time_ms(&s);
        if let Ok(r) = s.parse::<SkipRange>() {
            prop_assert!(r.start >= 0 && r.start < r.end);
            let b = BitReversal::new(&BitReversed { skip: Some(r) });
            prop_assert!(b.counter_of(r.start).is_err());
        }
    }

    #[test]
    fn bounds_of_any_window_and_layout_never_panic(
        t in 0u32..70, w in 0u32..30, q in 0u32..30, unit in -5i64..100_000_000,
        epoch in any::<i64>(), from in any::<i64>(), to in any::<i64>(),
    ) {
        let l = Layout { time_bits: t, worker_bits: w, sequence_bits: q, unit_ms: unit, epoch_ms: epoch };
        if let Ok(b) = l.bounds(from, to) {
            prop_assert!(b.min_id <= b.max_id);
            prop_assert!(l.decode(b.min_id).is_ok() && l.decode(b.max_id).is_ok());
        }
    }
}

#[test]
fn worker_lease_tokens_never_panic() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let leases = rt.block_on(async {
        let store = keysmith::store::open("memory://").await.unwrap();
        WorkerLeases::new(store, LeaseKey::random())
    });
    let held = rt
        .block_on(leases.lease("g", Duration::from_secs(60), 4))
        .unwrap();
    let token: Vec<char> = held.lease.chars().collect();
    let mut runner = proptest::test_runner::TestRunner::default();
    runner
        .run(
            &(any::<prop::sample::Index>(), any::<char>(), "\\PC{0,60}"),
            |(at, c, junk)| {
                let mut t = token.clone();
                let i = at.index(t.len());
                let same = t[i] == c;
                t[i] = c;
                let edited: String = t.into_iter().collect();
                let ok = rt.block_on(leases.renew("g", &edited, None)).is_ok();
                prop_assert_eq!(ok, same, "an edited token renewed: {}", edited);
                prop_assert!(rt.block_on(leases.renew("g", &junk, None)).is_err());
                prop_assert!(rt.block_on(leases.release("g", &junk)).is_err());
                Ok(())
            },
        )
        .unwrap();
}
