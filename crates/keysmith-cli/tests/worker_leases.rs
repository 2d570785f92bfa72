//! Worker-id leases for other generators (`/v1/workers/...`, `keysmith
//! workers`), on the real binary: several `keysmith serve` processes over
//! one SQLite file, one PostgreSQL, one etcd and one MariaDB, clients leasing, renewing,
//! releasing and abandoning leases through all of them at once. Two leases
//! of one worker id never have overlapping validity windows
//! (`not_before_ms..until_ms`, the last renewal's `until_ms`); a renewal
//! after expiry or after a take-over is refused (409); exhaustion names the
//! group and its size; bad input is a 400 and changes nothing. Also
//! `keysmith ids bounds` beside `GET /v1/ids/bounds` and `ids decode`.
//!
//! `cargo test -p keysmith-cli --test worker_leases`

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::server::ServerProc;
use common::{DEADLINE, Db};
use serde_json::Value;

const SECRET: &str = "a lease secret shared by the servers";
const SERVERS: usize = 3;
const CLIENTS: usize = 6;
/// Leases each client holds, one after the other.
const ROUNDS: usize = 12;
/// Fewer worker ids than clients: they compete, and reuse worker ids.
const GROUP_SIZE: i64 = 3;
const TTL_MS: i64 = 400;

/// One lease as its holder saw it: the window is `not_before_ms` to the
/// last `until_ms` it was given.
#[derive(Debug, Clone)]
struct Seen {
    worker: i64,
    fence: i64,
    not_before_ms: i64,
    until_ms: i64,
}

