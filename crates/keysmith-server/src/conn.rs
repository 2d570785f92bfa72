//! Accepting and serving connections: a cap on connections served at once,
//! a header-read timeout and an idle timeout, graceful shutdown, and JSON
//! bodies for the errors hyper answers by itself (a request head it cannot
//! parse).
//!
//! `axum::serve` has no header timeout and no connection cap, so a client
//! that opens connections and sends nothing (or one byte now and then)
//! could hold every file descriptor of the process. Here:
//!
//! - at most `max_connections` connections are served at once; the next
//!   one is accepted when one closes (until then it waits in the kernel's
//!   listen queue);
//! - at most `max_connections_per_ip` of them from one client address
//!   ([`crate::per_ip`]): one more from that address is accepted and closed
//!   at once, so that one address cannot hold every connection;
//! - HTTP/1: the headers of a request must arrive within
//!   `header_read_timeout` of the server starting to wait for them (after
//!   connecting, or after the previous response): hyper's own timer;
//! - any connection (also HTTP/2, and one that has not yet sent enough to
//!   tell its protocol) is closed when it has had no request in flight for
//!   `header_read_timeout` before its first request, or for `idle_timeout`
//!   after one. Requests answered 401 or 429 (no or a wrong credential,
//!   throttled) do not count: a connection that has had only those is closed
//!   after `header_read_timeout` idle, as one that never sent a request, so
//!   that strangers cannot hold connections open. A request in flight (from its head being read to the last
//!   byte of its answer being written) keeps its connection open;
//! - with TLS ([`crate::tls`]), the handshake runs in the connection's task
//!   (a slow client never holds up accepting) and must finish within
//!   `header_read_timeout` of the accept, the same limit a connection has to
//!   its first request; a failed handshake closes the connection.
//!
//! Every request carries its connection's peer address as an
//! `axum::extract::ConnectInfo<SocketAddr>` extension, and with mutual TLS
//! the client certificate's subject as a [`ClientCert`].

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

use crate::tls::{ClientCert, Tls};

/// The largest request head (request line and headers) hyper reads, in
/// bytes; more is a 431.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The connection limits of a server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) header_read_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) max_connections_per_ip: usize,
}

/// Serves `router` on `listener` until `shutdown` completes; then stops
/// accepting, lets every connection finish what it has in flight (hyper's
/// graceful shutdown), and returns when all are closed or `grace` has
/// passed, whichever comes first.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<Tls>>,
    limits: Limits,
    grace: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        // One buffer per write, so an answer hyper makes by itself is seen
        // whole by `JsonErrors`.
        .writev(false);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let per_ip = crate::per_ip::Connections::new(limits.max_connections_per_ip);
    let mut refused_per_ip: u64 = 0;
    let mut refused_logged: Option<Instant> = None;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A permit first: past the cap, connections wait to be accepted.
        let permit = tokio::select! {
            () = &mut shutdown => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break, // never closed
            },
        };
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        let Some(held) = per_ip.admit(peer.ip()) else {
            // Closed at once (its permit goes back): that address holds
            // its most. Logged at most once a minute.
            refused_per_ip += 1;
            if refused_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                tracing::warn!(
                    peer = %peer.ip(),
                    refused = refused_per_ip,
                    "closed connections of an address that holds --max-connections-per-ip ({}) already",
                    limits.max_connections_per_ip
                );
                refused_logged = Some(Instant::now());
                refused_per_ip = 0;
            }
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (router, builder, stop) = (router.clone(), builder.clone(), stop_rx.clone());
        let tls = tls.clone();
        tokio::spawn(async move {
            let about = Peer {
                addr: peer,
                accepted: Instant::now(),
                client: None,
            };
            match tls {
                None => connection(tcp, about, router, &builder, stop, limits).await,
                Some(tls) => {
                    if let Some((stream, about)) =
                        handshake(&tls, tcp, about, stop.clone(), limits).await
                    {
                        connection(stream, about, router, &builder, stop, limits).await;
                    }
                }
            }
            tracing::trace!(%peer, "connection closed");
            drop(held);
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection holds a permit until it is closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(grace, permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            "connections still open {grace:?} after the shutdown signal; closing handles anyway"
        );
    }
}

