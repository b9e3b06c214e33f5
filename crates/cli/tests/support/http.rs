//! Just enough of an HTTP/1.0 client for the dashboard's tests: one request per
//! connection (the server closes it after the response, so no chunked bodies), and a
//! reader of a Server-Sent Events stream.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedReadHalf;
use tokio::time::timeout;

/// Longest a request may take.
const LIMIT: Duration = Duration::from_secs(20);

/// A response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; it must be JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

fn head(method: &str, addr: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut req = format!("{method} {path} HTTP/1.0\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    req
}

async fn read_head(reader: &mut BufReader<OwnedReadHalf>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await.unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            return (status, headers);
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
}

/// Sends one request and reads the whole response.
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let call = async {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (read, mut write) = stream.into_split();
        write
            .write_all(head(method, addr, path, headers, body).as_bytes())
            .await
            .unwrap();
        let mut reader = BufReader::new(read);
        let (status, headers) = read_head(&mut reader).await;
        let mut body = String::new();
        reader.read_to_string(&mut body).await.unwrap();
        Response {
            status,
            headers,
            body,
        }
    };
    timeout(LIMIT, call)
        .await
        .unwrap_or_else(|_| panic!("{method} {path} took over {LIMIT:?}"))
}

/// `GET path`.
pub async fn get(addr: &str, path: &str) -> Response {
    request(addr, "GET", path, &[], "").await
}

/// A viewer of `/events`: dropping it closes the connection.
pub struct Events {
    reader: BufReader<OwnedReadHalf>,
    _write: tokio::net::tcp::OwnedWriteHalf,
}

impl Events {
    /// Opens `path` (`/events?...`); it must answer 200 with `text/event-stream`.
    pub async fn open(addr: &str, path: &str) -> Self {
        Self::open_with(addr, path, &[]).await
    }

    /// As [`open`](Self::open), with these headers.
    pub async fn open_with(addr: &str, path: &str, headers: &[(&str, &str)]) -> Self {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (read, mut write) = stream.into_split();
        write
            .write_all(head("GET", addr, path, headers, "").as_bytes())
            .await
            .unwrap();
        let mut reader = BufReader::new(read);
        let (status, headers) = timeout(LIMIT, read_head(&mut reader))
            .await
            .expect("no answer to the event stream");
        assert_eq!(status, 200, "{headers:?}");
        let kind = headers.iter().find(|(n, _)| n == "content-type");
        assert!(
            kind.is_some_and(|(_, v)| v.starts_with("text/event-stream")),
            "{headers:?}"
        );
        Self {
            reader,
            _write: write,
        }
    }

    /// The next event (its name and data as JSON), skipping comments.
    pub async fn next(&mut self) -> (String, serde_json::Value) {
        let read = async {
            let mut name = String::new();
            let mut data = String::new();
            let mut line = String::new();
            loop {
                line.clear();
                let n = self.reader.read_line(&mut line).await.unwrap();
                assert!(n > 0, "the event stream ended");
                let l = line.trim_end_matches(['\r', '\n']);
                if l.is_empty() {
                    if !data.is_empty() {
                        return (name, serde_json::from_str(&data).unwrap());
                    }
                    continue;
                }
                if let Some(v) = l.strip_prefix("event:") {
                    name = v.trim().to_owned();
                } else if let Some(v) = l.strip_prefix("data:") {
                    data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
        };
        timeout(LIMIT, read).await.expect("no event for 20 s")
    }

    /// The next event named `name` whose data satisfies `done`.
    pub async fn until(
        &mut self,
        name: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        loop {
            let (n, data) = self.next().await;
            if n == name && done(&data) {
                return data;
            }
        }
    }
}
