//! The admin actions (`--allow-admin`): drain, undrain, weight, prefer (and
//! unprefer), add and remove partitions, each through the group admin the CLI's
//! commands use, and the guard in front of them ([`authorize`], a layer that runs
//! before the body is read): the admin token in a header, the request from the
//! dashboard's own page.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, MAX_WEIGHT, PartitionsError};
use serde::{Deserialize, Serialize};

use super::api::{ApiError, App, Result, Shared, group_name, name};
use super::guard::{self, TOKEN_HEADER};
use crate::commands::group_error;
use crate::error::{Change, Error};

/// Lets an admin action through, before its body is read, only if admin is on, the
/// request comes from the dashboard's own page (or a tool: no `Origin`, no
/// `Sec-Fetch-Site`), and it carries the admin token in [`TOKEN_HEADER`] (a header,
/// never a cookie: a browser does not add it to a request another site makes). A
/// client that sent wrong tokens waits first ([`guard::Backoff`]).
pub async fn authorize(State(app): Shared, request: Request, next: Next) -> Response {
    match check(&app, &request) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

fn check(app: &App, request: &Request) -> Result<()> {
    let forbidden = |m: &str| ApiError::new(StatusCode::FORBIDDEN, m);
    let Some(token) = &app.access.admin else {
        return Err(forbidden(
            "this dashboard is read-only: start it with --allow-admin and an admin token \
             to change groups",
        ));
    };
    let headers = request.headers();
    guard::same_origin(headers)?;
    let Some(given) = headers.get(TOKEN_HEADER).map(HeaderValue::as_bytes) else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("an admin action needs the token in the {TOKEN_HEADER} header"),
        ));
    };
    let client = guard::client(request);
    if let Some(wait) = app.backoff.wait(client) {
        return Err(guard::too_many_tries(wait));
    }
    if token.matches(given) {
        app.backoff.right(client);
        Ok(())
    } else {
        app.backoff.wrong(client);
        Err(ApiError::new(StatusCode::UNAUTHORIZED, "wrong admin token"))
    }
}

/// What an admin action answers.
#[derive(Debug, Serialize)]
pub struct Done {
    group: String,
    action: &'static str,
    /// What it did, for people.
    message: String,
}

/// The body of `drain` and `undrain`.
#[derive(Debug, Deserialize)]
pub struct ReplicaBody {
    replica: String,
    /// Drain even the last replica taking part.
    #[serde(default)]
    force: bool,
}

/// The body of `weight`.
#[derive(Debug, Deserialize)]
pub struct WeightBody {
    partition: String,
    weight: u64,
}

/// The body of `prefer`: `replica` absent or `null` removes the preference.
#[derive(Debug, Deserialize)]
pub struct PreferBody {
    partition: String,
    #[serde(default)]
    replica: Option<String>,
}

/// The body of `partitions/add` and `partitions/remove`.
#[derive(Debug, Deserialize)]
pub struct PartitionsBody {
    partitions: Vec<String>,
}

/// The group's admin, once its name is checked (the request is authorized first).
fn admin_for(app: &App, group: &str) -> Result<GroupAdmin<RedisStore>> {
    group_name(app, group)?;
    app.hub
        .source()
        .admin(group)
        .map_err(|e| ApiError::of(app, &e))
}

/// The error of a refused or failed change.
async fn change_error(app: &App, group: &str, e: PartitionsError, change: Change) -> ApiError {
    let source = app.hub.source();
    let error = group_error(&source.target, &source.store, group, e, Some(change)).await;
    ApiError::of(app, &error)
}

