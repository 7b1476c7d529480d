//! The connection layer: our own accept loop over hyper's HTTP/1
//! connections, because `axum::serve` sets no header read timeout and caps
//! nothing. Every connection counts against a global and a per-address
//! cap (over either, the client gets a 503 in our error shape and the
//! connection is closed); headers must arrive within the header read
//! timeout; request bodies are wrapped with an idle and a total deadline
//! (see [`TimedBody`]); and the few answers hyper writes by itself (400,
//! 414, 431 for request heads it cannot parse) are rewritten into our JSON
//! error shape.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use http_body::Frame;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use crate::api::error::ApiError;
use crate::api::extract::BodyTimeout;
use crate::server::tls::Tls;

/// The limits of the connection layer (see `config` for the defaults and
/// their reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time to send a request's headers; also how long an idle keep-alive
    /// connection stays open.
    pub header_read_timeout: Duration,
    /// Longest pause while a request body arrives.
    pub body_idle_timeout: Duration,
    /// Longest time a whole request body may take.
    pub body_read_timeout: Duration,
    /// Open connections across all clients.
    pub max_connections: usize,
    /// Open connections from one IP address.
    pub max_connections_per_ip: usize,
}

impl ConnectionLimits {
    /// The limits `sandpiper serve`'s settings ask for, each at least 1.
    pub fn from_args(args: &crate::config::ServeArgs) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(args.header_read_timeout_secs.max(1)),
            body_idle_timeout: Duration::from_secs(args.body_idle_timeout_secs.max(1)),
            body_read_timeout: Duration::from_secs(args.body_read_timeout_secs.max(1)),
            max_connections: args.max_connections.max(1),
            max_connections_per_ip: args.max_connections_per_ip.max(1),
        }
    }
}

/// What a refused connection is told to wait before trying again, seconds:
/// connections end within the header and body timeouts, so a few seconds
/// usually frees one without inviting a tight retry loop.
pub const CONNECTION_RETRY_AFTER_SECS: u64 = 5;

/// How long a refused connection is kept open, after its 503 is written,
/// to read what the client sent: closing a socket with unread input makes
/// the kernel send a reset, which can destroy the 503 before the client
/// reads it.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Most bytes read from a refused connection while lingering.
const REFUSAL_DRAIN_BYTES: usize = 64 * 1024;

/// How long to pause accepting after `accept` fails (out of file
/// descriptors, typically): retrying at once would spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Serves `app` on `listener` until `stop` resolves, then closes the
/// listener, lets every connection finish its request in flight, and
/// returns when all are closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    tls: Option<Tls>,
    stop: impl Future<Output = ()>,
) {
    let counts = Arc::new(Counts::default());
    let refusal = refusal_response();
    let (closing_tx, closing_rx) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match counts.admit(peer.ip(), &limits) {
                    Some(slot) => {
                        let app = app.clone();
                        let closing = closing_rx.clone();
                        let tls = tls.clone();
                        connections.spawn(async move {
                            match tls {
                                None => serve_connection(stream, app, limits, closing).await,
                                Some(tls) => {
                                    let handshake = tls.acceptor().accept(stream);
                                    match tokio::time::timeout(limits.header_read_timeout, handshake).await {
                                        Ok(Ok(stream)) => serve_connection(stream, app, limits, closing).await,
                                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                                    }
                                }
                            }
                            drop(slot);
                        });
                    }
                    // Over TLS a refusal is a closed socket: answering
                    // would first cost the handshake the caps exist to
                    // spare.
                    None if tls.is_some() => {
                        tracing::warn!(%peer, "connection refused: too many connections");
                    }
                    None => {
                        tracing::warn!(%peer, "connection refused: too many connections");
                        tokio::spawn(refuse(stream, Bytes::clone(&refusal)));
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut stop => break,
        }
    }
    drop(listener);
    let _ = closing_tx.send(true);
    while connections.join_next().await.is_some() {}
}

/// Largest request head (request line and headers) read before answering
/// 431: our routes need a token, a content type and a few short headers, so
/// 64 KiB is generous, and it bounds what a client can make the server
/// buffer before it has said who it is (hyper's own default is ~400 KiB and
/// was not reliably enforced for one long header line).
pub const MAX_REQUEST_HEAD_BYTES: usize = 64 * 1024;

