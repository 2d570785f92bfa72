//! `POST /v1/ids/next` and `GET /v1/ids/{id}`: time-ordered ids over HTTP,
//! their metrics and status line, and bad input.

mod common;

use std::collections::HashSet;

use common::TestServer;
use reqwest::{Method, StatusCode};

fn ids_of(v: &serde_json::Value) -> Vec<i64> {
    v["ids"]
        .as_array()
        .unwrap_or_else(|| panic!("no ids in {v}"))
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

async fn take(srv: &TestServer, count: i64) -> Vec<i64> {
    let (st, v) = srv
        .call(Method::POST, &format!("/v1/ids/next?count={count}"), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    ids_of(&v)
}

#[tokio::test]
async fn ids_increase_decode_and_show_in_metrics_and_status() {
    let srv = TestServer::start().await;
    // Before the first request: no lease, and the status page says so.
    let page = srv.req(Method::GET, "/").send().await.unwrap();
    assert!(page.text().await.unwrap().contains("none issued yet"));
    let a = take(&srv, 500).await;
    let b = take(&srv, 3).await;
    assert_eq!(a.len(), 500);
    assert!(a.windows(2).all(|w| w[0] < w[1]) && b[0] > a[499]);
    let (st, v) = srv
        .call(Method::POST, "/v1/ids/next?count=2&as=string", None)
        .await;
    assert_eq!(st, StatusCode::OK);
    let s: i64 = v["ids"][0].as_str().unwrap().parse().unwrap();
    assert!(s > b[2]);
    let (st, d) = srv
        .call(Method::GET, &format!("/v1/ids/{}", a[0]), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{d}");
    assert_eq!(
        (d["worker"].as_i64(), d["sequence"].as_i64()),
        (Some(0), Some(0))
    );
    assert!(d["time"].as_str().unwrap().starts_with("20"));
    let metrics = srv
        .req(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "keysmith_ids_worker{group=\"ids\"} 0",
        "keysmith_ids_lease_held{group=\"ids\"} 1",
        "keysmith_ids_issued_total{group=\"ids\"} 505",
        "keysmith_ids_clock_skew_seconds{group=\"ids\"}",
    ] {
        assert!(metrics.contains(line), "no {line:?} in\n{metrics}");
    }
    let page = srv.req(Method::GET, "/").send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("worker id 0, lease held"), "{page}");
    let (_, status) = srv.call(Method::GET, "/v1/status", None).await;
    assert_eq!(status["ids"]["worker"], 0);
}

/// `format=uuidv7`: JSON strings, version 7 and RFC variant, increasing
/// across requests and after integer ids of the same generator, parsing
/// back to the server's worker id.
#[tokio::test]
async fn uuidv7_ids_are_strings_that_increase_and_parse_back() {
    let srv = TestServer::start().await;
    let ints = take(&srv, 3).await;
    let mut all = Vec::new();
    for q in [
        "count=700&format=uuidv7",
        "format=uuidv7&as=string",
        "format=uuidv7&count=2&as=number",
    ] {
        let (st, v) = srv
            .call(Method::POST, &format!("/v1/ids/next?{q}"), None)
            .await;
        assert_eq!(st, StatusCode::OK, "{q}: {v}");
        all.extend(v["ids"].as_array().unwrap().iter().map(|x| {
            x.as_str()
                .unwrap_or_else(|| panic!("{x} is not a string"))
                .to_owned()
        }));
    }
    assert_eq!(all.len(), 703);
    assert!(all.windows(2).all(|w| w[0] < w[1]), "not increasing");
    let last_int = keysmith::ids::Layout::snowflake().decode(ints[2]).unwrap();
    for u in &all {
        let d = keysmith::ids::decode_uuidv7(u).unwrap();
        assert_eq!(d.worker, 0, "{u}");
        assert!(
            (d.time_ms, d.counter) > (last_int.time_ms, last_int.sequence),
            "{u}"
        );
    }
    // Integers again, named: they go on above the UUIDs' time and counter.
    let (st, v) = srv
        .call(Method::POST, "/v1/ids/next?format=integer", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let d = keysmith::ids::Layout::snowflake()
        .decode(ids_of(&v)[0])
        .unwrap();
    let last = keysmith::ids::decode_uuidv7(all.last().unwrap()).unwrap();
    assert!((d.time_ms, d.sequence) > (last.time_ms, last.counter));
}

#[tokio::test]
async fn bad_input_is_a_400_and_takes_nothing() {
    let srv = TestServer::start().await;
    for path in [
        "/v1/ids/next?count=0",
        "/v1/ids/next?count=abc",
        "/v1/ids/next?as=hex",
        "/v1/ids/next?bogus=1",
        "/v1/ids/next?format=uuid",
        "/v1/ids/next?format=",
        "/v1/ids/next?format=uuidv7&count=0",
        "/v1/ids/abc",
        "/v1/ids/-1",
        "/v1/ids/99999999999999999999",
    ] {
        let method = if path.starts_with("/v1/ids/next") {
            Method::POST
        } else {
            Method::GET
        };
        let (st, v) = srv.call(method, path, None).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{path}: {v}");
        if path.contains("format=uuid&") || path.ends_with("format=uuid") {
            let m = v["error"]["message"].as_str().unwrap();
            assert!(m.contains("integer") && m.contains("uuidv7"), "{m}");
        }
        assert!(v["error"]["message"].as_str().unwrap().len() > 10, "{v}");
    }
    let (st, _) = srv
        .call(Method::POST, "/v1/ids/next?count=100000000", None)
        .await;
    assert_eq!(st, StatusCode::PAYLOAD_TOO_LARGE);
    // Nothing was leased by the refused requests: the first real one is
    // worker 0 and nothing was issued before it.
    let first = take(&srv, 1).await[0];
    let (_, d) = srv
        .call(Method::GET, &format!("/v1/ids/{first}"), None)
        .await;
    assert_eq!(
        (d["worker"].as_i64(), d["sequence"].as_i64()),
        (Some(0), Some(0))
    );
}

/// Two servers on one store take different worker ids and never share an
/// id; with one worker id only, the second answers 503 (all taken), and
/// after the first stops (releasing it) a new server starts above its ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_on_one_store_never_share_an_id_or_a_worker() {
    let a = TestServer::start().await;
    let url = common::sqlite_url(&a.db_path(), "");
    let u = url.clone();
    let b = TestServer::start_with(move |c, _| c.store_url = u).await;
    let (xa, xb) = (take(&a, 1000).await, take(&b, 1000).await);
    let all: HashSet<i64> = xa.iter().chain(&xb).copied().collect();
    assert_eq!(all.len(), 2000);
    let (_, d) = b
        .call(Method::GET, &format!("/v1/ids/{}", xb[0]), None)
        .await;
    assert_eq!(d["worker"], 1);

    let one = |url: String| {
        move |c: &mut keysmith_server::Config, _: &std::path::Path| {
            c.store_url = url;
            c.ids.group = "solo".into();
            c.ids.max_workers = Some(1);
        }
    };
    let s1 = TestServer::start_with(one(url.clone())).await;
    let s2 = TestServer::start_with(one(url.clone())).await;
    let first = take(&s1, 10).await;
    let res = s2.req(Method::POST, "/v1/ids/next").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().contains_key("retry-after"));
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], "ids_unavailable", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("all 1 worker ids")
    );
    drop(s1.stop().await);
    let later = take(&s2, 10).await;
    assert!(later[0] > first[9], "{} after {}", later[0], first[9]);
}

