//! Hand-overs: their cadence, the move budget, removals and drains (`handover.rs`).

use super::*;

#[test]
fn hand_overs_need_two_ticks_in_a_row_and_then_wait_out_a_cooldown() {
    let mut sim = Driven::new(12);
    sim.settled(&[("b", 6)], 6);
    sim.claimed(0, 6, 0);
    // c joined and finished settling: 6 / 6 / 0, floor 4.
    let view = || {
        vec![
            member("a", ReplicaState::Active, 6),
            member("b", ReplicaState::Active, 6),
            member("c", ReplicaState::Active, 0),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, first) = sim.tick(r);
    assert!(
        first.is_empty(),
        "one tick of imbalance is not enough: {first:?}"
    );
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, second) = sim.tick(r);
    let shed_at = sim.now;
    let [
        Action::Stop {
            indices: chosen,
            reason: MoveCause::HandOff,
            to,
            held,
        },
    ] = second.as_slice()
    else {
        panic!("{second:?}");
    };
    assert_eq!(chosen.len(), 2, "a hands over its half of c's floor");
    assert_eq!(
        to.iter().map(|(i, r)| (*i, r.as_str())).collect::<Vec<_>>(),
        chosen.iter().map(|&i| (i, "c")).collect::<Vec<_>>(),
        "both named for c, the member with room"
    );
    assert!(held.is_empty(), "moves are not warm");
    assert_eq!(sim.st.handoffs(), 2);
    // Counts lag behind the hand-over: no second one during the cooldown, even with
    // the imbalance seen twice more.
    while sim.st.wake_at().is_some_and(|w| w < shed_at + 2 * RI) {
        let r = sim.reply(SessionReply::Live, view(), 0);
        let (_, actions) = sim.tick(r);
        assert!(actions.is_empty(), "{actions:?}");
    }
}

#[test]
fn with_a_move_budget_a_hand_over_asks_for_it_first_and_makes_only_what_it_grants() {
    let mut sim = Driven::with(
        12,
        Settings {
            move_budget: Some(1),
            ..settings()
        },
        configured(0),
    );
    sim.settled(&[("b", 6)], 6);
    sim.claimed(0, 6, 0);
    let view = || {
        vec![
            member("a", ReplicaState::Active, 6),
            member("b", ReplicaState::Active, 6),
            member("c", ReplicaState::Active, 0),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    sim.tick(r);
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, second) = sim.tick(r);
    let [
        Action::Budget {
            indices,
            want: 2,
            budget: 1,
        },
    ] = second.as_slice()
    else {
        panic!("the hand-over asks the budget first: {second:?}");
    };
    assert_eq!(indices.len(), 2, "for both of its half of c's floor");
    assert_eq!(
        sim.st.handoffs(),
        0,
        "nothing handed over before the answer"
    );
    // The budget grants one: one is handed over, the other waits for a later tick.
    let stops = sim.st.on_budget(indices.clone(), 1, sim.now);
    let [
        Action::Stop {
            indices: chosen,
            reason: MoveCause::HandOff,
            ..
        },
    ] = stops.as_slice()
    else {
        panic!("{stops:?}");
    };
    assert_eq!(chosen, &indices[..1]);
    assert_eq!(sim.st.handoffs(), 1);
    // A budget used up (or a failed take) hands nothing over, and the rule asks again
    // at the very next tick (the next window), with no cooldown.
    assert!(
        sim.st
            .on_budget(indices[1..].to_vec(), 0, sim.now)
            .is_empty()
    );
    assert_eq!(sim.st.handoffs(), 1);
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, next) = sim.tick(r);
    assert!(
        matches!(next.as_slice(), [Action::Budget { budget: 1, .. }]),
        "asks the budget again at once: {next:?}"
    );
}

