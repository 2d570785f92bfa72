//! `keysmith ids`: next, decode, layout, and bad input.

mod common;

use common::{Db, assert_increasing, complete_values};

#[test]
fn next_prints_increasing_ids_that_decode_to_now_and_worker_0() {
    let db = Db::new();
    let ids = complete_values(db.ok(&["ids", "next", "--count", "2500"]).as_bytes());
    assert_eq!(ids.len(), 2500);
    assert_increasing(&ids, "ids next");
    let d: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "ids", "decode", &ids[0].to_string()])).unwrap();
    assert_eq!(d["worker"], 0);
    let t = d["time_ms"].as_i64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(
        (now - t).abs() < 600_000,
        "decoded time {t} far from now {now}"
    );
    // The closed generator released its worker id and lowered its floor:
    // the next process starts right above.
    let more = complete_values(db.ok(&["ids", "next", "--count", "3"]).as_bytes());
    assert!(more[0] > ids[2499]);
    let text = db.ok(&["ids", "decode", &more[0].to_string()]);
    assert!(text.contains("worker:   0"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "ids", "next", "--count", "2"])).unwrap();
    assert_eq!(json["ids"].as_array().unwrap().len(), 2);
}

#[test]
fn js_safe_ids_are_below_2_to_the_53() {
    let db = Db::new();
    let ids = complete_values(
        db.ok(&["ids", "next", "--count", "300", "--preset", "js-safe"])
            .as_bytes(),
    );
    assert!(ids.iter().all(|&i| i < 1 << 53));
    assert_increasing(&ids, "js-safe");
}

#[test]
fn layout_prints_lifetime_workers_and_rate() {
    let db = Db::new();
    let r: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "ids", "layout", "--preset", "js-safe"])).unwrap();
    assert_eq!(r["workers"], 256);
    assert_eq!(r["ids_per_unit"], 256);
    assert_eq!(r["javascript_safe"], true);
    assert!(r["years_left"].as_f64().unwrap() > 30.0);
    let text = db.ok(&["ids", "layout"]);
    assert!(
        text.contains("workers:     1024") && text.contains("69.7 years"),
        "{text}"
    );
}

#[test]
fn bad_input_is_a_clear_error_and_changes_nothing() {
    let db = Db::new();
    for (args, says) in [
        (
            &["ids", "layout", "--time-bits", "30"][..],
            "years from now",
        ),
        (
            &["ids", "next", "--time-bits", "30"][..],
            "--allow-short-lifetime",
        ),
        (
            &[
                "ids",
                "next",
                "--worker-bits",
                "23",
                "--time-bits",
                "20",
                "--sequence-bits",
                "0",
            ][..],
            "at most 22 worker bits",
        ),
        (&["ids", "next", "--time-bits", "50"][..], "63 bits"),
        (
            &["ids", "next", "--workers", "2000"][..],
            "holds 1024 worker ids",
        ),
        (&["ids", "next", "--count", "0"][..], "--count"),
        (
            &["ids", "next", "--preset", "nope"][..],
            "unknown layout preset",
        ),
        (&["ids", "decode", "-1"][..], "not an id of layout"),
        (&["ids", "decode", "12x"][..], "is not an id"),
        (
            &["ids", "decode", "9007199254740992", "--preset", "js-safe"][..],
            "another layout",
        ),
    ] {
        let (code, err) = db.fails(args);
        assert_ne!(code, 0);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(!db.path().exists(), "a refused command created the store");
    // A short layout, allowed explicitly.
    let ids = db.ok(&["ids", "next", "--time-bits", "38", "--allow-short-lifetime"]);
    assert_eq!(complete_values(ids.as_bytes()).len(), 1);
}
