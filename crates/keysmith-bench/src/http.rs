//! A minimal HTTP/1.1 keep-alive client for the HTTP rows of `bench
//! compare`: one request in flight per connection, no allocation per request
//! beyond the response buffer, so the client costs the server's cores as
//! little as wrk would.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(16 * 1024),
        })
    }

    /// Sends `request` (a whole HTTP/1.1 request) and reads the answer.
    /// Returns the status and the body.
    pub async fn call(&mut self, request: &[u8]) -> anyhow::Result<(u16, &[u8])> {
        self.stream.write_all(request).await?;
        self.buf.clear();
        let (head_end, len) = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                let len = content_length(&self.buf[..at])
                    .ok_or_else(|| anyhow::anyhow!("answer without Content-Length"))?;
                break (at + 4, len);
            }
            self.read_more().await?;
        };
        while self.buf.len() < head_end + len {
            self.read_more().await?;
        }
        let status = std::str::from_utf8(self.buf.get(9..12).unwrap_or_default())
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("not an HTTP answer"))?;
        Ok((status, &self.buf[head_end..head_end + len]))
    }

    async fn read_more(&mut self) -> anyhow::Result<()> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            anyhow::bail!("the server closed the connection");
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn content_length(head: &[u8]) -> Option<usize> {
    let head = std::str::from_utf8(head).ok()?;
    head.split("\r\n").find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse().ok())?
    })
}

/// A request with no body.
pub fn request(method: &str, path: &str) -> Vec<u8> {
    format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n").into_bytes()
}

/// A request with a JSON body.
pub fn json_request(method: &str, path: &str, body: &str) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// What a load run measured.
#[derive(Debug, Clone, Default)]
pub struct Load {
    pub requests: u64,
    pub seconds: f64,
    /// Sorted latencies, nanoseconds.
    pub latencies: Vec<u64>,
    /// Requests answered with a status other than 2xx.
    pub failed: u64,
    /// Requests slower than [`SLOW`]: when each was due (since the start),
    /// its latency (nanoseconds) and the first number in its answer's body.
    pub slow: Vec<(u64, u64, Option<i64>)>,
}

/// A request slower than this is listed in [`Load::slow`].
pub const SLOW: Duration = Duration::from_millis(2);

/// The first integer in `body` (the first value of a `next` answer).
fn first_number(body: &[u8]) -> Option<i64> {
    let at = body.iter().position(u8::is_ascii_digit)?;
    let end = body[at..]
        .iter()
        .position(|b| !b.is_ascii_digit())
        .map_or(body.len(), |e| at + e);
    std::str::from_utf8(&body[at..end]).ok()?.parse().ok()
}

impl Load {
    pub fn per_sec(&self) -> f64 {
        self.requests as f64 / self.seconds
    }

    pub fn pct(&self, p: f64) -> Option<u64> {
        if self.latencies.is_empty() {
            return None;
        }
        let i = ((self.latencies.len() - 1) as f64 * p).round() as usize;
        Some(self.latencies[i])
    }
}

/// `conns` connections send `request` back to back for `duration`
/// (closed loop, the server's saturation). `rate`: if set, the requests go
/// out at that total rate instead (open loop), and a request that could not
/// go out when due because its connection still waited for the previous
/// answer counts its latency from when it was due, so a stalled server
/// cannot hide its queue (no coordinated omission).
pub async fn load(
    addr: SocketAddr,
    request: &[u8],
    conns: usize,
    duration: Duration,
    rate: Option<f64>,
) -> anyhow::Result<Load> {
    let start = Instant::now() + Duration::from_millis(20);
    let mut tasks = Vec::new();
    for i in 0..conns.max(1) {
        let mut conn = Conn::open(addr).await?;
        let request = request.to_vec();
        // Each connection's share of the rate, staggered.
        let interval = rate.map(|r| Duration::from_secs_f64(conns.max(1) as f64 / r));
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut slow = Vec::new();
            let mut failed = 0u64;
            tokio::time::sleep_until(start.into()).await;
            let offset = interval.map(|iv| iv.mul_f64(i as f64 / conns.max(1) as f64));
            let mut k = 0u32;
            loop {
                // When the latency counts from: when the request was due if
                // the connection was still busy then (the server's queue),
                // else when it went out (a timer that wakes late is the
                // client's doing, not the server's).
                let (due, from) = match (interval, offset) {
                    (Some(iv), Some(off)) => {
                        let due = start + off + iv * k;
                        if due > Instant::now() {
                            tokio::time::sleep_until(due.into()).await;
                            (due, Instant::now())
                        } else {
                            (due, due)
                        }
                    }
                    _ => {
                        let now = Instant::now();
                        (now, now)
                    }
                };
                if due.duration_since(start) >= duration {
                    break;
                }
                let (status, body) = conn.call(&request).await?;
                let took = from.elapsed();
                lat.push(took.as_nanos() as u64);
                if took >= SLOW {
                    slow.push((
                        due.duration_since(start).as_nanos() as u64,
                        took.as_nanos() as u64,
                        first_number(body),
                    ));
                }
                if !(200..300).contains(&status) {
                    failed += 1;
                }
                k += 1;
            }
            Ok::<_, anyhow::Error>((lat, slow, failed))
        }));
    }
    let mut all = Load {
        seconds: duration.as_secs_f64(),
        ..Load::default()
    };
    for t in tasks {
        let (lat, slow, failed) = t.await??;
        all.requests += lat.len() as u64;
        all.latencies.extend(lat);
        all.slow.extend(slow);
        all.failed += failed;
    }
    all.latencies.sort_unstable();
    all.slow.sort_unstable();
    Ok(all)
}
