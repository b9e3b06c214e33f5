//! Claims: sizing, batches, resends, orphans, reconciling by term (`claim.rs`).

use super::*;

#[test]
fn a_replica_joining_a_served_group_claims_its_share_without_settling() {
    // A restart in a rolling deploy: the others hold what the leaver freed and more.
    let mut sim = Driven::new(8);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Settling, 0),
            member("b", ReplicaState::Active, 3),
            member("c", ReplicaState::Active, 3),
        ],
        2,
    );
    let (_, actions) = sim.tick(r);
    assert!(!sim.st.settling(sim.now));
    assert_eq!(
        claims(&actions).first().map(|c| c.count),
        Some(2),
        "{actions:?}"
    );

    // Replicas started together (nobody serving yet) still settle.
    let mut sim = Driven::new(8);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Settling, 0),
            member("b", ReplicaState::Settling, 0),
        ],
        8,
    );
    let (_, actions) = sim.tick(r);
    assert!(sim.st.settling(sim.now));
    assert!(claims(&actions).is_empty(), "{actions:?}");
}

#[test]
fn a_settling_replica_claims_nothing_then_claims_its_share_in_batches() {
    // Two replicas, each with a floor of one batch and 100 more.
    let p = 2 * (CLAIM_BATCH + 100);
    let mut sim = Driven::new(p);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Settling, 0),
            member("b", ReplicaState::Active, 0),
        ],
        p,
    );
    let (renewal, actions) = sim.tick(r);
    assert!(matches!(renewal, Renewal::Renewed { .. }));
    assert!(actions.is_empty(), "settling: {actions:?}");
    assert!(sim.st.settling(sim.now));
    sim.advance(LEASE);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Active, 0),
            member("b", ReplicaState::Active, 0),
        ],
        p,
    );
    let (_, actions) = sim.tick(r);
    assert_eq!(
        actions,
        vec![Action::Claim(Claim {
            seq: 1,
            count: CLAIM_BATCH,
            floor: Fence(1),
            room: None,
            fallback: false,
            bound: 0,
            regrant: Vec::new(),
            prefer: Vec::new(),
            only_preferred: false,
            leave_to: Vec::new(),
        })]
    );
    // One batch in flight at a time; the next one as soon as it is back.
    assert!(claims(&sim.st.poll(sim.now)).is_empty());
    let next = sim.claimed(0, CLAIM_BATCH, p - CLAIM_BATCH);
    assert_eq!(
        starts(&next).len(),
        CLAIM_BATCH,
        "a runner per partition won"
    );
    let [c] = claims(&next)[..] else {
        panic!("{next:?}");
    };
    assert_eq!(
        (c.seq, c.count, c.floor),
        (2, CLAIM_BATCH, Fence(100 + CLAIM_BATCH as u64)),
        "up to floor(P/2), with fences above every fence seen"
    );
    let last = sim.claimed(CLAIM_BATCH, 100, p - CLAIM_BATCH - 100);
    assert!(claims(&last).is_empty(), "allowance reached: {last:?}");
}

#[test]
fn a_claim_whose_reply_is_lost_is_sent_again_as_the_same_request() {
    let mut sim = Driven::new(4);
    let actions = sim.settled(&[], 4);
    let [first] = claims(&actions)[..] else {
        panic!("{actions:?}");
    };
    let first = first.clone();
    let token = sim.st.token().to_owned();
    let actions = sim
        .st
        .on_claimed(Err(ClaimFailure::Failed), &[], &[], &token, sim.now);
    assert!(actions.is_empty(), "{actions:?}");
    // Sent again shortly, the same request (the store answers it once).
    let at = sim.st.wake_at().expect("a resend is due");
    assert!(at <= sim.now + RI / 4, "{:?}", at - sim.now);
    sim.now = at;
    let again = sim.st.poll(sim.now);
    assert_eq!(claims(&again), vec![&first]);
    // Its answer starts the runners, anchored at the first send.
    let granted: Vec<_> = (0..4).map(|i| (i, Fence(9), 1)).collect();
    let actions = sim.answer(&granted, &[], 0);
    assert_eq!(starts(&actions), [0, 1, 2, 3]);
}

