//! Opaque and encoded sequences (`create --opaque`, `--encoding base32|base62
//! [--prefix P]`, `--js-safe`, `decode`) on the real binary, over SQLite and
//! PostgreSQL, and over HTTP with grants: values are unique and map back to
//! their counters, encoded strings sort as their numbers, bad input is
//! refused naming what was wrong and creates nothing, and the key never
//! appears in any output.
//!
//! `cargo test -p keysmith-cli --test opaque`

mod common;

use std::collections::HashSet;

use common::server::ServerProc;
use common::{Db, fails, ok};
use serde_json::Value;

fn decode(url: &str, name: &str, v: &str) -> i64 {
    ok(url, &["decode", name, v]).trim().parse().unwrap()
}

fn opaque_and_encoded_sequences(url: &str) {
    // Opaque and base32 with a prefix, from several processes.
    ok(
        url,
        &[
            "create",
            "orders",
            "--opaque",
            "--encoding",
            "base32",
            "--prefix",
            "ord",
        ],
    );
    let mut all = Vec::new();
    for _ in 0..4 {
        all.extend(
            ok(url, &["next", "orders", "--count", "25"])
                .lines()
                .map(str::to_owned),
        );
    }
    assert_eq!(all.len(), 100);
    assert_eq!(
        all.iter().collect::<HashSet<_>>().len(),
        100,
        "a value twice"
    );
    for s in &all {
        assert!(s.starts_with("ord_") && s.len() == 4 + 13 + 1, "{s}");
    }
    let counters: Vec<i64> = all.iter().map(|s| decode(url, "orders", s)).collect();
    assert_eq!(counters, (1..=100).collect::<Vec<_>>());
    // Not in order: opaque values do not show the order they were made in.
    let mut sorted = all.clone();
    sorted.sort();
    assert_ne!(sorted, all);
    let show = ok(url, &["show", "orders"]);
    assert!(show.contains("opaque:    yes, key 0 of 16"), "{show}");
    assert!(show.contains("base32, 13 digits"), "{show}");

    // Decode refuses what the sequence never wrote, saying what is wrong.
    let good = &all[0];
    let mut bad_check = good.clone().into_bytes();
    let last = bad_check.len() - 1;
    bad_check[last] = if bad_check[last] == b'0' { b'1' } else { b'0' };
    let bad_check = String::from_utf8(bad_check).unwrap();
    for (bad, says) in [
        (good.replacen("ord_", "usr_", 1), "prefix ord_"),
        (format!("{good}0"), "wrong width"),
        (
            good.replacen("ord_", "ord_!", 1)[..good.len()].to_owned(),
            "not a base32 digit",
        ),
        (bad_check, "check character"),
    ] {
        let e = fails(url, &["decode", "orders", &bad]);
        assert!(e.contains(says), "{bad}: {e}");
    }

    // Rotation: new values in the new key's slot, old ones still decode, none twice.
    let show = ok(url, &["alter", "orders", "--rotate-key"]);
    assert!(show.contains("opaque:    yes, key 1 of 16"), "{show}");
    let after: Vec<String> = ok(url, &["next", "orders", "--count", "20"])
        .lines()
        .map(str::to_owned)
        .collect();
    let every: HashSet<&String> = all.iter().chain(&after).collect();
    assert_eq!(every.len(), 120, "a value twice across the rotation");
    for (i, s) in all.iter().enumerate().step_by(7) {
        assert_eq!(decode(url, "orders", s), i as i64 + 1, "an old value");
    }
    let counters: Vec<i64> = after.iter().map(|s| decode(url, "orders", s)).collect();
    // Counter 101 marks the rotation (a gap of one).
    assert_eq!(counters, (102..=121).collect::<Vec<_>>());
    let e = fails(url, &["alter", "tags-missing", "--rotate-key"]);
    assert!(e.contains("tags-missing"), "{e}");

    // An opaque sequence over a small range: every counter, each value once,
    // then exhausted; values stay inside 1..=max.
    ok(url, &["create", "small", "--opaque", "--max", "1600"]);
    let vals: Vec<i64> = ok(url, &["next", "small", "--count", "99"])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(vals.iter().collect::<HashSet<_>>().len(), 99);
    assert!(vals.iter().all(|v| (1..=100).contains(v)), "{vals:?}");
    for (i, v) in vals.iter().enumerate() {
        assert_eq!(decode(url, "small", &v.to_string()), i as i64 + 1);
    }
    let e = fails(url, &["next", "small"]);
    assert!(e.contains("exhausted") || e.contains("max"), "{e}");
    // A value in the slot of a key the sequence does not have.
    let e = fails(url, &["decode", "small", "1500"]);
    assert!(e.contains("key 14"), "{e}");
    let e = fails(url, &["decode", "small", "1601"]);
    assert!(e.contains("1 to 1600"), "{e}");

    // Encoded, not opaque: fixed-width strings in the order handed out sort.
    ok(
        url,
        &[
            "create",
            "tags",
            "--encoding",
            "base62",
            "--max",
            "100000000",
        ],
    );
    let tags: Vec<String> = ok(url, &["next", "tags", "--count", "200"])
        .lines()
        .map(str::to_owned)
        .collect();
    let mut sorted = tags.clone();
    sorted.sort();
    assert_eq!(sorted, tags);
    assert!(tags.iter().all(|t| t.len() == 5 + 1), "{tags:?}");
    assert_eq!(decode(url, "tags", &tags[41]), 42);
    let json: Value =
        serde_json::from_str(&ok(url, &["--json", "next", "tags", "--count", "2"])).unwrap();
    assert!(json["values"][0].is_string(), "{json}");

    // JavaScript-safe.
    ok(url, &["create", "js", "--js-safe"]);
    let show = ok(url, &["show", "js"]);
    assert!(
        show.contains("max:       9007199254740991 (2^53-1, JavaScript-safe)"),
        "{show}"
    );
    ok(
        url,
        &[
            "create",
            "js-end",
            "--js-safe",
            "--start",
            "9007199254740990",
        ],
    );
    assert_eq!(
        ok(url, &["next", "js-end", "--count", "2"]),
        "9007199254740990\n9007199254740991\n"
    );
    fails(url, &["next", "js-end"]);
    let show = ok(url, &["show", "js-end"]);
    assert!(
        show.contains("warning:   only 0.00% of the range is left"),
        "{show}"
    );
    let show: Value = serde_json::from_str(&ok(url, &["--json", "show", "js-end"])).unwrap();
    assert_eq!(show["js_safe"], true);
    assert!(show["range_warning"].is_string(), "{show}");

    // Bad input: a clear error naming what was wrong, nothing created.
    for (bad, says) in [
        (
            &["create", "x1", "--encoding", "base64"][..],
            "base32 or base62",
        ),
        (
            &["create", "x2", "--encoding", "base32", "--prefix", "Ord"],
            "--prefix",
        ),
        (&["create", "x3", "--opaque", "--gapless"], "opaque"),
        (&["create", "x4", "--opaque", "--max", "15"], "at least 16"),
        (&["create", "x5", "--opaque", "--bit-reversed"], "opaque"),
        (&["create", "x6", "--prefix", "ord"], "--encoding"),
        (
            &["create", "x7", "--js-safe", "--max", "9007199254740992"],
            "2^53 - 1",
        ),
        (&["create", "x8", "--opaque", "--start=-1"], "0 or more"),
        (&["create", "x9", "--js-safe", "--bit-reversed"], "63 bits"),
    ] {
        let e = fails(url, bad);
        assert!(e.contains(says), "{bad:?}: {e}");
    }
    let list = ok(url, &["list"]);
    for n in ["x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9"] {
        assert!(!list.contains(&format!("{n}\t")), "{n} created: {list}");
    }
    ok(url, &["create", "plain"]);
    let e = fails(url, &["decode", "plain", "5"]);
    assert!(e.contains("ordinary sequence"), "{e}");
    let e = fails(url, &["alter", "plain", "--rotate-key"]);
    assert!(e.contains("not opaque"), "{e}");
}