async fn post(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = c.post(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn held(v: &Value) -> Seen {
    Seen {
        worker: v["worker"].as_i64().unwrap(),
        fence: v["fence"].as_i64().unwrap(),
        not_before_ms: v["not_before_ms"].as_i64().unwrap(),
        until_ms: v["until_ms"].as_i64().unwrap(),
    }
}

async fn start_servers(url: &str) -> Vec<ServerProc> {
    let mut servers = Vec::new();
    for _ in 0..SERVERS {
        servers.push(ServerProc::start_on(url, &[], &[("KEYSMITH_LEASE_SECRET", SECRET)]).await);
    }
    servers
}

/// Clients lease through every server in turn; each lease is renewed 0 to
/// 2 times, then released or abandoned (left to expire).
async fn leases_never_overlap(url: &str, group: &str) {
    let servers = start_servers(url).await;
    let bases: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.base().to_owned()).collect());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let until = Instant::now() + DEADLINE;
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let (bases, seen, group) = (bases.clone(), seen.clone(), group.to_owned());
        tasks.push(tokio::spawn(async move {
            let c = reqwest::Client::new();
            let mut n = client;
            let mut next = || {
                n += 1;
                bases[n % bases.len()].clone()
            };
            let mut refused = 0;
            for round in 0..ROUNDS {
                // Poll the lease state: a refusal means every worker id is
                // held; try again until one is released or expires.
                let v = loop {
                    let (st, v) = post(
                        &c,
                        &format!(
                            "{}/v1/workers/{group}/lease?ttl_ms={TTL_MS}&max={GROUP_SIZE}",
                            next()
                        ),
                    )
                    .await;
                    if st == 200 {
                        break v;
                    }
                    assert_eq!(st, 409, "{v}");
                    let m = v["error"]["message"].as_str().unwrap();
                    assert!(
                        m.contains(&format!("all {GROUP_SIZE} worker ids of group \"{group}\"")),
                        "{m}"
                    );
                    refused += 1;
                    assert!(Instant::now() < until, "no worker id came free");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                };
                let mut s = held(&v);
                let mut token = v["lease"].as_str().unwrap().to_owned();
                for _ in 0..(client + round) % 3 {
                    let (st, v) = post(
                        &c,
                        &format!("{}/v1/workers/{group}/lease/{token}/renew", next()),
                    )
                    .await;
                    if st != 200 {
                        // Only a lease that lapsed (a slow machine) is refused.
                        assert_eq!(st, 409, "{v}");
                        break;
                    }
                    let r = held(&v);
                    assert_eq!(
                        (r.worker, r.fence, r.not_before_ms),
                        (s.worker, s.fence, s.not_before_ms)
                    );
                    assert!(r.until_ms >= s.until_ms);
                    s.until_ms = r.until_ms;
                    token = v["lease"].as_str().unwrap().to_owned();
                }
                seen.lock().unwrap().push(s);
                if (client + round) % 4 != 0 {
                    let (st, v) = post(
                        &c,
                        &format!("{}/v1/workers/{group}/lease/{token}/release", next()),
                    )
                    .await;
                    assert_eq!(st, 200, "{v}");
                }
            }
            refused
        }));
    }
    let mut refused = 0;
    for t in tasks {
        refused += t.await.unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), CLIENTS * ROUNDS);
    let mut by_worker: HashMap<i64, Vec<Seen>> = HashMap::new();
    for s in seen {
        assert!((0..GROUP_SIZE).contains(&s.worker), "{s:?}");
        assert!(s.not_before_ms < s.until_ms, "{s:?}");
        by_worker.entry(s.worker).or_default().push(s);
    }
    for (w, mut leases) in by_worker {
        leases.sort_by_key(|s| s.fence);
        for pair in leases.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(a.fence < b.fence, "worker {w}: fence {} twice", a.fence);
            assert!(
                a.until_ms <= b.not_before_ms,
                "worker {w}: windows overlap: {a:?} and {b:?}"
            );
        }
    }
    eprintln!(
        "{} leases, {refused} refusals while all were held",
        CLIENTS * ROUNDS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_servers_never_share_a_worker_id_in_overlapping_windows() {
    let db = Db::new();
    leases_never_overlap(&db.url(), "sonyflakes").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_servers_never_share_a_worker_id_in_overlapping_windows() {
    let Some(pg) = keysmith_testsupport::postgres::TempPostgres::shared() else {
        return;
    };
    leases_never_overlap(&format!("{}?schema=worker_leases", pg.url()), "sonyflakes").await;
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_servers_never_share_a_worker_id_in_overlapping_windows() {
    let Some(etcd) = keysmith_testsupport::etcd::TempEtcd::shared() else {
        return;
    };
    let url = etcd.url_with_prefix(&format!("leases-{:016x}", rand::random::<u64>()));
    leases_never_overlap(&url, "sonyflakes").await;
}

#[cfg(feature = "mysql")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_servers_never_share_a_worker_id_in_overlapping_windows() {
    let Some(server) = keysmith_testsupport::mariadb::TempMariaDb::shared() else {
        return;
    };
    leases_never_overlap(&server.fresh_url(), "sonyflakes").await;
}

/// Expiry, take-over, exhaustion and bad input over HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_after_expiry_or_take_over_are_refused() {
    let db = Db::new();
    let s = ServerProc::start(&db, &[], &[("KEYSMITH_LEASE_SECRET", SECRET)]).await;
    let c = reqwest::Client::new();
    // Expired, no one took it: refused by the expiry the token carries.
    let (st, a) = post(&c, &s.url("/v1/workers/solo/lease?ttl_ms=100&max=1")).await;
    assert_eq!(st, 200, "{a}");
    let expires = a["expires_ms"].as_i64().unwrap();
    while keysmith::ids::wall_ms() <= expires {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let tok = a["lease"].as_str().unwrap();
    let (st, v) = post(&c, &s.url(&format!("/v1/workers/solo/lease/{tok}/renew"))).await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("lease_refused")),
        "{v}"
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("expired"),
        "{v}"
    );

    // Taken over: the second lease waits (polling) for the first to expire.
    let (st, a) = post(&c, &s.url("/v1/workers/pair/lease?ttl_ms=300&max=1")).await;
    assert_eq!(st, 200, "{a}");
    let until = Instant::now() + DEADLINE;
    let b = loop {
        let (st, b) = post(&c, &s.url("/v1/workers/pair/lease?ttl_ms=60000&max=1")).await;
        if st == 200 {
            break b;
        }
        assert_eq!(st, 409, "{b}");
        assert!(
            b["error"]["message"]
                .as_str()
                .unwrap()
                .contains("all 1 worker ids of group \"pair\""),
            "{b}"
        );
        assert!(Instant::now() < until);
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        (b["worker"].as_i64(), b["fence"].as_i64()),
        (Some(0), Some(2))
    );
    assert!(b["not_before_ms"].as_i64() >= a["until_ms"].as_i64());
    let tok = a["lease"].as_str().unwrap();
    let (st, v) = post(&c, &s.url(&format!("/v1/workers/pair/lease/{tok}/renew"))).await;
    assert_eq!(st, 409, "{v}");
    let (st, v) = post(&c, &s.url(&format!("/v1/workers/pair/lease/{tok}/release"))).await;
    assert_eq!((st, v["released"].as_bool()), (200, Some(false)), "{v}");
    // b still holds it.
    let tb = b["lease"].as_str().unwrap();
    let (st, v) = post(&c, &s.url(&format!("/v1/workers/pair/lease/{tb}/renew"))).await;
    assert_eq!(st, 200, "{v}");

    // Bad input: 400, nothing leased.
    for bad in [
        "/v1/workers/g/lease?ttl_ms=0",
        "/v1/workers/g/lease?ttl_ms=86400001",
        "/v1/workers/g/lease?max=0",
        "/v1/workers/g/lease?max=abc",
        "/v1/workers/g/lease?max=4194305",
        "/v1/workers/g/lease?other=1",
        "/v1/workers/a%20b/lease",
        "/v1/workers/g/lease/nonsense/renew",
        "/v1/workers/g/lease/nonsense/release",
    ] {
        let (st, v) = post(&c, &s.url(bad)).await;
        assert_eq!(st, 400, "{bad}: {v}");
    }
    let (st, v) = post(&c, &s.url(&format!("/v1/workers/other/lease/{tb}/renew"))).await;
    assert_eq!(st, 400, "another group's token: {v}");
    let (st, g) = post(&c, &s.url("/v1/workers/g/lease?max=1")).await;
    assert_eq!(
        (st, g["worker"].as_i64(), g["fence"].as_i64()),
        (200, Some(0), Some(1)),
        "{g}"
    );
}

