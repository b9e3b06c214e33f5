//! A private `redis-server` child: a free loopback port, no persistence, killed on drop.
//!
//! `leasehold-testkit` does this too (and more: TLS, Sentinel, Cluster, a fault proxy),
//! but its dependencies would all be built by the README's first command; these few
//! lines keep the demo's build to the libraries it shows.

use std::io::{self, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Overrides the `redis-server` binary (the same variable the test kit reads).
const BINARY_ENV: &str = "LEASEHOLD_REDIS_SERVER";
/// How long a server may take to answer `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Fresh ports tried when one is taken between our probe and the server's bind.
const ATTEMPTS: usize = 5;

/// A running `redis-server` owned by the demo.
#[derive(Debug)]
pub(crate) struct PrivateRedis {
    child: Child,
    port: u16,
}

impl PrivateRedis {
    /// Starts a server and waits until it answers `PING`.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] if no `redis-server` is installed; another error if
    /// it does not come up.
    pub(crate) fn start() -> io::Result<Self> {
        let bin = find_binary()?;
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
                .local_addr()?
                .port();
            let child = Command::new(&bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(std::env::temp_dir())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let mut server = Self { child, port };
            match server.wait_for_ping() {
                Ok(()) => return Ok(server),
                Err(e) => last = Some(e), // dropping `server` kills it
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("redis-server did not start")))
    }

    /// `127.0.0.1:port`.
    pub(crate) fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:port/`.
    pub(crate) fn url(&self) -> String {
        format!("redis://{}/", self.addr())
    }

    fn wait_for_ping(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "redis-server exited early ({status})"
                )));
            }
            match ping(self.addr()) {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("redis-server gave no PONG within {START_TIMEOUT:?}: {e}"),
                    ));
                }
                Err(_) => thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_binary() -> io::Result<PathBuf> {
    let not_found = || io::Error::new(io::ErrorKind::NotFound, "redis-server not found");
    if let Some(bin) = std::env::var_os(BINARY_ENV) {
        let bin = PathBuf::from(bin);
        return if bin.is_file() {
            Ok(bin)
        } else {
            Err(not_found())
        };
    }
    let path = std::env::var_os("PATH").ok_or_else(not_found)?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(not_found)
}

/// One raw RESP `PING`, expecting `+PONG`.
fn ping(addr: SocketAddr) -> io::Result<()> {
    let timeout = Duration::from_millis(500);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply)?;
    if &reply == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(io::Error::other("unexpected reply to PING"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_fails_on_a_closed_port() {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(ping(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).is_err());
    }
}