async fn set_drain(app: &App, group: &str, body: ReplicaBody, on: bool) -> Result<Json<Done>> {
    let admin = admin_for(app, group)?;
    name(app, "replica", "replica id", &body.replica)?;
    let (result, change, action) = match (on, body.force) {
        (true, false) => (admin.drain(&body.replica).await, Change::Drain, "drain"),
        (true, true) => (
            admin.drain_forced(&body.replica).await,
            Change::Drain,
            "drain",
        ),
        (false, _) => (
            admin.undrain(&body.replica).await,
            Change::Undrain,
            "undrain",
        ),
    };
    if let Err(e) = result {
        return Err(change_error(app, group, e, change).await);
    }
    Ok(Json(Done {
        group: group.to_owned(),
        action,
        message: format!("{action}ed {} in {group}", body.replica),
    }))
}

pub async fn drain(
    State(app): Shared,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<ReplicaBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    let Json(body) = body?;
    set_drain(&app, &group, body, true).await
}

pub async fn undrain(
    State(app): Shared,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<ReplicaBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    let Json(body) = body?;
    set_drain(&app, &group, body, false).await
}

pub async fn weight(
    State(app): Shared,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<WeightBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    let Json(body) = body?;
    let admin = admin_for(&app, &group)?;
    name(&app, "partition", "partition name", &body.partition)?;
    if !(1..=MAX_WEIGHT).contains(&body.weight) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("a partition weight must be between 1 and {MAX_WEIGHT}"),
        ));
    }
    let old = match admin.set_weight(&body.partition, body.weight).await {
        Ok(old) => old,
        Err(e) => return Err(change_error(&app, &group, e, Change::Weight).await),
    };
    Ok(Json(Done {
        group: group.clone(),
        action: "weight",
        message: format!(
            "{} of {group}: weight {old} -> {}",
            body.partition, body.weight
        ),
    }))
}

pub async fn prefer(
    State(app): Shared,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<PreferBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    let Json(body) = body?;
    let admin = admin_for(&app, &group)?;
    name(&app, "partition", "partition name", &body.partition)?;
    if let Some(r) = &body.replica {
        name(&app, "replica", "replica id", r)?;
    }
    let done = match &body.replica {
        Some(r) => admin.prefer(&body.partition, r).await,
        None => admin.unprefer(&body.partition).await,
    };
    let old = match done {
        Ok(old) => old,
        Err(PartitionsError::UnknownGroup(g)) => {
            return Err(ApiError::of(&app, &Error::NoGroup(g)));
        }
        Err(e) => return Err(change_error(&app, &group, e, Change::Prefer).await),
    };
    let was = old.as_deref().unwrap_or("none");
    let (action, message) = match &body.replica {
        Some(r) => (
            "prefer",
            format!(
                "{} of {group}: preferred on {r} (was {was})",
                body.partition
            ),
        ),
        None => (
            "unprefer",
            format!("{} of {group}: no preference (was {was})", body.partition),
        ),
    };
    Ok(Json(Done {
        group,
        action,
        message,
    }))
}

async fn change_partitions(
    app: &App,
    group: &str,
    body: PartitionsBody,
    change: Change,
) -> Result<Json<Done>> {
    let admin = admin_for(app, group)?;
    if body.partitions.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "no partitions given",
        ));
    }
    for p in &body.partitions {
        name(app, "partition", "partition name", p)?;
    }
    let (result, action) = if change == Change::Add {
        (admin.add(body.partitions.iter().cloned()).await, "add")
    } else {
        (
            admin.remove(body.partitions.iter().cloned()).await,
            "remove",
        )
    };
    match result {
        Ok(n) => Ok(Json(Done {
            group: group.to_owned(),
            action,
            message: format!("{action}: {n} partitions of {group}"),
        })),
        Err(PartitionsError::UnknownGroup(g)) => Err(ApiError::of(app, &Error::NoGroup(g))),
        Err(e) => Err(change_error(app, group, e, change).await),
    }
}

pub async fn add(
    State(app): Shared,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<PartitionsBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    let Json(body) = body?;
    change_partitions(&app, &group, body, Change::Add).await
}

pub async fn remove(
    State(app): Shared,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<PartitionsBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    let Json(body) = body?;
    change_partitions(&app, &group, body, Change::Remove).await
}
