//! What both balancing rules (by count, [`crate::balance::plan`], and by weight,
//! [`crate::balance::weighted`]) share over time: hand partitions over only when the
//! rule asked for it on two ticks in a row, then not again for two renew intervals,
//! unless the rebalance is under way and its last hand-over has landed (the next round
//! goes at the first tick that sees it landed and still asks; the tick after a
//! hand-over comes a quarter interval early to see it, as does the tick confirming a
//! first ask made just after a step in load); and
//! availability before balance (partitions nobody owns for longer than lease + retry
//! interval, while nobody settles, go to whoever asks, above the cap). And how long a
//! claim may leave free partitions to the members they are preferred on: while
//! partitions have gone without an owner for at most one renew interval.

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Default)]
pub(crate) struct Policy {
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
    /// When the group last said a partition's load stepped (a jump, not drift).
    stepped_at: Option<Instant>,
}

impl Policy {
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

    /// The rule asks to hand partitions over (`wants`): whether to do it now, after two
    /// ticks in a row and outside the cooldown; doing it starts a cooldown of
    /// `cooldown`. The two ticks and the cooldown are there because the counts lag
    /// behind a hand-over (and against noise). Once a rebalance is under way (a
    /// hand-over, then the rule asking on every tick since), a tick whose view has
    /// caught up with the last hand-over (`landed`: its partitions released and claimed
    /// again, the store counting what the ledger holds) goes on at once: its counts no
    /// longer lag, and the first decision already passed the noise filter.
    pub(crate) fn hand_over(
        &mut self,
        wants: bool,
        cooldown: Duration,
        landed: bool,
        now: Instant,
    ) -> bool {
        self.shed_streak = if wants { self.shed_streak + 1 } else { 0 };
        if !wants {
            self.under_way = false;
        }
        let cooled = self.cooldown_until.is_none_or(|c| now >= c);
        let next_round = wants && self.under_way && landed;
        if (self.shed_streak >= 2 && cooled) || next_round {
            self.shed_streak = 0;
            self.cooldown_until = Some(now + cooldown);
            self.under_way = true;
            return true;
        }
        false
    }

    /// The group said a partition's load stepped (a jump of a damped average, not
    /// drift): for two renew intervals, a first ask to hand over is confirmed early
    /// (see [`look_again`](Self::look_again)).
    pub(crate) fn stepped(&mut self, now: Instant) {
        self.stepped_at = Some(now);
    }

    /// How soon to tick again, sooner than the next regular tick, after
    /// [`hand_over`](Self::hand_over) said `go`: a quarter of the renew interval when a
    /// hand-over just went (a tick that sees it landed sends the next round at once), or
    /// when a first ask came within two renew intervals of a step in load (a step is a
    /// cause, not noise); else `None`. Without a step, the tick that confirms a first
    /// ask is not brought forward: two ticks a whole interval apart are the filter
    /// against noise (with them a quarter apart, noisy stationary loads moved
    /// partitions: `redis_loads.rs`), and noise does not step.
    pub(crate) fn look_again(
        &self,
        go: bool,
        renew_interval: Duration,
        now: Instant,
    ) -> Option<Duration> {
        let after_step = self
            .stepped_at
            .is_some_and(|t| now.saturating_duration_since(t) <= 2 * renew_interval);
        (go || (self.shed_streak == 1 && after_step)).then(|| renew_interval / 4)
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
        let mut p = Policy::default();
        let t0 = Instant::now();
        assert!(!p.hand_over(true, 2 * RI, false, t0));
        assert!(
            !p.hand_over(false, 2 * RI, false, t0 + RI),
            "the streak broke"
        );
        assert!(!p.hand_over(true, 2 * RI, false, t0 + 2 * RI));
        assert!(p.hand_over(true, 2 * RI, false, t0 + 3 * RI));
        assert!(!p.hand_over(true, 2 * RI, false, t0 + 4 * RI));
        assert!(
            !p.hand_over(true, 2 * RI, false, t0 + 4 * RI),
            "cooling down"
        );
        assert!(p.hand_over(true, 2 * RI, false, t0 + 5 * RI));
    }

