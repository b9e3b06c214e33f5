//! Leaving: graceful and sticky (`leave.rs`).

use super::*;

#[test]
fn a_leave_announces_then_stops_everything_then_ends_the_session() {
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 4, 0);
    assert!(sim.st.on_shutdown(sim.now).is_empty());
    let req = sim.next_request();
    assert_eq!(req.state, ReplicaState::Leaving);
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Leaving, 4)],
        0,
    );
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert_eq!(
        actions,
        vec![Action::StopAll { keep: false }],
        "and no claim while leaving"
    );
    for i in 0..3 {
        assert!(
            sim.st
                .on_stopped(i, Fence(100 + i as u64), sim.now)
                .is_empty()
        );
    }
    assert_eq!(sim.st.on_stopped(3, Fence(103), sim.now), vec![Action::End]);
}

#[test]
fn a_leave_whose_session_is_lost_meanwhile_still_ends() {
    // Found by the simulation (seed 9351): the last runner had ended when the reply
    // saying the session was lost came back.
    let mut sim = Driven::new(4);
    sim.settled(&[], 4);
    sim.claimed(0, 1, 3);
    sim.st.on_shutdown(sim.now);
    sim.next_request();
    let token = sim.st.token().to_owned();
    // The claim in flight fails; the announce tick finds the session lost.
    sim.st
        .on_claimed(Err(ClaimFailure::Failed), &[], &[], &token, sim.now);
    assert!(sim.st.on_stopped(0, Fence(100), sim.now).is_empty());
    let r = sim.reply(SessionReply::Lost, vec![], 4);
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert!(actions.contains(&Action::End), "{actions:?}");
}

#[test]
fn a_claim_that_comes_back_after_the_leave_began_is_left_to_the_end_of_the_session() {
    let mut sim = Driven::new(4);
    let actions = sim.settled(&[], 4);
    assert_eq!(claims(&actions).len(), 1);
    sim.st.on_shutdown(sim.now);
    sim.next_request();
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Leaving, 0)],
        4,
    );
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert_eq!(actions, vec![Action::StopAll { keep: false }]);
    // The claim sent before the shutdown comes back now: no runner starts, and the
    // leave ends the session (which frees them).
    assert_eq!(sim.claimed(0, 4, 0), vec![Action::End]);
}

fn sticky() -> Driven {
    Driven::with(
        4,
        Settings {
            rejoin_grace: Some(Duration::from_secs(5)),
            ..settings()
        },
        configured(0),
    )
}

#[test]
fn a_sticky_leave_keeps_every_partition_and_parks_the_session_for_the_grace() {
    let mut sim = sticky();
    sim.settled(&[], 4);
    sim.claimed(0, 4, 0);
    assert_eq!(
        sim.st.on_shutdown(sim.now),
        vec![Action::StopAll { keep: true }]
    );
    assert!(sim.st.keeps_leases(), "the runners' releases are refused");
    // Ticks go on (state active) while the runners finish their grace.
    let req = sim.next_request();
    assert_eq!((req.state, req.ttl), (ReplicaState::Active, LEASE));
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 4)],
        0,
    );
    sim.st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    for i in 0..4 {
        assert!(
            sim.st
                .on_stopped(i, Fence(100 + i as u64), sim.now)
                .is_empty(),
            "no End: the session stays"
        );
    }
    let req = sim.next_request();
    assert_eq!(
        (req.state, req.ttl),
        (ReplicaState::Away, Duration::from_secs(5)),
        "parked for the grace"
    );
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Away, 4)],
        0,
    );
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert_eq!(actions, vec![Action::Exit]);
    assert_eq!(sim.st.wake_at(), None, "nothing left to do");
}

#[test]
fn a_sticky_leave_waits_for_its_own_parking_tick() {
    // Found by the simulation (seed 940): the reply of a tick sent before the runners
    // had ended was taken for the parking tick's, and the session was never parked.
    let mut sim = sticky();
    sim.settled(&[], 4);
    sim.claimed(0, 1, 0);
    sim.st.on_shutdown(sim.now);
    let before = sim.next_request();
    assert_eq!(before.state, ReplicaState::Active);
    // The last runner ends with that tick in flight.
    assert!(sim.st.on_stopped(0, Fence(100), sim.now).is_empty());
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 1)],
        0,
    );
    let (_, actions) = sim
        .st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert!(!actions.contains(&Action::Exit), "{actions:?}");
    assert_eq!(sim.next_request().state, ReplicaState::Away);
}

#[test]
fn a_sticky_leave_whose_session_was_lost_exits_without_parking() {
    // Found by the simulation (seed 2674): shutdown never returned.
    let mut sim = sticky();
    sim.settled(&[], 4);
    sim.claimed(0, 1, 3);
    sim.st.on_shutdown(sim.now);
    sim.next_request();
    let r = sim.reply(SessionReply::Lost, vec![], 4);
    sim.st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert_eq!(
        sim.st.on_stopped(0, Fence(100), sim.now),
        vec![Action::Exit]
    );
}
