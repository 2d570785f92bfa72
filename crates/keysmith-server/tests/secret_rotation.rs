//! Rotating the lease and shard key secrets without a restart: the server
//! reads its secret files again on `AppState::reload_secrets`, signs with
//! the newest key, accepts every listed one, refuses a removed one, and
//! keeps its keys when a file is bad.

mod common;

use std::path::{Path, PathBuf};

use common::json_of;
use keysmith::sequence::lease::LeaseKey;
use keysmith::shard_key::{ShardKeyCodec, ShardKeySecret};
use keysmith_server::{AppState, Config, ServeError, Server};
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const LEASE_1: &str = "lease secret one, 0123456789";
const LEASE_2: &str = "lease secret two, 0123456789";
const SHARD_1: &str = "shard secret one, 0123456789";
const SHARD_2: &str = "shard secret two, 0123456789";

/// A server over a SQLite file whose lease and shard key secrets come from
/// files in its directory; its state, to reload.
struct Srv {
    addr: std::net::SocketAddr,
    dir: tempfile::TempDir,
    state: AppState,
    client: Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Srv {
    fn lease_file(dir: &Path) -> PathBuf {
        dir.join("lease.keys")
    }

    fn shard_file(dir: &Path) -> PathBuf {
        dir.join("shard.keys")
    }

    fn config(dir: &Path) -> Config {
        Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            store_url: common::sqlite_url(&dir.join("k.db"), ""),
            lease_secret_file: Some(Self::lease_file(dir)),
            shard_key_secret_file: Some(Self::shard_file(dir)),
            ..Config::default()
        }
    }

