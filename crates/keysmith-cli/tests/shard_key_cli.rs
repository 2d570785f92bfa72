//! `keysmith shard-key ...` as a user runs it.

use std::process::{Command, Output};

const SECRET: &str = "0123456789abcdef0123456789abcdef";

/// Runs keysmith with `args`; `secret` is put in the environment or removed.
fn run(secret: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keysmith"));
    cmd.args(args).env_remove("KEYSMITH_STORE");
    match secret {
        Some(s) => cmd.env("KEYSMITH_SHARD_KEY_SECRET", s),
        None => cmd.env_remove("KEYSMITH_SHARD_KEY_SECRET"),
    };
    cmd.output().expect("keysmith runs")
}

fn ok(secret: Option<&str>, args: &[&str]) -> String {
    let out = run(secret, args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

/// Runs a command that must fail with `code`; returns stderr.
fn fails(secret: Option<&str>, args: &[&str], code: i32) -> String {
    let out = run(secret, args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
    assert!(out.stdout.is_empty(), "{args:?} printed {out:?}");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn encode_then_decode_prints_the_json_form() {
    for secret in [None, Some(SECRET)] {
        let s = ok(
            secret,
            &[
                "shard-key",
                "encode",
                "--origin",
                "c",
                "--shard",
                "3",
                "--record",
                "42",
                "--child",
                "7",
            ],
        );
        assert!(
            s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{s}"
        );
        assert_eq!(ok(secret, &["shard-key", "decode", &s]), r#"["c",3,42,7]"#);
        assert_eq!(
            ok(
                secret,
                &[
                    "shard-key",
                    "decode",
                    &s,
                    "--origin",
                    "c",
                    "--record-type",
                    "i64",
                    "--child-type",
                    "i64"
                ]
            ),
            r#"["c",3,42,7]"#
        );
    }
}

#[test]
fn typed_ids_round_trip() {
    let s = ok(
        None,
        &[
            "shard-key",
            "encode",
            "--origin",
            "p",
            "--shard",
            "65535",
            "--record",
            "uuid:67e55044-10b1-426f-9247-bb680e5fe0c8",
            "--child",
            "string:line 1",
            "--child",
            "-5",
            "--child",
            "datetime:2024-05-01T12:00:00+02:00",
        ],
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(None, &["--json", "shard-key", "decode", &s])).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "origin": "p",
            "shard": 65535,
            "record": {"type": "uuid", "value": "67e55044-10b1-426f-9247-bb680e5fe0c8"},
            "children": [
                {"type": "string", "value": "line 1"},
                {"type": "i64", "value": -5},
                {"type": "datetime", "value": "2024-05-01T12:00:00+02:00"},
            ],
        })
    );
    let enc: serde_json::Value = serde_json::from_str(&ok(
        None,
        &[
            "--json",
            "shard-key",
            "encode",
            "--origin",
            "c",
            "--shard",
            "1",
            "--record",
            "u8:9",
        ],
    ))
    .unwrap();
    assert_eq!(enc["key"]["record"]["type"], "u8");
    assert_eq!(
        ok(
            None,
            &["shard-key", "decode", enc["external"].as_str().unwrap()]
        ),
        r#"["c",1,9]"#
    );
}

#[test]
fn signed_strings_resist_edits_and_other_secrets() {
    let s = ok(
        Some(SECRET),
        &[
            "shard-key",
            "encode",
            "--origin",
            "c",
            "--shard",
            "3",
            "--record",
            "42",
        ],
    );
    // Each position changed once.
    for i in 0..s.len() {
        let mut e = s.clone().into_bytes();
        e[i] = if e[i] == b'A' { b'B' } else { b'A' };
        let e = String::from_utf8(e).unwrap();
        let err = fails(Some(SECRET), &["shard-key", "decode", &e], 1);
        assert!(err.starts_with("error: "), "{err}");
    }
    let err = fails(
        Some("another secret, also long enough"),
        &["shard-key", "decode", &s],
        1,
    );
    assert!(err.contains("signature check"), "{err}");
    let err = fails(None, &["shard-key", "decode", &s], 1);
    assert!(err.contains("KEYSMITH_SHARD_KEY_SECRET"), "{err}");
    let unsigned = ok(
        None,
        &[
            "shard-key",
            "encode",
            "--origin",
            "c",
            "--shard",
            "3",
            "--record",
            "42",
        ],
    );
    let err = fails(Some(SECRET), &["shard-key", "decode", &unsigned], 1);
    assert!(err.contains("not signed"), "{err}");
}

#[test]
fn bad_secrets_are_refused_not_ignored() {
    let args = [
        "shard-key",
        "encode",
        "--origin",
        "c",
        "--shard",
        "3",
        "--record",
        "42",
    ];
    let err = fails(Some(""), &args, 1);
    assert!(err.contains("set but empty"), "{err}");
    let err = fails(Some("short"), &args, 1);
    assert!(err.contains("at least 16 bytes"), "{err}");
    // There is no way to pass it as an argument.
    let mut with_flag = args.to_vec();
    with_flag.extend(["--secret", SECRET]);
    fails(None, &with_flag, 2);
}

#[test]
fn decode_checks_what_it_is_told_to() {
    let s = ok(
        None,
        &[
            "shard-key",
            "encode",
            "--origin",
            "c",
            "--shard",
            "3",
            "--record",
            "u32:42",
        ],
    );
    let err = fails(None, &["shard-key", "decode", &s, "--origin", "p"], 1);
    assert!(err.contains("origin 'c', expected 'p'"), "{err}");
    let err = fails(
        None,
        &[
            "shard-key",
            "decode",
            &s,
            "--origin",
            "c",
            "--record-type",
            "i64",
        ],
        1,
    );
    assert!(err.contains("is a u32, expected a i64"), "{err}");
    let err = fails(None, &["shard-key", "decode", "not a key!"], 1);
    assert!(err.contains("URL-safe base64"), "{err}");
    // --record-type without --origin is a usage error.
    fails(
        None,
        &["shard-key", "decode", &s, "--record-type", "u32"],
        2,
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let base = ["shard-key", "encode", "--shard", "3", "--record", "42"];
    let mut args = base.to_vec();
    args.extend(["--origin", "-"]);
    let err = fails(None, &args, 1);
    assert!(err.contains("ASCII letter or digit"), "{err}");
    let mut args = base.to_vec();
    args.extend(["--origin", "0"]);
    let err = fails(None, &args, 1);
    assert!(err.contains("reserved"), "{err}");
    let mut args = base.to_vec();
    args.extend([
        "--origin", "c", "--child", "1", "--child", "2", "--child", "3", "--child", "4",
    ]);
    let err = fails(None, &args, 1);
    assert!(err.contains("at most 3"), "{err}");
    let err = fails(
        None,
        &[
            "shard-key",
            "encode",
            "--origin",
            "c",
            "--shard",
            "3",
            "--record",
            "u8:300",
        ],
        2,
    );
    assert!(err.contains("not a valid u8"), "{err}");
    fails(
        None,
        &[
            "shard-key",
            "encode",
            "--origin",
            "c",
            "--shard",
            "70000",
            "--record",
            "1",
        ],
        2,
    );
    fails(
        None,
        &["shard-key", "encode", "--origin", "c", "--record", "1"],
        2,
    );
}

#[test]
fn identity_ranges() {
    let layout = ["--base", "1", "--size", "1000", "--shards", "16"];
    let mut args = vec!["shard-key", "range", "locate"];
    args.extend(layout);
    args.push("3001");
    assert_eq!(ok(None, &args), "shard 3 local 0");
    let mut args = vec!["shard-key", "range", "global"];
    args.extend(layout);
    args.extend(["15", "999"]);
    assert_eq!(ok(None, &args), "16000");
    let mut args = vec!["shard-key", "range", "locate"];
    args.extend(layout);
    args.push("16001");
    let err = fails(None, &args, 1);
    assert!(err.contains("in no shard's range"), "{err}");
    let err = fails(
        None,
        &[
            "shard-key",
            "range",
            "locate",
            "--size",
            "4611686018427387904",
            "--shards",
            "4",
            "1",
        ],
        1,
    );
    assert!(err.contains("do not fit"), "{err}");

    let out = ok(
        None,
        &[
            "--store",
            "memory://",
            "shard-key",
            "range",
            "create",
            "orders",
            "--size",
            "1000",
            "--shards",
            "3",
            "--base",
            "1",
        ],
    );
    assert_eq!(
        out,
        "orders.shard-0 1 1000\norders.shard-1 1001 2000\norders.shard-2 2001 3000"
    );
}

#[test]
fn range_sequences_live_in_the_store_and_hand_out_their_shards_ids() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("k.db").display());
    let create = [
        "--store",
        &url,
        "shard-key",
        "range",
        "create",
        "orders",
        "--size",
        "1000",
        "--shards",
        "3",
        "--base",
        "1",
    ];
    let first = ok(None, &create);
    assert_eq!(
        first,
        "orders.shard-0 1 1000\norders.shard-1 1001 2000\norders.shard-2 2001 3000"
    );
    assert_eq!(
        ok(None, &create),
        first,
        "creating again keeps the same sequences"
    );
    let ids = ok(
        None,
        &["--store", &url, "next", "orders.shard-2", "--count", "3"],
    );
    assert_eq!(ids, "2001\n2002\n2003");
    for id in ids.lines() {
        let at = ok(
            None,
            &[
                "shard-key",
                "range",
                "locate",
                "--size",
                "1000",
                "--shards",
                "3",
                "--base",
                "1",
                id,
            ],
        );
        assert!(at.starts_with("shard 2 "), "{at}");
    }
    let other = [
        "--store",
        &url,
        "shard-key",
        "range",
        "create",
        "orders",
        "--size",
        "100",
        "--shards",
        "3",
        "--base",
        "1",
    ];
    let err = fails(None, &other, 1);
    assert!(err.contains("exists with the range 1 to 1000"), "{err}");
}
