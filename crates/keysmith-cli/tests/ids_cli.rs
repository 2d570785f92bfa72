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

/// `--format uuidv7`: version-7 UUIDs, increasing as strings across two
/// processes, that `ids decode --format uuidv7` takes apart into the time,
/// worker id and counter; JSON gives strings.
#[test]
fn uuidv7_ids_increase_and_decode_to_now_worker_and_counter() {
    let db = Db::new();
    let text = db.ok(&["ids", "next", "--format", "uuidv7", "-n", "5000"]);
    let mut uuids: Vec<&str> = text.lines().collect();
    assert_eq!(uuids.len(), 5000);
    let more = db.ok(&["ids", "next", "--format", "uuidv7", "-n", "3"]);
    uuids.extend(more.lines());
    for w in uuids.windows(2) {
        assert!(w[0] < w[1], "{} then {}", w[0], w[1]);
    }
    for u in &uuids {
        assert_eq!(u.len(), 36, "{u}");
        assert_eq!(&u[14..15], "7", "version of {u}");
        assert!("89ab".contains(&u[19..20]), "variant of {u}");
    }
    let d: serde_json::Value = serde_json::from_str(&db.ok(&[
        "--json",
        "ids",
        "decode",
        "--format",
        "uuidv7",
        uuids[4097],
    ]))
    .unwrap();
    assert_eq!(d["worker"], 0);
    let lib = keysmith::ids::decode_uuidv7(uuids[4097]).unwrap();
    assert_eq!(d["counter"], lib.counter);
    assert_eq!(d["time_ms"], lib.time_ms);
    let text = db.ok(&["ids", "decode", "--format", "uuidv7", uuids[0]]);
    assert!(text.contains("counter:  0"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&db.ok(&[
        "--json", "ids", "next", "--format", "uuidv7", "--count", "2",
    ]))
    .unwrap();
    let got = json["ids"].as_array().unwrap();
    assert_eq!(got.len(), 2);
    assert!(
        got.iter()
            .all(|v| v.as_str().is_some_and(|s| s.len() == 36))
    );
    // The default format is today's integers; naming it gives the same.
    let ints = complete_values(
        db.ok(&["ids", "next", "--format", "integer", "-n", "2"])
            .as_bytes(),
    );
    assert_eq!(ints.len(), 2);
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

/// The runway of a layout's time bits: in `ids layout` (text and JSON),
/// with a warning on stderr when under the threshold (5 years).
#[test]
fn layout_shows_its_runway_and_warns_when_it_runs_out_soon() {
    let db = Db::new();
    let r: serde_json::Value = serde_json::from_str(&db.ok(&["--json", "ids", "layout"])).unwrap();
    assert!(
        r["runway"]["seconds_left"].as_f64().unwrap() > 60.0 * 365.0 * 86_400.0,
        "{r}"
    );
    assert_eq!(r["runway"]["warning"], false);
    let out = db.cmd().args(["ids", "layout"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("runway:      6"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
    // 40 bits of 1 ms last 34.8 years: an epoch 33 years back leaves 1.8.
    let epoch = keysmith::ids::wall_ms() - 33 * 31_556_952_000;
    let epoch = epoch.to_string();
    let args = [
        "ids",
        "layout",
        "--time-bits",
        "40",
        "--epoch-ms",
        &epoch,
        "--allow-short-lifetime",
    ];
    let out = db.cmd().args(args).output().unwrap();
    assert!(out.status.success());
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(text.contains("runway:      1.8 years"), "{text}");
    assert!(
        err.contains("warning: the time bits of layout") && err.contains("5.0 years"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_str(&db.ok(&[
        "--json",
        "ids",
        "layout",
        "--time-bits",
        "40",
        "--epoch-ms",
        &epoch,
        "--allow-short-lifetime",
    ]))
    .unwrap();
    assert_eq!(r["runway"]["warning"], true);
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
            &["ids", "next", "--format", "uuid"][..],
            "unknown id format \"uuid\": use integer",
        ),
        (
            &[
                "ids",
                "next",
                "--format",
                "uuidv7",
                "--sequence-bits",
                "13",
                "--worker-bits",
                "9",
            ][..],
            "13 sequence bits",
        ),
        (
            &[
                "ids",
                "decode",
                "--format",
                "uuidv7",
                "67e55044-10b1-426f-9247-bb680e5fe0c8",
            ][..],
            "not a version-7 UUID",
        ),
        (
            &["ids", "decode", "--format", "uuidv7", "12"][..],
            "is not a UUID",
        ),
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
    // A bad --format is a usage error.
    assert_eq!(db.fails(&["ids", "next", "--format", "UUID4"]).0, 2);
    assert!(!db.path().exists(), "a refused command created the store");
    // A short layout, allowed explicitly.
    let ids = db.ok(&["ids", "next", "--time-bits", "38", "--allow-short-lifetime"]);
    assert_eq!(complete_values(ids.as_bytes()).len(), 1);
}