    #[test]
    fn the_next_round_of_a_rebalance_goes_once_the_last_hand_over_has_landed() {
        let mut p = Policy::default();
        let t0 = Instant::now();
        assert!(
            !p.hand_over(true, 2 * RI, true, t0),
            "the first needs two ticks"
        );
        assert!(p.hand_over(true, 2 * RI, true, t0 + RI));
        assert!(
            !p.hand_over(true, 2 * RI, false, t0 + 2 * RI),
            "not landed: the counts may lag, so cooling down"
        );
        assert!(
            p.hand_over(true, 2 * RI, true, t0 + 3 * RI),
            "landed and still asking: the next round at once"
        );
        assert!(!p.hand_over(false, 2 * RI, true, t0 + 4 * RI), "done");
        assert!(
            !p.hand_over(true, 2 * RI, true, t0 + 5 * RI),
            "a new rebalance needs two ticks again"
        );
        assert!(p.hand_over(true, 2 * RI, true, t0 + 6 * RI));
    }

    #[test]
    fn the_tick_that_sees_a_round_land_comes_early_the_confirming_one_does_not() {
        let mut p = Policy::default();
        let t0 = Instant::now();
        assert_eq!(p.look_again(false, RI, t0), None, "nothing asked");
        let go = p.hand_over(true, 2 * RI, true, t0);
        assert!(!go);
        assert_eq!(
            p.look_again(go, RI, t0),
            None,
            "a first ask is confirmed at the next regular tick: the noise filter"
        );
        let go = p.hand_over(true, 2 * RI, true, t0 + RI);
        assert!(go, "two ticks in a row");
        assert_eq!(p.look_again(go, RI, t0 + RI), Some(RI / 4), "see it land");
        let go = p.hand_over(true, 2 * RI, false, t0 + RI + RI / 4);
        assert!(!go, "not landed yet");
        assert_eq!(
            p.look_again(go, RI, t0 + RI + RI / 4),
            None,
            "not landed: the regular ticks from here on"
        );
        let go = p.hand_over(false, 2 * RI, true, t0 + 2 * RI);
        assert_eq!(p.look_again(go, RI, t0 + 2 * RI), None, "done");
    }

    #[test]
    fn after_a_step_in_load_a_first_ask_is_confirmed_early() {
        let mut p = Policy::default();
        let t0 = Instant::now();
        p.stepped(t0);
        let go = p.hand_over(true, 2 * RI, true, t0);
        assert!(!go);
        assert_eq!(
            p.look_again(go, RI, t0),
            Some(RI / 4),
            "a step is a cause: confirm early"
        );
        let go = p.hand_over(true, 2 * RI, true, t0 + RI / 4);
        assert!(go, "two ticks in a row");
        // The step is old: a new first ask waits for the next regular tick again.
        let go = p.hand_over(false, 2 * RI, true, t0 + 2 * RI);
        assert!(!go);
        let later = t0 + 3 * RI;
        let go = p.hand_over(true, 2 * RI, true, later);
        assert!(!go);
        assert_eq!(
            p.look_again(go, RI, later),
            None,
            "no step since: noise filter"
        );
        // A second ask in a row is confirmed at once anyway: no early tick needed.
        p.stepped(later);
        let go = p.hand_over(true, 2 * RI, true, later + RI);
        assert!(go);
    }

    #[test]
    fn a_hand_over_that_moved_nothing_waits_for_no_cooldown() {
        let mut p = Policy::default();
        let t0 = Instant::now();
        assert!(!p.hand_over(true, 2 * RI, false, t0));
        assert!(p.hand_over(true, 2 * RI, false, t0 + RI));
        p.refund();
        assert!(
            p.hand_over(true, 2 * RI, false, t0 + 2 * RI),
            "no cooldown, no streak"
        );
        assert!(
            !p.hand_over(true, 2 * RI, false, t0 + 3 * RI),
            "this one moved: cooling down"
        );
    }

    #[test]
    fn claims_leave_partitions_to_their_preferred_members_for_one_window_at_most() {
        let mut p = Policy::default();
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
        let mut p = Policy::default();
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
