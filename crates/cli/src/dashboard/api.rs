//! The HTTP routes: the page and its assets, the JSON API, the event stream, and the
//! admin actions ([`super::admin`]).
//!
//! Every failure is a JSON object `{"error": "...", "status": N}` with a 4xx or 5xx
//! status: a bad name, body or limit is 400, a missing group 404, a missing or wrong
//! token 401, a refused host, site or admin action 403, a body too large 413, a client
//! that must wait after wrong tokens 429; Redis unreachable 503, anything else Redis
//! said 502 (never a client's mistake).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::HeaderMap;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER, SET_COOKIE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware;
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use leasehold_partitions::LEDGER_LEN;
use serde::{Deserialize, Serialize};

use super::alerts::AlertClock;
use super::feed::{Hub, MAX_GROUPS_WATCHED, Topic};
use super::guard::{self, Access, Backoff, Sessions};
use super::guard::{SESSION_COOKIE, SESSION_TTL};
use super::view::{PageJson, PartitionRow, group_page, group_rows};
use super::{admin, events};
use crate::commands::read_after;
use crate::error::{EXIT_CONNECTION, EXIT_NOT_FOUND, EXIT_USAGE, Error, check_name};
use crate::output;

/// How often an idle event stream sends a comment (which also notices a viewer gone).
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(2);

/// What the handlers share.
#[derive(Debug)]
pub struct App {
    /// The readers.
    pub hub: Arc<Hub>,
    /// Who may read and change what ([`guard`]).
    pub access: Access,
    /// The page's sessions.
    pub sessions: Sessions,
    /// The wait imposed on clients that sent wrong tokens.
    pub backoff: Backoff,
    /// The last `GET /api/groups` answer, and when it was read.
    pub overview: tokio::sync::Mutex<Option<(tokio::time::Instant, Arc<str>)>>,
}

pub type Shared = State<Arc<App>>;

/// A failed request: a status and one line.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    /// Seconds to wait before trying again (`Retry-After`), if the client must.
    retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// This error, telling the client to wait `secs` seconds first.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub fn of(app: &App, error: &Error) -> Self {
        let failure = error.failure(&app.hub.source().target);
        let status = match failure.code {
            EXIT_USAGE => StatusCode::BAD_REQUEST,
            EXIT_NOT_FOUND => StatusCode::NOT_FOUND,
            EXIT_CONNECTION => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_GATEWAY,
        };
        Self::new(status, failure.message)
    }
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    error: &'a str,
    status: u16,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorJson {
            error: &self.message,
            status: self.status.as_u16(),
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        Self::new(StatusCode::BAD_REQUEST, r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        Self::new(StatusCode::BAD_REQUEST, r.body_text())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        Self::new(r.status(), r.body_text())
    }
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

/// The largest admin request body read (once the token is checked): the partitions
/// of an `add` or `remove` are the biggest.
const ADMIN_BODY_LIMIT: usize = 1 << 20;

/// Every route, behind [`guard::guard`] (and the admin actions behind
/// [`admin::authorize`], before their body is read).
pub fn router(app: Arc<App>) -> Router {
    let admin = Router::new()
        .route("/api/groups/{group}/drain", post(admin::drain))
        .route("/api/groups/{group}/undrain", post(admin::undrain))
        .route("/api/groups/{group}/weight", post(admin::weight))
        .route("/api/groups/{group}/prefer", post(admin::prefer))
        .route("/api/groups/{group}/partitions/add", post(admin::add))
        .route("/api/groups/{group}/partitions/remove", post(admin::remove))
        .route_layer(middleware::from_fn_with_state(
            app.clone(),
            admin::authorize,
        ))
        .layer(DefaultBodyLimit::max(ADMIN_BODY_LIMIT));
    Router::new()
        .route("/", get(page))
        .route("/app.js", get(script))
        .route("/style.css", get(style))
        .route(
            "/api/session",
            get(session)
                .post(sign_in)
                .layer(DefaultBodyLimit::max(SIGN_IN_BODY_LIMIT)),
        )
        .route("/api/groups", get(groups))
        .route("/api/groups/{group}", get(group))
        .route("/api/groups/{group}/partitions", get(partitions))
        .route("/api/groups/{group}/moves", get(moves))
        .route("/events", get(stream))
        .merge(admin)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard::guard))
        .with_state(app)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

async fn page() -> Response {
    asset(
        "text/html; charset=utf-8",
        include_str!("assets/index.html"),
    )
}

async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    )
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", include_str!("assets/style.css"))
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such page")
}

/// Checks a name from a request against the naming rules (400 if it breaks one).
pub fn name(app: &App, arg: &str, what: &'static str, value: &str) -> Result<()> {
    check_name(arg, what, value).map_err(|e| ApiError::of(app, &e))
}

pub fn group_name(app: &App, group: &str) -> Result<()> {
    name(app, "group", "group", group)
}

