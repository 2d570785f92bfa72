//! `keysmith top` as an operator uses it: the real binary in a tmux pane
//! of 120 x 40 over a real SQLite store that a loop takes values from. The
//! test reads the screen with `capture-pane`, changes the sort with
//! `send-keys`, and quits with `q`. Also: `--once` on a store and against
//! a server, and the error without a terminal.
//!
//! The tmux test skips with a message when tmux is not installed, unless
//! `KEYSMITH_REQUIRE_BACKENDS=1` (Debian: `apt-get install tmux`).

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::server::ServerProc;
use common::{DEADLINE, Db, KEYSMITH};

/// The pane's size.
const WIDTH: &str = "120";
const HEIGHT: &str = "40";

/// A tmux server of the test's own (its own socket, `-L`), so that no
/// user's session is touched; the session and the server are killed when
/// it is dropped, whatever the test did.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-L").arg(&self.socket);
        c
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The pane's text as shown now.
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    fn send(&self, key: &str) {
        self.run(&["send-keys", "-t", "top", key]);
    }

    /// Polls the screen until `done` holds, failing after [`DEADLINE`] with
    /// the last screen.
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + DEADLINE;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < until,
                "within {DEADLINE:?}, the screen never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self
            .cmd()
            .args(["kill-session", "-t", "top"])
            .stderr(Stdio::null())
            .status();
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}

/// The line of the table that starts with `name`, split into words.
fn row<'a>(screen: &'a str, name: &str) -> Option<(usize, Vec<&'a str>)> {
    screen.lines().enumerate().find_map(|(i, l)| {
        let words: Vec<&str> = l.split_whitespace().collect();
        (words.first() == Some(&name)).then_some((i, words))
    })
}

/// The rate `top` shows on `name`'s line ("12.5/s"), if a number.
fn rate(screen: &str, name: &str) -> Option<f64> {
    let (_, words) = row(screen, name)?;
    words.get(2)?.strip_suffix("/s")?.parse().ok()
}

/// Whether `first`'s line is above `second`'s.
fn above(screen: &str, first: &str, second: &str) -> bool {
    match (row(screen, first), row(screen, second)) {
        (Some((a, _)), Some((b, _))) => a < b,
        _ => false,
    }
}

