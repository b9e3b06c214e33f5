//! What both balancing rules (by count, [`crate::balance::plan`], and by weight,
//! [`crate::balance::weighted`]) share over time: hand partitions over only when the
//! rule asked for it on two ticks in a row, then not again for two renew intervals,
//! unless the rebalance is under way and its last hand-over has landed (the next round
//! goes at the first tick that sees it landed and still asks; the tick after a
//! hand-over comes a quarter interval early to see it); after a step in load, not
//! before the group's reports of it are in (a renew interval after the last step
//! message, two after the first), and then, for two more, a first ask goes at once:
//! the step stands in for it; and
//! availability before balance (partitions nobody owns for longer than lease + retry
//! interval, while nobody settles, go to whoever asks, above the cap). And how long a
//! claim may leave free partitions to the members they are preferred on: while
//! partitions have gone without an owner for at most one renew interval.

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug)]
pub(crate) struct Policy {
    /// The group's renew interval: the cooldown after a hand-over is two of them.
    renew_interval: Duration,
    /// Consecutive ticks whose rule asked to hand partitions over.
    shed_streak: u32,
    /// No hand-over before this instant.
    cooldown_until: Option<Instant>,
    /// Since when partitions have been without a live owner while nobody settles.
    unowned_since: Option<Instant>,
    /// Since when partitions have been without a live owner, settling or not.
    unowned_seen: Option<Instant>,
    /// A rebalance is under way: the last tick that asked handed over, and every tick
    /// since has asked again.
    under_way: bool,
    /// The step messages of a burst (steps no more than two renew intervals after its
    /// first): when the first came, when the last came. Dropped two renew intervals
    /// after the hold it sets.
    steps: Option<(Instant, Instant)>,
}

impl Policy {
    /// A policy for a group renewing every `renew_interval`.
    pub(crate) fn new(renew_interval: Duration) -> Self {
        Self {
            renew_interval,
            shed_streak: 0,
            cooldown_until: None,
            unowned_since: None,
            unowned_seen: None,
            under_way: false,
            steps: None,
        }
    }

    /// Takes in one tick's view: partitions without a live owner, whether anyone
    /// settles.
    pub(crate) fn observe(&mut self, unowned: usize, anyone_settling: bool, now: Instant) {
        if unowned > 0 && !anyone_settling {
            self.unowned_since.get_or_insert(now);
        } else {
            self.unowned_since = None;
        }
        if unowned > 0 {
            self.unowned_seen.get_or_insert(now);
        } else {
            self.unowned_seen = None;
        }
    }

    /// Whether claims may still leave free partitions to the members they are
    /// preferred on: no partition has gone without an owner for longer than `window`
    /// (one renew interval), settling or not.
    pub(crate) fn may_leave(&self, window: Duration, now: Instant) -> bool {
        self.unowned_seen
            .is_none_or(|t| now.saturating_duration_since(t) <= window)
    }

    /// Whether partitions have gone without an owner for longer than `patience`.
    pub(crate) fn orphaned(&self, patience: Duration, now: Instant) -> bool {
        self.unowned_since
            .is_some_and(|t| now.saturating_duration_since(t) > patience)
    }

    /// Until when hand-overs wait for the reports of a step burst: a renew interval
    /// after its last step message (every replica writes the weights it measured once
    /// per renew interval, so by then those of a step that hit many partitions at once
    /// are in), at most two after its first (steps that keep coming do not hold
    /// balancing off for ever).
    fn held_until(&self) -> Option<Instant> {
        let ri = self.renew_interval;
        self.steps
            .map(|(first, last)| (last + ri).min(first + 2 * ri))
    }

    /// The rule asks to hand partitions over (`wants`): whether to do it now, after two
    /// ticks in a row and outside the cooldown; doing it starts a cooldown of two
    /// renew intervals. The two ticks and the cooldown are there because the counts lag
    /// behind a hand-over (and against noise). Once a rebalance is under way (a
    /// hand-over, then the rule asking on every tick since), a tick whose view has
    /// caught up with the last hand-over (`landed`: its partitions released and claimed
    /// again, the store counting what the holdings hold) goes on at once: its counts no
    /// longer lag, and the first decision already passed the noise filter.
    ///
    /// After a step in load ([`stepped`](Self::stepped)), nothing is handed over until
    /// the step's weights are in (a rule that runs on half of them moves partitions
    /// the other half sends back); then, for two renew intervals, a tick that asks,
    /// cooled down or landed, goes at once: a step is a cause, not noise, so it stands
    /// in for the first of the two asks (for every replica: the rule names one giver
    /// per round, and the next one may be another).
    pub(crate) fn hand_over(&mut self, wants: bool, landed: bool, now: Instant) -> bool {
        let Some(until) = self.held_until() else {
            return self.ask(wants, landed, false, now);
        };
        if now < until {
            return false;
        }
        // Each replica may be the one the rule asks first (one giver per round), so the
        // step stands in for a first ask for two renew intervals after the hold.
        let after_step = now < until + 2 * self.renew_interval;
        if !after_step {
            self.steps = None;
        }
        self.ask(wants, landed, after_step, now)
    }

