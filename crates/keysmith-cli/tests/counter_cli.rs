//! `keysmith counter`: the real binary, real files, real SIGKILLs.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use rand::{RngExt, SeedableRng, rngs::StdRng};

fn keysmith() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keysmith"));
    c.env_remove("KEYSMITH_COUNTER_DIR");
    c
}

fn run(dir: &Path, args: &[&str]) -> Output {
    keysmith()
        .arg("counter")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn next_prints_names_and_peek_reads_the_counter() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(stdout(&run(d, &["next", "--host", "web1"])), "web1/1\n");
    assert_eq!(
        stdout(&run(d, &["next", "--count", "3", "--host", "web2"])),
        "web2/2\nweb2/3\nweb2/4\n"
    );
    assert_eq!(
        stdout(&run(d, &["next", "-n", "5", "--batch", "2", "--host", "h"])),
        "h/5\nh/6\nh/7\nh/8\nh/9\n"
    );
    assert_eq!(stdout(&run(d, &["peek"])), "9\n");
    let out = keysmith()
        .args([
            "--json", "counter", "next", "-n", "2", "--host", "h", "--dir",
        ])
        .arg(d)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json, serde_json::json!({ "names": ["h/10", "h/11"] }));
    // Without --host, the system host name prefixes the names.
    let name = stdout(&run(d, &["next"]));
    let (host, n) = name.trim_end().rsplit_once('/').unwrap();
    assert!(
        !host.is_empty() && !host.contains(char::is_whitespace),
        "{name:?}"
    );
    assert_eq!(n, "12");
}

#[test]
fn default_directory_comes_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let out = keysmith()
        .args(["counter", "next", "--host", "h"])
        .env("KEYSMITH_COUNTER_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "h/1\n");
    assert!(dir.path().join("host-counter").exists());
    // Then $XDG_DATA_HOME/keysmith, then ~/.local/share/keysmith.
    let out = keysmith()
        .args(["counter", "next", "--host", "h"])
        .env("XDG_DATA_HOME", dir.path().join("xdg"))
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "h/1\n");
    assert!(dir.path().join("xdg/keysmith/host-counter").exists());
    let out = keysmith()
        .args(["counter", "next", "--host", "h"])
        .env_remove("XDG_DATA_HOME")
        .env("HOME", dir.path().join("home"))
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "h/1\n");
    assert!(
        dir.path()
            .join("home/.local/share/keysmith/host-counter")
            .exists()
    );
}