#[test]
fn a_budget_by_weight_asks_for_the_weights_and_hands_over_what_fits() {
    let mut sim = Driven::with(
        12,
        Settings {
            move_budget: Some(4),
            budget_by_weight: true,
            ..settings()
        },
        configured(0),
    );
    sim.settled(&[("b", 6)], 6);
    let weights = [5, 1, 1, 1, 3, 1];
    let granted: Vec<(usize, Fence, u64)> = (0..6)
        .map(|i| (i, Fence(100 + i as u64), weights[i]))
        .collect();
    sim.answer(&granted, &[], 0);
    let view = || {
        vec![
            member("a", ReplicaState::Active, 6),
            member("b", ReplicaState::Active, 6),
            member("c", ReplicaState::Active, 0),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    sim.tick(r);
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, second) = sim.tick(r);
    let [
        Action::Budget {
            indices,
            want,
            budget: 4,
        },
    ] = second.as_slice()
    else {
        panic!("the hand-over asks the budget first: {second:?}");
    };
    let asked: u64 = indices.iter().map(|&i| weights[i]).sum();
    assert_eq!(*want as u64, asked, "the weights of {indices:?}");
    let stopped = |actions: Vec<Action>| -> Vec<usize> {
        match actions.as_slice() {
            [] => Vec::new(),
            [Action::Stop { indices, .. }] => indices.clone(),
            other => panic!("{other:?}"),
        }
    };
    // 1 + 1 fit into 2, the third does not.
    assert_eq!(stopped(sim.st.on_budget(vec![1, 2, 3], 2, sim.now)), [1, 2]);
    // 3 does not fit into 2: nothing moves.
    assert_eq!(
        stopped(sim.st.on_budget(vec![4, 3], 2, sim.now)),
        Vec::<usize>::new()
    );
    // A partition heavier than the whole budget moves alone once granted all of it.
    assert_eq!(
        stopped(sim.st.on_budget(vec![0, 3], 3, sim.now)),
        Vec::<usize>::new()
    );
    assert_eq!(stopped(sim.st.on_budget(vec![0, 3], 4, sim.now)), [0]);
    assert_eq!(sim.st.handoffs(), 3);
}

#[test]
fn a_removed_partition_is_handed_back_and_a_drained_replica_hands_everything_over() {
    let mut sim = Driven::new(6);
    sim.settled(&[("b", 3)], 3);
    sim.claimed(0, 3, 0);
    let view = || {
        vec![
            member("a", ReplicaState::Active, 3),
            member("b", ReplicaState::Active, 3),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, actions) = sim.tick_revoking(r, &[1]);
    assert_eq!(
        actions,
        vec![Action::Stop {
            indices: vec![1],
            reason: MoveCause::Removal,
            to: BTreeMap::new(),
            held: BTreeMap::new(),
        }]
    );
    let mut r = sim.reply(SessionReply::Live, view(), 0);
    r.drained = true;
    let (_, actions) = sim.tick(r);
    let [
        Action::Stop {
            indices, reason, ..
        },
    ] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert_eq!(*reason, MoveCause::Drain);
    assert_eq!(indices.len(), 2, "the two it still serves");
    assert_eq!(sim.next_request().state, ReplicaState::Draining);
    // Undrained: back to the rule.
    let r = sim.reply(SessionReply::Live, view(), 0);
    sim.st
        .on_tick(Ok(r), &[], None, sim.now, sim.now, &mut sim.rng);
    assert!(!sim.st.drained());
    assert_eq!(sim.next_request().state, ReplicaState::Active);
}

#[test]
fn a_drained_replica_that_resumes_regrants_nothing_it_would_keep() {
    // Finding 8: the store gives a drained replica's regrants back.
    let mut sim = Driven::new(4);
    let mut r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Away, 2)],
        0,
    );
    r.resumed = Some("a:parked".into());
    r.drained = true;
    sim.tick(r);
    let held = vec![(0, Fence(5), 1), (1, Fence(6), 1)];
    let actions = sim.st.on_reconciled(Some(held), "a:parked", sim.now);
    let [c] = claims(&actions)[..] else {
        panic!("{actions:?}");
    };
    assert_eq!(c.regrant.len(), 2, "sent for the store to give back");
    let next = sim.answer(&[], &[0, 1], 0);
    assert!(starts(&next).is_empty());
    assert_eq!(sim.st.holdings().held_count(), 0);
    assert!(claims(&next).is_empty(), "a drained replica claims nothing");
}

