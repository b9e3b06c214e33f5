//! The dashboard's accept loop: HTTP/1 (or HTTPS, with rustls) under a cap on
//! connections in all and per client, with timeouts for a TLS handshake, for a
//! request's head, and for a connection on which nothing moves.
//!
//! axum's own `serve` has none of these: a client could open sockets and send nothing
//! until the process runs out of file descriptors.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep, sleep, timeout};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::error::Error;

/// What a client may hold open, and how long a connection may wait.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once, in all (beyond, a new one is closed at once).
    /// Default: 512.
    pub connections: usize,
    /// Connections open at once from one address. Default: 32 (a page holds one event
    /// stream and a few requests; behind a proxy, every viewer shares its address).
    pub per_client: usize,
    /// Longest TLS handshake. Default: 10 s.
    pub handshake: Duration,
    /// Longest wait for a request's head once its first byte came. Default: 10 s.
    pub header_read: Duration,
    /// A connection on which no byte moved either way for this long is closed (a
    /// silent socket, a keep-alive nobody uses, a viewer that stopped reading; an event
    /// stream sends a comment every 2 s). Default: 60 s.
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connections: 512,
            per_client: 32,
            handshake: Duration::from_secs(10),
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(60),
        }
    }
}

/// A server certificate and key for HTTPS, read from PEM files.
///
/// # Errors
/// [`Error::Unsafe`] naming the file that could not be read or used.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, Error> {
    let bad = |what: &Path, why: String| {
        Error::Unsafe(format!("cannot use {} for HTTPS: {why}", what.display()))
    };
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| bad(cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(bad(cert, "no certificate in it".to_owned()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| bad(key, e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The connections open, in all and per address.
#[derive(Debug, Default)]
struct Open {
    per_client: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection counted in [`Open`] until dropped.
struct Counted {
    open: Arc<Open>,
    client: IpAddr,
}

impl Open {
    /// Counts a connection from `client`, if under `limits`.
    fn admit(self: &Arc<Self>, client: IpAddr, limits: &Limits) -> Option<Counted> {
        let mut per = self
            .per_client
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let total: usize = per.values().sum();
        let mine = per.get(&client).copied().unwrap_or(0);
        if total >= limits.connections || mine >= limits.per_client {
            return None;
        }
        *per.entry(client).or_insert(0) += 1;
        Some(Counted {
            open: self.clone(),
            client,
        })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut per = self
            .open
            .per_client
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = per.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.client);
            }
        }
    }
}

/// Serves `router` on `listener` until dropped (which ends every connection: they are
/// tasks of a [`JoinSet`] owned here). Each request carries its client's address as
/// [`ConnectInfo<SocketAddr>`].
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    limits: Limits,
) {
    let open = Arc::new(Open::default());
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            // Out of file descriptors, or a connection reset before it was accepted:
            // try again shortly.
            Err(_) => {
                sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(counted) = open.admit(peer.ip(), &limits) else {
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            let _counted = counted;
            match tls {
                Some(tls) => {
                    // A failed or slow handshake ends the connection.
                    if let Ok(Ok(stream)) = timeout(limits.handshake, tls.accept(tcp)).await {
                        connection(stream, peer, router, limits).await;
                    }
                }
                None => connection(tcp, peer, router, limits).await,
            }
        });
    }
}

/// Serves one connection until it closes, times out, or is refused.
async fn connection<T>(io: T, peer: SocketAddr, router: Router, limits: Limits)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(request)
    });
    let io = TokioIo::new(Idle::new(io, limits.idle));
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .serve_connection(io, service)
        .await;
}

/// A connection that fails with [`io::ErrorKind::TimedOut`] once no byte has moved
/// either way for `idle` while it waits to read or write.
struct Idle<T> {
    io: T,
    idle: Duration,
    /// When a byte last moved.
    last: Instant,
    timer: Pin<Box<Sleep>>,
}

impl<T> Idle<T> {
    fn new(io: T, idle: Duration) -> Self {
        let now = Instant::now();
        Self {
            io,
            idle,
            last: now,
            timer: Box::pin(tokio::time::sleep_until(now + idle)),
        }
    }

    /// Called while the connection waits: `Ready` with an error once it has been idle
    /// too long; else arms the timer to wake the waiting task then.
    fn expired(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let deadline = self.last + self.idle;
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        ready!(self.timer.as_mut().poll(cx));
        Poll::Ready(io::Error::new(
            io::ErrorKind::TimedOut,
            "the connection was idle too long",
        ))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Idle<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.last = Instant::now();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx).map(Err),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Idle<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write(cx, buf) {
            Poll::Ready(r) => {
                if r.as_ref().is_ok_and(|n| *n > 0) {
                    self.last = Instant::now();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx).map(Err),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(r) => Poll::Ready(r),
            Poll::Pending => self.expired(cx).map(Err),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                if r.as_ref().is_ok_and(|n| *n > 0) {
                    self.last = Instant::now();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx).map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn connections_are_capped_in_all_and_per_client() {
        let limits = Limits {
            connections: 3,
            per_client: 2,
            ..Limits::default()
        };
        let open = Arc::new(Open::default());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = open.admit(a, &limits).unwrap();
        let _a2 = open.admit(a, &limits).unwrap();
        assert!(open.admit(a, &limits).is_none(), "per client");
        let _b1 = open.admit(b, &limits).unwrap();
        assert!(open.admit(b, &limits).is_none(), "in all");
        drop(a1);
        assert!(
            open.admit(b, &limits).is_some(),
            "a closed one frees its place"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_where_nothing_moves_times_out() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut idle = Idle::new(near, Duration::from_secs(60));
        let mut buf = [0u8; 8];
        far.write_all(b"hi").await.unwrap();
        assert_eq!(idle.read(&mut buf).await.unwrap(), 2);
        let start = Instant::now();
        let e = idle.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), Duration::from_secs(60));
    }
}
