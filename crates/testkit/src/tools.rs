//! Finding the Redis command-line tools the topology helpers need.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Environment variable that overrides the path of the `redis-cli` binary.
pub const REDIS_CLI_ENV: &str = "LEASEHOLD_REDIS_CLI";

const CLI_NOT_FOUND: &str = "redis-cli not found on PATH: install it with `sudo apt-get install redis-tools` (Debian/Ubuntu; it comes with redis-server) or `brew install redis` (macOS), or set LEASEHOLD_REDIS_CLI to its path";

/// `redis-cli`, from [`REDIS_CLI_ENV`] or `PATH`.
pub(crate) fn redis_cli() -> io::Result<PathBuf> {
    find_in(
        "redis-cli",
        std::env::var_os(REDIS_CLI_ENV),
        std::env::var_os("PATH"),
    )
    .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, CLI_NOT_FOUND))
}

/// How to start a Sentinel: `redis-sentinel <conf>` if it is on `PATH`, otherwise
/// `redis-server <conf> --sentinel` (the same binary; Debian ships `redis-sentinel` in a
/// separate package).
pub(crate) fn sentinel_command(conf: &std::path::Path) -> io::Result<Command> {
    if let Some(bin) = find_in("redis-sentinel", None, std::env::var_os("PATH")) {
        let mut cmd = Command::new(bin);
        cmd.arg(conf);
        return Ok(cmd);
    }
    let server = crate::server::find_binary().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "neither redis-sentinel nor redis-server is available for Sentinel: {e} \
                 (or `sudo apt-get install redis-sentinel`)"
            ),
        )
    })?;
    let mut cmd = Command::new(server);
    cmd.arg(conf).arg("--sentinel");
    Ok(cmd)
}

fn find_in(name: &str, override_path: Option<OsString>, path: Option<OsString>) -> Option<PathBuf> {
    if let Some(bin) = override_path {
        let bin = PathBuf::from(bin);
        return bin.is_file().then_some(bin);
    }
    std::env::split_paths(&path?)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Polls `check` every 50 ms until it returns `Ok`, or fails with its last error after
/// `limit`.
pub(crate) fn poll<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> io::Result<T> {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{what} not reached within {limit:?}: {e}"),
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_and_path_lookup() {
        assert_eq!(
            find_in("redis-cli", None, Some("/nonexistent".into())),
            None
        );
        assert_eq!(find_in("redis-cli", None, None), None);
        assert_eq!(
            find_in("redis-cli", Some("/nonexistent/redis-cli".into()), None),
            None
        );
        let bin = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(
            find_in("x", Some(bin.path().into()), None).as_deref(),
            Some(bin.path())
        );
    }

    #[test]
    fn missing_cli_error_names_the_package() {
        assert!(CLI_NOT_FOUND.contains("apt-get install redis-tools"));
    }
}
