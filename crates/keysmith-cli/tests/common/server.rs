//! A real `keysmith serve` process for tests: started on a free port, killed
//! with SIGKILL or stopped with SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Db;

/// How long a server may take to come up or go down before a test fails: a
/// bound on a hang, not a performance threshold.
pub const SERVER_DEADLINE: Duration = Duration::from_secs(60);

/// A `keysmith serve` child process, killed when dropped.
pub struct ServerProc {
    child: Child,
    base: String,
    /// Lines the server wrote to stderr after the address.
    pub lines: mpsc::Receiver<String>,
}

impl ServerProc {
    /// Starts `keysmith --store DB serve --listen 127.0.0.1:0 ARGS`, reads
    /// the address it prints, and waits until /readyz answers.
    pub async fn start(db: &Db, args: &[&str], env: &[(&str, &str)]) -> ServerProc {
        ServerProc::start_with(db.cmd(), args, env).await
    }

    /// [`ServerProc::start`] on the store at `url` (any store URL).
    pub async fn start_on(url: &str, args: &[&str], env: &[(&str, &str)]) -> ServerProc {
        ServerProc::start_with(super::keysmith(url), args, env).await
    }

    /// Starts `CMD serve --listen 127.0.0.1:0 ARGS`, `CMD` being `keysmith`
    /// with its global options.
    async fn start_with(mut cmd: Command, args: &[&str], env: &[(&str, &str)]) -> ServerProc {
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("KEYSMITH_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Off the runtime's threads: other tasks keep running meanwhile.
        let (rx, first) = tokio::task::spawn_blocking(move || {
            let first = rx.recv_timeout(SERVER_DEADLINE);
            (rx, first)
        })
        .await
        .unwrap();
        let first = first.expect("the server printed nothing");
        let (scheme, addr) = ["http", "https"]
            .into_iter()
            .find_map(|scheme| {
                let addr = first.split(&format!(" {scheme}://")).nth(1)?;
                Some((scheme, addr.split_whitespace().next()?))
            })
            .unwrap_or_else(|| panic!("no address in {first:?}"));
        let base = format!("{scheme}://{addr}");
        // An HTTPS server is listening once it prints its address (its
        // store is open by then); its tests connect with their own client.
        if scheme == "http" {
            let client = reqwest::Client::new();
            let until = Instant::now() + SERVER_DEADLINE;
            loop {
                if let Ok(r) = client.get(format!("{base}/readyz")).send().await
                    && r.status().is_success()
                {
                    break;
                }
                assert!(Instant::now() < until, "the server never became healthy");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        ServerProc {
            child,
            base,
            lines: rx,
        }
    }

    /// The address the server listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.base
            .split("://")
            .nth(1)
            .and_then(|a| a.parse().ok())
            .expect("an address")
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn signal(&self, sig: libc::c_int) {
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill failed");
    }

    /// Waits (with the deadline) for the process to exit.
    pub fn wait(&mut self) -> ExitStatus {
        let until = Instant::now() + SERVER_DEADLINE;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < until, "the server did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGKILL (no chance to finish a request or hand a block back),
    /// waits for the process to exit, and checks that the signal killed it.
    pub fn sigkill(&mut self) {
        self.signal(libc::SIGKILL);
        let st = self.wait();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&st),
            Some(libc::SIGKILL),
            "{st:?}"
        );
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The numbers of a `{"values": [...]}` answer.
pub fn values(v: &Value) -> Vec<i64> {
    v["values"]
        .as_array()
        .unwrap_or_else(|| panic!("no values in {v}"))
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}
