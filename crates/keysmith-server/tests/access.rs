//! Access control: principals from an access file, the grant each route
//! needs, refusals that change nothing, filtered listings, quotas, rates,
//! reloads and the audit trail.

mod common;

use common::{TestServer, call, enc, json_of, store_state, values};
use keysmith_server::access::{Requirement, Target, requirement, token_digest_hex};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const OPS: &str = "ops-token-0123456789";
const TEAM_A: &str = "team-a-token-0123456789";
const TEAM_B: &str = "team-b-token-0123456789";
const APP_A: &str = "app-a-token-0123456789";

fn access_file(extra: &str) -> String {
    access_file_with(&[TEAM_A], extra)
}

/// The access file with team-a known by `team_a` tokens.
fn access_file_with(team_a: &[&str], extra: &str) -> String {
    let d = |t: &str| token_digest_hex(t.as_bytes());
    let team_a: Vec<String> = team_a.iter().map(|t| format!("\"{}\"", d(t))).collect();
    format!(
        r#"
[[principal]]
name = "ops"
token_sha256 = "{}"
grants = [ {{ names = "*", actions = ["use", "read", "admin"] }} ]

[[principal]]
name = "team-a"
token_sha256 = [{}]
grants = [ {{ names = "team-a/*", actions = ["use", "read", "admin"] }} ]

[[principal]]
name = "team-b"
token_sha256 = "{}"
grants = [ {{ names = "team-b/*", actions = ["use", "read", "admin"] }} ]

[[principal]]
name = "app-a"
token_sha256 = "{}"
grants = [ {{ names = "team-a/*", actions = ["use", "read"] }} ]
{extra}
"#,
        d(OPS),
        team_a.join(", "),
        d(TEAM_B),
        d(APP_A)
    )
}

async fn server(extra: &str) -> TestServer {
    let text = access_file(extra);
    TestServer::start_with(move |c, db| {
        let dir = db.parent().unwrap();
        let file = dir.join("access.toml");
        std::fs::write(&file, &text).unwrap();
        c.access_file = Some(file);
        c.audit_log = Some(dir.join("audit.log"));
        c.shard_key_secret = Some(
            keysmith::shard_key::ShardKeySecret::new(*b"0123456789abcdef0123456789abcdef").unwrap(),
        );
    })
    .await
}

/// `POST path` with no body, as `token`.
async fn post(srv: &TestServer, token: &str, path: &str) -> (StatusCode, Value) {
    call(srv, token, Method::POST, path, None).await
}

/// `POST /v1/sequences {"name": name}` as `token`.
async fn create(srv: &TestServer, token: &str, name: &str) -> (StatusCode, Value) {
    call(
        srv,
        token,
        Method::POST,
        "/v1/sequences",
        Some(json!({ "name": name })),
    )
    .await
}