/// The CLI's leases: lease, renew, release, exhaustion, bad input.
#[test]
fn cli_leases_renews_and_releases() {
    let db = Db::new();
    let lease = |max: &str| db.run(&["--json", "workers", "lease", "g", "--max", max]);
    let out = lease("1");
    assert!(out.status.success(), "{out:?}");
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in ["worker", "fence", "not_before_ms", "until_ms", "lease"] {
        assert!(a.get(k).is_some(), "{k} in {a}");
    }
    let (code, err) = db.fails(&["workers", "lease", "g", "--max", "1"]);
    assert_ne!(code, 0);
    assert!(err.contains("all 1 worker ids of group \"g\""), "{err}");
    let tok = a["lease"].as_str().unwrap();
    let r: Value = serde_json::from_str(&db.ok(&["--json", "workers", "renew", "g", tok])).unwrap();
    assert_eq!(r["worker"], a["worker"]);
    let tok = r["lease"].as_str().unwrap();
    let out = db.ok(&["--json", "workers", "release", "g", tok]);
    assert!(out.contains("\"released\":true"), "{out}");
    let (code, err) = db.fails(&["workers", "renew", "g", "garbage"]);
    assert_ne!(code, 0);
    assert!(err.contains("invalid worker lease token"), "{err}");
    for bad in [
        &["workers", "lease", "g", "--ttl-ms", "0"][..],
        &["workers", "lease", "g", "--max", "-1"],
        &["workers", "lease", "a b"],
    ] {
        let (code, _) = db.fails(bad);
        assert_ne!(code, 0, "{bad:?}");
    }
}

