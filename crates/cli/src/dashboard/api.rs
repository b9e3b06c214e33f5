//! The HTTP routes: the page and its assets, the JSON API, the event stream, and the
//! admin actions ([`super::admin`]).
//!
//! Every failure is a JSON object `{"error": "...", "status": N}` with a 4xx or 5xx
//! status: a bad name or body is 400, a missing group 404, a refused admin action
//! 401/403, Redis unreachable 503, anything else Redis said 502.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, HOST};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::alerts::AlertClock;
use super::feed::{Hub, MAX_GROUPS_WATCHED, Topic};
use super::view::{PageJson, group_page};
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
    /// The admin token; admin actions are refused without one.
    pub token: Option<String>,
    /// Whether it listens on a loopback address: then only requests for a loopback
    /// host name are served (see [`own_host`]).
    pub loopback: bool,
}

pub type Shared = State<Arc<App>>;

/// A failed request: a status and one line.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
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
        (self.status, Json(body)).into_response()
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

/// Every route.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/app.js", get(script))
        .route("/style.css", get(style))
        .route("/api/groups", get(groups))
        .route("/api/groups/{group}", get(group))
        .route("/api/groups/{group}/moves", get(moves))
        .route("/api/groups/{group}/drain", post(admin::drain))
        .route("/api/groups/{group}/undrain", post(admin::undrain))
        .route("/api/groups/{group}/weight", post(admin::weight))
        .route("/api/groups/{group}/prefer", post(admin::prefer))
        .route("/api/groups/{group}/partitions/add", post(admin::add))
        .route("/api/groups/{group}/partitions/remove", post(admin::remove))
        .route("/events", get(stream))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), own_host))
        .with_state(app)
}

/// Whether `host` (a `Host` header: a name or address, and maybe a port) names this
/// machine's loopback: `localhost` or a loopback address.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// On a loopback address, refuses a request for another host name: a page of another
/// site whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends its own name,
/// and must not read the fleet, or reach the admin actions.
async fn own_host(State(app): Shared, request: Request, next: Next) -> Response {
    let host = request.headers().get(HOST).and_then(|h| h.to_str().ok());
    if app.loopback && !host.is_some_and(is_loopback_host) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "this dashboard listens on loopback: open it as localhost or 127.0.0.1",
        )
        .into_response();
    }
    next.run(request).await
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

/// `GET /api/groups`: read now (not from the readers, which run only for viewers).
async fn groups(State(app): Shared) -> Result<Response> {
    let overview = app
        .hub
        .source()
        .overview(&mut AlertClock::default())
        .await
        .map_err(|e| ApiError::of(&app, &e))?;
    Ok(Json(overview).into_response())
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

/// The filters of `GET /api/groups/{group}/moves`.
#[derive(Debug, Deserialize)]
struct MovesQuery {
    /// Only this partition's moves.
    partition: Option<String>,
    /// Only moves from or to this replica.
    replica: Option<String>,
    /// Only the last this many (after filtering).
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
        Some(limit) if unfiltered && limit > 0 => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_localhost_and_loopback_addresses() {
        for host in [
            "localhost",
            "LOCALHOST:9470",
            "127.0.0.1:9470",
            "127.1.2.3",
            "[::1]:9470",
            "[::1]",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:9470",
            "10.0.0.1:9470",
            "[::2]:80",
            "localhost.evil:1",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