/// The runway of the server's ids on `/metrics`, `/v1/status` and the
/// status page: a default layout warns of nothing; a layout that runs out
/// within 5 years, and a group whose every worker id is held (0 free),
/// warn in all three.
#[tokio::test]
async fn runway_and_free_worker_ids_show_with_warnings() {
    let metrics = |srv: &TestServer| {
        let r = srv.req(Method::GET, "/metrics");
        async move { r.send().await.unwrap().text().await.unwrap() }
    };
    let srv = TestServer::start().await;
    let m = metrics(&srv).await;
    for line in [
        "keysmith_ids_runway_seconds{group=\"ids\",layout=\"41/10/12 bits of 1 ms\"} ",
        "keysmith_ids_runway_warning{group=\"ids\"} 0",
        "keysmith_ids_workers_free{group=\"ids\"} 1024",
        "keysmith_ids_workers_size{group=\"ids\"} 1024",
        "keysmith_ids_workers_free_warning{group=\"ids\"} 0",
    ] {
        assert!(m.contains(line), "no {line:?} in\n{m}");
    }
    let page = srv.req(Method::GET, "/").send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("1024 of 1024 worker ids free"), "{page}");
    assert!(!page.contains("Warning:"), "{page}");

    // 40 bits of 1 ms last 34.8 years: an epoch 33 years back leaves 1.8;
    // one worker id, held once an id is taken.
    let epoch_ms = keysmith::ids::wall_ms() - 33 * 31_556_952_000;
    let srv = TestServer::start_with(move |c, _| {
        c.ids.layout.time_bits = 40;
        c.ids.layout.epoch_ms = epoch_ms;
        c.ids.allow_short_lifetime = true;
        c.ids.max_workers = Some(1);
    })
    .await;
    take(&srv, 1).await;
    let m = metrics(&srv).await;
    for line in [
        "keysmith_ids_runway_warning{group=\"ids\"} 1",
        "keysmith_ids_workers_free{group=\"ids\"} 0",
        "keysmith_ids_workers_size{group=\"ids\"} 1",
        "keysmith_ids_workers_free_warning{group=\"ids\"} 1",
    ] {
        assert!(m.contains(line), "no {line:?} in\n{m}");
    }
    let secs: f64 = m
        .lines()
        .find(|l| l.starts_with("keysmith_ids_runway_seconds{"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    let years = secs / 31_556_952.0;
    assert!((1.7..1.9).contains(&years), "{years}");
    let (_, status) = srv.call(Method::GET, "/v1/status", None).await;
    let r = &status["ids_runway"];
    assert_eq!(r["runway"]["warning"], true, "{status}");
    assert_eq!(r["workers"]["free"], 0, "{status}");
    assert_eq!(r["workers"]["warning"], true, "{status}");
    let page = srv.req(Method::GET, "/").send().await.unwrap();
    let page = page.text().await.unwrap();
    assert!(page.contains("time bits run out in 1.8 years"), "{page}");
    assert!(page.contains("0 of 1 worker ids free"), "{page}");
    assert!(
        page.contains("Warning: the time bits run out in under 5.0 years; 0 of 1 worker ids free"),
        "{page}"
    );
}