/// A replica with warm moves that hands two partitions over to `c`: the stop, and the
/// terms held (index, fence) in order.
fn warm_hand_over(sim: &mut Driven) -> (Vec<usize>, Vec<(usize, Fence)>) {
    sim.settled(&[("b", 6)], 6);
    sim.claimed(0, 6, 0);
    let view = || {
        vec![
            member("a", ReplicaState::Active, 6),
            member("b", ReplicaState::Active, 6),
            member("c", ReplicaState::Active, 0),
        ]
    };
    let r = sim.reply(SessionReply::Live, view(), 0);
    sim.tick(r);
    let r = sim.reply(SessionReply::Live, view(), 0);
    let (_, actions) = sim.tick(r);
    let [
        Action::Stop {
            indices,
            reason: MoveCause::HandOff,
            to,
            held,
        },
    ] = actions.as_slice()
    else {
        panic!("{actions:?}");
    };
    assert!(to.values().all(|r| r == "c"), "{to:?}");
    let held: Vec<(usize, Fence)> = held
        .iter()
        .map(|(&i, h)| {
            assert_eq!(h.within, WARM, "the receiver is told how long it has");
            (i, h.fence)
        })
        .collect();
    (indices.clone(), held)
}

const WARM: Duration = Duration::from_millis(100);

fn warm() -> Driven {
    Driven::with(
        12,
        Settings {
            prepare_moves: Some(WARM),
            ..settings()
        },
        configured(0),
    )
}

fn let_goes(actions: &[Action]) -> Vec<(usize, Fence, bool)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::LetGo {
                index,
                fence,
                ready,
            } => Some((index, fence, ready)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_warm_move_holds_its_term_until_the_receiver_is_ready_or_the_wait_is_over() {
    let mut sim = warm();
    let (stopped, held) = warm_hand_over(&mut sim);
    assert_eq!(
        held.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        stopped,
        "every term named for a receiver is held"
    );
    let [(first, f1), (second, f2)] = held[..] else {
        panic!("{held:?}");
    };
    assert_eq!(f1, Fence(100 + first as u64));
    let deadline = sim.now + WARM;
    assert!(
        sim.st.wake_at().is_some_and(|w| w <= deadline),
        "the machine wakes for the wait"
    );
    // Answers for another term, from another replica, are not the receiver's.
    assert!(sim.st.on_ready(first, Fence(1), "c").is_empty());
    assert!(sim.st.on_ready(first, f1, "b").is_empty());
    assert_eq!(
        let_goes(&sim.st.on_ready(first, f1, "c")),
        [(first, f1, true)],
        "ready: let go, named for it"
    );
    assert!(sim.st.on_ready(first, f1, "c").is_empty(), "answered once");
    // Before the deadline nothing is let go; at it, the other term goes to anyone.
    assert!(let_goes(&sim.st.poll(deadline - Duration::from_millis(1))).is_empty());
    let actions = sim.st.poll(deadline);
    assert_eq!(
        actions.first(),
        Some(&Action::LetGo {
            index: second,
            fence: f2,
            ready: false
        }),
        "let go before anything else of the poll: {actions:?}"
    );
    assert!(let_goes(&sim.st.poll(deadline)).is_empty(), "once");
    assert!(sim.st.on_ready(second, f2, "c").is_empty(), "too late");
    assert_ne!(sim.st.wake_at(), Some(deadline));
}

#[test]
fn a_warm_moves_hold_ends_with_its_term() {
    let mut sim = warm();
    let (_, held) = warm_hand_over(&mut sim);
    let deadline = sim.now + WARM;
    // One term's runner ends before its receiver answers (its session was lost, say):
    // nothing waits for it any more; the other's wait goes on.
    let (i, f) = held[0];
    sim.st.on_stopped(i, Fence(f.0 - 1), sim.now);
    sim.st.on_stopped(i, f, sim.now);
    assert!(
        sim.st.on_ready(i, f, "c").is_empty(),
        "an answer after the end"
    );
    assert_eq!(
        let_goes(&sim.st.poll(deadline)),
        [(held[1].0, held[1].1, false)]
    );
}
