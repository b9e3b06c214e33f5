use super::*;

#[test]
fn a_group_has_one_move_budget_or_none_and_never_zero() {
    let b = || GroupConfig::builder("g", ["x"], "a");
    for zero in [MoveBudget::Moves(0), MoveBudget::Weight(0)] {
        assert_eq!(
            b().move_budget(zero).build().unwrap_err(),
            GroupConfigError::ZeroMoveBudget
        );
    }
    assert_eq!(
        b().hand_off_ttl(Duration::ZERO).build().unwrap_err(),
        GroupConfigError::HandOffTtlOutOfRange(Duration::ZERO)
    );
    for wait in [Duration::ZERO, Duration::from_secs(11)] {
        assert_eq!(
            b().prepare_moves(wait).build().unwrap_err(),
            GroupConfigError::PrepareWaitOutOfRange(wait),
            "a wait of {wait:?} with a lease of 10 s"
        );
    }
    // One budget: the last one set.
    let c = b()
        .move_budget(MoveBudget::Moves(3))
        .move_budget(MoveBudget::Weight(9))
        .build()
        .unwrap();
    assert_eq!(c.move_budget(), Some(MoveBudget::Weight(9)));
    assert_eq!(c.hand_off_ttl(), DEFAULT_HAND_OFF_TTL);
}

/// Issue 46: no public call panics, whatever a setter is given: every setter at its
/// limits builds or is a typed error, and what builds spawns a coordinator (on the
/// in-memory store) that runs and shuts down.
#[tokio::test(start_paused = true)]
async fn every_setter_at_its_limits_builds_or_is_a_typed_error() {
    use crate::{Coordinator, MemoryGroupStore};
    let durations = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_millis(1),
        Duration::from_secs(10),
        leasehold_election::MAX_LEASE,
        leasehold_election::MAX_LEASE + Duration::from_nanos(1),
        Duration::MAX,
    ];
    let base = || GroupConfig::builder("g", ["x", "y"], "a").lease(Duration::from_secs(1));
    let mut builders: Vec<(String, GroupConfigBuilder)> = Vec::new();
    for d in durations {
        builders.push((format!("lease {d:?}"), base().lease(d)));
        builders.push((format!("renew {d:?}"), base().renew_interval(d)));
        builders.push((format!("retry {d:?}"), base().retry_interval(d)));
        builders.push((format!("settle {d:?}"), base().settle(d)));
        builders.push((format!("grace {d:?}"), base().grace(d)));
        builders.push((format!("rejoin {d:?}"), base().rejoin_grace(d)));
        builders.push((format!("ttl {d:?}"), base().hand_off_ttl(d)));
        builders.push((format!("prepare {d:?}"), base().prepare_moves(d)));
        let damping = LoadDamping::default();
        builders.push((
            format!("half-life {d:?}"),
            base().weights_from_loads(damping.half_life(d)),
        ));
        builders.push((
            format!("warm-up {d:?}"),
            base().weights_from_loads(damping.warm_up(d)),
        ));
    }
    for n in [0, 1, 1_000, 1_001, u32::MAX] {
        builders.push((format!("capacity {n}"), base().capacity(n)));
        builders.push((
            format!("moves {n}"),
            base().move_budget(MoveBudget::Moves(n)),
        ));
        builders.push((
            format!("weight {n}"),
            base().move_budget(MoveBudget::Weight(n)),
        ));
        let damping = LoadDamping::default();
        builders.push((
            format!("threshold {n}"),
            base().weights_from_loads(damping.threshold_percent(n)),
        ));
        builders.push((
            format!("jump {n}"),
            base().weights_from_loads(damping.jump_percent(n)),
        ));
    }
    for n in [0, 1, usize::MAX] {
        builders.push((format!("acked {n}"), base().min_replicas_acked(n)));
    }
    for v in [0, 1, u64::MAX] {
        builders.push((format!("list version {v}"), base().list_version(v)));
    }
    let long = "x".repeat(leasehold_election::MAX_NAME_LEN + 1);
    for name in ["", "a\nb", "{g}", long.as_str()] {
        builders.push((format!("prefix {name:?}"), base().key_prefix(name)));
        builders.push((
            format!("group {name:?}"),
            GroupConfig::builder(name, ["x"], "a"),
        ));
        builders.push((
            format!("replica {name:?}"),
            GroupConfig::builder("g", ["x"], name),
        ));
        builders.push((
            format!("partition {name:?}"),
            GroupConfig::builder("g", [name], "a"),
        ));
    }
    let longest = "a".repeat(crate::MAX_ADDRESS_LEN);
    let too_long = "a".repeat(crate::MAX_ADDRESS_LEN + 1);
    for address in [
        "",
        "a\tb",
        "10.0.0.7:8080",
        longest.as_str(),
        too_long.as_str(),
    ] {
        builders.push((format!("advertise {address:?}"), base().advertise(address)));
    }
    builders.push((
        "no partitions".to_owned(),
        GroupConfig::builder("g", Vec::<String>::new(), "a"),
    ));
    builders.push((
        "a partition twice".to_owned(),
        GroupConfig::builder("g", ["x", "x"], "a"),
    ));
    let (mut built, mut refused) = (0, 0);
    for (what, b) in builders {
        let Ok(config) = b.build() else {
            refused += 1;
            continue;
        };
        built += 1;
        let handle = Coordinator::new(MemoryGroupStore::new(), config, |_, lease| async move {
            lease.cancelled().await;
            Ok(())
        })
        .spawn();
        tokio::time::sleep(Duration::from_secs(3)).await;
        tokio::time::timeout(Duration::from_secs(60), handle.shutdown())
            .await
            .unwrap_or_else(|_| panic!("{what}: the shutdown hung"));
    }
    assert!(
        built > 20 && refused > 20,
        "{built} built, {refused} refused"
    );
}

