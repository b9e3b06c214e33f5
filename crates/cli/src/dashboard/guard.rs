//! Who may ask the dashboard what: the checks every request passes before a handler
//! runs, and the headers every response leaves with.
//!
//! In order, for every route:
//! 1. **Host**: the name the request was sent to must be one this dashboard answers
//!    to ([`Hosts`]): a page of another site whose name was made to resolve to the
//!    dashboard's address (DNS rebinding) sends its own name, and is refused.
//! 2. **Browsers**: the data routes (`/api/...`, `/events`) refuse a request another
//!    site's page made (`Sec-Fetch-Site: cross-site` or `same-site`, or an `Origin`
//!    that is not the dashboard's own). The page and its assets hold no data, and may
//!    be opened from a link.
//! 3. **Reads**: when reads need a token ([`Access::reads_need_token`]), the data
//!    routes need one: the read or admin token in [`TOKEN_HEADER`] or
//!    `Authorization: Bearer`, or the session cookie the page gets for it at
//!    `POST /api/session`. A client that sends wrong tokens waits longer and longer
//!    ([`Backoff`]).
//!
//! Admin actions then need the admin token in [`TOKEN_HEADER`] (see
//! [`super::admin`]), checked before their body is read.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{
    AUTHORIZATION, CACHE_CONTROL, CONTENT_SECURITY_POLICY, COOKIE, HOST, ORIGIN, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ring::digest::{SHA256, digest};
use subtle::ConstantTimeEq;
use tokio::time::Instant;

use super::api::{ApiError, Shared};

/// The header that carries a token (the admin token for admin actions; the read or
/// admin token for reads, when they need one).
pub const TOKEN_HEADER: &str = "x-leasehold-token";

/// The cookie that carries a session of the page (`POST /api/session`).
pub const SESSION_COOKIE: &str = "leasehold_session";

/// The page's Content-Security-Policy: its own script and style, connections to itself,
/// never framed. The page has no inline script or style (it sets styles through the
/// DOM), so nothing else is needed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// A token, kept as its SHA-256 digest: compared in a time that depends on neither its
/// length nor where a guess differs, and never printed.
#[derive(Clone)]
pub struct Secret {
    digest: [u8; 32],
}

impl Secret {
    /// The secret `token`.
    pub fn new(token: &str) -> Self {
        Self {
            digest: sha256(token.as_bytes()),
        }
    }

    /// Whether `given` is this secret: the digests compared in constant time (so
    /// neither the length nor a prefix leaks).
    pub fn matches(&self, given: &[u8]) -> bool {
        self.digest.ct_eq(&sha256(given)).into()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

/// The host names a dashboard answers to.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// Only loopback: `localhost`, loopback addresses and the `--allow-host` names.
    pub loopback: bool,
    /// The `--allow-host` names, lowercased.
    pub names: Vec<String>,
}

impl Hosts {
    /// Whether a request whose `Host` header is `host` (a name or address, maybe a
    /// port) is for this dashboard. An address is always (a browser sends the page's
    /// own address, and no other site can be reached by it; on loopback only a
    /// loopback one), and so is `localhost`; any other name only if allowed.
    pub fn allows(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else {
            return false;
        };
        if let Ok(ip) = name.parse::<IpAddr>() {
            return !self.loopback || ip.is_loopback();
        }
        name.eq_ignore_ascii_case("localhost")
            || self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }
}

/// The name or address of a `Host` header, without its port and brackets; `None` if it
/// is not one (`[::1]x`, an empty name).
fn host_name(host: &str) -> Option<&str> {
    let name = match host.strip_prefix('[') {
        Some(v6) => {
            let (addr, rest) = v6.split_once(']')?;
            if !(rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port)) {
                return None;
            }
            addr
        }
        None => match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return None,
            None => host,
        },
    };
    (!name.is_empty()).then_some(name)
}

