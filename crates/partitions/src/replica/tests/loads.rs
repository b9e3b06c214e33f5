//! Weights from load reports: when they are sampled and written, and when the group is
//! told of a step (`loads.rs`).

use super::*;
use crate::config::LoadDamping;

fn loads() -> Driven {
    Driven::with(
        4,
        Settings {
            // No warm-up: the first report counts.
            load_damping: Some(LoadDamping::default().warm_up(Duration::ZERO)),
            ..settings()
        },
        configured(0),
    )
}

fn samples(actions: &[Action]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, Action::SampleLoads))
        .count()
}

#[test]
fn load_weights_are_sampled_after_a_tick_once_per_interval_with_one_write_in_flight() {
    let mut sim = loads();
    let decided = sim.settled(&[], 4);
    assert_eq!(
        decided.last(),
        Some(&Action::SampleLoads),
        "sampled last, after a member's tick: {decided:?}"
    );
    sim.claimed(0, 2, 2);
    let (t0, t1) = ((0, Fence(100)), (1, Fence(101)));
    sim.advance(RI);
    let written_at = sim.now;
    // A step: weight 1, reported 50 (a stale term's report and one the holdings do not
    // hold are ignored).
    let report = sim.st.on_samples(
        &[
            (t0, Some(50.0)),
            (t1, None),
            ((0, Fence(99)), Some(9.0)),
            ((3, Fence(7)), Some(9.0)),
        ],
        sim.now,
    );
    assert_eq!(report, [Action::Report(vec![(t0, 50)])]);
    // In flight: the next tick samples nothing, and a sample changes nothing.
    let r = sim.reply(
        SessionReply::Live,
        vec![member("a", ReplicaState::Active, 2)],
        2,
    );
    let (_, actions) = sim.tick(r);
    assert_eq!(samples(&actions), 0, "a write in flight: {actions:?}");
    assert!(sim.st.on_samples(&[(t0, Some(80.0))], sim.now).is_empty());
    // Written: the holdings have the weight, and the group is told of the step at once.
    let told = sim.st.on_reported(&[(t0, 50)], Some(&[true]));
    assert_eq!(told, [Action::LoadStep]);
    assert_eq!(sim.st.holdings().held(0).unwrap().weight, 50);
    // One write per renew interval: the first tick a full interval after the write
    // samples again.
    loop {
        let a = member("a", ReplicaState::Active, 51);
        let r = sim.reply(SessionReply::Live, vec![a], 2);
        let (_, actions) = sim.tick(r);
        if sim.now >= written_at + RI {
            assert_eq!(samples(&actions), 1, "{actions:?}");
            break;
        }
        assert_eq!(samples(&actions), 0, "{actions:?}");
    }
}

#[test]
fn a_failed_or_refused_load_write_changes_no_weight_and_tells_nobody() {
    let mut sim = loads();
    sim.settled(&[], 4);
    sim.claimed(0, 1, 3);
    let t0 = (0, Fence(100));
    sim.advance(RI);
    let report = sim.st.on_samples(&[(t0, Some(50.0))], sim.now);
    assert_eq!(report, [Action::Report(vec![(t0, 50)])]);
    assert!(sim.st.on_reported(&[(t0, 50)], None).is_empty(), "failed");
    assert_eq!(sim.st.holdings().held(0).unwrap().weight, 1);
    // Tried again an interval later; the store refuses it (not this session's term).
    sim.advance(RI);
    let report = sim.st.on_samples(&[(t0, Some(50.0))], sim.now);
    assert_eq!(report, [Action::Report(vec![(t0, 50)])]);
    assert!(sim.st.on_reported(&[(t0, 50)], Some(&[false])).is_empty());
    assert_eq!(sim.st.holdings().held(0).unwrap().weight, 1);
}

#[test]
fn a_terms_average_starts_with_its_elector_and_ends_with_it() {
    let mut sim = loads();
    sim.settled(&[], 4);
    sim.claimed(0, 1, 3);
    let t0 = (0, Fence(100));
    sim.advance(RI);
    // Its runner ended: a report still sampled (the holdings have no term) writes nothing.
    sim.st.on_stopped(0, Fence(100), sim.now);
    assert!(sim.st.on_samples(&[(t0, Some(50.0))], sim.now).is_empty());
    // Without load reports, nothing is ever sampled.
    let mut plain = Driven::new(4);
    assert_eq!(samples(&plain.settled(&[], 4)), 0);
    assert!(
        plain
            .st
            .on_samples(&[(t0, Some(50.0))], plain.now)
            .is_empty()
    );
}
