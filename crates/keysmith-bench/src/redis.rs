//! Just enough of the Redis protocol (RESP2) for `INCR` and `CONFIG`.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One connection to a Redis server.
pub struct Redis {
    conn: BufReader<TcpStream>,
    line: String,
}

/// `HOST:PORT` of `redis://HOST[:PORT]` (no user, password or database).
///
/// # Errors
/// Says what the URL should look like.
pub fn parse_url(url: &str) -> anyhow::Result<String> {
    let rest = url.strip_prefix("redis://").ok_or_else(|| {
        anyhow::anyhow!(
            "--redis takes redis://HOST:PORT, got {:?}",
            keysmith::store::redact_url(url)
        )
    })?;
    let hostport = rest.trim_end_matches('/');
    if hostport.is_empty() || hostport.contains(['/', '@']) {
        anyhow::bail!(
            "--redis takes redis://HOST:PORT (no user, password or database), got {:?}",
            keysmith::store::redact_url(url)
        );
    }
    Ok(if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:6379")
    })
}

/// A reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Redis {
    /// Connects to `redis://HOST:PORT` (no auth, database 0).
    pub async fn connect(url: &str) -> anyhow::Result<Redis> {
        let hostport = parse_url(url)?;
        let stream = TcpStream::connect(&hostport)
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach Redis at {hostport}: {e}"))?;
        stream.set_nodelay(true)?;
        Ok(Redis {
            conn: BufReader::new(stream),
            line: String::new(),
        })
    }

    /// Sends one command and reads its reply; an error reply is an error.
    pub async fn call(&mut self, args: &[&str]) -> anyhow::Result<Reply> {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.conn.get_mut().write_all(out.as_bytes()).await?;
        self.read().await
    }

    fn read(
        &mut self,
    ) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<Reply>> + Send + '_>> {
        Box::pin(async move {
            self.line.clear();
            if self.conn.read_line(&mut self.line).await? == 0 {
                anyhow::bail!("Redis closed the connection");
            }
            let line = self.line.trim_end().to_owned();
            let (kind, rest) = line.split_at(line.len().min(1));
            match kind {
                "+" => Ok(Reply::Status(rest.to_owned())),
                "-" => anyhow::bail!("Redis: {rest}"),
                ":" => Ok(Reply::Int(rest.parse()?)),
                "$" => {
                    let n: i64 = rest.parse()?;
                    if n < 0 {
                        return Ok(Reply::Bulk(None));
                    }
                    let mut b = vec![0u8; n as usize + 2];
                    self.conn.read_exact(&mut b).await?;
                    b.truncate(n as usize);
                    Ok(Reply::Bulk(Some(b)))
                }
                "*" => {
                    let n: i64 = rest.parse()?;
                    let mut items = Vec::new();
                    for _ in 0..n.max(0) {
                        items.push(self.read().await?);
                    }
                    Ok(Reply::Array(items))
                }
                _ => anyhow::bail!("not a Redis reply: {line:?}"),
            }
        })
    }

    /// `CONFIG GET name`: the value, if the server has that setting.
    pub async fn config_get(&mut self, name: &str) -> anyhow::Result<Option<String>> {
        match self.call(&["CONFIG", "GET", name]).await? {
            Reply::Array(items) => match items.get(1) {
                Some(Reply::Bulk(Some(v))) => Ok(Some(String::from_utf8_lossy(v).into_owned())),
                _ => Ok(None),
            },
            other => anyhow::bail!("CONFIG GET {name}: unexpected reply {other:?}"),
        }
    }

    /// `INCR key`.
    pub async fn incr(&mut self, key: &str) -> anyhow::Result<i64> {
        match self.call(&["INCR", key]).await? {
            Reply::Int(v) => Ok(v),
            other => anyhow::bail!("INCR: unexpected reply {other:?}"),
        }
    }
}

/// A `redis-server` started for the run (no persistence configured; the
/// bench switches it), on a free port of 127.0.0.1, with its files in a
/// fresh directory; killed and removed on drop.
pub struct Throwaway {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Throwaway {
    /// `None` when no `redis-server` is on the PATH.
    pub async fn start(parent: &std::path::Path) -> anyhow::Result<Option<Throwaway>> {
        let Some(bin) = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("redis-server"))
                .find(|p| p.is_file())
        }) else {
            return Ok(None);
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = parent.join(format!("keysmith-compare-redis-{port}"));
        std::fs::create_dir_all(&dir)?;
        let child = std::process::Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", bin.display()))?;
        let t = Throwaway { child, port, dir };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Ok(mut r) = Redis::connect(&t.url()).await
                && r.call(&["PING"]).await.is_ok()
            {
                return Ok(Some(t));
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!("{} did not answer within 10 s", bin.display());
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
