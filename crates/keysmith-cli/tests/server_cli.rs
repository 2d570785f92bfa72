//! `keysmith --server URL`: every command a team uses, against a real
//! `keysmith serve` over TLS with a token scoped by an access file, printing
//! what the same command prints against a store; and no command creating a
//! store file when a server is meant.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::server::ServerProc;
use common::{Db, KEYSMITH};
use keysmith_testsupport::tls::Certs;

/// The scoped token of team A (names `team-a/*`, the ids group).
const TOKEN: &str = "team-a-0123456789abcdef";
/// A token with no grant on `team-a/*`.
const OTHER: &str = "team-b-0123456789abcdef";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The digest an access file lists for `token` (what `keysmith access hash`
/// prints: the same library function).
fn sha256(token: &str) -> String {
    keysmith_server::access::token_digest_hex(token.as_bytes())
}

/// A TLS server with an access file, its CA, and a local store to compare with.
struct Setup {
    server: ServerProc,
    certs: Certs,
    local: Db,
    _remote: Db,
}

async fn setup() -> Setup {
    let certs = Certs::generate(&["127.0.0.1", "localhost"], "team-a");
    let remote = Db::new();
    let access = remote.dir.path().join("access.toml");
    std::fs::write(
        &access,
        format!(
            "[[principal]]\nname = \"team-a\"\ntoken_sha256 = \"{}\"\n\
             grants = [{{ names = \"team-a/*\", actions = [\"use\", \"read\", \"admin\"] }}, \
             {{ names = \"ids\", actions = [\"use\", \"read\"] }}]\n\
             [[principal]]\nname = \"team-b\"\ntoken_sha256 = \"{}\"\n\
             grants = [{{ names = \"team-b/*\", actions = [\"use\", \"read\", \"admin\"] }}]\n",
            sha256(TOKEN),
            sha256(OTHER)
        ),
    )
    .unwrap();
    let server = ServerProc::start(
        &remote,
        &[
            "--tls-cert",
            s(&certs.server_cert),
            "--tls-key",
            s(&certs.server_key),
            "--access-file",
            s(&access),
        ],
        &[],
    )
    .await;
    assert!(server.base().starts_with("https://"));
    Setup {
        server,
        certs,
        local: Db::new(),
        _remote: remote,
    }
}

impl Setup {
    /// `keysmith --server URL --ca-file CA ARGS` with `$KEYSMITH_TOKEN`.
    fn remote(&self, token: &str, args: &[&str]) -> Output {
        Command::new(KEYSMITH)
            .args([
                "--server",
                self.server.base(),
                "--ca-file",
                s(&self.certs.ca),
            ])
            .args(args)
            .env_remove("KEYSMITH_STORE")
            .env_remove("KEYSMITH_SERVER")
            .env("KEYSMITH_TOKEN", token)
            .current_dir(self.local.dir.path())
            .output()
            .unwrap()
    }

    /// Runs `args` against the store and the server; both succeed and print
    /// the same (after `normalize`). Returns the server's output.
    fn same(&self, args: &[&str]) -> String {
        let local = self.local.run(args);
        let remote = self.remote(TOKEN, args);
        let text = |o: &Output, what: &str| {
            assert!(
                o.status.success(),
                "{what} {args:?} failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8(o.stdout.clone()).unwrap()
        };
        let (l, r) = (text(&local, "store"), text(&remote, "server"));
        assert_eq!(normalize(&l), normalize(&r), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&local.stderr),
            String::from_utf8_lossy(&remote.stderr),
            "{args:?}"
        );
        r
    }
}

impl Setup {
    /// Runs `args` (a `next`) against both: the same values.
    fn same_values(&self, args: &[&str]) -> String {
        let local = self.local.ok(args);
        let remote = self.remote(TOKEN, args);
        assert!(remote.status.success(), "{remote:?}");
        let remote = String::from_utf8(remote.stdout).unwrap();
        assert_eq!(local, remote, "{args:?}");
        remote
    }
}

/// Output without what differs between two stores by design: the store's
/// generation (a random id per store).
fn normalize(out: &str) -> String {
    out.lines()
        .map(|l| match l.find(", generation ") {
            Some(i) => &l[..i],
            None => l,
        })
        .map(|l| {
            if l.starts_with('{') || l.starts_with('[') {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                for o in std::iter::once(&mut v)
                    .flat_map(|v| match v {
                        serde_json::Value::Array(a) => a.iter_mut().collect::<Vec<_>>(),
                        other => vec![other],
                    })
                    .filter_map(serde_json::Value::as_object_mut)
                {
                    o.remove("generation");
                }
                v.to_string()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_server_command_prints_what_the_store_prints() {
    let t = setup().await;
    // Sequences, a name with `/` (sent as %2F).
    t.same(&["create", "team-a/orders", "--start", "10", "--block", "5"]);
    t.same(&["--json", "show", "team-a/orders"]);
    t.same(&["show", "team-a/orders"]);
    t.same(&["create", "team-a/list-me"]);
    t.same(&["alter", "team-a/list-me", "--next", "50", "--max", "1000"]);
    t.same(&["list"]);
    t.same(&["--json", "list"]);
    t.same(&["drop", "team-a/list-me"]);
    t.same(&["list"]);
    // The server's handle keeps its block (next=15 there, 13 in the store
    // after a command's handle hands its tail back): values match.
    assert_eq!(
        t.same_values(&["next", "team-a/orders", "--count", "3"]),
        "10\n11\n12\n"
    );
    t.same_values(&["--json", "next", "team-a/orders"]);
    // Encoded values and decode.
    t.same(&[
        "create",
        "team-a/enc",
        "--encoding",
        "base32",
        "--prefix",
        "ord",
    ]);
    let enc = t.same(&["next", "team-a/enc"]);
    assert!(enc.starts_with("ord_"), "{enc}");
    t.same(&["decode", "team-a/enc", enc.trim()]);
    t.same(&["show", "team-a/enc"]);
    // Opaque values: each store has its own key, so values differ; both decode.
    t.same(&["create", "team-a/opaque", "--opaque"]);
    let v = t.remote(TOKEN, &["next", "team-a/opaque"]);
    assert!(v.status.success());
    let v = String::from_utf8(v.stdout).unwrap();
    let d = t.remote(TOKEN, &["decode", "team-a/opaque", v.trim()]);
    assert_eq!(String::from_utf8(d.stdout).unwrap(), "1\n");
    // Gap-free numbers with tickets.
    t.same(&[
        "create",
        "team-a/inv",
        "--gapless",
        "--period",
        "year",
        "--format",
        "INV-{period}-{n:04}",
    ]);
    let take = |t: &Setup, remote: bool| {
        let o = if remote {
            t.remote(TOKEN, &["ticket", "take", "team-a/inv"])
        } else {
            t.local.run(&["ticket", "take", "team-a/inv"])
        };
        assert!(o.status.success(), "{o:?}");
        let line = String::from_utf8(o.stdout).unwrap();
        let (value, ticket) = line.trim().split_once(' ').unwrap();
        (value.to_owned(), ticket.to_owned())
    };
    let ((lv, lt), (rv, rt)) = (take(&t, false), take(&t, true));
    assert_eq!(lv, rv);
    let committed = |remote: bool, ticket: &str| {
        let args = ["ticket", "commit", "team-a/inv", ticket];
        let o = if remote {
            t.remote(TOKEN, &args)
        } else {
            t.local.run(&args)
        };
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    assert_eq!(committed(false, &lt), committed(true, &rt));
    let ((_, lt), (_, rt)) = (take(&t, false), take(&t, true));
    let released = |remote: bool, ticket: &str| {
        let args = ["ticket", "release", "team-a/inv", ticket];
        let o = if remote {
            t.remote(TOKEN, &args)
        } else {
            t.local.run(&args)
        };
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    assert_eq!(released(false, &lt), released(true, &rt));
    t.same(&["show", "team-a/inv"]);

    // Pools.
    t.same(&[
        "pool", "create", "team-a/p", "--size", "4", "--start", "100",
    ]);
    t.same(&["pool", "show", "team-a/p"]);
    // A take samples members at random: a value of the pool, each store its own.
    let taken = t.remote(TOKEN, &["pool", "take", "team-a/p", "--count", "1"]);
    assert!(taken.status.success(), "{taken:?}");
    let taken = String::from_utf8(taken.stdout).unwrap();
    assert!(
        (100..104).contains(&taken.trim().parse::<i64>().unwrap()),
        "{taken}"
    );
    t.same(&["pool", "list"]);
    t.same(&["pool", "drop", "team-a/p"]);

    // Time ids from the server's generator (its worker lease, group `ids`).
    let ids = t.remote(TOKEN, &["ids", "next", "--count", "3"]);
    assert!(ids.status.success(), "{ids:?}");
    let ids: Vec<i64> = String::from_utf8(ids.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let decoded = t.remote(TOKEN, &["ids", "decode", &ids[0].to_string()]);
    let local = t.local.run(&["ids", "decode", &ids[0].to_string()]);
    assert!(decoded.status.success(), "{decoded:?}");
    assert_eq!(decoded.stdout, local.stdout);
    let u = t.remote(TOKEN, &["ids", "next", "--format", "uuidv7"]);
    assert!(u.status.success(), "{u:?}");
    assert_eq!(String::from_utf8(u.stdout).unwrap().trim().len(), 36);

    // Worker leases: lease, list, renew, release.
    let lease = t.remote(
        TOKEN,
        &["--json", "workers", "lease", "team-a/w", "--max", "4"],
    );
    assert!(lease.status.success(), "{lease:?}");
    let held: serde_json::Value = serde_json::from_slice(&lease.stdout).unwrap();
    assert_eq!(held["worker"], 0);
    let token = held["lease"].as_str().unwrap().to_owned();
    let renewed = t.remote(TOKEN, &["--json", "workers", "renew", "team-a/w", &token]);
    assert!(renewed.status.success(), "{renewed:?}");
    let renewed: serde_json::Value = serde_json::from_slice(&renewed.stdout).unwrap();
    let list = t.remote(TOKEN, &["workers", "list", "team-a/w", "--max", "4"]);
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(
        list.contains("held: 1") || list.contains("(1 held)"),
        "{list}"
    );
    let rel = t.remote(
        TOKEN,
        &[
            "workers",
            "release",
            "team-a/w",
            renewed["lease"].as_str().unwrap(),
        ],
    );
    assert_eq!(String::from_utf8(rel.stdout).unwrap(), "released\n");
    t.same(&["workers", "list", "team-a/never"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_printed_and_setup_errors_fail_at_once() {
    let t = setup().await;
    // The server's message, exit 1.
    let o = t.remote(TOKEN, &["next", "team-a/missing"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("team-a/missing"), "{err}");
    // A name outside the token's grants: 403, named as such.
    let o = t.remote(OTHER, &["create", "team-a/x"]);
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("forbidden (403)"), "{err}");
    // A wrong token: 401; a token with a space: refused before any request.
    let o = t.remote("wrong-token-0000000000", &["list"]);
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("401"), "{err}");
    assert!(!err.contains("wrong-token"), "{err}");
    let o = t.remote("bad token", &["list"]);
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("whitespace") && !err.contains("bad token"),
        "{err}"
    );
    // A token file with a trailing newline works.
    let file = t.local.dir.path().join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let o = Command::new(KEYSMITH)
        .args(["--server", t.server.base(), "--ca-file", s(&t.certs.ca)])
        .args(["--token-file", s(&file), "create", "team-a/from-file"])
        .env_remove("KEYSMITH_TOKEN")
        .env_remove("KEYSMITH_SERVER")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    // The wrong CA: a setup error naming ca_file.
    let o = Command::new(KEYSMITH)
        .args([
            "--server",
            t.server.base(),
            "--ca-file",
            s(&t.certs.other_ca),
            "list",
        ])
        .env("KEYSMITH_TOKEN", TOKEN)
        .output()
        .unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("TLS") && err.contains("ca_file"), "{err}");
    // Several servers: the first is down, the second answers.
    let o = Command::new(KEYSMITH)
        .args([
            "--server",
            "https://127.0.0.1:1",
            "--server",
            t.server.base(),
        ])
        .args(["--ca-file", s(&t.certs.ca), "show", "team-a/from-file"])
        .env("KEYSMITH_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    // --server with --store: a usage error.
    let o = t.remote(TOKEN, &["--store", &t.local.url(), "list"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// Every command that reads or takes, run where a server is meant but not
/// named (`$KEYSMITH_TOKEN` set) or with no store: each fails, and no
/// store file appears.
#[test]
fn no_command_creates_a_store_file_when_a_server_is_meant() {
    let dir = tempfile::tempdir().unwrap();
    let commands: &[&[&str]] = &[
        &["next", "team-a/orders"],
        &["show", "team-a/orders"],
        &["list"],
        &["drop", "team-a/orders"],
        &["alter", "team-a/orders", "--next", "5"],
        &["create", "team-a/orders"],
        &["decode", "team-a/orders", "ord_1"],
        &["ticket", "take", "team-a/inv"],
        &["ids", "next"],
        &["workers", "lease", "g"],
        &["workers", "list", "g"],
        &["pool", "take", "p"],
    ];
    let db: PathBuf = dir.path().join("keysmith.db");
    for args in commands {
        let o = Command::new(KEYSMITH)
            .args(*args)
            .current_dir(dir.path())
            .env_remove("KEYSMITH_STORE")
            .env_remove("KEYSMITH_SERVER")
            .env("KEYSMITH_TOKEN", TOKEN)
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(!o.status.success(), "{args:?}");
        assert!(err.contains("--server"), "{args:?}: {err}");
        assert!(!err.contains(TOKEN), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} created {}", db.display());
    }
    // Without a token: reading commands say there is no store, create none.
    for args in &commands[..5] {
        let o = Command::new(KEYSMITH)
            .args(*args)
            .current_dir(dir.path())
            .env_remove("KEYSMITH_STORE")
            .env_remove("KEYSMITH_SERVER")
            .env_remove("KEYSMITH_TOKEN")
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(!o.status.success(), "{args:?}");
        assert!(
            err.contains("no store at") && err.contains("--server"),
            "{args:?}: {err}"
        );
        assert!(!db.exists(), "{args:?} created {}", db.display());
    }
}
