//! `keysmith-bench compare` runs and writes a well-formed table and SVG
//! charts: tiny durations, SQLite and in-process rows (and the HTTP rows of
//! an in-process server); no PostgreSQL, MySQL, etcd or Redis, whose rows must then
//! say they were skipped. Speed is not checked here (see BENCHMARKS.md).

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keysmith-bench"))
        .args(args)
        .env_remove("KEYSMITH_STORE")
        // No redis-server on the PATH: its rows are skipped.
        .env("PATH", "")
        .output()
        .expect("keysmith-bench runs")
}

/// The elements of an SVG document open and close in order, and it is one
/// `<svg>` element.
fn assert_well_formed_svg(svg: &str) {
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    let mut stack = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let end = rest.find('>').expect("a tag closes");
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name.trim()), "tag order");
        } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
            let name = tag.split_whitespace().next().unwrap_or_default();
            stack.push(name.to_owned());
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

#[test]
fn compare_writes_a_table_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let d = dir.path().to_str().unwrap();
    let o = out.to_str().unwrap();
    let res = run(&[
        "compare",
        "--seconds",
        "0.05",
        "--block",
        "1,100",
        "--conns",
        "2",
        "--rate",
        "200",
        "--dir",
        d,
        "--out",
        o,
    ]);
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let table = String::from_utf8(res.stdout).unwrap();
    assert_eq!(
        table,
        std::fs::read_to_string(out.join("compare.md")).unwrap()
    );
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    // Two tables (throughput, latency), each with rows as wide as its header.
    for t in table.split("\n\n").filter(|t| t.starts_with("| ")) {
        let cols = t.lines().next().unwrap().matches('|').count();
        for r in t.lines() {
            assert_eq!(r.matches('|').count(), cols, "ragged row {r}");
        }
    }
    for want in [
        "bare AtomicU64::fetch_add, 1 thread(s)",
        "keysmith next(), cached block, 2 thread(s)",
        "uuid v7",
        "ULID",
        "keysmith on SQLite, block 100",
        "GET /livez",
        "POST next, SQLite, block 1 ",
        "POST reserve?count=1000000, SQLite",
        "bare fsync loop, SQLite",
        "POST next, strict, SQLite, 1 connection(s)",
        "POST next, strict, SQLite, 64 connection(s)",
        "POST next, strict, SQLite, fixed rate",
    ] {
        let row = rows
            .iter()
            .find(|r| r.contains(want))
            .unwrap_or_else(|| panic!("no row {want:?} in\n{table}"));
        assert!(!row.contains("skipped"), "{row}");
    }
    for skipped in [
        "keysmith on PostgreSQL, block 1 ",
        "nextval, no cache",
        "UPDATE ... RETURNING",
        "INCR, appendfsync always",
        "keysmith on etcd, block 100",
        "keysmith on MySQL, block 100, locked",
        "LAST_INSERT_ID(v + 1) per value",
        "bare fsync loop, PostgreSQL",
        "POST next, strict, etcd, 16 connection(s)",
        "POST next, strict, etcd, fixed rate",
    ] {
        let row = rows.iter().find(|r| r.contains(skipped)).unwrap();
        assert!(row.contains("skipped: "), "{row}");
    }
    assert!(table.contains("Latency at a fixed request rate"));
    for svg in ["compare.svg", "http-latency.svg"] {
        assert_well_formed_svg(&std::fs::read_to_string(out.join(svg)).unwrap());
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    assert!(json["rows"].as_array().unwrap().len() >= rows.len() - 2 - 4);
    // Its scratch SQLite file is gone.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "out")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bad_options_are_clear_errors() {
    for (args, says) in [
        (vec!["--seconds", "0"], "--seconds"),
        (vec!["--seconds=-1"], "--seconds"),
        (vec!["--seconds", "nan"], "--seconds"),
        (vec!["--block", "0"], "--block"),
        (vec!["--rate", "0"], "--rate"),
        (vec!["--conns", "0"], "--conns"),
        (vec!["--redis", "http://x"], "redis://"),
    ] {
        let mut all = vec!["compare", "--no-http", "--seconds", "0.01"];
        all.extend(&args);
        let res = run(&all);
        assert!(!res.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
