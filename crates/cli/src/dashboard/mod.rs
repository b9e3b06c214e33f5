//! `leasehold dashboard`: a live web page of the groups and duties under a prefix,
//! served on `--listen` with its assets embedded (no CDN, works offline).
//!
//! - [`feed`]: one reader per watched topic, shared by its viewers, idle without them.
//! - [`events`]: one viewer's Server-Sent Events.
//! - [`view`]: what is shown, read with the commands' own reads; [`alerts`]: the alerts
//!   of `docs/operations.md` evaluated on it.
//! - [`api`]: the routes and the JSON errors; [`admin`]: the admin actions and their
//!   guard.
//! - [`guard`]: who may ask what (host names, other sites' pages, tokens, sessions),
//!   and the security headers of every response; [`mod@serve`]: the accept loop (HTTPS,
//!   connection caps, timeouts).
//!
//! Its threat model is in `docs/operations.md` ("The dashboard's threat model").

mod admin;
mod alerts;
mod api;
mod events;
mod feed;
mod guard;
mod serve;
mod view;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use self::api::{App, router};
use self::feed::{CLIENT_NAME, Hub, Pace};
use self::guard::{Access, Backoff, Hosts, Secret, Sessions};
use self::serve::{Limits, serve, tls_acceptor};
use self::view::Source;
use crate::commands::print;
use crate::error::Error;
use crate::target::Target;

/// The shortest token accepted (admin or read).
pub const MIN_TOKEN_LEN: usize = 16;

/// How `leasehold dashboard` runs.
#[derive(Clone)]
pub struct Options {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Whether admin actions are allowed.
    pub allow_admin: bool,
    /// The admin token (`--admin-token`, `LEASEHOLD_ADMIN_TOKEN`).
    pub admin_token: Option<String>,
    /// A file whose content is the admin token (`--admin-token-file`).
    pub admin_token_file: Option<PathBuf>,
    /// The read token (`--read-token`, `LEASEHOLD_READ_TOKEN`).
    pub read_token: Option<String>,
    /// A file whose content is the read token (`--read-token-file`).
    pub read_token_file: Option<PathBuf>,
    /// The host names it may be reached by besides addresses and `localhost`
    /// (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// The certificate chain (PEM) for HTTPS.
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM) for HTTPS.
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP off loopback (behind a TLS proxy): `--insecure-http`.
    pub insecure_http: bool,
    /// The shortest time between two reads of a watched group (or of the overview).
    pub interval: Duration,
    /// The longest time between two reads of a watched group without a notice.
    pub refresh: Duration,
}

/// Prints `Some(<redacted>)` for a secret that is set: a token must never reach a log.
fn redacted(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| "<redacted>")
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("listen", &self.listen)
            .field("allow_admin", &self.allow_admin)
            .field("admin_token", &redacted(&self.admin_token))
            .field("admin_token_file", &self.admin_token_file)
            .field("read_token", &redacted(&self.read_token))
            .field("read_token_file", &self.read_token_file)
            .field("allow_hosts", &self.allow_hosts)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("insecure_http", &self.insecure_http)
            .field("interval", &self.interval)
            .field("refresh", &self.refresh)
            .finish()
    }
}

/// One token from its flag (or variable) or its file; the file's content without its
/// trailing line break. `None` if neither, or if empty.
fn token(
    flag: Option<&str>,
    file: Option<&Path>,
    what: &str,
    flag_name: &str,
) -> Result<Option<String>, Error> {
    let flag = flag.filter(|t| !t.is_empty());
    let token = match (flag, file) {
        (Some(_), Some(_)) => {
            return Err(Error::Unsafe(format!(
                "give the {what} token once: --{flag_name} (or its variable), or \
                 --{flag_name}-file"
            )));
        }
        (Some(t), None) => t.to_owned(),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Error::Unsafe(format!(
                    "cannot read the {what} token from {}: {e}",
                    path.display()
                ))
            })?;
            text.trim_end_matches(['\r', '\n']).to_owned()
        }
        (None, None) => return Ok(None),
    };
    if token.is_empty() {
        return Ok(None);
    }
    if token.len() < MIN_TOKEN_LEN {
        return Err(Error::Unsafe(format!(
            "the {what} token is too short: use at least {MIN_TOKEN_LEN} characters"
        )));
    }
    Ok(Some(token))
}