    /// One tick's ask outside a hold: two in a row and cooled down, the next round of
    /// a rebalance under way once the last landed, or (`after_step`) the first one.
    fn ask(&mut self, wants: bool, landed: bool, after_step: bool, now: Instant) -> bool {
        self.shed_streak = if wants { self.shed_streak + 1 } else { 0 };
        if !wants {
            self.under_way = false;
        }
        let cooled = self.cooldown_until.is_none_or(|c| now >= c);
        let next_round = wants && self.under_way && landed;
        let stepped = wants && after_step && (cooled || landed);
        if (self.shed_streak >= 2 && cooled) || next_round || stepped {
            self.shed_streak = 0;
            self.cooldown_until = Some(now + 2 * self.renew_interval);
            self.under_way = true;
            return true;
        }
        false
    }

    /// The group said a partition's load stepped (a jump of a damped average, not
    /// drift): hand-overs wait for the burst's reports, then, for two renew intervals,
    /// a tick that asks goes at once (see [`hand_over`](Self::hand_over)).
    pub(crate) fn stepped(&mut self, now: Instant) {
        let ri = self.renew_interval;
        self.steps = Some(match self.steps {
            Some((first, _)) if now.saturating_duration_since(first) <= 2 * ri => (first, now),
            _ => (now, now),
        });
    }

    /// How soon to tick again, sooner than the next regular tick: a quarter of the
    /// renew interval after [`hand_over`](Self::hand_over) said `go` (a tick that sees
    /// it landed sends the next round at once), or when the hold after a step ends;
    /// else `None`. The tick that confirms a first ask is not brought forward: two
    /// ticks a whole interval apart are the filter against noise (with them a quarter
    /// apart, noisy stationary loads moved partitions: `redis_loads.rs`), and noise
    /// does not step.
    pub(crate) fn look_again(&self, go: bool, now: Instant) -> Option<Duration> {
        if go {
            return Some(self.renew_interval / 4);
        }
        self.held_until()
            .filter(|&until| now < until)
            .map(|until| until - now)
    }

    /// The hand-over just allowed made no move (a move budget granted none): no
    /// cooldown, and the next tick that still asks for one hands over at once.
    pub(crate) fn refund(&mut self) {
        self.cooldown_until = None;
        self.shed_streak = 1;
    }