#[test]
fn sqlite_opaque_and_encoded_sequences() {
    let db = Db::new();
    opaque_and_encoded_sequences(&db.url());
}

#[test]
fn postgres_opaque_and_encoded_sequences() {
    let Some(pg) = keysmith_testsupport::postgres::TempPostgres::shared() else {
        return;
    };
    opaque_and_encoded_sequences(&format!("{}?schema=opaque", pg.url()));
}

/// The digest an access file lists for `token` (what `keysmith access hash`
/// prints, tested in `access_new.rs`: the same library function).
fn digest(token: &str) -> String {
    keysmith_server::access::token_digest_hex(token.as_bytes())
}

/// The secrets of every opaque key in the SQLite store.
fn stored_secrets(db: &Db) -> Vec<String> {
    let c = rusqlite::Connection::open(db.path()).unwrap();
    let mut st = c
        .prepare("SELECT settings FROM keysmith_numbering")
        .unwrap();
    let rows: Vec<String> = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = Vec::new();
    for r in rows {
        let v: Value = serde_json::from_str(&r).unwrap();
        for k in v["opaque"]["keys"].as_array().into_iter().flatten() {
            out.push(k["secret"].as_str().unwrap().to_owned());
        }
    }
    out
}

/// Over HTTP with an access file and an audit log: create, next and decode
/// with the grants each needs; a refused or bad request changes nothing;
/// the key is in the store and in no answer, log or page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_over_http_with_grants_and_no_secret_shown() {
    let db = Db::new();
    let file = db.dir.path().join("access.toml");
    std::fs::write(
        &file,
        format!(
            "[[principal]]\nname = \"admin\"\ntoken_sha256 = \"{}\"\ngrants = [{{ names = \"*\", actions = [\"use\", \"read\", \"admin\"] }}]\n\
             [[principal]]\nname = \"reader\"\ntoken_sha256 = \"{}\"\ngrants = [{{ names = \"*\", actions = [\"read\"] }}]\n",
            digest("admin-0123456789"),
            digest("reader-0123456789"),
        ),
    )
    .unwrap();
    let audit = db.dir.path().join("audit.log");
    let s = ServerProc::start(
        &db,
        &[
            "--access-file",
            file.to_str().unwrap(),
            "--audit-log",
            audit.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let c = reqwest::Client::new();
    let admin = |r: reqwest::RequestBuilder| r.bearer_auth("admin-0123456789");
    let reader = |r: reqwest::RequestBuilder| r.bearer_auth("reader-0123456789");
    let mut seen = String::new();

    let r = admin(c.post(s.url("/v1/sequences")))
        .json(&serde_json::json!({"name": "users", "opaque": true, "encoding": "base62", "prefix": "usr", "js_safe": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let body = r.text().await.unwrap();
    seen.push_str(&body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["numbering"]["opaque"]["value_max"], (1i64 << 53) - 1);
    assert_eq!(v["numbering"]["encoding"]["width"], 9);

    let r = admin(c.post(s.url("/v1/sequences/users/next?count=20")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body = r.text().await.unwrap();
    seen.push_str(&body);
    let v: Value = serde_json::from_str(&body).unwrap();
    let got: Vec<String> = v["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(got.iter().collect::<HashSet<_>>().len(), 20);
    for (i, x) in got.iter().enumerate() {
        assert!(x.starts_with("usr_") && x.len() == 4 + 9 + 1, "{x}");
        let r = admin(c.post(s.url("/v1/sequences/users/decode")))
            .json(&serde_json::json!({ "value": x }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let d: Value = r.json().await.unwrap();
        assert_eq!(d["counter"], i as i64 + 1);
        // The integer form decodes alike.
        let r = admin(c.post(s.url("/v1/sequences/users/decode")))
            .json(&serde_json::json!({ "value": d["value"] }))
            .send()
            .await
            .unwrap();
        let d2: Value = r.json().await.unwrap();
        assert_eq!(d2["counter"], i as i64 + 1);
        // The CLI agrees.
        assert_eq!(db.ok(&["decode", "users", x]).trim(), (i + 1).to_string());
    }

    // rotate-key needs `admin`: a reader is refused and nothing changes.
    let r = reader(c.post(s.url("/v1/sequences/users/rotate-key")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let shown: Value = admin(c.get(s.url("/v1/sequences/users")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        shown["numbering"]["opaque"]["keys"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let r = admin(c.post(s.url("/v1/sequences/users/rotate-key")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body = r.text().await.unwrap();
    seen.push_str(&body);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["numbering"]["opaque"]["keys"][1]["id"], 1);
    // The server's handle maps with the new key at once: a new value decodes
    // to a counter after the rotation's marker, the old ones still decode.
    let r: Value = admin(c.post(s.url("/v1/sequences/users/next")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let fresh = r["values"][0].as_str().unwrap().to_owned();
    assert!(!got.contains(&fresh));
    assert_eq!(db.ok(&["decode", "users", &fresh]).trim(), "22");
    assert_eq!(db.ok(&["decode", "users", &got[0]]).trim(), "1");

    // decode needs `use`: a reader is refused.
    let r = reader(c.post(s.url("/v1/sequences/users/decode")))
        .json(&serde_json::json!({ "value": got[0] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // Bad values: 400 naming what was wrong.
    for (bad, says) in [
        (serde_json::json!({"value": "ord_000000001"}), "prefix usr_"),
        (serde_json::json!({"value": "usr_00000"}), "wrong width"),
        (serde_json::json!({"value": 0}), "not a value"),
        (serde_json::json!({"valu": 1}), "valu"),
    ] {
        let r = admin(c.post(s.url("/v1/sequences/users/decode")))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{bad}");
        let t = r.text().await.unwrap();
        assert!(t.contains(says), "{bad}: {t}");
    }
    // Bad creates: 400, nothing created.
    for bad in [
        serde_json::json!({"name": "y1", "js_safe": true, "max": 9007199254740992i64}),
        serde_json::json!({"name": "y2", "encoding": "base64"}),
        serde_json::json!({"name": "y3", "prefix": "ord"}),
        serde_json::json!({"name": "y4", "encoding": "base32", "prefix": "Ord"}),
        serde_json::json!({"name": "y5", "opaque": true, "gapless": true}),
        serde_json::json!({"name": "y6", "opaque": true, "max": 3}),
        serde_json::json!({"name": "y7", "js_safe": true, "bit_reversed": true}),
    ] {
        let r = admin(c.post(s.url("/v1/sequences")))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{bad}");
        let name = bad["name"].as_str().unwrap();
        let r = admin(c.get(s.url(&format!("/v1/sequences/{name}"))))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "{bad} created something");
    }

    // A sequence with less than 10 % of its range left warns in show,
    // /metrics and the status page; one with more does not.
    for (name, take) in [("near", 95), ("far", 5)] {
        let r = admin(c.post(s.url("/v1/sequences")))
            .json(&serde_json::json!({"name": name, "max": 100, "block": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        let r = admin(c.post(s.url(&format!("/v1/sequences/{name}/next?count={take}"))))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    let show: Value = admin(c.get(s.url("/v1/sequences/near")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(show["range_warning"].is_string(), "{show}");
    let show: Value = admin(c.get(s.url("/v1/sequences/far")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(show.get("range_warning").is_none(), "{show}");
    let metrics = admin(c.get(s.url("/metrics")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("keysmith_sequence_range_warning{name=\"near\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("keysmith_sequence_range_warning{name=\"far\"} 0"),
        "{metrics}"
    );
    let page = admin(c.get(s.url("/")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(page.matches("range nearly used up").count(), 1, "{page}");

    // Everything a caller can read, and the logs: never the key.
    for path in ["/v1/sequences/users", "/v1/sequences", "/metrics", "/"] {
        let r = admin(c.get(s.url(path))).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        seen.push_str(&r.text().await.unwrap());
    }
    for args in [
        &["show", "users"][..],
        &["--json", "show", "users"],
        &["list"],
        &["--json", "list"],
    ] {
        seen.push_str(&db.ok(args));
    }
    seen.push_str(&std::fs::read_to_string(&audit).unwrap());
    for line in s.lines.try_iter() {
        seen.push_str(&line);
    }
    drop(s);
    let secrets = stored_secrets(&db);
    assert_eq!(secrets.len(), 2, "both keys are kept in the store");
    assert!(secrets.iter().all(|k| k.len() == 32) && secrets[0] != secrets[1]);
    assert!(
        seen.contains("users"),
        "the outputs checked are the real ones"
    );
    for secret in &secrets {
        assert!(!seen.contains(secret.as_str()), "the key was shown");
    }
}