#[test]
fn nothing_is_claimed_before_the_groups_grant_wait() {
    let mut sim = Driven::new(10);
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Settling, 0)],
        10,
    );
    sim.tick(r);
    sim.advance(LEASE);
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 0)],
        10,
    );
    r.grant_wait = Duration::from_millis(200);
    let (_, actions) = sim.tick(r);
    assert!(actions.is_empty(), "{actions:?}");
    assert_eq!(sim.st.wake_at(), Some(sim.now + Duration::from_millis(200)));
    sim.advance(Duration::from_millis(200));
    let actions = sim.st.poll(sim.now);
    assert_eq!(claims(&actions).first().map(|c| c.count), Some(10));
}

#[test]
fn unowned_partitions_are_claimed_above_the_cap_after_lease_plus_retry() {
    // b is live and active but never claims its share.
    let mut sim = Driven::new(10);
    sim.settled(&[("b", 0)], 10);
    let since = sim.now;
    sim.claimed(0, 5, 5);
    let view = vec![
        member("a", ReplicaState::Active, 5),
        member("b", ReplicaState::Active, 0),
    ];
    loop {
        let r = sim.reply(SessionReply::Live, view.clone(), 5);
        let (_, actions) = sim.tick(r);
        if let Some(c) = claims(&actions).first() {
            assert_eq!(c.count, 5, "every orphan, above the cap");
            break;
        }
        assert!(
            sim.now - since <= LEASE + 3 * RI,
            "never claimed the orphans"
        );
    }
    let waited = sim.now - since;
    assert!(waited > LEASE + RI, "claimed orphans too early: {waited:?}");
}

#[test]
fn orphan_clocks_stop_while_anyone_settles() {
    let mut sim = Driven::new(10);
    sim.settled(&[("b", 0)], 10);
    sim.claimed(0, 5, 5);
    for _ in 0..20 {
        let r = sim.reply(
            SessionReply::Live,
            vec![
                member("a", ReplicaState::Active, 5),
                member("b", ReplicaState::Settling, 0),
            ],
            5,
        );
        let (_, actions) = sim.tick(r);
        assert!(actions.is_empty(), "{actions:?}");
    }
}

#[test]
fn a_count_mismatch_seen_twice_with_nothing_in_flight_reconciles_by_term() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 2, 0);
    // The store says 3: a claim whose reply was lost took one more.
    for expect in [false, true] {
        let r = sim.reply(
            SessionReply::Live,
            vec![member("a", ReplicaState::Active, 3)],
            0,
        );
        let (_, actions) = sim.tick(r);
        assert_eq!(
            actions.contains(&Action::Reconcile { resume: false }),
            expect,
            "{actions:?}"
        );
    }
    // The store holds 0 (this term) and 3, not 1.
    let token = sim.st.token().to_owned();
    let held = vec![(0, Fence(100), 1), (3, Fence(77), 1)];
    let actions = sim.st.on_reconciled(Some(held), &token, sim.now);
    assert_eq!(
        actions,
        vec![
            Action::Revoke(vec![(1, Fence(101))]),
            Action::Claim(Claim {
                seq: 2,
                count: 0,
                floor: Fence(102),
                room: None,
                fallback: false,
                bound: 0,
                regrant: vec![(3, Fence(77))],
                prefer: Vec::new(),
                only_preferred: false,
                leave_to: Vec::new(),
            }),
        ],
        "refuse the term the store no longer lists; take up again what no runner runs"
    );
}