/// Sets the flag when dropped: the loop stops however the test ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Takes values from `name` with the real binary, one short-lived process
/// after another (each closes cleanly and records the sequence's counts,
/// which the rate is measured from), until `stop`.
fn taker(url: &str, name: &str, stop: &AtomicBool, taken: &AtomicU64) {
    let mut cmd = common::keysmith(url);
    cmd.args(["next", name, "--count", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    while !stop.load(Ordering::Relaxed) {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "keysmith next failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        taken.fetch_add(3, Ordering::Relaxed);
    }
}

#[test]
fn top_shows_the_busiest_names_sorts_on_keys_and_quits_on_q() {
    if let Err(e) = Command::new("tmux").arg("-V").output() {
        keysmith_testsupport::skip_or_fail("tmux", &format!("tmux -V: {e}"));
        return;
    }
    let db = Db::new();
    db.ok(&["create", "a-idle"]);
    db.ok(&["create", "z-busy", "--block", "10"]);

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_failure = StopOnDrop(stop.clone());
    let taken = Arc::new(AtomicU64::new(0));
    let loader = {
        let (url, stop, taken) = (db.url(), stop.clone(), taken.clone());
        std::thread::spawn(move || taker(&url, "z-busy", &stop, &taken))
    };

    let tmux = Tmux {
        socket: format!("keysmith-top-test-{}", std::process::id()),
    };
    // How the process ended, written by the shell tmux runs it in (tmux's
    // own `pane_dead_status` stayed empty on a loaded machine).
    let ended = tempfile::tempdir().unwrap();
    let status_file = ended.path().join("status");
    let status_path = status_file.display();
    let command = format!(
        "'{KEYSMITH}' --store '{}' top --interval-ms 200; echo $? > '{status_path}.tmp' && mv '{status_path}.tmp' '{status_path}'",
        db.url(),
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        WIDTH,
        "-y",
        HEIGHT,
        &command,
    ]);
    tmux.run(&["set-option", "-t", "top", "remain-on-exit", "on"]);

    // Both names, and a rate on the busy one: values are being taken.
    let screen = tmux.wait_for("both names and a rate on z-busy", |s| {
        row(s, "a-idle").is_some() && rate(s, "z-busy").is_some_and(|r| r > 0.0)
    });
    assert!(screen.contains("sorted by rate"), "{screen}");
    assert!(
        above(&screen, "z-busy", "a-idle"),
        "busiest first:\n{screen}"
    );
    assert_eq!(rate(&screen, "a-idle"), None, "{screen}");

    // n: by name, a-idle first.
    tmux.send("n");
    let screen = tmux.wait_for("the rows sorted by name", |s| {
        s.contains("sorted by name") && above(s, "a-idle", "z-busy")
    });
    assert!(row(&screen, "z-busy").is_some(), "{screen}");

    // w: by runway, the one with a runway first.
    tmux.send("w");
    tmux.wait_for("the rows sorted by runway", |s| {
        s.contains("sorted by runway") && above(s, "z-busy", "a-idle")
    });

    // q: the process ends, with status 0 (the shell writes it; polled
    // until it has).
    tmux.send("q");
    let until = Instant::now() + DEADLINE;
    let status = loop {
        if let Ok(status) = std::fs::read_to_string(&status_file) {
            break status.trim().to_owned();
        }
        assert!(
            Instant::now() < until,
            "keysmith top still runs {DEADLINE:?} after q:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        status, "0",
        "keysmith top exited with {status} (128 + N: signal N)"
    );

    stop.store(true, Ordering::Relaxed);
    loader.join().unwrap();
    assert!(taken.load(Ordering::Relaxed) > 0);
}

#[test]
fn without_a_terminal_top_says_to_use_once_and_once_prints_the_rows() {
    let db = Db::new();
    db.ok(&["create", "orders"]);
    db.ok(&["pool", "create", "seats", "--size", "10"]);
    db.ok(&["next", "orders"]);

    let out = db.cmd().arg("top").stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("draws on a terminal") && err.contains("--once"),
        "{err}"
    );

    let text = db.ok(&["top", "--once", "--sort", "name"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "NAME\tKIND\tRATE\tRUNWAY\tLEFT\tLEASE", "{text}");
    assert!(lines[1].starts_with("orders\tsequence\t"), "{text}");
    assert!(lines[2].starts_with("seats\tpool\t"), "{text}");
    assert_eq!(lines.len(), 3, "{text}");

    let json: serde_json::Value =
        serde_json::from_str(&db.ok(&["--json", "top", "--once"])).unwrap();
    let names: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{json}");
    assert!(
        names.contains(&"orders") && names.contains(&"seats"),
        "{json}"
    );

    let (code, err) = db.fails(&["top", "--once", "--sort", "speed"]);
    assert_eq!(code, 2);
    assert!(err.contains("rate, name or runway"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_once_against_a_server_shows_the_servers_rate() {
    let db = Db::new();
    db.ok(&["create", "orders"]);
    db.ok(&["create", "quiet"]);
    let server = ServerProc::start(&db, &[], &[]).await;
    let client = reqwest::Client::new();
    let until = Instant::now() + DEADLINE;
    loop {
        let r = client
            .post(server.url("/v1/sequences/orders/next?count=10"))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        let out = tokio::task::spawn_blocking({
            let base = server.base().to_owned();
            move || {
                Command::new(KEYSMITH)
                    .args(["--server", &base, "top", "--once"])
                    .env_remove("KEYSMITH_STORE")
                    .env_remove("KEYSMITH_TOKEN")
                    .output()
                    .unwrap()
            }
        })
        .await
        .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let first = text.lines().nth(1).unwrap_or_default().to_owned();
        let moving = first.starts_with("orders\tsequence\t")
            && first
                .split('\t')
                .nth(2)
                .and_then(|r| r.strip_suffix("/s"))
                .and_then(|r| r.parse::<f64>().ok())
                .is_some_and(|r| r > 0.0);
        if moving {
            assert!(text.contains("\nquiet\tsequence\t"), "{text}");
            break;
        }
        assert!(
            Instant::now() < until,
            "no rate on orders within {DEADLINE:?}:\n{text}"
        );
    }
}
