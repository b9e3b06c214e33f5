//! `leasehold dashboard`: a live web page of the groups and duties under a prefix,
//! served on `--listen` with its assets embedded (no CDN, works offline).
//!
//! - [`feed`]: one reader per watched topic, shared by its viewers, idle without them.
//! - [`events`]: one viewer's Server-Sent Events.
//! - [`view`]: what is shown, read with the commands' own reads; [`alerts`]: the alerts
//!   of `docs/operations.md` evaluated on it.
//! - [`api`]: the routes and the JSON errors; [`admin`]: the admin actions and their
//!   guard.

mod admin;
mod alerts;
mod api;
mod events;
mod feed;
mod view;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use self::api::{App, router};
use self::feed::{CLIENT_NAME, Hub, Pace};
use self::view::Source;
use crate::commands::print;
use crate::error::Error;
use crate::target::Target;

/// The shortest admin token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// How `leasehold dashboard` runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Whether admin actions are allowed.
    pub allow_admin: bool,
    /// The admin token.
    pub admin_token: Option<String>,
    /// The shortest time between two reads of a watched group (or of the overview).
    pub interval: Duration,
    /// The longest time between two reads of a watched group without a notice.
    pub refresh: Duration,
}

/// The token admin actions need, if they are allowed; refuses options that would
/// expose the dashboard: admin without a token, a non-loopback address without one,
/// a short token.
///
/// # Errors
/// [`Error::Unsafe`], saying what to change.
pub fn admin_token(options: &Options) -> Result<Option<String>, Error> {
    let token = options.admin_token.as_deref().filter(|t| !t.is_empty());
    if let Some(t) = token
        && t.len() < MIN_TOKEN_LEN
    {
        return Err(Error::Unsafe(format!(
            "the admin token is too short: use at least {MIN_TOKEN_LEN} characters"
        )));
    }
    if token.is_none() {
        if options.allow_admin {
            return Err(Error::Unsafe(
                "--allow-admin needs an admin token: --admin-token or LEASEHOLD_ADMIN_TOKEN"
                    .to_owned(),
            ));
        }
        if !options.listen.ip().is_loopback() {
            return Err(Error::Unsafe(format!(
                "refusing to listen on {} without an admin token: other machines could \
                 reach it; listen on 127.0.0.1, or set --admin-token (or \
                 LEASEHOLD_ADMIN_TOKEN)",
                options.listen
            )));
        }
    }
    Ok(token.filter(|_| options.allow_admin).map(str::to_owned))
}

/// `leasehold dashboard`: serves the page until Ctrl-C. Says where on stdout, one
/// line, once it listens.
pub async fn run(target: &Target, options: Options) -> Result<(), Error> {
    let token = admin_token(&options)?;
    let source = Source {
        target: target.clone(),
        store: target.named_store(CLIENT_NAME)?,
        admin: token.is_some(),
    };
    let pace = Pace {
        interval: options.interval,
        refresh: options.refresh.max(options.interval),
    };
    let app = Arc::new(App {
        hub: Hub::new(source, pace),
        token,
        loopback: options.listen.ip().is_loopback(),
    });
    let addr = options.listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| Error::Listen { addr, error })?;
    let bound = listener
        .local_addr()
        .map_err(|error| Error::Listen { addr, error })?;
    let mode = if app.token.is_some() {
        "admin actions allowed with the token"
    } else {
        "read-only"
    };
    print(&format!(
        "leasehold dashboard on http://{bound}/ ({mode}); Ctrl-C to stop\n"
    ))?;
    let serve = axum::serve(listener, router(app));
    tokio::select! {
        r = serve => r.map_err(|error| Error::Listen { addr, error }),
        _ = tokio::signal::ctrl_c() => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(listen: &str, allow_admin: bool, token: Option<&str>) -> Options {
        Options {
            listen: listen.parse().unwrap(),
            allow_admin,
            admin_token: token.map(str::to_owned),
            interval: Duration::from_secs(1),
            refresh: Duration::from_secs(5),
        }
    }

    const TOKEN: &str = "0123456789abcdef";

    #[test]
    fn unsafe_options_are_refused() {
        let refused = |o: Options| match admin_token(&o) {
            Err(Error::Unsafe(why)) => why,
            other => panic!("not refused: {other:?}"),
        };
        assert!(refused(options("0.0.0.0:9470", false, None)).contains("refusing to listen"));
        assert!(refused(options("[::]:9470", false, Some(""))).contains("refusing to listen"));
        assert!(refused(options("127.0.0.1:9470", true, None)).contains("--allow-admin"));
        assert!(refused(options("127.0.0.1:9470", true, Some("short"))).contains("too short"));
    }

    #[test]
    fn the_token_guards_admin_only_when_allowed() {
        let token = |o: Options| admin_token(&o).unwrap();
        assert_eq!(token(options("127.0.0.1:9470", false, None)), None);
        assert_eq!(token(options("[::1]:9470", false, None)), None);
        assert_eq!(token(options("0.0.0.0:9470", false, Some(TOKEN))), None);
        assert_eq!(
            token(options("0.0.0.0:9470", true, Some(TOKEN))).as_deref(),
            Some(TOKEN)
        );
    }
}