fn is_port(port: &str) -> bool {
    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

/// Who may read and change what.
#[derive(Debug, Clone)]
pub struct Access {
    /// The admin token; admin actions are refused without one (`--allow-admin`).
    pub admin: Option<Secret>,
    /// The tokens that let a client read (the read token, and the admin token); empty
    /// if reads need none (on loopback without `--read-token`).
    pub read: Vec<Secret>,
    /// The names it answers to.
    pub hosts: Hosts,
    /// Whether it serves HTTPS (then the session cookie is `Secure`).
    pub tls: bool,
}

impl Access {
    /// Whether reading needs a token.
    pub fn reads_need_token(&self) -> bool {
        !self.read.is_empty()
    }

    /// Whether `given` is a token that lets a client read.
    pub fn reads_with(&self, given: &[u8]) -> bool {
        // Every secret compared (no early return: which one matched does not leak).
        self.read
            .iter()
            .fold(false, |ok, secret| secret.matches(given) | ok)
    }
}

/// How many wrong tokens a client may send before it has to wait.
pub const FREE_TRIES: u32 = 5;

/// The longest wait after wrong tokens.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// How many clients the back-off remembers (beyond, those that wait no longer are
/// forgotten first).
const BACKOFF_CLIENTS: usize = 4096;

/// Wrong tokens, by client address: after [`FREE_TRIES`] a client waits one second
/// before it may try again, then twice as long after each wrong one (at most
/// [`MAX_WAIT`]); a right token forgets its count. Guessing a token of 16 random
/// characters at one try per minute takes longer than anyone will wait.
#[derive(Debug, Default)]
pub struct Backoff {
    clients: Mutex<HashMap<IpAddr, Strikes>>,
}

#[derive(Debug, Clone, Copy)]
struct Strikes {
    wrong: u32,
    until: Instant,
}

impl Backoff {
    /// How long `client` must still wait before a token of its is looked at.
    pub fn wait(&self, client: IpAddr) -> Option<Duration> {
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        clients
            .get(&client)
            .filter(|s| s.until > now)
            .map(|s| s.until - now)
    }

    /// Notes a wrong token from `client`.
    pub fn wrong(&self, client: IpAddr) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if clients.len() >= BACKOFF_CLIENTS && !clients.contains_key(&client) {
            clients.retain(|_, s| s.until > now);
            if clients.len() >= BACKOFF_CLIENTS {
                // Every one of them waits: the newcomer waits as long as the longest.
                clients.clear();
            }
        }
        let strikes = clients.entry(client).or_insert(Strikes {
            wrong: 0,
            until: now,
        });
        strikes.wrong = strikes.wrong.saturating_add(1);
        if strikes.wrong >= FREE_TRIES {
            let doublings = (strikes.wrong - FREE_TRIES).min(6);
            strikes.until = now + MAX_WAIT.min(Duration::from_secs(1 << doublings));
        }
    }

    /// Notes a right token from `client`: forgets its wrong ones.
    pub fn right(&self, client: IpAddr) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.remove(&client);
    }
}

/// How long a session of the page lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// How many sessions are kept (the oldest is forgotten first).
const MAX_SESSIONS: usize = 1024;

/// The page's sessions: a random id, handed out in an `HttpOnly`, `SameSite=Strict`
/// cookie for a right token (an `EventSource` cannot send a header), kept as its digest
/// until [`SESSION_TTL`] has passed.
#[derive(Debug, Default)]
pub struct Sessions {
    ids: Mutex<HashMap<[u8; 32], Instant>>,
}

impl Sessions {
    /// A new session's id (64 hex digits), or `None` if the system has no randomness.
    pub fn open(&self) -> Option<String> {
        use ring::rand::{SecureRandom, SystemRandom};
        let mut bytes = [0u8; 32];
        SystemRandom::new().fill(&mut bytes).ok()?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        ids.retain(|_, until| *until > now);
        if ids.len() >= MAX_SESSIONS
            && let Some(oldest) = ids.iter().min_by_key(|(_, u)| **u).map(|(k, _)| *k)
        {
            ids.remove(&oldest);
        }
        ids.insert(sha256(id.as_bytes()), now + SESSION_TTL);
        Some(id)
    }

    /// Whether `id` is a session that has not expired.
    pub fn valid(&self, id: &str) -> bool {
        let ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        ids.get(&sha256(id.as_bytes()))
            .is_some_and(|until| *until > Instant::now())
    }
}

/// The address of the client that sent `request` (the accept loop puts it there).
pub fn client(request: &Request) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// A 429 that says how long to wait.
pub fn too_many_tries(wait: Duration) -> ApiError {
    // Rounded up: a client that waits as long as told is let through.
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("too many wrong tokens: try again in {secs} s"),
    )
    .retry_after(secs)
}

/// Whether `path` is a data route (the API and the stream): the page and its assets
/// are not.
fn is_data(path: &str) -> bool {
    path.starts_with("/api/") || path == "/api" || path == "/events"
}

/// Refuses a browser's request made by another site's page: `Sec-Fetch-Site` other
/// than `same-origin` or `none` (a user's own navigation), or an `Origin` whose host is
/// not the `Host` the request was sent to (`Origin: null` included).
pub fn same_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let forbidden = |m: &str| ApiError::new(StatusCode::FORBIDDEN, m);
    let site = headers.get("sec-fetch-site").map(HeaderValue::as_bytes);
    if site.is_some_and(|s| s != b"same-origin" && s != b"none") {
        return Err(forbidden("cross-site request refused"));
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        let origin_host = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .map(|(_, rest)| rest);
        if !host.is_some_and(|h| origin_host.is_some_and(|o| o.eq_ignore_ascii_case(h))) {
            return Err(forbidden("cross-origin request refused"));
        }
    }
    Ok(())
}

/// The session id in a `Cookie` header, if any.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v)
}

/// The token a request carries, in [`TOKEN_HEADER`] or `Authorization: Bearer`.
pub fn given_token(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(t) = headers.get(TOKEN_HEADER) {
        return Some(t.as_bytes());
    }
    let auth = headers.get(AUTHORIZATION)?.as_bytes();
    auth.get(..7)
        .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
        .map(|_| auth[7..].trim_ascii())
}

