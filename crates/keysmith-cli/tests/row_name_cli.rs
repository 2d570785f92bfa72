//! `keysmith row-name`: the real binary against a real SQLite file.

use std::path::Path;
use std::process::{Command, Output};

fn keysmith(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keysmith"))
        .arg("--store")
        .arg(format!("sqlite://{}", store.display()))
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "{}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn fails(o: Output, code: i32) -> String {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout {:?}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(o.stdout.is_empty());
    String::from_utf8(o.stderr).unwrap()
}

#[test]
fn parse_prints_the_parts_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db");
    let json = |name: &str| -> serde_json::Value {
        serde_json::from_str(&ok(keysmith(&db, &["row-name", "parse", name]))).unwrap()
    };
    assert_eq!(
        json("HTTPS://Example.com:443/docs/./intro#en_GB/3.17"),
        serde_json::json!({
            "name": "https://example.com/docs/intro#en_GB/3.17",
            "kind": "revision",
            "url": "https://example.com/docs/intro",
            "branch": 3,
            "revision": 17,
            "locale": "en_GB",
            "language": "en",
            "country": "GB",
        })
    );
    assert_eq!(
        json("https://example.com/a#suggestion/2"),
        serde_json::json!({
            "name": "https://example.com/a#suggestion/2",
            "kind": "suggestion",
            "url": "https://example.com/a",
            "branch": 2,
        })
    );
    assert_eq!(json("user/alice")["kind"], "user");
    // Parsing needs no store: nothing was created.
    assert!(!db.exists());

    let err = fails(
        keysmith(
            &db,
            &["row-name", "parse", "https://example.com/a#en_gb/3.1"],
        ),
        1,
    );
    assert_eq!(
        err,
        "error: invalid name \"https://example.com/a#en_gb/3.1\": the country \"gb\" must be two upper-case letters, as in GB\n"
    );
    let err = fails(keysmith(&db, &["row-name", "parse"]), 2);
    assert!(err.contains("NAME"), "{err}");
}

#[test]
fn revision_counts_per_branch_from_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db");
    let rev = |url: &str, branch: &str, locale: Option<&str>| {
        let mut args = vec!["row-name", "revision", "--url", url, "--branch", branch];
        if let Some(l) = locale {
            args.extend(["--locale", l]);
        }
        ok(keysmith(&db, &args))
    };
    assert_eq!(
        rev("https://example.com/a", "3", Some("en_GB")),
        "https://example.com/a#en_GB/3.1\n"
    );
    assert_eq!(
        rev("https://example.com/a", "3", None),
        "https://example.com/a#3.2\n"
    );
    assert_eq!(
        rev("HTTPS://EXAMPLE.COM/x/../a", "3", Some("fr")),
        "https://example.com/a#fr/3.3\n"
    );
    assert_eq!(
        rev("https://example.com/a", "4", None),
        "https://example.com/a#4.1\n"
    );
    let out = ok(keysmith(
        &db,
        &[
            "--json",
            "row-name",
            "revision",
            "--url",
            "https://example.com/a",
            "--branch",
            "3",
        ],
    ));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["name"], "https://example.com/a#3.4");
    assert_eq!(json["revision"], 4);
    // The revision sequences are ordinary sequences named after the branches.
    let list = ok(keysmith(&db, &["list"]));
    let names: Vec<&str> = list
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(
        names,
        ["https://example.com/a#3", "https://example.com/a#4"]
    );
}

#[test]
fn bad_revision_arguments_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db");
    for (args, code, expect) in [
        (
            &["--url", "example.com/a", "--branch", "1"][..],
            1,
            "not a valid absolute URL",
        ),
        (
            &["--url", "https://example.com/a#x", "--branch", "1"],
            1,
            "fragment",
        ),
        (
            &[
                "--url",
                "https://example.com/a",
                "--branch",
                "1",
                "--locale",
                "en-GB",
            ],
            1,
            "write a locale with '_'",
        ),
        (
            &["--url", "https://example.com/a", "--branch", "-1"],
            2,
            "--branch",
        ),
        (&["--url", "https://example.com/a"], 2, "--branch"),
        (&["--branch", "1"], 2, "--url"),
    ] {
        let mut all = vec!["row-name", "revision"];
        all.extend(args);
        let err = fails(keysmith(&db, &all), code);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    assert!(!db.exists(), "no store was opened for bad arguments");
}

/// Several processes ask for the first revisions of one new branch at once:
/// one of them creates the sequence, and together they get 1..=N, each once.
#[test]
fn racing_processes_get_gap_free_unique_revisions() {
    const N: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("k.db");
    // Create the database file first so the processes race on the sequence,
    // not on the schema (a command that only reads makes no store).
    ok(keysmith(&db, &["create", "schema-first"]));
    let children: Vec<_> = (0..N)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_keysmith"))
                .arg("--store")
                .arg(format!("sqlite://{}", db.display()))
                .args([
                    "row-name",
                    "revision",
                    "--url",
                    "https://example.com/race",
                    "--branch",
                    "0",
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut revisions: Vec<u64> = children
        .into_iter()
        .map(|c| {
            let out = ok(c.wait_with_output().unwrap());
            out.trim_end()
                .strip_prefix("https://example.com/race#0.")
                .unwrap_or_else(|| panic!("{out:?}"))
                .parse()
                .unwrap()
        })
        .collect();
    revisions.sort_unstable();
    assert_eq!(revisions, (1..=N as u64).collect::<Vec<_>>());
}
