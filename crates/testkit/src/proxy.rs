//! An in-process TCP relay that injects latency, partitions and connection resets.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// What the proxy does with bytes and connections; see the methods of [`FaultProxy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Pass,
    Latency(Duration),
    Blackhole,
    Refuse,
}

/// A TCP relay from a loopback port to `upstream`, whose behaviour tests switch at runtime.
///
/// Mode changes apply immediately to open and new connections. Bytes are always read from
/// both sides as they arrive and queued per direction with the time they were read; the
/// current mode decides when each queued chunk is written out, in order.
///
/// Dropping the proxy resets every open connection and aborts the accept loop and all
/// connection tasks.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    /// Bumped by [`reset_connections`](Self::reset_connections). Connections watch it, and
    /// dropping it (with the proxy) resets them all at once.
    resets: watch::Sender<u64>,
    open: Arc<AtomicUsize>,
    /// Replies still to cut ([`cut_replies`](Self::cut_replies)).
    cuts: Arc<Cuts>,
    accept_loop: JoinHandle<()>,
}

impl FaultProxy {
    /// Binds `127.0.0.1:0` and starts relaying to `upstream` in [`pass`](Self::pass) mode.
    /// The upstream is dialled once per accepted connection.
    ///
    /// # Errors
    ///
    /// If the listening socket cannot be bound.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (mode, mode_rx) = watch::channel(Mode::Pass);
        let (resets, resets_rx) = watch::channel(0);
        let open = Arc::new(AtomicUsize::new(0));
        let cuts = Arc::new(Cuts::default());
        let accept_loop = tokio::spawn(accept_loop(
            listener,
            upstream,
            mode_rx,
            resets_rx,
            open.clone(),
            cuts.clone(),
        ));
        Ok(Self {
            addr,
            mode,
            resets,
            open,
            cuts,
            accept_loop,
        })
    }

    /// The proxy's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT/` for the proxy's port.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.addr.port())
    }

    /// Forwards bytes both ways as soon as they arrive, including any held back before.
    pub fn pass(&self) {
        self.mode.send_replace(Mode::Pass);
    }

    /// Delivers every chunk `delay` after it was read, in both directions, so a round trip
    /// takes about `2 * delay` longer.
    pub fn latency(&self, delay: Duration) {
        self.mode.send_replace(Mode::Latency(delay));
    }

    /// Accepts connections and reads from both sides but forwards nothing, like a network
    /// partition. Held bytes are delivered in order once the mode becomes pass or latency.
    /// Connections stay open.
    pub fn blackhole(&self) {
        self.mode.send_replace(Mode::Blackhole);
    }

    /// Closes new connections right after accepting them (with a reset). Open connections
    /// keep forwarding as in [`pass`](Self::pass) mode.
    pub fn refuse(&self) {
        self.mode.send_replace(Mode::Refuse);
    }

    /// Closes every open connection on both sides with a TCP reset, dropping held bytes.
    /// The mode is unchanged and new connections are accepted as usual.
    pub fn reset_connections(&self) {
        self.resets.send_modify(|n| *n += 1);
    }

    /// Cuts the next `n` replies: each time the server answers on some connection, the
    /// answer is dropped and that connection reset on both sides, so the request has run
    /// and its client sees the connection drop (as when a connection breaks right after
    /// the server executed a command). Counts chunks of bytes from the server: one reply
    /// to one command, as long as the client sends one command at a time.
    pub fn cut_replies(&self, n: usize) {
        self.cut_replies_containing(n, b"");
    }

    /// As [`cut_replies`](Self::cut_replies), but only replies whose bytes contain
    /// `needle` are cut (and counted); others pass.
    pub fn cut_replies_containing(&self, n: usize, needle: &[u8]) {
        *self
            .cuts
            .needle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = needle.to_vec();
        self.cuts.left.store(n, Ordering::SeqCst);
    }

    /// Replies still to be cut.
    pub fn cuts_left(&self) -> usize {
        self.cuts.left.load(Ordering::SeqCst)
    }

    /// The number of currently open relayed connections.
    pub fn connection_count(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Dropping `self.resets` makes every connection reset its sockets as soon as it is
        // polled, before relaying anything else. Aborting the accept loop drops its `JoinSet`,
        // which aborts the connection tasks as well.
        self.accept_loop.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    mode: watch::Receiver<Mode>,
    mut resets: watch::Receiver<u64>,
    open: Arc<AtomicUsize>,
    cuts: Arc<Cuts>,
) {
    let mut conns = JoinSet::new();
    loop {
        let client = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = conns.join_next() => continue,
        };
        let client = match client {
            Ok((client, _)) => client,
            Err(e) => {
                tracing::warn!(error = %e, "fault proxy accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await; // e.g. out of fds
                continue;
            }
        };
        if *mode.borrow() == Mode::Refuse {
            let _ = client.set_zero_linger();
            continue;
        }
        // Only resets issued from now on concern this connection.
        resets.mark_unchanged();
        let (mode, mut reset, cuts) = (mode.clone(), resets.clone(), cuts.clone());
        let guard = OpenGuard::new(&open);
        conns.spawn(async move {
            let _guard = guard;
            let mut upstream = match TcpStream::connect(upstream).await {
                Ok(upstream) => upstream,
                Err(e) => {
                    tracing::debug!(error = %e, "fault proxy cannot reach upstream");
                    let _ = client.set_zero_linger();
                    return;
                }
            };
            let mut client = client;
            tokio::select! {
                // Biased: once a reset is signalled, no further byte is relayed.
                biased;
                _ = reset.changed() => {} // a reset, or the proxy was dropped
                cut = relay(&mut client, &mut upstream, mode, &cuts) => if !cut { return },
            }
            let _ = client.set_zero_linger();
            let _ = upstream.set_zero_linger();
        });
    }
}

