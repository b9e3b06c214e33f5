//! The partition set: seeding, restoring, reading and copying it (`list.rs`).

use super::*;

#[test]
fn a_group_that_does_not_exist_is_seeded_and_a_newer_list_is_applied_once() {
    let mut sim = Driven::with(4, settings(), configured(3));
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        0,
    );
    r.set = None;
    // (Its copy is of a group since lost: it restores that first; here a fresh one.)
    sim.st.set = SetSync::new(configured(3));
    let (_, actions) = sim.tick(r);
    let [Action::Set(SetOp::Seed { names, .. })] = actions.as_slice() else {
        panic!("{actions:?}");
    };
    assert_eq!(names.len(), 4);
    // While it is seeded, the next tick does not ask again.
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        4,
    );
    let (_, actions) = sim.tick(r);
    assert!(actions.is_empty(), "{actions:?}");
    // The seed is done; the new group takes the list's version.
    let next = sim.st.on_set(SetAnswer::Added(AddReply::Added(4)), sim.now);
    assert_eq!(next, vec![Action::Set(SetOp::Begin { version: 3 })]);
    let next = sim.st.on_set(SetAnswer::Ok(true), sim.now);
    assert_eq!(
        next,
        vec![Action::Set(SetOp::Done {
            version: 3,
            digest: "d".into()
        })]
    );
    assert!(sim.st.on_set(SetAnswer::Ok(true), sim.now).is_empty());
    // Same version, another list: the group's wins (and this replica says so).
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        4,
    );
    r.set = Some(SetInfo {
        digest: "other".into(),
        version: 3,
        ..set(4)
    });
    sim.tick(r);
    assert!(sim.st.list_differs());
}

/// The one step of `actions`, a seed's chunk: its names and the new group's life.
fn seed_step(actions: &[Action]) -> (Vec<String>, String) {
    match actions {
        [Action::Set(SetOp::Seed { names, life, .. })] => (names.clone(), life.clone()),
        other => panic!("expected one seed chunk: {other:?}"),
    }
}

/// Found by the wide bench (200 replicas, 10,000 partitions): a seed chunk that timed
/// out ended the seed, and an unversioned list only seeds, so the group kept half of
/// its set for good. The failed chunk goes again at the next tick, and the seed goes on.
#[test]
fn a_seed_chunk_that_failed_is_sent_again_and_the_seed_goes_on() {
    let many = || Configured {
        names: (0..600).map(|i| format!("p{i}")).collect::<Vec<_>>().into(),
        ..configured(0)
    };
    let mut sim = Driven::with(4, settings(), many());
    sim.st.set = SetSync::new(many());
    let mut lost = sim.reply(SessionReply::Live, Vec::new(), 0);
    lost.set = None;
    let (first, life) = seed_step(&sim.tick(lost.clone()).1);
    let added = |n| SetAnswer::Added(AddReply::Added(n));
    let (second, _) = seed_step(&sim.st.on_set(added(250), sim.now));
    assert_ne!(first, second);
    // The second chunk times out: nothing now, the same chunk at the next tick.
    assert!(sim.st.on_set(SetAnswer::Failed, sim.now).is_empty());
    let (_, actions) = sim.tick(sim.reply(SessionReply::Live, Vec::new(), 250));
    assert_eq!(
        seed_step(&actions),
        (second, life.clone()),
        "the failed chunk goes again"
    );
    // In flight again: the next tick does not send it twice.
    let (_, actions) = sim.tick(sim.reply(SessionReply::Live, Vec::new(), 250));
    assert!(actions.is_empty(), "{actions:?}");
    let (last, _) = seed_step(&sim.st.on_set(added(250), sim.now));
    assert_eq!(last.len(), 100, "the seed goes on, to the last chunk");
    assert!(sim.st.on_set(added(100), sim.now).is_empty());
    // A chunk that failed because Redis lost the group it began: the seed starts over,
    // from the first chunk.
    sim.st.set = SetSync::new(many());
    sim.tick(lost.clone());
    sim.st.on_set(added(250), sim.now);
    assert!(sim.st.on_set(SetAnswer::Failed, sim.now).is_empty());
    let (again, new) = seed_step(&sim.tick(lost).1);
    assert_eq!(again, first, "from the first chunk again");
    assert_ne!(new, life, "a new group");
}