/// Who may read and change what, from the options; refuses options that would expose
/// the dashboard: admin without a token, a non-loopback address without a token (reads
/// off loopback need one), or in plain HTTP without `--insecure-http`, a short token,
/// half a certificate.
///
/// Reads need a token off loopback, or on loopback with `--read-token`; then the read
/// token, if given, or the admin token lets a client read (admin implies read).
///
/// # Errors
/// [`Error::Unsafe`], saying what to change.
pub fn access(options: &Options) -> Result<Access, Error> {
    let admin = token(
        options.admin_token.as_deref(),
        options.admin_token_file.as_deref(),
        "admin",
        "admin-token",
    )?;
    let read = token(
        options.read_token.as_deref(),
        options.read_token_file.as_deref(),
        "read",
        "read-token",
    )?;
    let loopback = options.listen.ip().is_loopback();
    if admin.is_none() && options.allow_admin {
        return Err(Error::Unsafe(
            "--allow-admin needs an admin token: --admin-token-file, LEASEHOLD_ADMIN_TOKEN \
             or --admin-token"
                .to_owned(),
        ));
    }
    if !loopback && admin.is_none() && read.is_none() {
        return Err(Error::Unsafe(format!(
            "refusing to listen on {} without a token: other machines could reach it, \
             and reads off loopback need one; listen on 127.0.0.1, or set --read-token-file \
             (or --admin-token-file, LEASEHOLD_READ_TOKEN, LEASEHOLD_ADMIN_TOKEN)",
            options.listen
        )));
    }
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(_), Some(_)) => true,
        (None, None) => false,
        _ => {
            return Err(Error::Unsafe(
                "HTTPS needs both --tls-cert and --tls-key".to_owned(),
            ));
        }
    };
    if !loopback && !tls && !options.insecure_http {
        return Err(Error::Unsafe(format!(
            "refusing to serve plain HTTP on {}: the token would cross the network in \
             clear; give --tls-cert and --tls-key, or --insecure-http if a TLS proxy on \
             this network ends HTTPS for it",
            options.listen
        )));
    }
    let mut readers = Vec::new();
    if !loopback || read.is_some() {
        readers.extend(read.as_deref().map(Secret::new));
        readers.extend(admin.as_deref().map(Secret::new));
    }
    Ok(Access {
        admin: admin
            .as_deref()
            .filter(|_| options.allow_admin)
            .map(Secret::new),
        read: readers,
        hosts: Hosts {
            loopback,
            names: options
                .allow_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
        },
        tls,
    })
}

/// What the startup line says is exposed: who can reach it, what reads need, what
/// admin allows, the names it answers to.
fn exposure(access: &Access) -> String {
    let reach = match (access.hosts.loopback, access.tls) {
        (true, _) => "loopback only",
        (false, true) => "reachable from other machines",
        (false, false) => {
            "reachable from other machines in plain HTTP (--insecure-http: TLS must end \
             in front of it)"
        }
    };
    let reads = match (access.reads_need_token(), access.hosts.loopback) {
        (true, _) => "reads need a token",
        (false, true) => "reads open to this machine's users",
        (false, false) => "reads open",
    };
    let admin = if access.admin.is_some() {
        "admin actions allowed with the admin token"
    } else {
        "read-only"
    };
    let mut names = vec![
        if access.hosts.loopback {
            "loopback addresses"
        } else {
            "IP addresses"
        }
        .to_owned(),
        "localhost".to_owned(),
    ];
    names.extend(access.hosts.names.iter().cloned());
    format!("{reach}; {reads}; {admin}; answers to {}", names.join(", "))
}

