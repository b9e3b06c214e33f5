//! The admin actions (`--allow-admin`): drain, undrain, weight, prefer (and
//! unprefer), add and remove partitions, each through the group admin the CLI's commands use, and the guard in
//! front of them: the token in a header, the request from the dashboard's own page.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use leasehold_election::RedisStore;
use leasehold_partitions::{GroupAdmin, MAX_WEIGHT, PartitionsError};
use serde::{Deserialize, Serialize};

use super::api::{ApiError, App, Result, Shared, group_name, name};
use crate::commands::group_error;
use crate::error::{Change, Error};

/// The header that carries the admin token.
pub const TOKEN_HEADER: &str = "x-leasehold-token";

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Lets an admin action through only if admin is on, the request comes from the
/// dashboard's own page (or a tool: no `Origin`, no `Sec-Fetch-Site`), and it carries
/// the token in [`TOKEN_HEADER`] (a header, never a cookie: a browser does not add it
/// to a request another site makes).
fn authorize(app: &App, headers: &HeaderMap) -> Result<()> {
    let forbidden = |m: &str| ApiError::new(StatusCode::FORBIDDEN, m);
    let Some(token) = &app.token else {
        return Err(forbidden(
            "this dashboard is read-only: start it with --allow-admin and --admin-token \
             to change groups",
        ));
    };
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if site.is_some_and(|s| s != "same-origin" && s != "none") {
        return Err(forbidden("cross-site request refused"));
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        let origin_host = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .map(|(_, rest)| rest);
        if host.is_none() || origin_host != host {
            return Err(forbidden("cross-origin request refused"));
        }
    }
    let given = headers.get(TOKEN_HEADER).map(HeaderValue::as_bytes);
    match given {
        Some(given) if same_secret(given, token.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(StatusCode::UNAUTHORIZED, "wrong admin token")),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("an admin action needs the token in the {TOKEN_HEADER} header"),
        )),
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
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<ReplicaBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    authorize(&app, &headers)?;
    let Json(body) = body?;
    set_drain(&app, &group, body, true).await
}

pub async fn undrain(
    State(app): Shared,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<ReplicaBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    authorize(&app, &headers)?;
    let Json(body) = body?;
    set_drain(&app, &group, body, false).await
}

pub async fn weight(
    State(app): Shared,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<WeightBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    authorize(&app, &headers)?;
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
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<PreferBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    authorize(&app, &headers)?;
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
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<PartitionsBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    authorize(&app, &headers)?;
    let Json(body) = body?;
    change_partitions(&app, &group, body, Change::Add).await
}

pub async fn remove(
    State(app): Shared,
    headers: HeaderMap,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<PartitionsBody>, JsonRejection>,
) -> Result<Json<Done>> {
    let Path(group) = path?;
    authorize(&app, &headers)?;
    let Json(body) = body?;
    change_partitions(&app, &group, body, Change::Remove).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"", b"a"));
    }
}