/// Whether a request for a data route may read; the refusal if not.
fn may_read(app: &super::api::App, request: &Request) -> Result<(), ApiError> {
    let access = &app.access;
    if !access.reads_need_token() || request.uri().path() == "/api/session" {
        return Ok(());
    }
    let headers = request.headers();
    if session_cookie(headers).is_some_and(|id| app.sessions.valid(id)) {
        return Ok(());
    }
    let client = client(request);
    let Some(given) = given_token(headers) else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!(
                "this dashboard needs a token to read: send it in the {TOKEN_HEADER} \
                 header (or Authorization: Bearer), or sign in on the page"
            ),
        ));
    };
    if let Some(wait) = app.backoff.wait(client) {
        return Err(too_many_tries(wait));
    }
    if access.reads_with(given) {
        app.backoff.right(client);
        Ok(())
    } else {
        app.backoff.wrong(client);
        Err(ApiError::new(StatusCode::UNAUTHORIZED, "wrong token"))
    }
}

/// The checks of this module's header, then the headers every response leaves with:
/// the page's Content-Security-Policy (on every response: a JSON error opened as a
/// page is a page too), no framing, no sniffing, no referrer; `no-store` for the data.
pub async fn guard(State(app): Shared, request: Request, next: Next) -> Response {
    let data = is_data(request.uri().path());
    let checked = check(&app, &request, data);
    let mut response = match checked {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if data {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

fn check(app: &super::api::App, request: &Request, data: bool) -> Result<(), ApiError> {
    let host = request.headers().get(HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| app.access.hosts.allows(h)) {
        let why = if app.access.hosts.loopback {
            "this dashboard listens on loopback: open it as localhost or 127.0.0.1 (or a \
             name given to --allow-host)"
        } else {
            "this dashboard does not answer to that host name: open it by address, or \
             start it with --allow-host NAME"
        };
        return Err(ApiError::new(StatusCode::FORBIDDEN, why));
    }
    if data {
        same_origin(request.headers())?;
        may_read(app, request)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_localhost_and_loopback_addresses() {
        let hosts = Hosts {
            loopback: true,
            names: vec!["dash.example".into()],
        };
        for host in [
            "localhost",
            "LOCALHOST:9470",
            "127.0.0.1:9470",
            "127.1.2.3",
            "[::1]:9470",
            "[::1]",
            "dash.example:9470",
            "DASH.example",
        ] {
            assert!(hosts.allows(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:9470",
            "10.0.0.1:9470",
            "[::2]:80",
            "localhost.evil:1",
            "[::1]evil.example",
            "localhost:x",
            ":9470",
            "",
        ] {
            assert!(!hosts.allows(host), "{host}");
        }
    }

    #[test]
    fn off_loopback_any_address_and_the_allowed_names() {
        let hosts = Hosts {
            loopback: false,
            names: vec!["dash.example".into()],
        };
        for host in [
            "10.0.0.1:9470",
            "[2001:db8::1]:443",
            "dash.example",
            "localhost",
        ] {
            assert!(hosts.allows(host), "{host}");
        }
        for host in ["evil.example", "dash.example.evil", "10.0.0.1.evil"] {
            assert!(!hosts.allows(host), "{host}");
        }
    }

    #[test]
    fn secrets_compare_whole_and_never_print() {
        let s = Secret::new("abc");
        assert!(s.matches(b"abc"));
        assert!(!s.matches(b"abd"));
        assert!(!s.matches(b"abcd"));
        assert!(!s.matches(b""));
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
    }

    #[test]
    fn tokens_come_in_the_header_or_as_a_bearer() {
        let mut h = HeaderMap::new();
        assert_eq!(given_token(&h), None);
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer  t0k "));
        assert_eq!(given_token(&h), Some(&b"t0k"[..]));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Basic dTpw"));
        assert_eq!(given_token(&h), None);
        h.insert(TOKEN_HEADER, HeaderValue::from_static("x"));
        assert_eq!(given_token(&h), Some(&b"x"[..]));
        h.insert(
            COOKIE,
            HeaderValue::from_static("a=b; leasehold_session=s1; c=d"),
        );
        assert_eq!(session_cookie(&h), Some("s1"));
    }

    #[tokio::test(start_paused = true)]
    async fn wrong_tokens_cost_a_growing_wait() {
        let b = Backoff::default();
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        for _ in 1..FREE_TRIES {
            b.wrong(ip);
            assert_eq!(b.wait(ip), None);
        }
        b.wrong(ip);
        assert_eq!(b.wait(ip), Some(Duration::from_secs(1)));
        b.wrong(ip);
        assert_eq!(b.wait(ip), Some(Duration::from_secs(2)));
        for _ in 0..20 {
            b.wrong(ip);
        }
        assert_eq!(b.wait(ip), Some(MAX_WAIT));
        assert_eq!(b.wait("10.0.0.8".parse().unwrap()), None, "per client");
        tokio::time::advance(MAX_WAIT).await;
        assert_eq!(b.wait(ip), None);
        b.right(ip);
        b.wrong(ip);
        assert_eq!(b.wait(ip), None, "a right token forgets the count");
    }
}