/// An accept error: the ones about one connection (reset before it was
/// accepted) are skipped; others (out of file descriptors) are logged and
/// retried after a pause, as `axum::serve` does.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::*;
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    ) {
        return;
    }
    tracing::error!("cannot accept a connection: {e}; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Who is at the other end of a connection.
#[derive(Debug, Clone)]
struct Peer {
    addr: SocketAddr,
    /// When the connection was accepted.
    accepted: Instant,
    /// The verified client certificate (mutual TLS).
    client: Option<ClientCert>,
}

/// The TLS handshake of a connection, with the configuration current when
/// it starts. `None` (logged) when it fails, takes longer than
/// `header_read_timeout`, or the server stops meanwhile: the connection is
/// closed.
async fn handshake(
    tls: &Tls,
    tcp: TcpStream,
    mut about: Peer,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) -> Option<(tokio_rustls::server::TlsStream<TcpStream>, Peer)> {
    let peer = about.addr;
    let accept = tokio::time::timeout(limits.header_read_timeout, tls.acceptor().accept(tcp));
    let stream = tokio::select! {
        r = accept => match r {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                tracing::debug!(%peer, "TLS handshake failed: {e}");
                return None;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake not done within the header read timeout");
                return None;
            }
        },
        _ = stop.wait_for(|s| *s) => return None,
    };
    match crate::tls::client_cert(stream.get_ref().1) {
        Ok(client) => about.client = client,
        Err(e) => {
            tracing::warn!(%peer, "closing a connection: {e}");
            return None;
        }
    }
    Some((stream, about))
}

/// Serves one connection until it ends, the server stops, or it is idle
/// too long.
async fn connection<I>(
    io: I,
    peer: Peer,
    router: Router,
    builder: &auto::Builder<TokioExecutor>,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // From the accept: a TLS handshake and the wait for the first request
    // share the header read timeout.
    let activity = Arc::new(Activity::new(peer.accepted));
    let service = ConnService {
        router,
        activity: activity.clone(),
        peer: Arc::new(peer),
    };
    let conn = builder.serve_connection(TokioIo::new(JsonErrors::new(io)), service);
    let mut conn = std::pin::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("connection ended: {e}");
                }
                return;
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = activity.expired(limits) => {
                tracing::debug!("closing a connection with no request in flight");
                return;
            }
        }
    }
}

/// What a connection is doing: requests in flight, since when it has had
/// none, and whether it has had any.
#[derive(Debug)]
struct Activity(Mutex<ActivityState>);

#[derive(Debug)]
struct ActivityState {
    in_flight: usize,
    idle_since: Instant,
    /// Whether a request was answered with something other than 401 or 429.
    had_request: bool,
}

