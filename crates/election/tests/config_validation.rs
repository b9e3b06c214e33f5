//! Every invalid configuration value gives its own typed error at build time.

use std::time::Duration;

use leasehold_election::{ConfigError, ElectorConfig};
use leasehold_election::{MAX_LEASE, MIN_LEASE};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn err(b: leasehold_election::ElectorConfigBuilder) -> ConfigError {
    b.build().expect_err("must be rejected")
}

#[test]
fn defaults_are_derived_from_the_lease() {
    let c = ElectorConfig::builder("job", "a")
        .lease(ms(900))
        .build()
        .unwrap();
    assert_eq!(c.renew_interval(), ms(300));
    assert_eq!(c.retry_interval(), ms(300));
    assert_eq!(c.safety_margin(), ms(11));
    assert_eq!(c.call_timeout(), ms(300));
    assert_eq!(c.key_prefix(), "leasehold");
    // The smallest lease still gets a margin below its renew interval.
    let c = ElectorConfig::builder("job", "a")
        .lease(MIN_LEASE)
        .build()
        .unwrap();
    assert!(c.safety_margin() < c.renew_interval());
}

#[test]
fn lease_bounds() {
    let b = || ElectorConfig::builder("job", "a");
    assert!(matches!(
        err(b().lease(ms(9))),
        ConfigError::LeaseOutOfRange { .. }
    ));
    assert!(matches!(
        err(b().lease(Duration::ZERO)),
        ConfigError::LeaseOutOfRange { .. }
    ));
    assert!(matches!(
        err(b().lease(MAX_LEASE + ms(1))),
        ConfigError::LeaseOutOfRange { .. }
    ));
    assert!(b().lease(MAX_LEASE).build().is_ok());
}

#[test]
fn intervals_must_be_positive_and_shorter_than_the_lease() {
    let b = || ElectorConfig::builder("job", "a").lease(ms(1000));
    for bad in [Duration::ZERO, ms(1000), ms(5000)] {
        assert!(matches!(
            err(b().renew_interval(bad)),
            ConfigError::IntervalOutOfRange {
                what: "renew interval",
                ..
            }
        ));
        assert!(matches!(
            err(b().retry_interval(bad)),
            ConfigError::IntervalOutOfRange {
                what: "retry interval",
                ..
            }
        ));
    }
}

#[test]
fn margin_must_be_below_the_renew_interval() {
    let b = ElectorConfig::builder("job", "a")
        .lease(ms(1000))
        .renew_interval(ms(100))
        .safety_margin(ms(100));
    assert!(matches!(err(b), ConfigError::MarginTooLarge { .. }));
}