/// Which replies to cut: the next `left` that contain `needle`.
#[derive(Debug, Default)]
struct Cuts {
    left: AtomicUsize,
    needle: std::sync::Mutex<Vec<u8>>,
}

impl Cuts {
    /// Whether to cut this chunk (counting it if so).
    fn take(&self, chunk: &[u8]) -> bool {
        if self.left.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let needle = self
            .needle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let matches = needle.is_empty() || chunk.windows(needle.len()).any(|w| w == &needle[..]);
        matches
            && self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
    }
}

/// Counts an open connection for as long as it lives (also when its task is aborted).
struct OpenGuard(Arc<AtomicUsize>);

impl OpenGuard {
    fn new(open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::SeqCst);
        Self(open.clone())
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Relays both directions until both have finished or either fails; true if it stopped
/// because a reply was cut (the connection is to be reset).
async fn relay(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    mode: watch::Receiver<Mode>,
    cuts: &Cuts,
) -> bool {
    let (client_rd, client_wr) = client.split();
    let (upstream_rd, upstream_wr) = upstream.split();
    let result = tokio::try_join!(
        direction(client_rd, upstream_wr, mode.clone(), None),
        direction(upstream_rd, client_wr, mode, Some(cuts)),
    );
    match result {
        Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => true,
        Err(e) => {
            tracing::debug!(error = %e, "fault proxy connection closed");
            false
        }
        Ok(_) => false,
    }
}

/// One direction: a reader that queues `(read_at, bytes)` and a writer that releases each
/// chunk when the current mode allows. EOF is forwarded once the queue has drained.
async fn direction(
    mut rd: impl AsyncRead + Unpin,
    mut wr: impl AsyncWrite + Unpin,
    mut mode: watch::Receiver<Mode>,
    cuts: Option<&Cuts>,
) -> io::Result<()> {
    // An empty chunk marks EOF. The queue is shared by the reader and writer futures below,
    // which run in this one task; a `Mutex` (never held across an await) keeps it `Send`.
    let queue = std::sync::Mutex::new(VecDeque::<(Instant, Vec<u8>)>::new());
    let queued = Notify::new();
    let reader = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = rd.read(&mut buf).await?;
            queue
                .lock()
                .unwrap()
                .push_back((Instant::now(), buf[..n].to_vec()));
            queued.notify_one();
            if n == 0 {
                return io::Result::Ok(());
            }
        }
    };
    let writer = async {
        loop {
            let next = queue.lock().unwrap().pop_front();
            let Some((read_at, chunk)) = next else {
                queued.notified().await;
                continue;
            };
            release_at(read_at, &mut mode).await?;
            if chunk.is_empty() {
                return wr.shutdown().await;
            }
            let cut = cuts.is_some_and(|c| c.take(&chunk));
            if cut {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "fault proxy cut a reply",
                ));
            }
            wr.write_all(&chunk).await?;
        }
    };
    tokio::try_join!(reader, writer).map(|_| ())
}

/// Waits until a chunk read at `read_at` may be written under the current mode.
async fn release_at(read_at: Instant, mode: &mut watch::Receiver<Mode>) -> io::Result<()> {
    loop {
        let current = *mode.borrow_and_update();
        let until = match current {
            Mode::Pass | Mode::Refuse => return Ok(()),
            Mode::Latency(delay) if Instant::now() >= read_at + delay => return Ok(()),
            Mode::Latency(delay) => Some(read_at + delay),
            Mode::Blackhole => None,
        };
        let sleep = async {
            match until {
                Some(until) => tokio::time::sleep_until(until).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep => return Ok(()),
            changed = mode.changed() => {
                changed.map_err(|_| io::Error::other("fault proxy dropped"))?;
            }
        }
    }
}
