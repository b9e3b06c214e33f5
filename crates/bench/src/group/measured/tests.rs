use super::*;

fn owned(replica: &str, p: &str, at_us: u64) -> Logged {
    Logged {
        replica: replica.into(),
        incarnation: 1,
        event: PartitionEvent::Owned {
            partition: p.into(),
            fence: 1,
            at_us,
            handed_over: None,
            handed_over_bytes: None,
            no_hand_off: None,
            no_hand_off_cause: None,
        },
    }
}

fn released(replica: &str, p: &str, at_us: u64) -> Logged {
    Logged {
        replica: replica.into(),
        incarnation: 1,
        event: PartitionEvent::Released {
            partition: p.into(),
            fence: 1,
            at_us,
            writes: 0,
            write_errors: 0,
            reason: None,
            sent_at_us: None,
            handed_off: None,
            hand_off_error: None,
            successor: None,
        },
    }
}

#[test]
fn placements_follow_the_lines_by_their_dates() {
    // Read out of order: b's claim of p0001 is dated before a's release of it.
    let log = [
        owned("a", "p0000", 10),
        owned("a", "p0001", 10),
        owned("b", "p0001", 45),
        released("a", "p0001", 40),
        owned("b", "p0002", 50),
    ];
    let at = placements(&log, &[5, 10, 42, 45, 100]);
    let holders = |i: usize, p: usize| at[i].get(&p).cloned().unwrap_or_default();
    assert!(at[0].is_empty());
    assert_eq!(holders(1, 1), ["a"]);
    assert!(holders(2, 1).is_empty(), "released, not yet claimed");
    assert_eq!(holders(3, 1), ["b"]);
    assert_eq!(at[4].len(), 3);
}

#[test]
fn percentiles_over_time_are_nearest_rank() {
    let values: Vec<f64> = (1..=100).map(f64::from).collect();
    let o = OverTime::of(&values);
    assert_eq!((o.p50, o.p95, o.max), (50.0, 95.0, 100.0));
    assert_eq!(OverTime::of(&[]), OverTime::default());
}

#[test]
fn recovery_is_the_first_sample_within_the_target_after_each_shift() {
    let s = 1_000_000;
    let times: Vec<u64> = (0..10).map(|i| i * s).collect();
    let ratios = [1.0, 1.0, 1.8, 1.5, 1.2, 1.0, 1.9, 1.9, 1.9, 1.9];
    assert_eq!(
        recovery(&times, &ratios, &[2 * s, 6 * s]),
        [Some(2.0), None]
    );
}

#[test]
fn hand_offs_are_the_ledgers_handoff_entries_and_self_moves_go_back_to_their_giver() {
    let entry = |cause, from: Option<&'static str>, to: &'static str, ms: Option<u64>| Entry {
        cause,
        from,
        to,
        unowned: ms.map(Duration::from_millis),
        started_ms: 0,
    };
    let entries = [
        entry(MoveCause::New, None, "a", None),
        entry(MoveCause::HandOff, Some("a"), "b", Some(4)),
        entry(MoveCause::HandOff, Some("b"), "b", Some(2000)),
        entry(MoveCause::Expiry, Some("b"), "b", Some(1500)),
        entry(MoveCause::Leave, Some("b"), "c", Some(1)),
        entry(MoveCause::HandOff, Some("c"), "a", Some(10)),
    ];
    let (h, self_moves) = hand_off_figures(&entries);
    assert_eq!(h.count, 3);
    // Only a hand-off back to its giver is a self-move (not an expiry's re-claim).
    assert_eq!(self_moves, 1);
    assert_eq!(
        h.unowned_ms,
        Tail {
            p50: 10.0,
            p99: 2000.0,
            max: 2000.0
        }
    );
    assert_eq!(hand_off_figures(&[]), (PlannedHandOffs::default(), 0));
    let values: Vec<f64> = (1..=200).map(f64::from).collect();
    let t = Tail::of(&values);
    assert_eq!((t.p50, t.p99, t.max), (100.0, 198.0, 200.0));
}

#[test]
fn moves_after_an_instant_count_self_moves_but_not_first_owners() {
    let at = |cause, from: Option<&'static str>, to: &'static str, started_ms| Entry {
        cause,
        from,
        to,
        unowned: None,
        started_ms,
    };
    let entries = [
        at(MoveCause::New, None, "a", 70_000),
        at(MoveCause::HandOff, Some("a"), "b", 59_999),
        at(MoveCause::HandOff, Some("b"), "b", 60_000),
        at(MoveCause::Expiry, Some("b"), "c", 61_000),
        at(MoveCause::HandOff, Some("c"), "a", 90_001),
    ];
    assert_eq!(moves_between(&entries, 60_000, 90_000), 2);
    assert_eq!(moves_between(&entries, 0, u64::MAX), 4);
    assert_eq!(moves_between(&entries, 100_000, 90_000), 0);
}

#[test]
fn catch_ups_split_first_owners_from_moves() {
    let backlog = |p: &str, ms: u64, source: &str| Logged {
        replica: "a".into(),
        incarnation: 1,
        event: PartitionEvent::Backlog {
            partition: p.into(),
            fence: 1,
            backlog_ms: ms,
            source: source.into(),
            at_us: 0,
        },
    };
    let log = [
        backlog("p0000", 3000, "origin"),
        backlog("p0001", 2900, "origin"),
        owned("a", "p0000", 10),
        backlog("p0000", 12, "handed_over"),
        backlog("p0001", 1800, "handed_over"),
        backlog("p0001", 500, "committed"),
    ];
    let c = CatchUps::of(&log);
    assert_eq!(
        c.terms,
        BTreeMap::from([
            ("committed".to_owned(), 1),
            ("handed_over".to_owned(), 2),
            ("origin".to_owned(), 2)
        ])
    );
    assert_eq!((c.backlog_ms.p50, c.backlog_ms.max), (500.0, 1800.0));
    assert_eq!(
        (c.first_backlog_ms.p50, c.first_backlog_ms.max),
        (2900.0, 3000.0)
    );
}

#[test]
fn moves_are_counted_per_minute_of_the_window() {
    let m = 60_000_000;
    let log = [
        owned("a", "p0000", 0),
        owned("b", "p0000", 10),
        owned("a", "p0000", m),
        owned("b", "p0000", m + 1),
        owned("a", "p0000", 2 * m + 5),
    ];
    assert_eq!(by_minute(&log, 5, 2 * m + 10), [3, 1, 0]);
}