/// Serves one connection until it closes, starting a graceful close (the
/// request in flight finishes, keep-alive ends) when the server stops.
async fn serve_connection<S>(
    stream: S,
    app: Router,
    limits: ConnectionLimits,
    mut closing: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = app.map_request(move |req: axum::http::Request<Incoming>| {
        req.map(|body| Body::new(TimedBody::new(body, &limits)))
    });
    let io = TokioIo::new(HyperErrors::new(stream));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_REQUEST_HEAD_BYTES);
    let connection = builder.serve_connection(io, TowerToHyperService::new(service));
    let mut connection = std::pin::pin!(connection);
    let mut shutting_down = *closing.borrow();
    if shutting_down {
        connection.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            changed = closing.changed(), if !shutting_down => {
                // A dropped sender means the server is stopping too.
                if changed.is_err() || *closing.borrow() {
                    shutting_down = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Open connections, in total and by address.
#[derive(Default)]
struct Counts {
    inner: Mutex<CountsInner>,
}

#[derive(Default)]
struct CountsInner {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

impl Counts {
    fn lock(&self) -> std::sync::MutexGuard<'_, CountsInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a new connection from `ip`, unless a cap is reached.
    fn admit(self: &Arc<Self>, ip: IpAddr, limits: &ConnectionLimits) -> Option<Slot> {
        let mut inner = self.lock();
        let from_ip = inner.by_ip.get(&ip).copied().unwrap_or(0);
        if inner.total >= limits.max_connections || from_ip >= limits.max_connections_per_ip {
            return None;
        }
        inner.total += 1;
        inner.by_ip.insert(ip, from_ip + 1);
        Some(Slot {
            counts: Arc::clone(self),
            ip,
        })
    }
}

/// One admitted connection; uncounted when dropped.
struct Slot {
    counts: Arc<Counts>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.counts.lock();
        inner.total = inner.total.saturating_sub(1);
        if let Some(n) = inner.by_ip.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                inner.by_ip.remove(&self.ip);
            }
        }
    }
}

/// The whole HTTP answer to a connection over a cap.
fn refusal_response() -> Bytes {
    let error = ApiError::Busy {
        code: "too_many_connections",
        message: "the server has too many open connections (in total or from your address); \
                  try again later"
            .to_owned(),
        details: serde_json::json!({}),
        retry_after_secs: CONNECTION_RETRY_AFTER_SECS,
    };
    raw_response(
        &error,
        &[("retry-after", CONNECTION_RETRY_AFTER_SECS.to_string())],
    )
}

/// `error` as a complete HTTP/1.1 response that closes the connection, for
/// the places that answer without hyper.
fn raw_response(error: &ApiError, extra: &[(&str, String)]) -> Bytes {
    let body = serde_json::to_vec(&error.body()).unwrap_or_default();
    let status = error.status_code();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(&body);
    Bytes::from(out)
}

/// Answers a connection over a cap with `response` without reading its
/// request, then reads (and drops) what the client sent for a moment so
/// that closing does not reset the connection before the answer is read.
async fn refuse(mut stream: TcpStream, response: Bytes) {
    let linger = async {
        stream.write_all(&response).await?;
        stream.shutdown().await?;
        let mut drained = 0;
        let mut buf = [0u8; 4096];
        while drained < REFUSAL_DRAIN_BYTES {
            let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buf).await?;
            if n == 0 {
                break;
            }
            drained += n;
        }
        Ok::<_, io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, linger).await;
}

/// A request body with two deadlines: the next piece must arrive within
/// the idle timeout, and the whole body within the read timeout. Past
/// either, reading fails with [`BodyTimeout`], which the handlers answer
/// with a 408, and hyper then closes the connection (the body was not read
/// to its end).
pub struct TimedBody<B> {
    inner: B,
    idle: Duration,
    total: Duration,
    idle_deadline: Pin<Box<Sleep>>,
    total_deadline: Pin<Box<Sleep>>,
}