/// `keysmith workers list`: a group's worker ids, held or free, in both
/// forms, never a token; an unknown group is empty; bad input fails.
#[test]
fn cli_lists_a_groups_worker_ids() {
    let db = Db::new();
    let lease = || -> Value {
        serde_json::from_str(&db.ok(&["--json", "workers", "lease", "g/1", "--max", "4"])).unwrap()
    };
    let (a, b) = (lease(), lease());
    let out = db.ok(&[
        "--json",
        "workers",
        "release",
        "g/1",
        a["lease"].as_str().unwrap(),
    ]);
    assert!(out.contains("\"released\":true"), "{out}");

    let before = keysmith::ids::wall_ms();
    let json = db.ok(&["--json", "workers", "list", "g/1"]);
    let after = keysmith::ids::wall_ms();
    let tokens = [a["lease"].as_str().unwrap(), b["lease"].as_str().unwrap()];
    assert!(tokens.iter().all(|t| !json.contains(t)), "{json}");
    let l: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(l["group"], "g/1");
    let w = l["workers"].as_array().unwrap();
    assert_eq!(w.len(), 2, "{l}");
    // Released: free, with its fence and floor.
    assert_eq!(w[0]["worker"], 0);
    assert_eq!(w[0]["held"], false);
    assert_eq!(w[0]["fence"], a["fence"]);
    assert_eq!(w[0]["until_ms"], a["until_ms"]);
    for k in ["holder", "expires_ms", "expires_in_ms"] {
        assert!(w[0][k].is_null(), "{k} of a free worker id: {l}");
    }
    // Held: by the command that leased it, until about when its lease said.
    assert_eq!(w[1]["worker"], 1);
    assert_eq!(w[1]["held"], true);
    assert_eq!(w[1]["fence"], b["fence"]);
    assert_eq!(w[1]["until_ms"], b["until_ms"]);
    assert!(
        w[1]["holder"].as_str().unwrap().starts_with("lease/"),
        "{l}"
    );
    let left = w[1]["expires_in_ms"].as_i64().unwrap();
    assert!(0 < left && left <= 10_000, "{l}");
    // expires_ms: the command's clock while it ran, plus the time left.
    let read_at = w[1]["expires_ms"].as_i64().unwrap() - left;
    assert!(before <= read_at && read_at <= after, "{l}");

    let text = db.ok(&["workers", "list", "g/1"]);
    assert!(tokens.iter().all(|t| !text.contains(t)), "{text}");
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "worker",
            "held",
            "fence",
            "until_ms",
            "expires_ms",
            "expires_in_ms",
            "holder"
        ]
    );
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(lines[3].join(" "), "free: 1023 of 1024 worker ids (1 held)");
    let fence = |v: &Value| v["fence"].to_string();
    let until = |v: &Value| v["until_ms"].to_string();
    assert_eq!(
        lines[1],
        ["0", "no", &fence(&a), &until(&a), "-", "-", "-"],
        "{text}"
    );
    assert_eq!(
        lines[2][..4],
        ["1", "yes", &fence(&b), &until(&b)],
        "{text}"
    );

    // An unknown group: empty, not an error.
    let l: Value = serde_json::from_str(&db.ok(&["--json", "workers", "list", "none"])).unwrap();
    assert_eq!(
        l,
        serde_json::json!({"group": "none", "workers": [],
            "occupancy": {"group": "none", "size": 1024, "held": 0, "free": 1024, "warning": false}})
    );
    let text = db.ok(&["workers", "list", "none"]);
    assert!(text.contains("no worker id of group \"none\""), "{text}");

    // Occupancy in the group's size: 1 of 4 held; with every id held, 0
    // free and a warning.
    let o: Value =
        serde_json::from_str(&db.ok(&["--json", "workers", "list", "g/1", "--max", "4"])).unwrap();
    assert_eq!(
        o["occupancy"],
        serde_json::json!({"group": "g/1", "size": 4, "held": 1, "free": 3, "warning": false})
    );
    let _more = (lease(), lease(), lease());
    let out = db
        .cmd()
        .args(["workers", "list", "g/1", "--max", "4"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(text.contains("free: 0 of 4 worker ids (4 held)"), "{text}");
    assert!(
        err.contains("warning: 0 of the 4 worker ids of group \"g/1\" are free"),
        "{err}"
    );

    // Bad input.
    let (code, err) = db.fails(&["workers", "list", "g", "--max", "0"]);
    assert!(code != 0 && err.contains("--max must be 1 to"), "{err}");
    let (code, err) = db.fails(&["workers", "list", "a b"]);
    assert_ne!(code, 0);
    assert!(err.contains("invalid name"), "{err}");
    let (code, _) = db.fails(&["workers", "list"]);
    assert_eq!(code, 2, "a missing group is a usage error");
    let (code, _) = db.fails(&["workers", "list", "g", "extra"]);
    assert_eq!(code, 2);
}

/// `keysmith ids bounds` and `GET /v1/ids/bounds` agree, and the ids of a
/// server made in a window lie within its bounds and decode into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_over_http_and_cli_hold_the_ids_of_their_window() {
    let db = Db::new();
    let s = ServerProc::start(&db, &[], &[]).await;
    let c = reqwest::Client::new();
    let from = keysmith::ids::wall_ms();
    let (st, v) = post(&c, &s.url("/v1/ids/next?count=50")).await;
    assert_eq!(st, 200, "{v}");
    let to = keysmith::ids::wall_ms();
    let b: Value = c
        .get(s.url(&format!("/v1/ids/bounds?from={from}&to={to}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cli: Value = serde_json::from_str(&db.ok(&[
        "--json",
        "ids",
        "bounds",
        "--from",
        &from.to_string(),
        "--to",
        &to.to_string(),
    ]))
    .unwrap();
    assert_eq!(b, cli);
    let (min, max) = (b["min_id"].as_i64().unwrap(), b["max_id"].as_i64().unwrap());
    for id in v["ids"].as_array().unwrap() {
        let id = id.as_i64().unwrap();
        assert!(min <= id && id <= max, "{id} outside {b}");
        let d: Value =
            serde_json::from_str(&db.ok(&["--json", "ids", "decode", &id.to_string()])).unwrap();
        let t = d["time_ms"].as_i64().unwrap();
        assert!(
            from <= t && t <= to,
            "{id} decodes to {t}, outside {from}..={to}"
        );
    }
    let rfc: Value = c
        .get(s.url("/v1/ids/bounds?from=2026-11-24T17:00:00Z&to=2026-11-24T17:00:00.999Z"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(rfc["from_ms"], 1_795_539_600_000i64);
    for bad in [
        "/v1/ids/bounds",
        "/v1/ids/bounds?from=1",
        "/v1/ids/bounds?from=2&to=1",
        "/v1/ids/bounds?from=x&to=1",
        "/v1/ids/bounds?from=0&to=1",
        "/v1/ids/bounds?from=0&to=1&x=2",
    ] {
        let r = c.get(s.url(bad)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 400, "{bad}");
    }
}