/// `GET /api/groups`: read now (not from the readers, which run only for viewers),
/// unless a read less than `--interval` old is at hand: requests that come together
/// wait for the read in flight, so a flood of them costs one SCAN per interval.
async fn groups(State(app): Shared) -> Result<Response> {
    let mut last = app.overview.lock().await;
    let fresh = last
        .as_ref()
        .filter(|(at, _)| at.elapsed() < app.hub.pace().interval);
    let json = match fresh {
        Some((_, json)) => json.clone(),
        None => {
            let overview = app
                .hub
                .source()
                .overview(&mut AlertClock::default())
                .await
                .map_err(|e| ApiError::of(&app, &e))?;
            let json: Arc<str> = serde_json::to_string(&overview)
                .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?
                .into();
            *last = Some((tokio::time::Instant::now(), json.clone()));
            json
        }
    };
    drop(last);
    let content_type = HeaderValue::from_static("application/json");
    Ok(([(CONTENT_TYPE, content_type)], json.to_string()).into_response())
}

/// `GET /api/groups/{group}`: the page, every partition included.
async fn group(State(app): Shared, path: Result<Path<String>, PathRejection>) -> Result<Response> {
    let Path(group) = path?;
    group_name(&app, &group)?;
    let source = app.hub.source();
    let status = source
        .status(&group)
        .await
        .map_err(|e| ApiError::of(&app, &e))?;
    let page = group_page(
        &source.target.prefix,
        &group,
        &status,
        &mut AlertClock::default(),
        None,
    );
    let json = PageJson {
        head: &page.head,
        partitions: Some(&page.partitions),
        moves: None,
        error: None,
    };
    Ok(Json(json).into_response())
}

/// What `GET /api/session` says: whether reads need a token, and whether this client
/// has a session (or needs none).
#[derive(Serialize)]
struct SessionJson {
    token_needed: bool,
    signed_in: bool,
}

/// `GET /api/session`: whether the page must ask for a token before it connects.
async fn session(State(app): Shared, headers: HeaderMap) -> Json<SessionJson> {
    let needed = app.access.reads_need_token();
    let signed_in =
        !needed || guard::session_cookie(&headers).is_some_and(|id| app.sessions.valid(id));
    Json(SessionJson {
        token_needed: needed,
        signed_in,
    })
}

/// The body of `POST /api/session`.
#[derive(Deserialize)]
struct SignIn {
    token: String,
}

/// The largest `POST /api/session` body read.
const SIGN_IN_BODY_LIMIT: usize = 4096;

/// `POST /api/session` `{"token": "..."}`: for the read (or admin) token, a session
/// cookie the page's requests and event stream then carry (`HttpOnly`,
/// `SameSite=Strict`, `Secure` over HTTPS). Wrong tokens cost a growing wait.
async fn sign_in(
    State(app): Shared,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Result<Json<SignIn>, JsonRejection>,
) -> Result<Response> {
    let client = peer.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0.0.ip());
    if !app.access.reads_need_token() {
        return Ok(Json(SessionJson {
            token_needed: false,
            signed_in: true,
        })
        .into_response());
    }
    if let Some(wait) = app.backoff.wait(client) {
        return Err(guard::too_many_tries(wait));
    }
    let Json(body) = body?;
    if !app.access.reads_with(body.token.as_bytes()) {
        app.backoff.wrong(client);
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "wrong token"));
    }
    app.backoff.right(client);
    let id = app.sessions.open().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no randomness for a session",
        )
    })?;
    let secure = if app.access.tls { "; Secure" } else { "" };
    let cookie = format!(
        "{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        SESSION_TTL.as_secs()
    );
    let cookie = HeaderValue::from_str(&cookie)
        .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "bad session cookie"))?;
    let json = Json(SessionJson {
        token_needed: true,
        signed_in: true,
    });
    Ok(([(SET_COOKIE, cookie)], json).into_response())
}

/// The most partitions one page of `GET /api/groups/{group}/partitions` holds.
pub const MAX_PARTITIONS_PAGE: usize = 10_000;

/// The partitions a page holds when `limit` is not given.
pub const PARTITIONS_PAGE: usize = 1_000;

/// The query of `GET /api/groups/{group}/partitions`.
#[derive(Debug, Deserialize)]
struct PageQuery {
    /// How many partitions to skip (in the order they were added). Default: 0.
    offset: Option<usize>,
    /// How many to send, 1 to [`MAX_PARTITIONS_PAGE`]. Default: [`PARTITIONS_PAGE`].
    limit: Option<usize>,
}

/// One page of a group's partitions.
#[derive(Serialize)]
struct PartitionsJson<'a> {
    group: &'a str,
    /// How many partitions the group has.
    total: usize,
    offset: usize,
    partitions: &'a [PartitionRow],
}