#[test]
fn a_group_redis_lost_is_restored_from_the_copy_and_a_seed_is_overtaken() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    // Redis lost the group: this replica has a copy of it.
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 0)],
        0,
    );
    r.set = None;
    let (_, actions) = sim.tick(r);
    let [Action::Set(SetOp::Restore(RestoreStep::Begin { of, names, .. }))] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert_eq!((of.life.as_str(), of.set_version, of.count), ("life", 1, 4));
    assert_eq!(names.len(), 4, "a small set in one step");
    assert!(sim.st.on_set(SetAnswer::Ok(true), sim.now).is_empty());
    // Another replica (without a copy) seeded it first: within the window, the copy
    // wins.
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 0)],
        0,
    );
    r.set = Some(SetInfo {
        life: "seeded".into(),
        origin: Origin::Seed,
        ..set(4)
    });
    r.grant_wait = LEASE;
    let (_, actions) = sim.tick(r);
    assert!(
        matches!(
            actions.as_slice(),
            [Action::Set(SetOp::Restore(RestoreStep::Begin { .. }))]
        ),
        "{actions:?}"
    );
}

#[test]
fn a_set_read_that_sees_the_set_change_reads_it_again() {
    let mut s = SetSync::new(configured(0));
    let mut r = set(2000);
    r.set_version = 7;
    let op = s.on_tick(Some(&r), Duration::ZERO, "", || "x".into());
    assert_eq!(op, Some(SetOp::Read { offset: 0 }));
    let page =
        |v: u64, from: usize, n: usize| page(v, 0, (from..from + n).map(|i| format!("p{i}")));
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(7, 0, 1000))), 4);
    assert_eq!(next, Some(SetOp::Read { offset: 1000 }));
    // The set changed between the pages: from the start.
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(8, 1000, 1000))), 4);
    assert_eq!(next, Some(SetOp::Read { offset: 0 }));
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(8, 0, 1000))), 4);
    assert_eq!(next, Some(SetOp::Read { offset: 1000 }));
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(8, 1000, 999))), 4);
    assert_eq!(next, None);
    let copy = s.copy().expect("complete");
    assert_eq!((copy.set_version, copy.names.len()), (8, 1999));
    // In a wide group, a page per tick: the next page waits for the next tick (and
    // goes only once), and the last one completes the copy.
    let mut r = r.clone();
    r.set_version = 9;
    let op = s.on_tick(Some(&r), Duration::ZERO, "", || "x".into());
    assert_eq!(op, Some(SetOp::Read { offset: 0 }));
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(9, 0, 1000))), 200);
    assert_eq!(next, None, "the next page waits");
    let op = s.on_tick(Some(&r), Duration::ZERO, "", || "x".into());
    assert_eq!(op, Some(SetOp::Read { offset: 1000 }));
    assert_eq!(s.on_tick(Some(&r), Duration::ZERO, "", || "x".into()), None);
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(9, 1000, 10))), 200);
    assert_eq!(next, None);
    assert_eq!(
        s.copy().map(|c| (c.set_version, c.names.len())),
        Some((9, 1010))
    );
    // Not while the group is being created: its set still grows.
    r.set_version = 10;
    assert_eq!(
        s.on_tick(Some(&r), Duration::from_millis(500), "", || "x".into()),
        None
    );
    let names: Arc<[String]> = Arc::from(Vec::<String>::new());
    drop(names);
}

/// A failover that lost a set change (here the removal of p1) promotes a store whose
/// set version is one lower; its next change (a drain, say) brings it back to the
/// same (life, version) as the lost one, with other names. A copy read in another
/// server lifetime is read again, so the replica never keeps (and never restores
/// after a data loss) the lost set as if it were the group's (simulation seed 13173).
#[test]
fn a_copy_read_in_another_server_lifetime_is_read_again() {
    let mut s = SetSync::new(configured(0));
    let mut r = set(3);
    r.set_version = 8;
    let op = s.on_tick(Some(&r), Duration::ZERO, "run-a:x", || "x".into());
    assert_eq!(op, Some(SetOp::Read { offset: 0 }));
    let lost = page(8, 0, ["p0", "p2"].map(String::from));
    assert_eq!(s.on_answer(SetAnswer::Page(Some(lost)), 2).0, None);
    assert_eq!(
        s.on_tick(Some(&r), Duration::ZERO, "run-a:x", || "x".into()),
        None
    );
    // The promoted server's set: p1 is back, and a drain brought the version to 8.
    let op = s.on_tick(Some(&r), Duration::ZERO, "run-b:y", || "x".into());
    assert_eq!(
        op,
        Some(SetOp::Read { offset: 0 }),
        "read again in the new lifetime"
    );
    let kept = page(8, 0, ["p0", "p1", "p2"].map(String::from));
    assert_eq!(s.on_answer(SetAnswer::Page(Some(kept)), 2).0, None);
    assert_eq!(s.copy().map(|c| c.names.len()), Some(3));
    assert_eq!(
        s.on_tick(Some(&r), Duration::ZERO, "run-b:y", || "x".into()),
        None
    );
}