/// `leasehold dashboard`: serves the page until Ctrl-C. Says where on stdout, one
/// line, once it listens, and what it exposes.
pub async fn run(target: &Target, options: Options) -> Result<(), Error> {
    let access = access(&options)?;
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some(tls_acceptor(cert, key)?),
        _ => None,
    };
    let source = Source {
        target: target.clone(),
        store: target.named_store(CLIENT_NAME)?,
        admin: access.admin.is_some(),
    };
    let pace = Pace {
        interval: options.interval,
        refresh: options.refresh.max(options.interval),
    };
    let line = exposure(&access);
    let app = Arc::new(App {
        hub: Hub::new(source, pace),
        access,
        sessions: Sessions::default(),
        backoff: Backoff::default(),
        overview: tokio::sync::Mutex::new(None),
    });
    let addr = options.listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| Error::Listen { addr, error })?;
    let bound = listener
        .local_addr()
        .map_err(|error| Error::Listen { addr, error })?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    print(&format!(
        "leasehold dashboard on {scheme}://{bound}/ ({line}); Ctrl-C to stop\n"
    ))?;
    tokio::select! {
        () = serve(listener, tls, router(app), Limits::default()) => Ok(()),
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
            admin_token_file: None,
            read_token: None,
            read_token_file: None,
            allow_hosts: Vec::new(),
            tls_cert: None,
            tls_key: None,
            insecure_http: true,
            interval: Duration::from_secs(1),
            refresh: Duration::from_secs(5),
        }
    }

    const TOKEN: &str = "0123456789abcdef";

    fn refused(o: &Options) -> String {
        match access(o) {
            Err(Error::Unsafe(why)) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn unsafe_options_are_refused() {
        assert!(refused(&options("0.0.0.0:9470", false, None)).contains("refusing to listen"));
        assert!(refused(&options("[::]:9470", false, Some(""))).contains("refusing to listen"));
        assert!(refused(&options("127.0.0.1:9470", true, None)).contains("--allow-admin"));
        assert!(refused(&options("127.0.0.1:9470", true, Some("short"))).contains("too short"));
        let mut plain = options("0.0.0.0:9470", false, Some(TOKEN));
        plain.insecure_http = false;
        assert!(refused(&plain).contains("plain HTTP"));
        let mut half = options("127.0.0.1:9470", false, None);
        half.tls_cert = Some("cert.pem".into());
        assert!(refused(&half).contains("both --tls-cert and --tls-key"));
        let mut twice = options("127.0.0.1:9470", true, Some(TOKEN));
        twice.admin_token_file = Some("token".into());
        assert!(refused(&twice).contains("once"));
    }

    #[test]
    fn off_loopback_reads_need_the_token() {
        let a = |o: Options| access(&o).unwrap();
        let local = a(options("127.0.0.1:9470", false, None));
        assert!(!local.reads_need_token() && local.admin.is_none());
        let local_admin = a(options("[::1]:9470", true, Some(TOKEN)));
        assert!(!local_admin.reads_need_token(), "loopback: reads open");
        assert!(
            local_admin
                .admin
                .as_ref()
                .unwrap()
                .matches(TOKEN.as_bytes())
        );
        // The token is kept for reads even without --allow-admin.
        let exposed = a(options("0.0.0.0:9470", false, Some(TOKEN)));
        assert!(exposed.admin.is_none());
        assert!(exposed.read.iter().any(|s| s.matches(TOKEN.as_bytes())));
        // A read token guards reads on loopback too; the admin token reads as well.
        let mut o = options("127.0.0.1:9470", true, Some(TOKEN));
        o.read_token = Some("read-token-read-token".into());
        let both = a(o);
        assert_eq!(both.read.len(), 2);
        assert!(
            both.read
                .iter()
                .any(|s| s.matches(b"read-token-read-token"))
        );
        assert!(!both.admin.unwrap().matches(b"read-token-read-token"));
    }

    #[test]
    fn a_token_file_is_read_without_its_line_break() {
        let dir = std::env::temp_dir().join(format!("lh-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("admin");
        std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
        let mut o = options("127.0.0.1:9470", true, None);
        o.admin_token_file = Some(file);
        let a = access(&o).unwrap();
        assert!(a.admin.unwrap().matches(TOKEN.as_bytes()));
        o.admin_token_file = Some(dir.join("missing"));
        assert!(refused(&o).contains("cannot read the admin token"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_startup_line_says_what_is_exposed() {
        let mut o = options("0.0.0.0:9470", true, Some(TOKEN));
        o.allow_hosts = vec!["Dash.Example".into()];
        let mut a = access(&o).unwrap();
        a.tls = true;
        assert_eq!(
            exposure(&a),
            "reachable from other machines; reads need a token; admin actions allowed \
             with the admin token; answers to IP addresses, localhost, dash.example"
        );
        a.tls = false;
        assert!(exposure(&a).starts_with("reachable from other machines in plain HTTP"));
        let line = exposure(&access(&options("127.0.0.1:9470", false, None)).unwrap());
        assert_eq!(
            line,
            "loopback only; reads open to this machine's users; read-only; answers to \
             loopback addresses, localhost"
        );
    }

    #[tokio::test]
    async fn no_options_struct_prints_a_secret() {
        let mut o = options("0.0.0.0:9470", true, Some("admin-secret-0123456789"));
        o.read_token = Some("read-secret-0123456789".into());
        let url = "redis://user:url-secret-0123456789@127.0.0.1:1/0";
        let target = Target {
            url: url.into(),
            more_urls: vec![url.into()],
            topology: crate::target::Topology::Sentinel {
                master: "m".into(),
                primary_url: Some(url.into()),
            },
            prefix: "lh".into(),
            timeout: Duration::from_secs(1),
        };
        let access = access(&o).unwrap();
        let source = Source {
            store: target.store().unwrap(),
            target: target.clone(),
            admin: true,
        };
        let pace = Pace {
            interval: o.interval,
            refresh: o.refresh,
        };
        let app = App {
            hub: Hub::new(source.clone(), pace),
            access: access.clone(),
            sessions: Sessions::default(),
            backoff: Backoff::default(),
            overview: tokio::sync::Mutex::new(None),
        };
        let printed = format!(
            "{o:?} {access:?} {target:?} {source:?} {app:?} {:?}",
            app.hub
        );
        assert!(!printed.contains("secret-0123456789"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
    }
}