/// `GET /api/groups/{group}/partitions?offset=N&limit=M`: a page of a group's
/// partitions (of a group too large for `GET /api/groups/{group}`).
async fn partitions(
    State(app): Shared,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response> {
    let Path(group) = path?;
    let Query(q) = query?;
    group_name(&app, &group)?;
    let limit = q.limit.unwrap_or(PARTITIONS_PAGE);
    if !(1..=MAX_PARTITIONS_PAGE).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("limit must be between 1 and {MAX_PARTITIONS_PAGE}"),
        ));
    }
    let source = app.hub.source();
    let status = source
        .status(&group)
        .await
        .map_err(|e| ApiError::of(&app, &e))?;
    let rows = group_rows(&status);
    let offset = q.offset.unwrap_or(0).min(rows.len());
    let end = offset.saturating_add(limit).min(rows.len());
    Ok(Json(PartitionsJson {
        group: &group,
        total: rows.len(),
        offset,
        partitions: &rows[offset..end],
    })
    .into_response())
}

/// The filters of `GET /api/groups/{group}/moves`.
#[derive(Debug, Deserialize)]
struct MovesQuery {
    /// Only this partition's moves.
    partition: Option<String>,
    /// Only moves from or to this replica.
    replica: Option<String>,
    /// Only the last this many (after filtering): 1 to [`LEDGER_LEN`], the most the
    /// ledger keeps.
    limit: Option<usize>,
}

/// `GET /api/groups/{group}/moves`: `leasehold moves --json`, filtered.
async fn moves(
    State(app): Shared,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<MovesQuery>, QueryRejection>,
) -> Result<Response> {
    let Path(group) = path?;
    let Query(q) = query?;
    group_name(&app, &group)?;
    if let Some(p) = &q.partition {
        name(&app, "partition", "partition name", p)?;
    }
    if let Some(r) = &q.replica {
        name(&app, "replica", "replica id", r)?;
    }
    if q.limit.is_some_and(|l| !(1..=LEDGER_LEN).contains(&l)) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("limit must be between 1 and {LEDGER_LEN} (the most the ledger keeps)"),
        ));
    }
    let source = app.hub.source();
    let admin = source.admin(&group).map_err(|e| ApiError::of(&app, &e))?;
    let exists = admin.exists().await.map_err(|error| {
        let e = Error::Group {
            group: group.clone(),
            error,
        };
        ApiError::of(&app, &e)
    })?;
    if !exists {
        return Err(ApiError::of(&app, &Error::NoGroup(group)));
    }
    let unfiltered = q.partition.is_none() && q.replica.is_none();
    let read = match q.limit {
        // The newest only: not the whole ledger.
        Some(limit) if unfiltered => {
            admin
                .newest_moves(limit)
                .await
                .map_err(|error| Error::Group {
                    group: group.clone(),
                    error,
                })
        }
        _ => read_after(&admin, &group, None).await,
    };
    let all = read.map_err(|e| ApiError::of(&app, &e))?;
    let mut kept: Vec<_> = all
        .into_iter()
        .filter(|m| q.partition.as_ref().is_none_or(|p| &m.partition == p))
        .filter(|m| {
            q.replica
                .as_ref()
                .is_none_or(|r| &m.to == r || m.from.as_ref() == Some(r))
        })
        .collect();
    if let Some(limit) = q.limit {
        kept.drain(..kept.len().saturating_sub(limit));
    }
    Ok(Json(output::moves_json(&source.target.prefix, &group, &kept)).into_response())
}

/// The query of `GET /events`.
#[derive(Debug, Deserialize)]
struct EventsQuery {
    /// The group to follow besides the overview.
    group: Option<String>,
}

/// `GET /events`: `text/event-stream` of the overview and, with `?group=`, a group.
async fn stream(
    State(app): Shared,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Response> {
    let Query(q) = query?;
    if let Some(g) = &q.group {
        group_name(&app, g)?;
        // A reader only for a group that exists: made-up names take no slot.
        if !app.hub.is_watched(&Topic::Group(g.clone())) {
            let admin = app
                .hub
                .source()
                .admin(g)
                .map_err(|e| ApiError::of(&app, &e))?;
            let exists = admin.exists().await.map_err(|error| {
                let e = Error::Group {
                    group: g.clone(),
                    error,
                };
                ApiError::of(&app, &e)
            })?;
            if !exists {
                return Err(ApiError::of(&app, &Error::NoGroup(g.clone())));
            }
        }
    }
    let too_many = || {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_GROUPS_WATCHED} groups are watched already: close a page"),
        )
    };
    let group = match q.group {
        Some(g) => Some(app.hub.watch(Topic::Group(g)).ok_or_else(too_many)?),
        None => None,
    };
    let overview = app.hub.watch(Topic::Overview).ok_or_else(too_many)?;
    let sse =
        Sse::new(events::stream(overview, group)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE));
    Ok(sse.into_response())
}