/// A replica whose configured names are the group's set (the same checksum and count,
/// unweighted) takes them as its copy after the first page; one whose names differ, or
/// a weighted set, reads every page.
#[test]
fn a_set_with_the_configured_names_is_copied_from_the_list_after_one_page() {
    let names: Vec<String> = (0..2500).map(|i| format!("p{i}")).collect();
    let configured = || Configured {
        names: names.clone().into(),
        ..configured(0)
    };
    let sum = crate::store::ops::read::set_checksum(names.iter().map(String::as_str));
    let first = |checksum, weighted| crate::store::protocol::SetPage {
        count: 2500,
        checksum,
        weighted,
        ..page(4, 0, names.iter().take(1000).cloned())
    };
    let read = |checksum, weighted| {
        let mut s = SetSync::new(configured());
        let op = s.on_tick(Some(&set(2500)), Duration::ZERO, "", || "x".into());
        assert_eq!(op, Some(SetOp::Read { offset: 0 }));
        let (next, _) = s.on_answer(SetAnswer::Page(Some(first(checksum, weighted))), 4);
        (s, next)
    };
    let (s, next) = read(Some(sum), false);
    assert_eq!(next, None, "no other page is read");
    let copy = s.copy().expect("complete after one page");
    assert_eq!(copy.names.len(), 2500);
    assert!(
        copy.names
            .iter()
            .zip(&names)
            .all(|((a, w), b)| a == b && *w == 1)
    );
    assert_eq!(copy.set_version, 4);
    assert!(s.difference().is_none());
    for (checksum, weighted, why) in [
        (Some(sum + 1), false, "other names"),
        (None, false, "a group that keeps no checksum"),
        (Some(sum), true, "a weighted set"),
    ] {
        let (s, next) = read(checksum, weighted);
        assert_eq!(next, Some(SetOp::Read { offset: 1000 }), "{why}");
        assert!(s.copy().is_none(), "{why}");
    }
}

#[test]
fn a_configured_list_unlike_the_groups_set_is_reported_with_counts_and_names() {
    let read = |configured: Configured, version: u64, names: &[&str]| {
        let mut s = SetSync::new(configured);
        let op = s.on_tick(Some(&set(names.len())), Duration::ZERO, "", || "x".into());
        assert_eq!(op, Some(SetOp::Read { offset: 0 }));
        assert_eq!(
            s.on_answer(
                SetAnswer::Page(Some(page(1, version, names.iter().copied()))),
                4
            )
            .0,
            None
        );
        s
    };
    // Unversioned, another group's list (p0..p3 against tenant-01..05 and p0).
    let group = [
        "p0",
        "tenant-01",
        "tenant-02",
        "tenant-03",
        "tenant-04",
        "tenant-05",
    ];
    let s = read(configured(0), 0, &group);
    let d = s.difference().expect("the lists differ");
    assert_eq!((d.only_here, d.only_in_group), (3, 5));
    assert_eq!(d.only_here_sample, ["p1", "p2", "p3"]);
    assert_eq!(
        d.only_in_group_sample,
        ["tenant-01", "tenant-02", "tenant-03"]
    );
    assert!(s.list_differs(Some(&set(6))));
    assert_eq!(
        d.to_string(),
        "5 only in the group's set (tenant-01, tenant-02, tenant-03, ...), \
         3 only in this replica's list (p1, p2, p3)"
    );
    // The same names: nothing to report.
    let s = read(configured(0), 0, &["p3", "p2", "p1", "p0"]);
    assert_eq!(s.difference(), None);
    assert!(!s.list_differs(Some(&set(4))));
    // An older versioned list than the group's differs too (it is not applied).
    let s = read(configured(2), 3, &group);
    assert_eq!(s.difference().map(|d| d.group_version), Some(3));
    // A newer one is about to replace the group's set: no difference reported.
    let s = read(configured(4), 3, &group);
    assert_eq!(s.difference(), None);
}