/// Creates team-a's and team-b's sequences and pools, and takes values.
async fn set_up(srv: &TestServer) {
    for team in ["team-a", "team-b"] {
        let (st, v) = call(
            srv,
            OPS,
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": format!("{team}/orders"), "block": 10})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (st, v) = call(
            srv,
            OPS,
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": format!("{team}/invoices"), "gapless": true})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (st, v) = call(
            srv,
            OPS,
            Method::POST,
            "/v1/pools",
            Some(json!({"name": format!("{team}/pool"), "size": 8})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        let (st, v) = call(
            srv,
            OPS,
            Method::POST,
            &format!(
                "/v1/sequences/{}/next?count=3",
                enc(&format!("{team}/orders"))
            ),
            None,
        )
        .await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
}

/// The path of an operation with its parameters filled in for `team`'s
/// objects.
fn path_for(template: &str, team: &str) -> String {
    let name = if template.starts_with("/v1/pools") {
        format!("{team}/pool")
    } else if template.contains("/tickets") || template.ends_with("/parse") {
        format!("{team}/invoices")
    } else {
        format!("{team}/orders")
    };
    template
        .replace("{name}", &enc(&name))
        .replace("{group}", &enc(&format!("{team}/workers")))
        .replace("{ticket}", "1")
        .replace("{token}", "x")
        .replace("{id}", "1")
}

/// A plausible body for an operation on `team`'s objects.
fn body_for(template: &str, team: &str) -> Option<Value> {
    Some(match template {
        "/v1/sequences" => json!({"name": format!("{team}/new"), "block": 5}),
        "/v1/pools" => json!({"name": format!("{team}/newpool"), "size": 4}),
        "/v1/fence" => json!({"name": format!("{team}/orders"), "skip": 100}),
        "/v1/sequences/{name}" => json!({"block": 7}),
        "/v1/sequences/{name}/release" => json!({"lease": "x", "from": 1}),
        "/v1/sequences/{name}/parse" => json!({"value": "1"}),
        "/v1/shard-keys/encode" => json!({"origin": 1, "shard": 1, "record": 1}),
        "/v1/shard-keys/decode" => json!({"key": "x"}),
        _ => return None,
    })
}

/// Every operation of the API document: (method, template).
async fn operations(srv: &TestServer) -> Vec<(Method, String)> {
    let (st, doc) = call(srv, OPS, Method::GET, "/openapi.json", None).await;
    assert_eq!(st, StatusCode::OK);
    let mut ops = Vec::new();
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (m, _) in item.as_object().unwrap() {
            let Ok(method) = m.to_uppercase().parse::<Method>() else {
                continue;
            };
            if ["GET", "POST", "PATCH", "DELETE", "PUT"].contains(&method.as_str()) {
                ops.push((method, template.clone()));
            }
        }
    }
    assert!(ops.len() > 25, "the document lists the routes: {ops:?}");
    ops
}

#[tokio::test]
async fn every_route_names_its_grant() {
    let srv = server("").await;
    for (method, template) in operations(&srv).await {
        assert_ne!(
            requirement(&method, &template),
            Requirement::NoSuchMethod,
            "{method} {template} is in the API document but not in the grant table"
        );
    }
    srv.stop().await;
}

#[tokio::test]
async fn a_team_on_the_other_teams_names_gets_403_and_changes_nothing() {
    let srv = server("").await;
    set_up(&srv).await;
    let ops = operations(&srv).await;
    let mut tried = 0;
    for (me, token, other) in [("team-a", TEAM_A, "team-b"), ("team-b", TEAM_B, "team-a")] {
        for (method, template) in &ops {
            let Requirement::Grant(need) = requirement(method, template) else {
                continue;
            };
            if matches!(need.target, Target::Listed | Target::Known) {
                continue;
            }
            let before = store_state(&srv.db_path());
            let path = path_for(template, other);
            let (st, v) = call(
                &srv,
                token,
                method.clone(),
                &path,
                body_for(template, other),
            )
            .await;
            assert_eq!(st, StatusCode::FORBIDDEN, "{me} on {method} {path}: {v}");
            assert_eq!(v["error"]["code"], "forbidden", "{v}");
            let msg = v["error"]["message"].as_str().unwrap();
            assert!(
                msg.contains(me) && msg.contains(need.action.as_str()),
                "{msg}"
            );
            assert_eq!(
                store_state(&srv.db_path()),
                before,
                "{me} on {method} {path} changed the store"
            );
            tried += 1;
        }
    }
    assert!(tried > 40, "tried {tried} refusals");
    // The owners themselves get through on the same routes.
    let (st, v) = call(
        &srv,
        TEAM_B,
        Method::POST,
        &format!("/v1/sequences/{}/next", enc("team-b/orders")),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = create(&srv, TEAM_A, "team-a/new").await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    srv.stop().await;
}

#[tokio::test]
async fn a_use_only_principal_gets_403_on_every_admin_route() {
    let srv = server("").await;
    set_up(&srv).await;
    let mut tried = 0;
    for (method, template) in operations(&srv).await {
        let Requirement::Grant(need) = requirement(&method, &template) else {
            continue;
        };
        if need.action != keysmith_server::access::Action::Admin {
            continue;
        }
        let before = store_state(&srv.db_path());
        let path = path_for(&template, "team-a");
        let (st, v) = call(
            &srv,
            APP_A,
            method.clone(),
            &path,
            body_for(&template, "team-a"),
        )
        .await;
        assert_eq!(st, StatusCode::FORBIDDEN, "app-a on {method} {path}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("`admin`"),
            "{v}"
        );
        assert_eq!(store_state(&srv.db_path()), before, "{method} {path}");
        tried += 1;
    }
    assert!(tried >= 7, "admin routes tried: {tried}");
    // What it may do, it does.
    let (st, v) = call(
        &srv,
        APP_A,
        Method::POST,
        &format!("/v1/sequences/{}/next?count=2", enc("team-a/orders")),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(values(&v).len(), 2);
    srv.stop().await;
}

#[tokio::test]
async fn listings_metrics_and_hints_show_only_readable_names() {
    let srv = server("").await;
    set_up(&srv).await;
    let (st, v) = call(&srv, TEAM_A, Method::GET, "/v1/sequences", None).await;
    assert_eq!(st, StatusCode::OK);
    let names: Vec<&str> = v["sequences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["team-a/invoices", "team-a/orders"]);
    let (_, v) = call(&srv, TEAM_A, Method::GET, "/v1/pools", None).await;
    assert_eq!(v["pools"].as_array().unwrap().len(), 1, "{v}");
    let (_, ops_view) = call(&srv, OPS, Method::GET, "/v1/sequences", None).await;
    assert_eq!(ops_view["sequences"].as_array().unwrap().len(), 4);

    for path in ["/v1/status", "/metrics", "/"] {
        let res = srv
            .client
            .get(srv.url(path))
            .bearer_auth(TEAM_A)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let text = res.text().await.unwrap();
        assert!(!text.contains("team-b"), "{path} shows team-b's names");
        if path != "/metrics" {
            assert!(text.contains("team-a/orders"), "{path}");
        }
    }
    let res = srv
        .client
        .get(srv.url("/metrics"))
        .bearer_auth(OPS)
        .send()
        .await
        .unwrap();
    assert!(res.text().await.unwrap().contains("team-b/orders"));

    // "Did you mean": team-a's own names only.
    let (st, v) = call(
        &srv,
        TEAM_A,
        Method::GET,
        &format!("/v1/sequences/{}", enc("team-a/orderz")),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    let similar: Vec<&str> = v["error"]["similar"]
        .as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap()).collect())
        .unwrap_or_default();
    assert!(similar.contains(&"team-a/orders"), "{v}");
    assert!(!similar.iter().any(|s| s.starts_with("team-b")), "{v}");
    assert!(
        !v["error"]["message"].as_str().unwrap().contains("team-b"),
        "the message names team-b: {v}"
    );
    let (_, v) = call(
        &srv,
        OPS,
        Method::GET,
        &format!("/v1/sequences/{}", enc("team-a/orderz")),
        None,
    )
    .await;
    assert!(
        v["error"]["similar"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s.as_str().unwrap().starts_with("team-b")),
        "the hint itself would show team-b's names: {v}"
    );
    srv.stop().await;
}

#[tokio::test]
async fn unknown_tokens_get_401_and_the_probes_are_open() {
    let srv = server("").await;
    let (st, v) = call(
        &srv,
        "nobody-0123456789",
        Method::GET,
        "/v1/sequences",
        None,
    )
    .await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "{v}");
    let res = srv
        .client
        .get(srv.url("/v1/sequences"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    for probe in ["/livez", "/readyz"] {
        let res = srv.client.get(srv.url(probe)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{probe}");
    }
    srv.stop().await;
}

#[tokio::test]
async fn quotas_cap_what_a_principal_creates() {
    let extra = format!(
        r#"
[[principal]]
name = "small"
token_sha256 = "{}"
grants = [ {{ names = "small/*", actions = ["use", "read", "admin"] }} ]
max_sequences = 2
max_pools = 1
"#,
        token_digest_hex(b"small-token-0123456789")
    );
    let srv = server(&extra).await;
    let small = "small-token-0123456789";
    for n in ["small/a", "small/b"] {
        let (st, v) = call(
            &srv,
            small,
            Method::POST,
            "/v1/sequences",
            Some(json!({"name": n})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
    }
    let before = store_state(&srv.db_path());
    let (st, v) = create(&srv, small, "small/c").await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(v["error"]["code"], "quota_exceeded");
    assert_eq!(store_state(&srv.db_path()), before);
    let (st, _) = call(
        &srv,
        small,
        Method::POST,
        "/v1/pools",
        Some(json!({"name": "small/p", "size": 2})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let (st, v) = call(
        &srv,
        small,
        Method::POST,
        "/v1/pools",
        Some(json!({"name": "small/q", "size": 2})),
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    // A drop makes room.
    let (st, _) = call(
        &srv,
        small,
        Method::DELETE,
        &format!("/v1/sequences/{}", enc("small/a")),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (st, v) = create(&srv, small, "small/c").await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    srv.stop().await;
}

#[tokio::test]
async fn a_principal_over_its_rate_gets_429_and_takes_nothing() {
    let extra = format!(
        r#"
[[principal]]
name = "slow"
token_sha256 = "{}"
grants = [ {{ names = "slow/*", actions = ["use", "read"] }} ]
rate = 1
burst = 2
"#,
        token_digest_hex(b"slow-token-0123456789")
    );
    let srv = server(&extra).await;
    let (st, _) = call(
        &srv,
        OPS,
        Method::POST,
        "/v1/sequences",
        Some(json!({"name": "slow/s", "block": 1})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let path = format!("/v1/sequences/{}/next", enc("slow/s"));
    let mut got = Vec::new();
    let mut limited = 0;
    for _ in 0..10 {
        let res = srv
            .client
            .post(srv.url(&path))
            .bearer_auth("slow-token-0123456789")
            .send()
            .await
            .unwrap();
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(res.headers().contains_key("retry-after"));
            limited += 1;
        } else {
            let (st, v) = json_of(res).await;
            assert_eq!(st, StatusCode::OK, "{v}");
            got.extend(values(&v));
        }
    }
    assert!(
        limited > 0,
        "ten requests at once with a burst of 2 were not limited"
    );
    // The refused ones took nothing: the next value follows the last one given.
    let (_, v) = post(&srv, OPS, &path).await;
    assert_eq!(values(&v), vec![got.len() as i64 + 1], "{got:?}");
    // Other principals are not limited by it.
    for _ in 0..5 {
        let (st, _) = call(&srv, OPS, Method::GET, "/v1/sequences", None).await;
        assert_eq!(st, StatusCode::OK);
    }
    srv.stop().await;
}

fn audit_lines(srv: &TestServer) -> Vec<Value> {
    let text = std::fs::read_to_string(srv.dir.path().join("audit.log")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[tokio::test]
async fn each_admin_route_writes_one_audit_line() {
    let srv = server("").await;
    let seq = enc("team-a/orders");
    let steps: Vec<(Method, String, Option<Value>, &str)> = vec![
        (
            Method::POST,
            "/v1/sequences".into(),
            Some(json!({"name": "team-a/orders", "block": 5})),
            "team-a/orders",
        ),
        (
            Method::PATCH,
            format!("/v1/sequences/{seq}"),
            Some(json!({"block": 7})),
            "team-a/orders",
        ),
        (
            Method::POST,
            "/v1/fence".into(),
            Some(json!({"name": "team-a/orders", "skip": 10})),
            "team-a/orders",
        ),
        (
            Method::DELETE,
            format!("/v1/sequences/{seq}"),
            None,
            "team-a/orders",
        ),
        (
            Method::POST,
            "/v1/pools".into(),
            Some(json!({"name": "team-a/p", "size": 3})),
            "team-a/p",
        ),
        (
            Method::DELETE,
            format!("/v1/pools/{}", enc("team-a/p")),
            None,
            "team-a/p",
        ),
        (
            Method::POST,
            "/v1/shard-keys/encode".into(),
            Some(json!({"origin": 1, "shard": 2, "record": 3})),
            "shard-keys",
        ),
    ];
    for (i, (method, path, body, object)) in steps.into_iter().enumerate() {
        let id = format!("audit-{i}");
        let mut b = srv
            .client
            .request(method.clone(), srv.url(&path))
            .bearer_auth(TEAM_A)
            .header("x-request-id", &id);
        if let Some(body) = body {
            b = b.json(&body);
        }
        let (st, v) = json_of(b.send().await.unwrap()).await;
        let want = if object == "shard-keys" {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::OK
        };
        if object != "shard-keys" {
            assert!(st.is_success(), "{method} {path}: {v}");
        } else {
            assert_eq!(st, want, "team-a has no grant on shard-keys: {v}");
        }
        let lines: Vec<Value> = audit_lines(&srv)
            .into_iter()
            .filter(|l| l["request_id"] == id.as_str())
            .collect();
        assert_eq!(lines.len(), 1, "{method} {path}: {lines:?}");
        let l = &lines[0];
        assert_eq!(l["principal"], "team-a", "{l}");
        assert_eq!(l["object"]["name"], object, "{l}");
        assert_eq!(l["action"], "admin", "{l}");
        assert!(l["time"].as_str().unwrap().contains('T'), "{l}");
        assert!(l["route"].as_str().unwrap().starts_with("/v1/"), "{l}");
        if object != "shard-keys" {
            assert_eq!(l["event"], "admin", "{l}");
            assert_eq!(l["status"], st.as_u16(), "{l}");
        } else {
            assert_eq!(l["event"], "refused", "{l}");
        }
        if method == Method::DELETE {
            assert!(!l["before"].is_null() && l["after"].is_null(), "{l}");
        }
        if method == Method::PATCH {
            assert_eq!(l["after"]["block"], 7, "{l}");
            assert_eq!(l["before"]["block"], 5, "{l}");
            assert_eq!(l["request"], json!({"block": 7}), "{l}");
        }
    }
    // A fence naming its sequence with "all": false needs the grant on that
    // name only; "all": true needs it on every name.
    let (st, v) = call(
        &srv,
        TEAM_A,
        Method::POST,
        "/v1/sequences",
        Some(json!({"name": "team-a/f"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let fence = |all: bool| json!({"name": "team-a/f", "all": all, "skip": 5});
    let (st, v) = call(&srv, TEAM_A, Method::POST, "/v1/fence", Some(fence(false))).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = call(
        &srv,
        TEAM_A,
        Method::POST,
        "/v1/fence",
        Some(json!({"all": true, "skip": 5})),
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{v}");
    // Uses and reads write nothing.
    let n = audit_lines(&srv).len();
    create(&srv, TEAM_A, "team-a/x").await;
    call(
        &srv,
        TEAM_A,
        Method::POST,
        &format!("/v1/sequences/{}/next", enc("team-a/x")),
        None,
    )
    .await;
    call(&srv, TEAM_A, Method::GET, "/v1/sequences", None).await;
    assert_eq!(audit_lines(&srv).len(), n + 1);
    srv.stop().await;
}

#[tokio::test]
async fn a_token_rotates_without_a_failed_request() {
    let srv = server("").await;
    let (st, _) = call(
        &srv,
        OPS,
        Method::POST,
        "/v1/sequences",
        Some(json!({"name": "team-a/r", "block": 50})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let file = srv.dir.path().join("access.toml");
    let new_token = "team-a-new-token-0123456789";
    // Load with the token that stays valid throughout, while the file changes.
    let load = {
        let client = srv.client.clone();
        let url = srv.url(&format!("/v1/sequences/{}/next", enc("team-a/r")));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut n = 0u32;
            let mut failures = Vec::new();
            while !*stop_rx.borrow() && n < 100_000 {
                let res = client.post(&url).bearer_auth(OPS).send().await.unwrap();
                if res.status() != StatusCode::OK {
                    failures.push(res.status());
                }
                n += 1;
            }
            (n, failures)
        });
        (stop_tx, task)
    };
    let both = access_file_with(&[TEAM_A, new_token], "");
    std::fs::write(&file, &both).unwrap();
    srv.state.reload_access().unwrap();
    for t in [TEAM_A, new_token] {
        let (st, v) = call(&srv, t, Method::GET, "/v1/sequences", None).await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
    // The old token goes.
    let only_new = access_file_with(&[new_token], "");
    std::fs::write(&file, &only_new).unwrap();
    srv.state.reload_access().unwrap();
    let (st, _) = call(&srv, TEAM_A, Method::GET, "/v1/sequences", None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let (st, _) = call(&srv, new_token, Method::GET, "/v1/sequences", None).await;
    assert_eq!(st, StatusCode::OK);
    // A bad file keeps the one in use, and says why.
    std::fs::write(&file, "[[principal]]\nname = \"x\"\n").unwrap();
    let e = srv.state.reload_access().unwrap_err().to_string();
    assert!(e.contains("neither token_sha256"), "{e}");
    let (st, _) = call(&srv, new_token, Method::GET, "/v1/sequences", None).await;
    assert_eq!(st, StatusCode::OK);
    let (stop, task) = load;
    stop.send(true).unwrap();
    let (n, failures) = task.await.unwrap();
    assert!(n > 0);
    assert!(failures.is_empty(), "{failures:?} of {n} requests failed");
    let reloads: Vec<Value> = audit_lines(&srv)
        .into_iter()
        .filter(|l| l["event"] == "access_reload")
        .collect();
    assert_eq!(reloads.len(), 3, "{reloads:?}");
    assert!(reloads[2]["reason"].as_str().unwrap().contains("kept"));
    srv.stop().await;
}

#[tokio::test]
async fn a_changed_access_file_is_read_again_without_a_signal() {
    let srv = server("").await;
    let new_token = "team-a-changed-0123456789";
    let (st, _) = call(&srv, new_token, Method::GET, "/v1/sequences", None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let file = srv.dir.path().join("access.toml");
    std::fs::write(&file, access_file_with(&[TEAM_A, new_token], "")).unwrap();
    // Await the watcher's reload (audited): bounded, it looks once a
    // second. (Polling with the new token instead would spend this
    // address's budget of failed authentications.)
    let reloaded = || {
        audit_lines(&srv)
            .iter()
            .any(|l| l["event"] == "access_reload" && l["reason"].is_null())
    };
    for _ in 0..300 {
        if reloaded() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(reloaded(), "the changed file was not read within 30 s");
    let (st, _) = call(&srv, new_token, Method::GET, "/v1/sequences", None).await;
    assert_eq!(st, StatusCode::OK);
    srv.stop().await;
}
