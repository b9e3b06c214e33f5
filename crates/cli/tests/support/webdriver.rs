//! Just enough of a W3C WebDriver client for the dashboard's browser test: chromedriver
//! on a free loopback port (killed on drop), one headless Chromium session (deleted on
//! drop), navigating, running scripts and taking screenshots. Blocking calls over
//! `std::net`, one request per connection, JSON bodies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Longest one WebDriver call may take.
const LIMIT: Duration = Duration::from_secs(30);

const INSTALL: &str = "install Debian's packages with `sudo apt-get install chromium chromium-driver` \
     (.ci/run does), or set LEASEHOLD_CHROMEDRIVER and LEASEHOLD_CHROMIUM to their paths";

/// `name` from the environment variable `var`, or on `PATH`; panics saying how to
/// install it.
fn find(name: &str, var: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(var) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{var}={} is not a file: {INSTALL}",
            path.display()
        );
        return path;
    }
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|dir| dir.join(name))
                .find(|c| c.is_file())
        })
        .unwrap_or_else(|| panic!("{name} not found on PATH: {INSTALL}"))
}

/// A chromedriver process on a free loopback port, killed when dropped.
pub struct Chromedriver {
    child: Child,
    addr: String,
    chromium: PathBuf,
}

impl Chromedriver {
    /// Starts chromedriver and waits until it is ready.
    pub fn start() -> Self {
        let bin = find("chromedriver", "LEASEHOLD_CHROMEDRIVER");
        let chromium = find("chromium", "LEASEHOLD_CHROMIUM");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&bin)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start ({e}): {INSTALL}", bin.display()));
        let driver = Self {
            child,
            addr: format!("127.0.0.1:{port}"),
            chromium,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok((200, status)) = call(&driver.addr, "GET", "/status", None)
                && status["value"]["ready"] == true
            {
                return driver;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver on {} not ready within 20 s",
                driver.addr
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A new headless session, 1400 × 1000.
    pub fn session(&self) -> Session {
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": self.chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--window-size=1400,1000", "--disable-dev-shm-usage"],
            },
        }}});
        let (status, body) = call(&self.addr, "POST", "/session", Some(&caps))
            .unwrap_or_else(|e| panic!("new session: {e}"));
        assert_eq!(status, 200, "new session: {body}");
        let id = body["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id: {body}"))
            .to_owned();
        Session {
            addr: self.addr.clone(),
            id,
        }
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A browser session, deleted (its Chromium closed) when dropped.
pub struct Session {
    addr: String,
    id: String,
}

impl Session {
    fn command(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let url = format!("/session/{}{path}", self.id);
        let (status, reply) =
            call(&self.addr, method, &url, body).unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        assert_eq!(status, 200, "{method} {url}: {reply}");
        reply["value"].clone()
    }

    /// Opens `url` and waits for its load.
    pub fn navigate(&self, url: &str) {
        self.command("POST", "/url", Some(&json!({ "url": url })));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page and returns
    /// what it returns; a promise returned is awaited.
    pub fn execute(&self, script: &str, args: &[Value]) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(&json!({ "script": script, "args": args })),
        )
    }

    /// Polls `script` every 50 ms until it returns something truthy (returned), for at
    /// most `limit`; `what` names it in the failure, with the last value.
    pub fn wait_for(&self, what: &str, limit: Duration, script: &str) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let v = self.execute(script, &[]);
            if !(v.is_null() || v == false || v == json!("") || v == 0) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "the page never showed {what} within {limit:?} (last: {v})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Resizes the window.
    pub fn resize(&self, width: u32, height: u32) {
        let rect = json!({ "width": width, "height": height });
        self.command("POST", "/window/rect", Some(&rect));
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        let v = self.command("GET", "/screenshot", None);
        base64(v.as_str().expect("a base64 screenshot"))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = call(&self.addr, "DELETE", &format!("/session/{}", self.id), None);
    }
}

/// One HTTP/1.1 request and its status and JSON body.
fn call(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<(u16, Value), String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    // chromedriver keeps the connection open: read the head, then Content-Length bytes.
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).map_err(|e| e.to_string())?;
        if n == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status: {head:?}"))?;
    let length = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| format!("no Content-Length: {head:?}"))?;
    let mut raw = vec![0; length];
    reader.read_exact(&mut raw).map_err(|e| e.to_string())?;
    let body = String::from_utf8(raw).map_err(|e| e.to_string())?;
    let json = serde_json::from_str(&body).map_err(|e| format!("not JSON ({e}): {body:?}"))?;
    Ok((status, json))
}

/// Decodes standard base64 (padding optional).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
    {
        acc = (acc << 6) | u32::from(value(c));
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from(acc >> bits).unwrap());
            acc &= (1 << bits) - 1;
        }
    }
    out
}