/// A group seeded again from a list while this replica (with a copy of its earlier
/// lifetime) was away, and granting already: this replica brings it to its copy, step
/// by step (begin, the names in chunks, the set listed for the names the copy lacks,
/// their removal, done); a begin refused (an operator changed the seeded group) makes
/// it read the group's set instead, never offer its copy again.
#[test]
fn a_group_seeded_while_this_replica_was_away_is_brought_to_its_copy() {
    let mut s = SetSync::new(configured(0));
    let r = set(4);
    assert_eq!(
        s.on_tick(Some(&r), Duration::ZERO, "", || "x".into()),
        Some(SetOp::Read { offset: 0 })
    );
    let names = ["p0", "p1", "x1"].map(String::from);
    let (next, _) = s.on_answer(SetAnswer::Page(Some(page(1, 0, names.clone()))), 4);
    assert_eq!(next, None);
    let seeded = SetInfo {
        life: "seeded".into(),
        origin: Origin::Seed,
        ..set(4)
    };
    // In its window, a restore takes it over (a_group_redis_lost_is_restored_...).
    let op = s.on_tick(Some(&seeded), LEASE, "", || "x".into());
    assert!(matches!(op, Some(SetOp::Restore(_))), "{op:?}");
    let _ = s.on_answer(SetAnswer::Ok(false), 4);
    // Granting: the copy is adopted.
    let op = s.on_tick(Some(&seeded), Duration::ZERO, "", || "x".into());
    let Some(SetOp::Adopt(Adopt {
        life,
        step: AdoptStep::Begin { seeded: from, .. },
        ..
    })) = op
    else {
        panic!("{op:?}");
    };
    assert_eq!((life.as_str(), from.as_str()), ("life", "seeded"));
    let done = || SetAnswer::Adopted(AdoptReply::Done);
    let (next, changed) = s.on_answer(done(), 4);
    let Some(SetOp::Adopt(Adopt {
        step: AdoptStep::Names(sent),
        ..
    })) = next
    else {
        panic!("{next:?}");
    };
    assert!(changed);
    assert_eq!(sent.len(), 3);
    let (next, _) = s.on_answer(done(), 4);
    assert_eq!(next, Some(SetOp::List { offset: 0 }));
    let listed = ["p0", "p1", "p2", "p3"].map(String::from).to_vec();
    let (next, _) = s.on_answer(SetAnswer::Listed(listed), 4);
    assert_eq!(next, Some(SetOp::List { offset: 4 }));
    let (next, _) = s.on_answer(SetAnswer::Listed(Vec::new()), 4);
    let Some(SetOp::Adopt(Adopt {
        step: AdoptStep::Remove(gone),
        ..
    })) = next
    else {
        panic!("{next:?}");
    };
    assert_eq!(gone, ["p2", "p3"]);
    let (next, _) = s.on_answer(done(), 4);
    assert!(
        matches!(
            next,
            Some(SetOp::Adopt(Adopt {
                step: AdoptStep::Done,
                ..
            }))
        ),
        "{next:?}"
    );
    let (next, changed) = s.on_answer(done(), 4);
    assert_eq!(next, None);
    assert!(changed);

    // Refused at its begin: read the group's set, and do not offer the copy again.
    let op = s.on_tick(Some(&seeded), Duration::ZERO, "", || "x".into());
    assert!(matches!(op, Some(SetOp::Adopt(_))), "{op:?}");
    let refused = SetAnswer::Adopted(AdoptReply::Refused(NotAdopted::Amended));
    let (next, _) = s.on_answer(refused, 4);
    assert_eq!(next, Some(SetOp::Read { offset: 0 }));
    let mine = ["p0", "p1", "p2", "p3"].map(String::from);
    let mut p = page(1, 0, mine);
    p.life = "seeded".into();
    let (next, _) = s.on_answer(SetAnswer::Page(Some(p)), 4);
    assert_eq!(next, None);
    assert_eq!(
        s.on_tick(Some(&seeded), Duration::ZERO, "", || "x".into()),
        None
    );
}