    async fn start(lease: &str, shard: &str) -> Srv {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(Self::lease_file(dir.path()), lease).unwrap();
        std::fs::write(Self::shard_file(dir.path()), shard).unwrap();
        let server = Server::bind(Self::config(dir.path())).await.unwrap();
        let addr = server.local_addr().unwrap();
        let state = server.state().clone();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        Srv {
            addr,
            dir,
            state,
            client: Client::new(),
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Rewrites both files and reloads them.
    fn rotate(&self, lease: &str, shard: &str) -> Result<(), ServeError> {
        std::fs::write(Self::lease_file(self.dir.path()), lease).unwrap();
        std::fs::write(Self::shard_file(self.dir.path()), shard).unwrap();
        self.state.reload_secrets()
    }

    async fn call(&self, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut b = self
            .client
            .request(Method::POST, format!("http://{}{path}", self.addr));
        if let Some(body) = body {
            b = b.json(&body);
        }
        json_of(b.send().await.unwrap()).await
    }

    /// A lease of 10 values of `s`: its first value and token.
    async fn reserve(&self) -> (i64, String) {
        let (st, v) = self.call("/v1/sequences/s/reserve?count=10", None).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        (
            v["ranges"][0]["start"].as_i64().unwrap(),
            v["lease"].as_str().unwrap().to_owned(),
        )
    }

    async fn release(&self, token: &str, from: i64) -> (StatusCode, Value) {
        self.call(
            "/v1/sequences/s/release",
            Some(json!({"lease": token, "from": from})),
        )
        .await
    }

    async fn encode(&self, record: i64) -> String {
        let (st, v) = self
            .call(
                "/v1/shard-keys/encode",
                Some(json!({"origin": "c", "shard": 3, "record": record})),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        v["external"].as_str().unwrap().to_owned()
    }

    async fn decode(&self, external: &str) -> (StatusCode, Value) {
        self.call("/v1/shard-keys/decode", Some(json!({"external": external})))
            .await
    }

    async fn worker_lease(&self) -> String {
        let (st, v) = self
            .call("/v1/workers/g/lease?ttl_ms=60000&max=8", None)
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        v["lease"].as_str().unwrap().to_owned()
    }

    async fn renew_worker(&self, token: &str) -> (StatusCode, Value) {
        self.call(
            &format!("/v1/workers/g/lease/{token}/renew?ttl_ms=60000"),
            None,
        )
        .await
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).unwrap();
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}

fn lease_key(file: &str) -> LeaseKey {
    LeaseKey::parse(file.as_bytes()).unwrap()
}

fn shard_codec(file: &str) -> ShardKeyCodec {
    ShardKeyCodec::signed(&ShardKeySecret::parse(file.as_bytes()).unwrap())
}

#[tokio::test]
async fn tokens_and_strings_of_a_listed_key_survive_a_reload_and_those_of_a_removed_key_do_not() {
    let only_1 = (format!("k1:{LEASE_1}\n"), format!("k1:{SHARD_1}\n"));
    let both = (
        format!("# rotation\nk1:{LEASE_1}\nk2:{LEASE_2}\n"),
        format!("k1:{SHARD_1}\nk2:{SHARD_2}\n"),
    );
    let only_2 = (format!("k2:{LEASE_2}\n"), format!("k2:{SHARD_2}\n"));
    let srv = Srv::start(&only_1.0, &only_1.1).await;
    let (st, v) = srv
        .call("/v1/sequences", Some(json!({"name": "s", "block": 10})))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");

    // Signed with k1: three leases, a shard key string, a worker lease.
    let (a, lease_a) = srv.reserve().await;
    let (b, lease_b) = srv.reserve().await;
    let (c, lease_c) = srv.reserve().await;
    let s1 = srv.encode(42).await;
    let worker_1 = srv.worker_lease().await;
    assert!(lease_key(&only_1.0).open("s", &lease_a).is_ok());
    assert!(lease_key(&only_2.0).open("s", &lease_a).is_err());
    assert!(shard_codec(&only_1.1).decode_any(&s1).is_ok());
    assert!(shard_codec(&only_2.1).decode_any(&s1).is_err());

    // k2 added: k1's still open, new ones are signed with k2 (a server with
    // only k2 opens them, one with only k1 does not).
    srv.rotate(&both.0, &both.1).unwrap();
    let (st, v) = srv.release(&lease_c, c + 5).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = srv.decode(&s1).await;
    assert_eq!(
        (st, &v["list"]),
        (StatusCode::OK, &json!(["c", 3, 42])),
        "{v}"
    );
    let (st, v) = srv.renew_worker(&worker_1).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let worker_2 = v["lease"].as_str().unwrap().to_owned();
    let (d, lease_d) = srv.reserve().await;
    let s2 = srv.encode(42).await;
    assert_ne!(s1, s2);
    assert!(lease_key(&only_2.0).open("s", &lease_d).is_ok());
    assert!(lease_key(&only_1.0).open("s", &lease_d).is_err());
    assert!(shard_codec(&only_2.1).decode_any(&s2).is_ok());
    assert!(shard_codec(&only_1.1).decode_any(&s2).is_err());

    // A bad file: nothing changes, in either file, and the error says which
    // line without the secret.
    std::fs::write(
        Srv::shard_file(srv.dir.path()),
        format!("k1:{SHARD_1}\nk1:{SHARD_2}\n"),
    )
    .unwrap();
    std::fs::write(Srv::lease_file(srv.dir.path()), &only_2.0).unwrap();
    let e = srv.state.reload_secrets().unwrap_err().to_string();
    assert!(e.contains("shard key secret file"), "{e}");
    assert!(
        e.contains("line 2: the key id \"k1\" is already used on line 1"),
        "{e}"
    );
    assert!(!e.contains("shard secret"), "{e}");
    let (st, v) = srv.decode(&s1).await;
    assert_eq!(st, StatusCode::OK, "k1 kept: {v}");
    let (st, v) = srv.release(&lease_b, b + 5).await;
    assert_eq!(
        st,
        StatusCode::OK,
        "the lease file was not applied either: {v}"
    );
    assert_eq!(srv.encode(42).await, s2, "k2 still signs");

    // k1 removed: its tokens and strings are refused with a 400 that says
    // why; k2's still work.
    srv.rotate(&only_2.0, &only_2.1).unwrap();
    let (st, v) = srv.release(&lease_a, a + 5).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("key since removed"),
        "{v}"
    );
    let (st, v) = srv.decode(&s1).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("key since removed"),
        "{v}"
    );
    let (st, v) = srv.renew_worker(&worker_1).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    let (st, v) = srv.decode(&s2).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = srv.release(&lease_d, d + 5).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = srv.renew_worker(&worker_2).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    srv.stop().await;
}

#[tokio::test]
async fn a_bare_secret_file_keeps_the_tokens_of_the_same_secret_in_the_environment() {
    // Before key lists: one bare secret (as $KEYSMITH_LEASE_SECRET or a file
    // of one line). Its tokens and strings still open from a file of the
    // bare secret, and from a key list that holds it under an id.
    let old_lease = LeaseKey::new(LEASE_1.as_bytes()).unwrap();
    let old_shard = ShardKeyCodec::signed(&ShardKeySecret::new(SHARD_1).unwrap());
    let srv = Srv::start(&format!("{LEASE_1}\n"), &format!("{SHARD_1}\n")).await;
    let s = srv.encode(7).await;
    assert_eq!(
        s,
        old_shard.encode(&keysmith::shard_key::ShardKey::new('c', 3, 7i64).unwrap())
    );
    let (st, v) = srv
        .call("/v1/sequences", Some(json!({"name": "s", "block": 10})))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (a, token) = srv.reserve().await;
    let lease = old_lease.open("s", &token).unwrap();
    assert_eq!(
        old_lease.seal(&lease),
        token,
        "the same signature as before"
    );
    srv.rotate(
        &format!("old:{LEASE_1}\nnew:{LEASE_2}\n"),
        &format!("old:{SHARD_1}\nnew:{SHARD_2}\n"),
    )
    .unwrap();
    let (st, v) = srv.decode(&s).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = srv.release(&token, a + 1).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    srv.stop().await;
}

#[tokio::test]
async fn a_bad_secret_file_or_two_sources_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(Srv::shard_file(dir.path()), format!("k1:{SHARD_1}\n")).unwrap();
    std::fs::write(
        Srv::lease_file(dir.path()),
        format!("k1:{LEASE_1}\nk2:short\n"),
    )
    .unwrap();
    let Err(e) = Server::bind(Srv::config(dir.path())).await else {
        panic!("a bad lease file is refused");
    };
    let e = e.to_string();
    assert!(e.contains("lease secret file"), "{e}");
    assert!(
        e.contains("line 2 (key \"k2\"): a lease secret must be at least 16 bytes"),
        "{e}"
    );

    std::fs::write(Srv::lease_file(dir.path()), format!("k1:{LEASE_1}\n")).unwrap();
    let config = Config {
        lease_key: Some(LeaseKey::new(LEASE_2.as_bytes()).unwrap()),
        ..Srv::config(dir.path())
    };
    let Err(e) = Server::bind(config).await else {
        panic!("a key and a file for one secret are refused");
    };
    let e = e.to_string();
    assert!(e.contains("set one"), "{e}");
}
