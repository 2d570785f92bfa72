//! An in-process server on a free port over a fresh SQLite file.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use keysmith_server::{AppState, Config, ServeError, Server};
use reqwest::{Client, Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct TestServer {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub client: Client,
    pub token: Option<String>,
    /// The running server's state (for reloads).
    pub state: AppState,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
}

/// The SQLite URL of a database file in `dir`, with URL parameters.
pub fn sqlite_url(path: &std::path::Path, params: &str) -> String {
    format!("sqlite://{}{params}", path.display())
}

impl TestServer {
    /// A server with default limits.
    pub async fn start() -> TestServer {
        TestServer::start_with(|_, _| {}).await
    }

    /// A server whose config `tweak` changes (the store URL may be changed
    /// to point at `db_path()` with parameters).
    pub async fn start_with(tweak: impl FnOnce(&mut Config, &std::path::Path)) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("k.db");
        let mut config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            store_url: sqlite_url(&db, ""),
            counter: keysmith_server::CounterConfig {
                dir: Some(dir.path().join("counter")),
                host: Some("testhost".into()),
            },
            ..Config::default()
        };
        tweak(&mut config, &db);
        let token = config.token.as_ref().map(|t| t.expose().to_owned());
        let server = Server::bind(config).await.unwrap();
        let addr = server.local_addr().unwrap();
        let state = server.state().clone();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        TestServer {
            addr,
            dir,
            client: Client::new(),
            token,
            state,
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("k.db")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A request carrying the server's token, if it has one.
    pub fn req(&self, method: Method, path: &str) -> RequestBuilder {
        let b = self.client.request(method, self.url(path));
        match &self.token {
            Some(t) => b.bearer_auth(t),
            None => b,
        }
    }

    /// Sends and returns (status, JSON body).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut b = self.req(method, path);
        if let Some(body) = body {
            b = b.json(&body);
        }
        json_of(b.send().await.unwrap()).await
    }

    pub async fn create(&self, name: &str, block: i64) -> Value {
        let (st, v) = self
            .call(
                Method::POST,
                "/v1/sequences",
                Some(serde_json::json!({"name": name, "block": block})),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        v
    }

    /// `count` values of `name` (percent-encoded by the caller if needed).
    pub async fn next(&self, name: &str, count: i64) -> Vec<i64> {
        self.post_values(&format!("/v1/sequences/{name}/next?count={count}"))
            .await
    }

    /// `count` numbers taken from pool `name`.
    pub async fn take(&self, name: &str, count: i64) -> Vec<i64> {
        self.post_values(&format!("/v1/pools/{name}/next?count={count}"))
            .await
    }

    /// The values of a `POST` to `path`, which must answer 200.
    async fn post_values(&self, path: &str) -> Vec<i64> {
        let (st, v) = self.call(Method::POST, path, None).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        values(&v)
    }

    /// Stops the server gracefully and waits for it; returns the directory
    /// of its database.
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.stop.take().unwrap().send(()).unwrap();
        self.task.take().unwrap().await.unwrap().unwrap();
        self.dir
    }
}

pub async fn json_of(res: Response) -> (StatusCode, Value) {
    let st = res.status();
    let text = res.text().await.unwrap();
    match serde_json::from_str(&text) {
        Ok(v) => (st, v),
        Err(_) => (st, Value::String(text)),
    }
}

pub fn values(v: &Value) -> Vec<i64> {
    v["values"]
        .as_array()
        .unwrap_or_else(|| panic!("no values in {v}"))
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

/// Percent-encodes a name for a path segment.
pub fn enc(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `method path` with `body` (JSON) as the holder of bearer `token`: the
/// status and the JSON answer.
pub async fn call(
    srv: &TestServer,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut b = srv.client.request(method, srv.url(path)).bearer_auth(token);
    if let Some(body) = body {
        b = b.json(&body);
    }
    json_of(b.send().await.unwrap()).await
}

/// Every row of every table of the SQLite store at `db`, as text: what
/// "a refused request changes nothing" is checked against.
pub fn store_state(db: &std::path::Path) -> std::collections::BTreeMap<String, Vec<String>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = std::collections::BTreeMap::new();
    for t in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let cols = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                let mut line = Vec::new();
                for i in 0..cols {
                    let v: rusqlite::types::Value = r.get(i)?;
                    line.push(format!("{v:?}"));
                }
                Ok(line.join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.insert(t, rows);
    }
    out
}