#[test]
fn errors_are_clear_and_usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (args, code, expect) in [
        (&["next", "--host", "a/b"][..], 1, "may not contain '/'"),
        (&["next", "--host", "a b"], 1, "whitespace"),
        (&["next", "--host", ""], 1, "must not be empty"),
        (&["next", "--count", "0"], 2, "--count"),
        (&["next", "--batch", "0"], 2, "--batch"),
        (&["next", "--count", "x"], 2, "--count"),
        (&["next", "--count", "1099511627777"], 2, "--count"),
    ] {
        let out = run(d, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // Nothing was taken by the failed calls.
    assert_eq!(stdout(&run(d, &["peek"])), "0\n");

    // A damaged file is refused, not reset.
    std::fs::write(d.join("host-counter"), "garbage").unwrap();
    let out = run(d, &["next", "--host", "h"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.starts_with("error: store corrupt: host counter file"),
        "{err}"
    );
    assert_eq!(std::fs::read(d.join("host-counter")).unwrap(), b"garbage");

    // A counter at its maximum says so and never wraps.
    let max = format!(
        "keysmith host counter v1\n{:020}\n{:020}\n",
        u64::MAX - 1,
        u64::MAX - 2
    );
    std::fs::write(d.join("host-counter"), &max).unwrap();
    assert_eq!(
        stdout(&run(d, &["next", "--host", "h"])),
        format!("h/{}\n", u64::MAX)
    );
    let out = run(d, &["next", "--host", "h"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("never wraps"), "{err}");
}

/// What one child process printed: its complete lines, in order.
struct Run {
    names: Vec<u64>,
    killed: bool,
}

/// Starts `keysmith counter next` taking names one at a time; once it has
/// printed `kill_after` lines (if given) sends it SIGKILL, then drains what it
/// printed before dying. A last line without its newline is not a name.
fn run_child(dir: &Path, count: u64, kill_after: Option<usize>) -> Run {
    let mut child = keysmith()
        .args(["counter", "next", "--batch", "1", "--host", "h", "--count"])
        .arg(count.to_string())
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut names = Vec::new();
    let mut killed = false;
    let mut line = Vec::new();
    loop {
        if kill_after == Some(names.len()) && !killed {
            child.kill().unwrap(); // SIGKILL on Unix
            killed = true;
        }
        line.clear();
        if reader.read_until(b'\n', &mut line).unwrap() == 0 {
            break;
        }
        let Some(text) = line.strip_suffix(b"\n") else {
            assert!(killed, "unterminated line from a live process");
            break;
        };
        let text = std::str::from_utf8(text).unwrap();
        let n = text
            .strip_prefix("h/")
            .unwrap_or_else(|| panic!("{text:?}"));
        names.push(n.parse().unwrap());
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    if killed {
        // It may have finished just before the signal; otherwise SIGKILL.
        assert!(
            status.success() || status.signal() == Some(9),
            "{status}: {err}"
        );
    } else {
        assert!(status.success(), "{status}: {err}");
        assert_eq!(names.len() as u64, count);
    }
    Run { names, killed }
}

/// Several processes take names from one counter directory at once, one name
/// per file write; some are SIGKILLed at random points (while they may hold
/// the lock or be in the middle of a write) and replaced. Every printed name
/// is unique, the names of each process increase, and the counter keeps
/// working and stays ahead of every name printed.
#[test]
fn processes_with_sigkills_never_repeat_a_name() {
    const SLOTS: usize = 4;
    const KILLED_PER_SLOT: usize = 3;
    const FINAL_COUNT: u64 = 60;
    let seed: u64 = std::env::var("KEYSMITH_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    eprintln!("seed {seed} (set KEYSMITH_TEST_SEED to repeat)");
    let dir = tempfile::tempdir().unwrap();

    let slots: Vec<_> = (0..SLOTS)
        .map(|slot| {
            let dir = dir.path().to_owned();
            let mut rng = StdRng::seed_from_u64(seed ^ slot as u64);
            std::thread::spawn(move || {
                let mut runs = Vec::new();
                for round in 0..KILLED_PER_SLOT {
                    // The first process of one slot dies at once, possibly
                    // while the counter file is being created.
                    let after = if slot == 0 && round == 0 {
                        0
                    } else {
                        rng.random_range(1..120)
                    };
                    runs.push(run_child(&dir, 1_000_000, Some(after)));
                }
                runs.push(run_child(&dir, FINAL_COUNT, None));
                runs
            })
        })
        .collect();
    let runs: Vec<Run> = slots.into_iter().flat_map(|t| t.join().unwrap()).collect();

    let mut seen = HashSet::new();
    for run in &runs {
        assert!(
            run.names.windows(2).all(|w| w[0] < w[1]),
            "names of one process must increase: {:?}",
            run.names
        );
        for &n in &run.names {
            assert!(n >= 1);
            assert!(seen.insert(n), "name h/{n} handed out twice");
        }
    }
    assert_eq!(
        runs.iter().filter(|r| r.killed).count(),
        SLOTS * KILLED_PER_SLOT
    );
    assert!(seen.len() as u64 >= SLOTS as u64 * FINAL_COUNT);
    let highest = *seen.iter().max().unwrap();

    // The counter survived the kills: it is ahead of everything printed and
    // goes on from there.
    let peek: u64 = stdout(&run(dir.path(), &["peek"])).trim().parse().unwrap();
    assert!(
        peek >= highest,
        "counter {peek} is behind printed name {highest}"
    );
    let next = stdout(&run(dir.path(), &["next", "--host", "h"]));
    assert_eq!(next, format!("h/{}\n", peek + 1));
    eprintln!(
        "{} names from {} processes, highest {highest}, {} taken but never printed",
        seen.len(),
        runs.len(),
        peek - seen.len() as u64
    );
}