    /// A new session starts from scratch.
    pub(crate) fn reset(&mut self) {
        self.shed_streak = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RI: Duration = Duration::from_millis(300);

    #[test]
    fn a_hand_over_needs_two_ticks_in_a_row_then_waits_out_the_cooldown() {
        let mut p = Policy::new(RI);
        let t0 = Instant::now();
        assert!(!p.hand_over(true, false, t0));
        assert!(!p.hand_over(false, false, t0 + RI), "the streak broke");
        assert!(!p.hand_over(true, false, t0 + 2 * RI));
        assert!(p.hand_over(true, false, t0 + 3 * RI));
        assert!(!p.hand_over(true, false, t0 + 4 * RI));
        assert!(!p.hand_over(true, false, t0 + 4 * RI), "cooling down");
        assert!(p.hand_over(true, false, t0 + 5 * RI));
    }

    #[test]
    fn the_next_round_of_a_rebalance_goes_once_the_last_hand_over_has_landed() {
        let mut p = Policy::new(RI);
        let t0 = Instant::now();
        assert!(!p.hand_over(true, true, t0), "the first needs two ticks");
        assert!(p.hand_over(true, true, t0 + RI));
        assert!(
            !p.hand_over(true, false, t0 + 2 * RI),
            "not landed: the counts may lag, so cooling down"
        );
        assert!(
            p.hand_over(true, true, t0 + 3 * RI),
            "landed and still asking: the next round at once"
        );
        assert!(!p.hand_over(false, true, t0 + 4 * RI), "done");
        assert!(
            !p.hand_over(true, true, t0 + 5 * RI),
            "a new rebalance needs two ticks again"
        );
        assert!(p.hand_over(true, true, t0 + 6 * RI));
    }

    #[test]
    fn the_tick_that_sees_a_round_land_comes_early_the_confirming_one_does_not() {
        let mut p = Policy::new(RI);
        let t0 = Instant::now();
        assert_eq!(p.look_again(false, t0), None, "nothing asked");
        let go = p.hand_over(true, true, t0);
        assert!(!go);
        assert_eq!(
            p.look_again(go, t0),
            None,
            "a first ask is confirmed at the next regular tick: the noise filter"
        );
        let go = p.hand_over(true, true, t0 + RI);
        assert!(go, "two ticks in a row");
        assert_eq!(p.look_again(go, t0 + RI), Some(RI / 4), "see it land");
        let go = p.hand_over(true, false, t0 + RI + RI / 4);
        assert!(!go, "not landed yet");
        assert_eq!(
            p.look_again(go, t0 + RI + RI / 4),
            None,
            "not landed: the regular ticks from here on"
        );
        let go = p.hand_over(false, true, t0 + 2 * RI);
        assert_eq!(p.look_again(go, t0 + 2 * RI), None, "done");
    }

    #[test]
    fn after_a_step_hand_overs_wait_for_its_reports_then_go_at_once() {
        let mut p = Policy::new(RI);
        let t0 = Instant::now();
        p.stepped(t0);
        assert!(
            !p.hand_over(true, true, t0),
            "the step's weights are not in"
        );
        assert_eq!(p.look_again(false, t0), Some(RI), "tick when they are");
        // Another step of the same burst moves the end of the hold.
        p.stepped(t0 + RI / 2);
        assert!(!p.hand_over(true, true, t0 + RI));
        assert_eq!(p.look_again(false, t0 + RI), Some(RI / 2));
        assert!(
            p.hand_over(true, true, t0 + RI + RI / 2),
            "the step stands in for the first ask"
        );
        // Steps that keep coming hold for two renew intervals at most.
        let t1 = t0 + 10 * RI;
        for k in 0..4 {
            p.stepped(t1 + RI / 2 * k);
        }
        assert!(!p.hand_over(true, true, t1 + RI + RI * 3 / 4));
        assert!(p.hand_over(true, true, t1 + 2 * RI), "the hold is over");
        // Another replica's round first (this one's rule asks nothing), then this
        // one's first ask, within two renew intervals of the hold: at once.
        let t2 = t1 + 10 * RI;
        p.stepped(t2);
        assert!(!p.hand_over(false, true, t2 + RI));
        assert_eq!(p.look_again(false, t2 + RI), None, "held no longer");
        assert!(p.hand_over(true, true, t2 + 2 * RI), "the step stands in");
        // Past those two intervals, a first ask waits for the next tick again.
        let t3 = t2 + 10 * RI;
        p.stepped(t3);
        assert!(!p.hand_over(false, true, t3 + RI));
        assert!(!p.hand_over(true, true, t3 + 3 * RI));
        assert_eq!(p.look_again(false, t3 + 3 * RI), None, "no step since");
        assert!(p.hand_over(true, true, t3 + 4 * RI));
    }

    #[test]
    fn after_a_step_a_replica_that_just_handed_over_waits_for_it_to_land() {
        let mut p = Policy::new(RI);
        let t0 = Instant::now();
        assert!(!p.hand_over(true, true, t0));
        assert!(p.hand_over(true, true, t0 + RI));
        p.hand_over(false, true, t0 + RI + RI / 4);
        p.stepped(t0 + RI + RI / 2);
        assert!(
            !p.hand_over(true, false, t0 + 2 * RI + RI / 2),
            "cooling down and its last hand-over not landed"
        );
        p.stepped(t0 + 4 * RI);
        assert!(p.hand_over(true, true, t0 + 5 * RI), "landed");
    }

    #[test]
    fn a_hand_over_that_moved_nothing_waits_for_no_cooldown() {
        let mut p = Policy::new(RI);
        let t0 = Instant::now();
        assert!(!p.hand_over(true, false, t0));
        assert!(p.hand_over(true, false, t0 + RI));
        p.refund();
        assert!(
            p.hand_over(true, false, t0 + 2 * RI),
            "no cooldown, no streak"
        );
        assert!(
            !p.hand_over(true, false, t0 + 3 * RI),
            "this one moved: cooling down"
        );
    }

    #[test]
    fn claims_leave_partitions_to_their_preferred_members_for_one_window_at_most() {
        let mut p = Policy::new(RI);
        let t0 = Instant::now();
        assert!(p.may_leave(RI, t0));
        p.observe(2, true, t0);
        assert!(p.may_leave(RI, t0 + RI), "settling or not");
        assert!(!p.may_leave(RI, t0 + RI * 2));
        p.observe(0, false, t0 + RI * 2);
        assert!(
            p.may_leave(RI, t0 + RI * 3),
            "everything owned: a new window"
        );
    }

    #[test]
    fn orphans_count_only_while_nobody_settles() {
        let mut p = Policy::new(RI);
        let t0 = Instant::now();
        let patience = Duration::from_secs(1);
        p.observe(3, false, t0);
        assert!(!p.orphaned(patience, t0 + patience));
        assert!(p.orphaned(patience, t0 + patience + RI));
        p.observe(3, true, t0 + 2 * patience);
        assert!(
            !p.orphaned(patience, t0 + 3 * patience),
            "the clock restarted"
        );
        p.observe(0, false, t0 + 3 * patience);
        assert!(!p.orphaned(patience, t0 + 9 * patience));
    }
}