impl Activity {
    /// A connection accepted at `accepted`, with nothing in flight yet.
    fn new(accepted: Instant) -> Self {
        Activity(Mutex::new(ActivityState {
            in_flight: 0,
            idle_since: accepted,
            had_request: false,
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ActivityState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        let mut s = self.state();
        s.in_flight += 1;
        InFlight(self.clone())
    }

    /// A request was answered as a caller's, not refused for want of a
    /// credential: from now on the idle limit applies.
    fn answered(&self) {
        self.state().had_request = true;
    }

    /// When the connection may be closed, if it has nothing in flight.
    fn closes_at(&self, limits: Limits) -> Option<Instant> {
        let s = self.state();
        (s.in_flight == 0).then(|| {
            s.idle_since
                + if s.had_request {
                    limits.idle_timeout
                } else {
                    limits.header_read_timeout
                }
        })
    }

    /// Completes once the connection has had nothing in flight for its limit.
    async fn expired(&self, limits: Limits) {
        loop {
            let wait = match self.closes_at(limits) {
                Some(at) if at <= Instant::now() => return,
                Some(at) => at,
                // Busy: look again a limit later (the end of a request
                // restarts the clock, so this never closes one early).
                None => Instant::now() + limits.header_read_timeout.min(limits.idle_timeout),
            };
            tokio::time::sleep_until(wait.into()).await;
        }
    }
}

/// A request in flight; it ends when this is dropped (with the answer's
/// body, once written, or with the request if it is abandoned).
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.0.state();
        s.in_flight -= 1;
        if s.in_flight == 0 {
            s.idle_since = Instant::now();
        }
    }
}

/// The router as hyper's service, counting requests in flight and putting
/// the peer's address (and client certificate) into each request.
#[derive(Clone)]
struct ConnService {
    router: Router,
    activity: Arc<Activity>,
    peer: Arc<Peer>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnService {
    type Response = hyper::Response<TrackedBody>;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send + 'static>>;

    fn call(&self, mut req: hyper::Request<Incoming>) -> Self::Future {
        let guard = self.activity.begin();
        req.extensions_mut().insert(ConnectInfo(self.peer.addr));
        if let Some(client) = &self.peer.client {
            req.extensions_mut().insert(client.clone());
        }
        let router = self.router.clone();
        Box::pin(async move {
            let res = match router.oneshot(req.map(Body::new)).await {
                Ok(res) => res,
                Err(never) => match never {},
            };
            if !matches!(res.status().as_u16(), 401 | 429) {
                guard.0.answered();
            }
            Ok(res.map(|body| TrackedBody {
                body,
                _in_flight: guard,
            }))
        })
    }
}

/// An answer's body that ends its request's time in flight when dropped.
struct TrackedBody {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The socket, with the answers hyper writes by itself for a request head
/// it cannot parse (400, 414, 431: empty bodies) replaced by the same
/// answers with a JSON error body, as every other error of the API has.
///
/// hyper writes such an answer as the last thing on the connection, with no
/// content type and no body; every answer of the router has a content type,
/// so nothing else matches.
struct JsonErrors<T> {
    io: T,
    /// A replacement still to write, and how much of it is written.
    pending: Vec<u8>,
    written: usize,
}

impl<T> JsonErrors<T> {
    fn new(io: T) -> Self {
        JsonErrors {
            io,
            pending: Vec::new(),
            written: 0,
        }
    }
}

impl<T: AsyncWrite + Unpin> JsonErrors<T> {
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.pending.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonErrors<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonErrors<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        if let Some(at) = automatic_error_at(buf) {
            let mut out = buf[..at].to_vec();
            out.extend_from_slice(&json_error_answer(&buf[at..]));
            this.pending = out;
            this.written = 0;
            // Written as far as hyper is concerned; flush and shutdown
            // finish it.
            if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The statuses hyper answers by itself, for a request head it cannot parse.
const AUTOMATIC: [&[u8]; 3] = [b"HTTP/1.1 400 ", b"HTTP/1.1 414 ", b"HTTP/1.1 431 "];

/// Where in `buf` an answer of hyper's own for a bad request head starts:
/// a head with one of [`AUTOMATIC`]'s statuses and no content type that
/// ends `buf` (no body).
fn automatic_error_at(buf: &[u8]) -> Option<usize> {
    if !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let at = buf.windows(9).rposition(|w| w == b"HTTP/1.1 ")?;
    let head = &buf[at..];
    if !AUTOMATIC.iter().any(|s| head.starts_with(s)) {
        return None;
    }
    // One head only: no blank line before the end, no content type.
    if head[..head.len() - 4].windows(4).any(|w| w == b"\r\n\r\n") {
        return None;
    }
    let lower = head.to_ascii_lowercase();
    if lower.windows(14).any(|w| w == b"\r\ncontent-type") {
        return None;
    }
    Some(at)
}

/// The JSON answer that replaces hyper's `head` (same status).
fn json_error_answer(head: &[u8]) -> Vec<u8> {
    let (status, code, message) = match &head[9..12] {
        b"431" => (
            "431 Request Header Fields Too Large",
            "headers_too_large",
            format!(
                "the request's headers are too large: at most {MAX_HEAD_BYTES} bytes and 100 headers"
            ),
        ),
        b"414" => (
            "414 URI Too Long",
            "uri_too_long",
            "the request's URI is too long".to_owned(),
        ),
        _ => (
            "400 Bad Request",
            "bad_request",
            "the request's head cannot be parsed: a bad method, URI or HTTP version, or a header \
             name or value with a forbidden byte (such as NUL or another control character)"
                .to_owned(),
        ),
    };
    let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bodiless_heads_of_hypers_statuses_are_replaced() {
        let auto =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(automatic_error_at(auto), Some(0));
        let mut after = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}".to_vec();
        after.extend_from_slice(auto);
        assert_eq!(automatic_error_at(&after), Some(after.len() - auto.len()));
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(automatic_error_at(ours), None);
        assert_eq!(
            automatic_error_at(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"),
            None
        );
        assert_eq!(automatic_error_at(b"HTTP/1.1 400 Bad Request\r\n"), None);
        let answer = String::from_utf8(json_error_answer(auto)).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "headers_too_large");
    }
}
