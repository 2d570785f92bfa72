//! A throwaway Prometheus server: [`TempPrometheus`] starts the installed
//! `prometheus` binary (`$KEYSMITH_PROMETHEUS_BIN`, else `prometheus` on the
//! `PATH`, else `/usr/bin/prometheus`; Debian's `prometheus` package) with a
//! configuration the test gives, its data in a temporary directory, listening
//! on a free port of 127.0.0.1, and kills it when dropped.
//!
//! Queries go through Prometheus's HTTP API ([`TempPrometheus::query`]), the
//! same API Grafana and alert managers use, so a query that does not parse is
//! refused by Prometheus itself.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, skip_or_fail};

/// How long Prometheus may take to become ready before the test fails: a
/// bound on a hang, not a performance threshold.
pub const START_DEADLINE: Duration = Duration::from_secs(60);

/// The prometheus binary to run, or why there is none.
pub fn prometheus_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("KEYSMITH_PROMETHEUS_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "KEYSMITH_PROMETHEUS_BIN={} is not a file",
                p.display()
            ))
        };
    }
    let from_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    });
    match from_path {
        Some(p) => Ok(p),
        None if Path::new("/usr/bin/prometheus").is_file() => {
            Ok(PathBuf::from("/usr/bin/prometheus"))
        }
        None => Err(
            "no prometheus binary (looked at $KEYSMITH_PROMETHEUS_BIN, the PATH and \
             /usr/bin/prometheus; Debian: apt-get install prometheus)"
                .to_owned(),
        ),
    }
}

/// A Prometheus server started for a test, killed and its data removed when
/// dropped.
#[derive(Debug)]
pub struct TempPrometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// What Prometheus answered to a query: its `data` on success, else its
/// `errorType: error` message.
pub type QueryResult = Result<serde_json::Value, String>;

impl TempPrometheus {
    /// Starts Prometheus with `config` (the text of a `prometheus.yml`;
    /// relative paths in it, such as `rule_files`, are taken from the data
    /// directory, [`TempPrometheus::dir`]) and waits until `/-/ready` answers.
    ///
    /// Returns `None` (after printing why) when no prometheus binary is
    /// installed; see [`skip_or_fail`], which panics instead under
    /// `KEYSMITH_REQUIRE_BACKENDS=1`.
    ///
    /// # Panics
    /// If Prometheus is installed but refuses the configuration or does not
    /// become ready in time (the message carries the end of its log).
    pub async fn start(config: &str) -> Option<TempPrometheus> {
        let bin = match prometheus_binary() {
            Ok(b) => b,
            Err(why) => {
                skip_or_fail("prometheus", &why);
                return None;
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("keysmith-prometheus-")
            .tempdir()
            .expect("cannot create a directory for prometheus");
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("cannot write prometheus.yml");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let port = free_port();
        let mut cmd = Command::new(&bin);
        cmd.arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; the kernel kills Prometheus
        // when the thread that spawned it (the test's) exits, however it exits.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut p = TempPrometheus { child, port, dir };
        let client = reqwest::Client::new();
        let until = Instant::now() + START_DEADLINE;
        loop {
            if let Ok(r) = client.get(format!("{}/-/ready", p.base())).send().await
                && r.status().is_success()
            {
                return Some(p);
            }
            if let Some(st) = p.child.try_wait().expect("try_wait") {
                panic!("prometheus exited ({st}) before it was ready:\n{}", p.log());
            }
            assert!(
                Instant::now() < until,
                "prometheus was not ready within {START_DEADLINE:?}:\n{}",
                p.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The directory holding its configuration, data and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last 40 lines of its log (stdout and stderr), for failure messages.
    pub fn log(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// `GET /api/v1/{path}` with the query parameters `params`: the `data`
    /// of a `success` answer, or Prometheus's error message.
    ///
    /// # Panics
    /// When Prometheus does not answer or answers something that is not its
    /// API's JSON.
    pub async fn api(&self, path: &str, params: &[(&str, &str)]) -> QueryResult {
        let query: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        let url = format!("{}/api/v1/{path}?{}", self.base(), query.join("&"));
        let body: serde_json::Value = reqwest::get(&url)
            .await
            .unwrap_or_else(|e| panic!("prometheus did not answer {url}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("prometheus answered {url} with no JSON: {e}"));
        if body["status"] == "success" {
            Ok(body["data"].clone())
        } else {
            Err(format!(
                "{}: {}",
                body["errorType"].as_str().unwrap_or("?"),
                body["error"].as_str().unwrap_or("?")
            ))
        }
    }

    /// Evaluates the PromQL `expr` now (`GET /api/v1/query`).
    ///
    /// # Panics
    /// As [`TempPrometheus::api`].
    pub async fn query(&self, expr: &str) -> QueryResult {
        self.api("query", &[("query", expr)]).await
    }

    /// The metric names Prometheus holds samples of (the values of
    /// `__name__`).
    ///
    /// # Panics
    /// As [`TempPrometheus::api`], or when Prometheus refuses the request.
    pub async fn metric_names(&self) -> Vec<String> {
        let data = self
            .api("label/__name__/values", &[])
            .await
            .expect("label values");
        data.as_array()
            .expect("a list of names")
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }
}

/// Percent-encodes `s` for a URL's query (every byte but unreserved ones).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Drop for TempPrometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
