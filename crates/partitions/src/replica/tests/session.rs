//! The group session: lost, refused, resumed; members expiring (`session.rs`, `tick.rs`).

use super::*;

#[test]
fn a_lost_session_refuses_its_electors_and_starts_a_new_one_that_settles_briefly() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 4, 0);
    let old = sim.st.token().to_owned();
    sim.advance(RI);
    let r = sim.reply(SessionReply::Lost, vec![], 4);
    let (renewal, actions) = sim.tick(r);
    assert!(matches!(renewal, Renewal::Refused));
    assert_eq!(
        actions,
        vec![Action::Revoke(
            (0..4).map(|i| (i, Fence(100 + i as u64))).collect()
        )],
        "its terms are refused for good: a failover may hand the same session back"
    );
    assert_ne!(sim.st.token(), old, "a lost session is never renewed again");
    assert_eq!(sim.st.wake_at(), Some(sim.now), "rejoin at once");
    let req = sim.next_request();
    assert!(req.join);
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        4,
    );
    sim.st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert!(sim.st.settling(sim.now + RI - Duration::from_millis(1)));
    assert!(
        !sim.st.settling(sim.now + RI),
        "a rejoin settles one renew interval"
    );
    // The old runners still run until they are refused, but hold nothing.
    assert_eq!(sim.st.holdings().runners(), 4);
    assert_eq!(sim.st.holdings().held_count(), 0);
}

#[test]
fn a_replica_refused_by_the_group_claims_nothing_and_asks_again_each_tick() {
    let mut sim = Driven::new(4);
    let r = sim.reply(
        SessionReply::Refused(Conflict::DuplicateReplica),
        vec![member("a", ReplicaState::Active, 4)],
        0,
    );
    let (renewal, actions) = sim.tick(r);
    assert!(matches!(renewal, Renewal::Refused));
    assert!(actions.is_empty());
    assert_eq!(sim.st.conflict(), Some(Conflict::DuplicateReplica));
    assert!(sim.next_request().join);
}

#[test]
fn a_resumed_session_takes_its_token_and_regrants_what_it_holds_by_term() {
    let mut sim = Driven::new(300);
    let old = "a:parked".to_owned();
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Away, 150)],
        0,
    );
    r.resumed = Some(old.clone());
    let (renewal, actions) = sim.tick(r);
    assert!(matches!(renewal, Renewal::Renewed { token } if token == old));
    assert_eq!(sim.st.token(), old, "this process holds that session now");
    assert!(
        !sim.st.settling(sim.now),
        "nothing to settle: it holds its share"
    );
    assert_eq!(actions, vec![Action::Reconcile { resume: true }]);
    let held: Vec<_> = (0..150).map(|i| (i, Fence(50 + i as u64), 1)).collect();
    let actions = sim.st.on_reconciled(Some(held), &old, sim.now);
    let [c] = claims(&actions)[..] else {
        panic!("{actions:?}");
    };
    assert_eq!(c.regrant.len(), CLAIM_BATCH);
    assert_eq!(c.regrant[0], (0, Fence(50)), "named by term");
    // The store gave 1 back (removed meanwhile), regranted the rest of the batch.
    let granted: Vec<_> = (0..CLAIM_BATCH)
        .filter(|&i| i != 1)
        .map(|i| (i, Fence(1000), 1))
        .collect();
    let next = sim.answer(&granted, &[1], 0);
    assert_eq!(starts(&next).len(), CLAIM_BATCH - 1);
    assert_eq!(sim.st.holdings().held(1), None, "given back");
    let [c] = claims(&next)[..] else {
        panic!("{next:?}");
    };
    assert_eq!(c.regrant.len(), CLAIM_BATCH, "the next batch at once");
    // A reconcile never runs while regrants are in flight.
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 149)],
        0,
    );
    let (_, actions) = sim.tick(r);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Reconcile { .. })),
        "{actions:?}"
    );
}

#[test]
fn a_dying_member_is_looked_at_right_after_its_session_expires() {
    let mut sim = Driven::new(4);
    sim.settled(&[("b", 2)], 2);
    let mut m = member("b", ReplicaState::Active, 2);
    m.left = Duration::from_millis(40);
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 0), m],
        2,
    );
    sim.tick(r);
    assert_eq!(
        sim.st.wake_at(),
        Some(sim.now + Duration::from_millis(40) + cadence::QUICK)
    );
}