#[test]
fn a_renewal_must_end_before_the_leaders_own_deadline() {
    // Lease 1 s, renew 700 ms, margin 400 ms: the renewal is sent 700 ms into the lease
    // and the deadline is at 600 ms, so the leader would step down every term.
    let e = err(ElectorConfig::builder("job", "a")
        .lease(ms(1000))
        .renew_interval(ms(700))
        .safety_margin(ms(400)));
    assert!(
        matches!(
            e,
            ConfigError::RenewalOutlastsDeadline { renew, lease, margin, .. }
                if renew == ms(700) && lease == ms(1000) && margin == ms(400)
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("renew interval (700ms) + call timeout (")
            && msg.contains("must be shorter than lease (1s) - safety margin (400ms)"),
        "the message names the rule: {msg}"
    );
    // An explicit call timeout that does not fit; the rule is strict.
    for call in [ms(688), ms(700), ms(900)] {
        let e = err(ElectorConfig::builder("job", "a")
            .lease(ms(1000))
            .renew_interval(ms(300))
            .safety_margin(ms(12))
            .call_timeout(call));
        assert!(
            matches!(e, ConfigError::RenewalOutlastsDeadline { call_timeout, .. } if call_timeout == call),
            "{call:?}: {e:?}"
        );
    }
    let fits = ElectorConfig::builder("job", "a")
        .lease(ms(1000))
        .renew_interval(ms(300))
        .safety_margin(ms(12))
        .call_timeout(ms(687))
        .build()
        .unwrap();
    assert_eq!(fits.call_timeout(), ms(687));
    // Without an explicit call timeout, the default shrinks to fit a long renew interval.
    let c = ElectorConfig::builder("job", "a")
        .lease(ms(1000))
        .renew_interval(ms(600))
        .build()
        .unwrap();
    assert!(c.call_timeout() < c.renew_interval(), "{c:?}");
    assert!(c.renew_interval() + c.call_timeout() < c.lease() - c.safety_margin());
}

#[test]
fn the_defaults_always_satisfy_the_renewal_rule() {
    for lease_ms in [
        10, 11, 15, 30, 100, 300, 1000, 10_000, 3_600_000, 86_400_000,
    ] {
        let c = ElectorConfig::builder("job", "a")
            .lease(ms(lease_ms))
            .build()
            .unwrap_or_else(|e| panic!("lease {lease_ms} ms: {e}"));
        assert!(
            c.renew_interval() + c.call_timeout() < c.lease() - c.safety_margin(),
            "{c:?}"
        );
    }
}

#[test]
fn zero_timeouts_and_inverted_backoff_are_rejected() {
    let b = || ElectorConfig::builder("job", "a");
    assert!(matches!(
        err(b().call_timeout(Duration::ZERO)),
        ConfigError::ZeroDuration {
            what: "call timeout"
        }
    ));
    assert!(matches!(
        err(b().backoff_initial(Duration::ZERO)),
        ConfigError::ZeroDuration { .. }
    ));
    assert!(matches!(
        err(b().backoff_initial(ms(500)).backoff_max(ms(100))),
        ConfigError::BackoffInverted { .. }
    ));
}

#[test]
fn names_are_checked() {
    let long = "x".repeat(257);
    for (duty, replica, what) in [
        ("", "a", "duty name"),
        ("job", "", "replica id"),
        (long.as_str(), "a", "duty name"),
        ("jo\nb", "a", "duty name"),
        ("job", "a\u{7}", "replica id"),
        ("j{o}b", "a", "duty name"),
    ] {
        let e = err(ElectorConfig::builder(duty, replica));
        let named = match &e {
            ConfigError::EmptyName { what }
            | ConfigError::NameTooLong { what, .. }
            | ConfigError::ControlCharacter { what, .. }
            | ConfigError::HashTagCharacter { what, .. } => *what,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(named, what, "{duty:?}/{replica:?}: {e}");
    }
    assert!(
        ElectorConfig::builder("x".repeat(256), "ünïcode ok")
            .build()
            .is_ok()
    );
    assert!(matches!(
        err(ElectorConfig::builder("job", "a").key_prefix("")),
        ConfigError::EmptyName { what: "key prefix" }
    ));
}

#[test]
fn errors_read_well() {
    let e = err(ElectorConfig::builder("job", "a").lease(ms(5)));
    assert_eq!(
        e.to_string(),
        "lease must be between 10ms and 86400s, got 5ms"
    );
}

/// Issue 46: no public call panics, whatever a setter is given: every setter at its
/// limits builds or is a typed error, and what builds runs an elector (on the in-memory
/// store) that leads and shuts down.
#[tokio::test(start_paused = true)]
async fn every_setter_at_its_limits_builds_or_is_a_typed_error() {
    use leasehold_election::{Elector, Leadership, MemoryStore};
    let durations = [
        Duration::ZERO,
        Duration::from_nanos(1),
        ms(1),
        Duration::from_secs(10),
        MAX_LEASE,
        MAX_LEASE + Duration::from_nanos(1),
        Duration::MAX,
    ];
    let base = || ElectorConfig::builder("job", "a").lease(Duration::from_secs(1));
    let mut builders = Vec::new();
    for d in durations {
        builders.push((format!("lease {d:?}"), base().lease(d)));
        builders.push((format!("renew {d:?}"), base().renew_interval(d)));
        builders.push((format!("retry {d:?}"), base().retry_interval(d)));
        builders.push((format!("margin {d:?}"), base().safety_margin(d)));
        builders.push((format!("grace {d:?}"), base().grace(d)));
        builders.push((format!("call timeout {d:?}"), base().call_timeout(d)));
        builders.push((format!("backoff {d:?}"), base().backoff_initial(d)));
        builders.push((format!("backoff max {d:?}"), base().backoff_max(d)));
        builders.push((format!("jitter {d:?}"), base().follower_jitter(d)));
    }
    for n in [0, 1, usize::MAX] {
        builders.push((format!("acked {n}"), base().min_replicas_acked(n)));
    }
    let long = "x".repeat(leasehold_election::MAX_NAME_LEN + 1);
    for name in ["", "a\nb", "{x}", long.as_str()] {
        builders.push((format!("prefix {name:?}"), base().key_prefix(name)));
        builders.push((format!("duty {name:?}"), ElectorConfig::builder(name, "a")));
        builders.push((
            format!("replica {name:?}"),
            ElectorConfig::builder("job", name),
        ));
    }
    let (mut built, mut refused) = (0, 0);
    for (what, b) in builders {
        let Ok(config) = b.build() else {
            refused += 1;
            continue;
        };
        built += 1;
        let lease = config.lease();
        let handle = Elector::new(MemoryStore::new(), config, |lead: Leadership| async move {
            lead.cancelled().await;
            Ok(())
        })
        .spawn();
        tokio::time::timeout(lease * 3, handle.wait_until_leader())
            .await
            .unwrap_or_else(|_| panic!("{what}: never led"))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        tokio::time::sleep(lease * 2).await;
        tokio::time::timeout(Duration::from_secs(60), handle.shutdown())
            .await
            .unwrap_or_else(|_| panic!("{what}: the shutdown hung"));
    }
    assert!(
        built > 15 && refused > 15,
        "{built} built, {refused} refused"
    );
}
