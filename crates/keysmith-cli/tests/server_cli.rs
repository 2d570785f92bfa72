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
        // What only a server knows (`status --server`).
        .map(|l| match l.find("; this server: ") {
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
                // `status --json --server`: what that server's handles served.
                for list in ["sequences", "pools"] {
                    for o in v
                        .get_mut(list)
                        .and_then(serde_json::Value::as_array_mut)
                        .into_iter()
                        .flatten()
                        .filter_map(serde_json::Value::as_object_mut)
                    {
                        o.remove("server");
                    }
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
    // Status, before any value is taken (a server's handle then holds a
    // block the store shows as reserved): the same lines, and with
    // --server what the server's own handles served.
    t.same(&[
        "pool",
        "create",
        "team-a/early",
        "--size",
        "3",
        "--start",
        "7",
    ]);
    let status = t.same(&["status"]);
    assert_eq!(
        normalize(&status),
        "sequence team-a/orders: next 10, remaining 9223372036854775797, max 9223372036854775806, \
         rate -, runway –, unaccounted 0\n\
         pool team-a/early: start 7, size 3, runway –",
        "{status}"
    );
    assert!(
        status.contains("; this server: served 0, 0.0/s"),
        "{status}"
    );
    t.same(&["--json", "status"]);
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
    // `show` says where the numbers are (the row's next never moves).
    let year = lv.split('-').nth(1).unwrap();
    let shown = t.same(&["show", "team-a/inv"]);
    assert!(shown.contains("next:      3\n"), "{shown}");
    assert!(
        shown.contains(&format!(
            "numbers:   last 2 in period {year}, 2 taken: 1 committed, 0 held by a ticket, 1 released"
        )),
        "{shown}"
    );
    assert!(!shown.contains("handed out 0"), "{shown}");
    t.same(&["--json", "show", "team-a/inv"]);

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

impl Setup {
    /// `keysmith ARGS` with `$KEYSMITH_CONFIG` naming `config` (when given),
    /// no server, token or store in the environment but `env`, in a
    /// folder of its own.
    fn with_config(
        &self,
        config: Option<&Path>,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> (Output, tempfile::TempDir) {
        let cwd = tempfile::tempdir().unwrap();
        let mut c = Command::new(KEYSMITH);
        c.args(args)
            .env_remove("KEYSMITH_STORE")
            .env_remove("KEYSMITH_SERVER")
            .env_remove("KEYSMITH_TOKEN")
            .env_remove("KEYSMITH_CONFIG")
            .env_remove("XDG_CONFIG_HOME")
            .env("HOME", cwd.path())
            .current_dir(cwd.path());
        if let Some(p) = config {
            c.env("KEYSMITH_CONFIG", p);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        (c.output().unwrap(), cwd)
    }

    /// Writes a config file in the local store's folder.
    fn config_file(&self, file: &str, text: &str) -> PathBuf {
        let p = self.local.dir.path().join(file);
        std::fs::write(&p, text).unwrap();
        p
    }
}

fn stdout_of(o: &Output) -> String {
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_names_the_server_and_flags_and_environment_win_over_it() {
    let t = setup().await;
    let dir = t.local.dir.path();
    std::fs::write(dir.join("team-a.token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(dir.join("team-b.token"), format!("{OTHER}\n")).unwrap();
    // Relative paths are taken from the file's folder.
    let ca = s(&t.certs.ca);
    let good = t.config_file(
        "good.toml",
        &format!(
            "server = [\"https://127.0.0.1:1\", \"{}\"]\ntoken_file = \"team-a.token\"\nca_file = \"{ca}\"\n",
            t.server.base()
        ),
    );
    let (o, cwd) = t.with_config(Some(&good), &[], &["create", "team-a/cfg", "--start", "5"]);
    stdout_of(&o);
    let (o, _) = t.with_config(Some(&good), &[], &["next", "team-a/cfg", "--count", "2"]);
    assert_eq!(stdout_of(&o), "5\n6\n");
    assert!(!cwd.path().join("keysmith.db").exists());
    // The default place: $XDG_CONFIG_HOME/keysmith/config.toml.
    let xdg = tempfile::tempdir().unwrap();
    std::fs::create_dir(xdg.path().join("keysmith")).unwrap();
    std::fs::copy(&good, xdg.path().join("keysmith/config.toml")).unwrap();
    std::fs::copy(
        dir.join("team-a.token"),
        xdg.path().join("keysmith/team-a.token"),
    )
    .unwrap();
    let (o, _) = t.with_config(
        None,
        &[("XDG_CONFIG_HOME", s(xdg.path()))],
        &["show", "team-a/cfg"],
    );
    assert!(stdout_of(&o).contains("name:      team-a/cfg"));

    // A file naming team B's token, the wrong CA and a server that is down.
    let other = t.config_file(
        "other.toml",
        &format!(
            "server = \"https://127.0.0.1:1\"\ntoken_file = \"team-b.token\"\nca_file = \"{}\"\n",
            s(&t.certs.other_ca)
        ),
    );
    // Flags win over the file: --server, --token-file, --ca-file.
    let (o, _) = t.with_config(
        Some(&other),
        &[],
        &[
            "--server",
            t.server.base(),
            "--token-file",
            s(&dir.join("team-a.token")),
            "--ca-file",
            ca,
            "show",
            "team-a/cfg",
        ],
    );
    stdout_of(&o);
    // The environment wins over the file: $KEYSMITH_SERVER, $KEYSMITH_TOKEN.
    let (o, _) = t.with_config(
        Some(&other),
        &[
            ("KEYSMITH_SERVER", t.server.base()),
            ("KEYSMITH_TOKEN", TOKEN),
        ],
        &["--ca-file", ca, "show", "team-a/cfg"],
    );
    stdout_of(&o);
    // ... and without them the file's values are used: its token is team
    // B's (403), its CA the wrong one.
    let (o, _) = t.with_config(
        Some(&other),
        &[("KEYSMITH_SERVER", t.server.base())],
        &["--ca-file", ca, "show", "team-a/cfg"],
    );
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("forbidden (403)"), "{err}");
    assert!(!err.contains(OTHER), "{err}");
    let (o, _) = t.with_config(
        Some(&other),
        &[
            ("KEYSMITH_SERVER", t.server.base()),
            ("KEYSMITH_TOKEN", TOKEN),
        ],
        &["show", "team-a/cfg"],
    );
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("TLS") && err.contains("ca_file"), "{err}");
    // $KEYSMITH_STORE and --store win over the file's server: the store is
    // used.
    t.local.ok(&["create", "local-only"]);
    let url = t.local.url();
    let listed = "local-only\tnext=1\tmax=9223372036854775806\tblock=100\n";
    let (o, _) = t.with_config(Some(&good), &[("KEYSMITH_STORE", url.as_str())], &["list"]);
    assert_eq!(stdout_of(&o), listed);
    let (o, _) = t.with_config(Some(&good), &[], &["--store", &url, "list"]);
    assert_eq!(stdout_of(&o), listed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_config_file_is_refused_naming_the_file_and_changes_nothing() {
    let t = setup().await;
    let dir = t.local.dir.path();
    std::fs::write(dir.join("team-a.token"), TOKEN).unwrap();
    let ca = s(&t.certs.ca);
    let good = t.config_file(
        "good.toml",
        &format!(
            "server = \"{}\"\ntoken_file = \"team-a.token\"\nca_file = \"{ca}\"\n",
            t.server.base()
        ),
    );
    let base = std::fs::read_to_string(&good).unwrap();
    let unknown = t.config_file("unknown.toml", &format!("{base}sever = \"https://x\"\n"));
    let inline = t.config_file("inline.toml", &format!("{base}token = \"{TOKEN}\"\n"));
    let store = t.config_file(
        "store.toml",
        &format!("{base}store = \"postgres://u:{TOKEN}@h/db\"\n"),
    );
    let broken = t.config_file("broken.toml", &format!("{base}server2 = \"{TOKEN}\n"));
    let missing = dir.join("missing.toml");
    let cases: [(&Path, &str); 6] = [
        (&unknown, "unknown key `sever`"),
        (&inline, "`token` writes a secret into the config file"),
        (&store, "store URL"),
        (&broken, "not valid TOML at line 4"),
        (&missing, "cannot read the config file"),
        // A folder: unreadable as a file.
        (dir, "cannot read the config file"),
    ];
    for (file, says) in cases {
        for args in [&["create", "team-a/bad"][..], &["next", "team-a/bad"]] {
            let (o, cwd) = t.with_config(Some(file), &[], args);
            let err = String::from_utf8(o.stderr).unwrap();
            assert_eq!(o.status.code(), Some(2), "{file:?} {args:?}: {err}");
            assert!(err.contains(says), "{file:?}: {err}");
            assert!(err.contains(s(file)), "{file:?}: {err}");
            assert!(!err.contains(TOKEN), "{file:?}: {err}");
            assert!(!cwd.path().join("keysmith.db").exists());
        }
    }
    // Nothing was created on the server.
    let (o, _) = t.with_config(Some(&good), &[], &["list"]);
    assert_eq!(stdout_of(&o), "");
}