#[test]
fn a_tick_in_another_server_lifetime_keeps_only_the_terms_the_store_lists() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 3, 1);
    let live = |sim: &Driven, lifetime: &str, holdings| TickReply {
        lifetime: lifetime.to_owned(),
        holdings,
        ..sim.reply(
            SessionReply::Live,
            vec![member("a", ReplicaState::Active, 3)],
            1,
        )
    };
    let r = live(&sim, "run1:repl1", None);
    sim.tick(r);
    assert_eq!(sim.next_request().lifetime, "run1:repl1", "ticks name it");
    // A failover: the promoted replica never saw the claim of partition 2.
    let r = live(
        &sim,
        "run2:repl2",
        Some(vec![
            ("p0".into(), Fence(100), 1),
            ("p1".into(), Fence(101), 1),
        ]),
    );
    let held = [(0, Fence(100), 1), (1, Fence(101), 1)];
    let (renewal, actions) =
        sim.st
            .on_tick(Ok(r), &[], Some(&held), sim.now, sim.now, &mut sim.rng);
    assert!(matches!(renewal, Renewal::Renewed { .. }), "{renewal:?}");
    assert_eq!(
        actions.first(),
        Some(&Action::Revoke(vec![(2, Fence(102))])),
        "the lost term is refused before anything else: {actions:?}"
    );
    assert_eq!(sim.next_request().lifetime, "run2:repl2");
}

#[test]
fn no_reconcile_while_a_claim_is_in_flight_whose_answer_it_could_overtake() {
    // Finding 5: a weight change seen with a claim in flight.
    let mut sim = Driven::new(8);
    sim.settled(&[("b", 0)], 8);
    let actions = sim.claimed(0, 2, 6);
    assert_eq!(claims(&actions).len(), 1, "the next claim is in flight");
    let mut r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Active, 2),
            member("b", ReplicaState::Active, 0),
        ],
        6,
    );
    r.set = Some(SetInfo {
        weighted: true,
        total_weight: 9,
        max_weight: 2,
        weights_version: 1,
        ..set(8)
    });
    let (_, actions) = sim.tick(r.clone());
    assert!(
        !actions.contains(&Action::Reconcile { resume: false }),
        "reconciled with a claim in flight: {actions:?}"
    );
    // Once the claim is back (and nothing more to claim), the weights are read.
    sim.claimed(2, 2, 0);
    let (_, actions) = sim.tick(r);
    assert!(
        actions.contains(&Action::Reconcile { resume: false }),
        "{actions:?}"
    );
}

#[test]
fn a_plan_lets_one_claim_take_a_partition_that_does_not_fit_not_every_claim() {
    // Found by the what-if planner's live test: a replica whose weighted plan allows
    // one partition that does not fit into its room kept taking the first free one,
    // claim after claim, until nothing was free (then handed the excess on).
    let mut sim = Driven::new(3);
    let weighted = |mut r: TickReply| {
        r.set = Some(SetInfo {
            weighted: true,
            total_weight: 30,
            max_weight: 10,
            ..set(3)
        });
        r
    };
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Settling, 0),
            member("b", ReplicaState::Active, 0),
        ],
        3,
    );
    sim.tick(weighted(r));
    sim.advance(LEASE);
    let r = sim.reply(
        SessionReply::Live,
        vec![
            member("a", ReplicaState::Active, 0),
            member("b", ReplicaState::Active, 0),
        ],
        3,
    );
    let (_, actions) = sim.tick(weighted(r));
    let first = claims(&actions);
    assert_eq!(first.len(), 1, "{actions:?}");
    assert!(first[0].fallback, "under its share: {:?}", first[0]);
    assert_eq!(first[0].room, Some(15));
    // It took one of weight 10: 5 of room left, which no free partition fits.
    let actions = sim.answer(&[(0, Fence(100), 10)], &[], 2);
    for c in claims(&actions) {
        assert!(
            !c.fallback,
            "a second claim past the room before the next plan: {c:?}"
        );
        assert_eq!(c.room, Some(5));
    }
}
