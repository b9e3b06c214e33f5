//! Every invalid configuration value gives its own typed error at build time.

use std::time::Duration;

use leasehold_election::config::{MAX_LEASE, MIN_LEASE};
use leasehold_election::{ConfigError, ElectorConfig};

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
    assert_eq!(c.renew_interval, ms(300));
    assert_eq!(c.retry_interval, ms(300));
    assert_eq!(c.safety_margin, ms(11));
    assert_eq!(c.call_timeout, ms(300));
    assert_eq!(c.key_prefix, "leasehold");
    // The smallest lease still gets a margin below its renew interval.
    let c = ElectorConfig::builder("job", "a")
        .lease(MIN_LEASE)
        .build()
        .unwrap();
    assert!(c.safety_margin < c.renew_interval);
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