impl<B> TimedBody<B> {
    fn new(inner: B, limits: &ConnectionLimits) -> Self {
        let now = Instant::now();
        TimedBody {
            inner,
            idle: limits.body_idle_timeout,
            total: limits.body_read_timeout,
            idle_deadline: Box::pin(tokio::time::sleep_until(now + limits.body_idle_timeout)),
            total_deadline: Box::pin(tokio::time::sleep_until(now + limits.body_read_timeout)),
        }
    }
}

impl<B> http_body::Body for TimedBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let next = Instant::now() + this.idle;
                this.idle_deadline.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if this.total_deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(Box::new(BodyTimeout {
                        idle: false,
                        limit: this.total,
                    }))));
                }
                if this.idle_deadline.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(Box::new(BodyTimeout {
                        idle: true,
                        limit: this.idle,
                    }))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, with hyper's own error answers replaced by ours.
///
/// hyper answers a request head it cannot parse (400), a URI over its
/// 65,534-byte limit (414) or a head over its buffer (431) by itself, with
/// an empty body and no hook to change it, before our router ever sees the
/// request. Those answers are the only responses without a body that start
/// a write with `content-length: 0` right after a 400, 414 or 431 status
/// line (every answer of ours to such a status has a JSON body), so that is
/// what is recognised here and replaced with the same status in our JSON
/// shape. hyper closes the connection after them.
struct HyperErrors<S> {
    inner: S,
    /// Our answer being written instead of hyper's, and how many bytes of
    /// hyper's to report written once it is.
    replacing: Option<(Bytes, usize)>,
}

impl<S: AsyncWrite + Unpin> HyperErrors<S> {
    fn new(inner: S) -> Self {
        HyperErrors {
            inner,
            replacing: None,
        }
    }

    /// Writes the replacement; `Ready(Ok(n))` reports hyper's `n` bytes.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        while let Some((rest, hyper_len)) = &mut self.replacing {
            if rest.is_empty() {
                let n = *hyper_len;
                self.replacing = None;
                return Poll::Ready(Ok(n));
            }
            let written = ready!(Pin::new(&mut self.inner).poll_write(cx, rest))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            let _ = rest.split_to(written);
        }
        Poll::Ready(Ok(0))
    }

    /// Starts replacing `buf` if it is one of hyper's own error answers.
    fn check(&mut self, buf: &[u8]) -> bool {
        if self.replacing.is_some() {
            return true;
        }
        match hyper_error_answer(buf) {
            Some((error, len)) => {
                self.replacing = Some((raw_response(&error, &[]), len));
                true
            }
            None => false,
        }
    }
}

/// The error of ours that stands for hyper's own answer at the start of
/// `buf`, with that answer's length: a 400, 414 or 431 head that says
/// `content-length: 0` and has no `content-type`.
fn hyper_error_answer(buf: &[u8]) -> Option<(ApiError, usize)> {
    let rest = buf.strip_prefix(b"HTTP/1.1 ")?;
    let error = match rest.get(..4)? {
        b"400 " => ApiError::MalformedRequest,
        b"414 " => ApiError::UriTooLong,
        b"431 " => ApiError::HeadersTooLarge,
        _ => return None,
    };
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let mut lines = buf[..head_end].split(|b| *b == b'\n').skip(1);
    let mut empty = false;
    for line in &mut lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let (name, value) = line.split_at(line.iter().position(|b| *b == b':')?);
        if name.eq_ignore_ascii_case(b"content-type") {
            return None;
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            empty = value[1..].trim_ascii() == b"0";
        }
    }
    empty.then_some((error, head_end + 4))
}

impl<S: AsyncRead + Unpin> AsyncRead for HyperErrors<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HyperErrors<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.check(buf) {
            return this.poll_replacement(cx);
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &**b);
        if this.check(first) {
            return this.poll_replacement(cx);
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyper_error_answers_are_recognised_and_ours_are_not() {
        let hyper_414 = b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let (error, len) = hyper_error_answer(hyper_414).expect("recognised");
        assert_eq!(error.code(), "uri_too_long");
        assert_eq!(len, hyper_414.len());
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 50\r\n\r\n";
        assert!(hyper_error_answer(ours).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(hyper_error_answer(ok).is_none());
    }
}
