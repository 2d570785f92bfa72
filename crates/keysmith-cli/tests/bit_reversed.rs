//! Bit-reversed sequences (`create --bit-reversed [--skip-range A..B]`,
//! `decode-reversed`) on the real binary, over SQLite and PostgreSQL, and
//! over HTTP: values are positive, unique, never in the skip range, and map
//! back to the counter; processes share the setting through the store; bad
//! input creates nothing.
//!
//! `cargo test -p keysmith-cli --test bit_reversed`

mod common;

use std::collections::HashSet;

use common::server::ServerProc;
use common::{Db, fails, ok};
use serde_json::Value;

/// Skips the upper half of the values: every odd counter's value.
const SKIP: &str = "4611686018427387904..9223372036854775807";

fn values(text: &str) -> Vec<i64> {
    text.lines().map(|l| l.parse().unwrap()).collect()
}

/// Several `next` processes, then every value decoded back.
fn bit_reversed_values_are_unique_positive_and_decode(url: &str) {
    ok(
        url,
        &["create", "spread", "--bit-reversed", "--skip-range", SKIP],
    );
    let show = ok(url, &["show", "spread"]);
    assert!(
        show.contains("reversed:  yes (skipping 4611686018427387904..9223372036854775807)"),
        "{show}"
    );
    let mut all = Vec::new();
    for _ in 0..4 {
        all.extend(values(&ok(url, &["next", "spread", "--count", "25"])));
    }
    assert_eq!(all.len(), 100);
    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "a value twice");
    let mut counters = Vec::new();
    for v in &all {
        assert!(
            *v > 0 && *v < 1 << 62,
            "{v} negative, zero or in the skip range"
        );
        counters.push(
            ok(url, &["decode-reversed", "spread", &v.to_string()])
                .trim()
                .parse::<i64>()
                .unwrap(),
        );
    }
    // The upper half is skipped: the even counters 2, 4, ... are handed out, in order.
    assert_eq!(counters, (1..=100).map(|i| 2 * i).collect::<Vec<_>>());
    let e = fails(url, &["decode-reversed", "spread", "5000000000000000000"]);
    assert!(e.contains("skip range"), "{e}");
    let e = fails(url, &["decode-reversed", "spread", "x"]);
    assert!(e.contains("not a value"), "{e}");

    // Bad input: a clear error, nothing created.
    for (bad, says) in [
        (
            &["create", "b1", "--bit-reversed", "--skip-range", "5..5"][..],
            "skip range",
        ),
        (
            &["create", "b2", "--bit-reversed", "--skip-range", "x"],
            "skip range",
        ),
        (
            &[
                "create",
                "b3",
                "--bit-reversed",
                "--skip-range",
                "0..9223372036854775807",
            ],
            "half",
        ),
        (
            &["create", "b4", "--bit-reversed", "--gapless"],
            "plain integers",
        ),
        (
            &["create", "b5", "--bit-reversed", "--start", "0"],
            "starts at 1",
        ),
        (&["create", "b6", "--skip-range", "1..5"], "--bit-reversed"),
    ] {
        let e = fails(url, bad);
        assert!(e.contains(says), "{bad:?}: {e}");
    }
    let list = ok(url, &["list"]);
    assert!(!list.contains("b1") && !list.contains("b5"), "{list}");
    ok(url, &["create", "plain"]);
    let e = fails(url, &["decode-reversed", "plain", "5"]);
    assert!(e.contains("bit-reversed"), "{e}");
}

#[test]
fn sqlite_bit_reversed_sequences() {
    let db = Db::new();
    bit_reversed_values_are_unique_positive_and_decode(&db.url());
}

#[test]
fn postgres_bit_reversed_sequences() {
    let Some(pg) = keysmith_testsupport::postgres::TempPostgres::shared() else {
        return;
    };
    bit_reversed_values_are_unique_positive_and_decode(&format!(
        "{}?schema=bit_reversed",
        pg.url()
    ));
}

/// Created over HTTP, values from `next`; decoded by the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_reversed_over_http() {
    let db = Db::new();
    let s = ServerProc::start(&db, &[], &[]).await;
    let c = reqwest::Client::new();
    let r = c
        .post(s.url("/v1/sequences"))
        .json(&serde_json::json!({"name": "h", "bit_reversed": true, "skip_range": {"start": 0, "end": 1i64 << 61}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["numbering"]["bit_reversed"]["skip"]["end"], 1i64 << 61);
    let v: Value = c
        .post(s.url("/v1/sequences/h/next?count=40"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let got: Vec<i64> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    assert_eq!(got.len(), 40);
    assert_eq!(got.iter().collect::<HashSet<_>>().len(), 40);
    for x in &got {
        assert!(*x >= 1 << 61, "{x} in the skip range");
        let counter: i64 = db
            .ok(&["decode-reversed", "h", &x.to_string()])
            .trim()
            .parse()
            .unwrap();
        assert!(counter >= 1);
    }
    for bad in [
        serde_json::json!({"name": "x1", "skip_range": {"start": 0, "end": 5}}),
        serde_json::json!({"name": "x2", "bit_reversed": true, "skip_range": {"start": 5, "end": 5}}),
        serde_json::json!({"name": "x3", "bit_reversed": true, "gapless": true}),
        serde_json::json!({"name": "x4", "bit_reversed": true, "start": 0}),
        serde_json::json!({"name": "x5", "bit_reversed": true, "skip_range": {"start": 0}}),
    ] {
        let r = c
            .post(s.url("/v1/sequences"))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{bad}");
    }
}