#[test]
fn load_damping_out_of_range_is_a_typed_error() {
    let b = |d: LoadDamping| GroupConfig::builder("g", ["x"], "a").weights_from_loads(d);
    let d = LoadDamping::default();
    assert_eq!(
        b(d.half_life(Duration::ZERO)).build().unwrap_err(),
        GroupConfigError::HalfLifeOutOfRange(Duration::ZERO)
    );
    assert_eq!(
        b(d.threshold_percent(1_001)).build().unwrap_err(),
        GroupConfigError::LoadThresholdOutOfRange(1_001)
    );
    let c = b(d.threshold_percent(0)).build().unwrap();
    assert_eq!(c.load_damping().map(|d| d.threshold_percent), Some(0));
}

#[test]
fn bad_input_gets_typed_errors() {
    let none: [&str; 0] = [];
    assert_eq!(
        GroupConfig::builder("g", none, "a").build().unwrap_err(),
        GroupConfigError::EmptyPartitionList
    );
    assert_eq!(
        GroupConfig::builder("g", ["x", "y", "x"], "a")
            .build()
            .unwrap_err(),
        GroupConfigError::DuplicatePartition("x".into())
    );
    assert!(matches!(
        GroupConfig::builder("g", ["ok", "bad\n"], "a")
            .build()
            .unwrap_err(),
        GroupConfigError::Invalid(ConfigError::ControlCharacter {
            what: "partition name",
            ..
        })
    ));
    assert!(matches!(
        GroupConfig::builder("g", ["x"], "a")
            .lease(Duration::ZERO)
            .build()
            .unwrap_err(),
        GroupConfigError::Invalid(ConfigError::LeaseOutOfRange { .. })
    ));
    assert!(matches!(
        GroupConfig::builder("g", ["x"], "a")
            .lease(Duration::from_secs(2 * 86_400))
            .build()
            .unwrap_err(),
        GroupConfigError::Invalid(ConfigError::LeaseOutOfRange { .. })
    ));
    assert!(matches!(
        GroupConfig::builder("", ["x"], "a").build().unwrap_err(),
        GroupConfigError::Invalid(ConfigError::EmptyName { what: "group name" })
    ));
    assert!(matches!(
        GroupConfig::builder("g", ["x"], "a")
            .renew_interval(Duration::from_secs(20))
            .build()
            .unwrap_err(),
        GroupConfigError::Invalid(ConfigError::IntervalOutOfRange { .. })
    ));
}

#[test]
fn digest_depends_on_the_list_and_its_order() {
    let d = |ps: &[&str]| {
        GroupConfig::builder("g", ps.to_vec(), "a")
            .build()
            .unwrap()
            .digest()
    };
    assert_eq!(d(&["a", "b"]), d(&["a", "b"]));
    assert_ne!(d(&["a", "b"]), d(&["b", "a"]));
    assert_ne!(d(&["a", "b"]), d(&["a", "b", "c"]));
}

#[test]
fn an_advertised_address_is_one_short_line() {
    let b = |address: &str| {
        GroupConfig::builder("g", ["x"], "a")
            .advertise(address)
            .build()
    };
    let refused = |address: &str| match b(address).unwrap_err() {
        GroupConfigError::InvalidAddress { reason } => reason,
        other => panic!("{address:?}: {other:?}"),
    };
    assert_eq!(refused(""), AddressError::Empty);
    let too_long = "a".repeat(MAX_ADDRESS_LEN + 1);
    assert_eq!(
        refused(&too_long),
        AddressError::TooLong {
            len: MAX_ADDRESS_LEN + 1
        }
    );
    // Bytes, not characters: 129 two-byte characters are 258 bytes.
    assert_eq!(
        refused(&"é".repeat(129)),
        AddressError::TooLong { len: 258 }
    );
    for (address, at) in [
        ("10.0.0.7:8080\n", 13),
        ("\t10.0.0.7", 0),
        ("host\r:1", 4),
        ("a\u{7f}", 1),
        ("é\u{85}", 2),
        ("\0", 0),
    ] {
        assert_eq!(
            refused(address),
            AddressError::ControlCharacter { at },
            "{address:?}"
        );
    }
    let err = b("").unwrap_err().to_string();
    assert!(err.contains("advertised address"), "{err}");

    let longest = "a".repeat(MAX_ADDRESS_LEN);
    for address in [
        "10.0.0.7:8080",
        "https://replica-1.example.com:8443/api",
        "[::1]:80",
        "host with spaces",
        "émoji 🦀",
        longest.as_str(),
    ] {
        assert_eq!(b(address).unwrap().advertise(), Some(address));
    }
    assert_eq!(
        GroupConfig::builder("g", ["x"], "a")
            .build()
            .unwrap()
            .advertise(),
        None
    );
}
