//! Measured load into weights (`GroupConfigBuilder::weights_from_loads`): the damping
//! rule ([`crate::LoadDamping`], [`Loads`]) and when its weights are written
//! ([`Reports`]). Pure: after a tick, at most once per renew interval and with no write
//! in flight, the machine asks the driver for the last load each running term reported
//! ([`Action::SampleLoads`]), folds them into the averages and returns the weights to
//! write ([`Action::Report`]); the write's answer may carry a step in load, which the
//! group is told of at once ([`Action::LoadStep`]).

use std::collections::HashMap;
use std::time::Duration;

use leasehold_election::Fence;
use tokio::time::Instant;

use super::{Action, ReplicaMachine};
use crate::MAX_WEIGHT;
use crate::config::LoadDamping;

/// When this replica's weights from load reports are written, and their averages.
#[derive(Debug)]
pub(crate) struct Reports {
    loads: Loads,
    /// At most one write per this long.
    every: Duration,
    /// When the last write was sent.
    sent: Option<Instant>,
    /// A write is in flight.
    in_flight: bool,
    /// The write in flight carries a step in load.
    stepped: bool,
}

impl Reports {
    /// Weights by `damping`, written at most once per `every`.
    pub(crate) fn new(damping: LoadDamping, every: Duration, lease: Duration) -> Self {
        Self {
            loads: Loads::new(damping, lease),
            every,
            sent: None,
            in_flight: false,
            stepped: false,
        }
    }

    /// Whether a write may be sent at `now`: none in flight, the last one an interval
    /// ago.
    fn may_write(&self, now: Instant) -> bool {
        !self.in_flight && self.sent.is_none_or(|at| now >= at + self.every)
    }
}

impl ReplicaMachine {
    /// A term's runner starts: its average starts at the term's weight.
    pub(super) fn load_starts(&mut self, i: usize, fence: Fence, now: Instant) {
        let weight = self.holdings.held(i).map_or(1, |h| h.weight);
        if let Some(r) = &mut self.loads {
            r.loads.start((i, fence), weight, now);
        }
    }

    /// A term's runner ended: its average goes.
    pub(super) fn load_ends(&mut self, i: usize, fence: Fence) {
        if let Some(r) = &mut self.loads {
            r.loads.end((i, fence));
        }
    }

    /// After a tick: whether to sample the running terms' load reports now (a member,
    /// taking loads, with no write in flight and none within the last interval).
    pub(super) fn sample_loads(&self, now: Instant) -> Option<Action> {
        let due = self.session.member() && self.loads.as_ref().is_some_and(|r| r.may_write(now));
        due.then_some(Action::SampleLoads)
    }

    /// The last load each running term reported (`None`: none yet), sampled at `now`:
    /// the weights that moved past the threshold, to write in one request.
    pub(crate) fn on_samples(
        &mut self,
        samples: &[(TermKey, Option<f64>)],
        now: Instant,
    ) -> Vec<Action> {
        let Some(r) = &mut self.loads else {
            return Vec::new();
        };
        if !r.may_write(now) {
            return Vec::new();
        }
        let holdings = &self.holdings;
        let samples: Vec<Sample> = samples
            .iter()
            .filter_map(|&((i, fence), latest)| {
                let held = holdings.held(i).filter(|h| h.fence == fence)?;
                Some(((i, fence), latest, held.weight))
            })
            .collect();
        let due = r.loads.due(samples, now);
        if due.is_empty() {
            return Vec::new();
        }
        r.in_flight = true;
        r.sent = Some(now);
        r.stepped = r.loads.stepped();
        vec![Action::Report(due)]
    }

    /// The write of `weights` came back: those the store took (`Some(flags)`), or none
    /// (it failed: tried again after a later tick). A weight the store took that
    /// carries a step in load is told to the group at once (a rebalance by load waits
    /// for it), not at the other replicas' next tick.
    pub(crate) fn on_reported(
        &mut self,
        weights: &[(TermKey, u64)],
        flags: Option<&[bool]>,
    ) -> Vec<Action> {
        let Some(r) = &mut self.loads else {
            return Vec::new();
        };
        r.in_flight = false;
        let stepped = std::mem::take(&mut r.stepped);
        let mut took = false;
        for (&((i, fence), w), &ok) in weights.iter().zip(flags.unwrap_or_default()) {
            if ok {
                r.loads.written((i, fence), w);
                self.holdings.weigh(i, fence, w);
                took = true;
            }
        }
        if stepped && took {
            vec![Action::LoadStep]
        } else {
            Vec::new()
        }
    }
}

/// One term's average.
#[derive(Debug, Clone, Copy)]
struct Damped {
    /// The average so far.
    value: f64,
    /// A fast average (a tenth of the half-life): when it is far from the stored
    /// weight, both jump to the latest report.
    fast: f64,
    /// The weight the store has for the term, as far as this replica knows.
    stored: u64,
    /// When `value` was last brought up to date.
    at: Instant,
    /// Reports before this are ignored (the term's warm-up).
    counts_from: Instant,
}

/// A term: partition index and fence.
pub(crate) type TermKey = (usize, Fence);

/// What one term says at a sample: its key, the last load its owner reported (if any),
/// and the weight the replica's holdings have for it.
pub(crate) type Sample = (TermKey, Option<f64>, u64);

/// The averages of this replica's terms.
#[derive(Debug)]
pub(crate) struct Loads {
    damping: LoadDamping,
    /// A new term's warm-up: the damping's, or one lease.
    warm_up: std::time::Duration,
    terms: HashMap<TermKey, Damped>,
    /// The last [`due`](Self::due) jumped some average to its latest report.
    stepped: bool,
}

impl Loads {
    /// The damping rule, with a new term's warm-up `lease` unless it says otherwise.
    pub(crate) fn new(damping: LoadDamping, lease: std::time::Duration) -> Self {
        Self {
            warm_up: damping.warm_up.unwrap_or(lease),
            damping,
            terms: HashMap::new(),
            stepped: false,
        }
    }

    /// Term `key` started with `weight` (the partition's weight when it was granted):
    /// its average starts there, so a partition that moves keeps its measured weight,
    /// and its reports count from one warm-up later (a new owner catching up with a
    /// backlog reports more than the tenant's load, if it reports throughput).
    pub(crate) fn start(&mut self, key: TermKey, weight: u64, now: Instant) {
        self.terms.insert(
            key,
            Damped {
                value: weight as f64,
                fast: weight as f64,
                stored: weight,
                at: now,
                counts_from: now + self.warm_up,
            },
        );
    }

    pub(crate) fn end(&mut self, key: TermKey) {
        self.terms.remove(&key);
    }

    /// Folds each sampled term's last report into its average at `now` and returns the
    /// weights to write: those whose rounded average moved from the stored weight by at
    /// least 1 and by more than the threshold. Both averages jump to the latest report
    /// when the fast one is more than the jump above the stored weight, or below it by
    /// the same ratio (a large step in load).
    /// A term whose holdings weight changed under it (an operator set it) restarts its
    /// averages there. A term nobody reported for keeps its weight.
    pub(crate) fn due(
        &mut self,
        samples: impl IntoIterator<Item = Sample>,
        now: Instant,
    ) -> Vec<(TermKey, u64)> {
        let half_life = self.damping.half_life.as_secs_f64();
        let threshold = f64::from(self.damping.threshold_percent) / 100.0;
        let jump = f64::from(self.damping.jump_percent) / 100.0;
        let mut out = Vec::new();
        self.stepped = false;
        for (key, latest, holdings) in samples {
            let Some(d) = self.terms.get_mut(&key) else {
                continue;
            };
            if holdings != d.stored {
                d.value = holdings as f64;
                d.fast = d.value;
                d.stored = holdings;
                d.at = now;
            }
            let Some(x) = latest else { continue };
            if now < d.counts_from {
                // Warming up: the report is ignored, and the average starts over from
                // the weight when the reports begin to count.
                d.at = now;
                continue;
            }
            let dt = now.saturating_duration_since(d.at).as_secs_f64();
            d.at = now;
            let alpha = 1.0 - 0.5f64.powf(dt / half_life);
            d.value += (x - d.value) * alpha;
            let fast = 1.0 - 0.5f64.powf(dt * 10.0 / half_life);
            d.fast += (x - d.fast) * fast;
            let stored = d.stored as f64;
            // Rises and falls alike, by ratio: up by more than the jump, or down to less
            // than 1 / (1 + jump) of the stored weight.
            let step = d.fast - stored > (jump * stored).max(1.0)
                || (stored - d.fast) * (1.0 + jump) > (jump * stored).max(1.0);
            if jump > 0.0 && step {
                // A step, not noise: the latest report says where the load went (the
                // fast average is still on its way there), and the slow average
                // corrects a noisy one later.
                d.value = x;
                d.fast = x;
                self.stepped = true;
            }
            let w = weight_of(d.value);
            let moved = w.abs_diff(d.stored);
            if moved >= 1 && moved as f64 > threshold * d.stored as f64 {
                out.push((key, w));
            }
        }
        out.sort_unstable_by_key(|((i, f), _)| (*i, *f));
        out
    }

    /// Whether the last [`due`](Self::due) jumped some average to its latest report (a
    /// step in load, not drift: worth telling the other replicas at once).
    pub(crate) fn stepped(&self) -> bool {
        self.stepped
    }

    /// The store now has `weight` for term `key`.
    pub(crate) fn written(&mut self, key: TermKey, weight: u64) {
        if let Some(d) = self.terms.get_mut(&key) {
            d.stored = weight;
        }
    }
}

/// A damped load as a weight: rounded, at least 1, at most [`MAX_WEIGHT`].
fn weight_of(value: f64) -> u64 {
    if value.is_nan() {
        return 1;
    }
    // In range after the clamp, so the cast is exact.
    value.round().clamp(1.0, MAX_WEIGHT as f64) as u64
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const K: TermKey = (3, Fence(7));

    fn loads(half_life_s: u64, percent: u32) -> Loads {
        // No warm-up: the rule's arithmetic from the first report.
        Loads::new(
            LoadDamping::default()
                .half_life(Duration::from_secs(half_life_s))
                .threshold_percent(percent),
            Duration::ZERO,
        )
    }

    #[test]
    fn a_step_in_load_is_half_way_into_the_weight_after_one_half_life() {
        let t0 = Instant::now();
        // Without jumps: a step of x3 would jump.
        let mut l = Loads::new(
            LoadDamping::default()
                .half_life(Duration::from_secs(10))
                .threshold_percent(0)
                .jump_percent(0),
            Duration::ZERO,
        );
        l.start(K, 100, t0);
        let due = l.due([(K, Some(300.0), 100)], t0 + Duration::from_secs(10));
        assert_eq!(due, [(K, 200)]);
        l.written(K, 200);
        // Sampled in two steps of 5 s: the same place after 10 s more.
        l.due([(K, Some(300.0), 200)], t0 + Duration::from_secs(15));
        let due = l.due([(K, Some(300.0), 200)], t0 + Duration::from_secs(20));
        assert_eq!(due, [(K, 250)]);
    }

    #[test]
    fn a_step_says_so_and_drift_does_not() {
        let t0 = Instant::now();
        let mut l = loads(10, 10);
        l.start(K, 100, t0);
        // Drift: 20 % up, damped, written only once past the threshold, never a step.
        let due = l.due([(K, Some(120.0), 100)], t0 + Duration::from_secs(30));
        assert_eq!(due, [(K, 118)]);
        assert!(!l.stepped(), "drift is not a step");
        l.written(K, 118);
        // A step: ten times the load, written at once as the latest report.
        let due = l.due(
            [(K, Some(1_200.0), 118)],
            t0 + Duration::from_millis(30_700),
        );
        assert_eq!(due, [(K, 1_200)]);
        assert!(l.stepped());
        l.written(K, 1_200);
        let due = l.due([(K, Some(1_200.0), 1_200)], t0 + Duration::from_secs(31));
        assert!(due.is_empty());
        assert!(!l.stepped(), "each sample says it anew");
    }

    #[test]
    fn moves_within_the_threshold_are_not_written() {
        let t0 = Instant::now();
        let mut l = loads(1, 10);
        l.start(K, 100, t0);
        // A long time at 109: the average reaches 109, 9 % off: nothing to write.
        let due = l.due([(K, Some(109.0), 100)], t0 + Duration::from_secs(60));
        assert!(due.is_empty(), "{due:?}");
        let due = l.due([(K, Some(111.0), 100)], t0 + Duration::from_secs(120));
        assert_eq!(due, [(K, 111)]);
        // And a weight of 1 needs a whole unit to move.
        let mut l = loads(1, 0);
        l.start(K, 1, t0);
        assert!(
            l.due([(K, Some(1.4), 1)], t0 + Duration::from_secs(60))
                .is_empty()
        );
    }

    #[test]
    fn noisy_stationary_load_settles_and_then_writes_nothing() {
        // ±20 % around 500, a new value every second, sampled every 2 s with a
        // half-life of 60 s: once the average has settled (written once or twice),
        // nothing more is written.
        let t0 = Instant::now();
        let mut l = loads(60, 10);
        l.start(K, 500, t0);
        let mut stored = 500;
        let mut writes = 0;
        let mut seed = 17u64;
        for s in 1..=600u64 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let noise = (seed >> 33) as f64 / f64::from(1u32 << 31) * 0.4 - 0.2;
            let x = 500.0 * (1.0 + noise);
            if s % 2 == 0 {
                for (k, w) in l.due([(K, Some(x), stored)], t0 + Duration::from_secs(s)) {
                    l.written(k, w);
                    stored = w;
                    writes += 1;
                }
            }
        }
        assert_eq!(writes, 0, "noise within the threshold writes nothing");
    }

    #[test]
    fn an_operator_weight_restarts_the_average_and_silence_keeps_the_weight() {
        let t0 = Instant::now();
        let mut l = loads(10, 0);
        l.start(K, 100, t0);
        // Set to 40 by hand; nobody reports: nothing written, ever.
        assert!(
            l.due([(K, None, 40)], t0 + Duration::from_secs(100))
                .is_empty()
        );
        // Reports of 40 agree with it: nothing to write.
        assert!(
            l.due([(K, Some(40.0), 40)], t0 + Duration::from_secs(110))
                .is_empty()
        );
        // A term not started is ignored; an ended one too.
        let other = (4, Fence(1));
        assert!(
            l.due([(other, Some(9.0), 1)], t0 + Duration::from_secs(120))
                .is_empty()
        );
        l.end(K);
        assert!(
            l.due([(K, Some(900.0), 40)], t0 + Duration::from_secs(130))
                .is_empty()
        );
    }

    #[test]
    fn a_large_step_goes_through_at_once_and_a_small_one_at_the_half_life() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut l = loads(10, 10);
        l.start(K, 100, t0);
        // Ten times the load: the fast average (1 s half-life) is past +50 % after one
        // interval of 667 ms, and the averages jump to the report.
        let due = l.due([(K, Some(1_000.0), 100)], at(667));
        assert_eq!(due, [(K, 1_000)]);
        l.written(K, 1_000);
        // And stay there: the slow average does not drag it back.
        assert!(l.due([(K, Some(1_000.0), 1_000)], at(1_334)).is_empty());
        // A fall to a tenth: the fast average is at 1 / 1.5 of the stored weight
        // after one interval, below it after two, and the averages jump to the report.
        assert!(l.due([(K, Some(100.0), 1_000)], at(2_001)).is_empty());
        assert_eq!(l.due([(K, Some(100.0), 1_000)], at(2_668)), [(K, 100)]);
        // A halving: below 1 / 1.5 after three intervals (the fast average's 1 s
        // half-life), not never.
        let mut l = loads(10, 10);
        l.start(K, 1_000, t0);
        assert!(l.due([(K, Some(500.0), 1_000)], at(667)).is_empty());
        assert!(l.due([(K, Some(500.0), 1_000)], at(1_334)).is_empty());
        assert_eq!(l.due([(K, Some(500.0), 1_000)], at(2_001)), [(K, 500)]);
        // A step of +30 %: no jump, the average takes the half-life.
        let mut l = loads(10, 10);
        l.start(K, 100, t0);
        assert!(l.due([(K, Some(130.0), 100)], at(667)).is_empty());
        assert!(l.due([(K, Some(130.0), 100)], at(1_334)).is_empty());
        let due = l.due([(K, Some(130.0), 100)], at(10_000));
        assert_eq!(due, [(K, 115)], "half-way after a half-life");
        // Jumps off: a large step too takes the half-life.
        let mut l = Loads::new(
            LoadDamping::default()
                .half_life(Duration::from_secs(10))
                .jump_percent(0),
            Duration::ZERO,
        );
        l.start(K, 100, t0);
        let due = l.due([(K, Some(1_000.0), 100)], at(667));
        assert!(due.iter().all(|(_, w)| *w < 150), "{due:?}");
    }

    #[test]
    fn weights_are_whole_and_within_bounds() {
        assert_eq!(weight_of(0.0), 1);
        assert_eq!(weight_of(2.5), 3);
        assert_eq!(weight_of(1e12), MAX_WEIGHT);
        assert_eq!(weight_of(f64::NAN), 1);
    }

    /// Issue 45: a new owner that reports throughput catches up with the backlog its
    /// tenant built while unowned, a burst that looked like a step and moved tenants for
    /// nothing. A new term's reports count only after its warm-up (default: one lease).
    #[test]
    fn a_new_terms_catch_up_burst_is_no_step_and_a_later_step_is() {
        let t0 = Instant::now();
        let lease = Duration::from_secs(2);
        let mut l = Loads::new(
            LoadDamping::default().half_life(Duration::from_secs(10)),
            lease,
        );
        l.start(K, 100, t0);
        // Four times the load while it catches up, every half second for a lease.
        for ms in [500, 1_000, 1_500] {
            let due = l.due([(K, Some(400.0), 100)], t0 + Duration::from_millis(ms));
            assert_eq!(due, [], "at {ms} ms");
            assert!(!l.stepped(), "a catch-up is no step (at {ms} ms)");
        }
        // Caught up: the tenant's own load, for a while: nothing to write.
        for ms in (2_000..6_000).step_by(500) {
            let due = l.due([(K, Some(100.0), 100)], t0 + Duration::from_millis(ms));
            assert_eq!(due, [], "at {ms} ms");
            assert!(!l.stepped());
        }
        // A real step once the term is under way is one.
        let due = l.due([(K, Some(400.0), 100)], t0 + Duration::from_millis(6_500));
        assert_eq!(due, [(K, 400)]);
        assert!(l.stepped());
        // The damping's own warm-up wins over the lease.
        let damping = LoadDamping::default()
            .half_life(Duration::from_secs(10))
            .warm_up(Duration::ZERO);
        let mut l = Loads::new(damping, lease);
        l.start(K, 100, t0);
        l.due([(K, Some(400.0), 100)], t0 + Duration::from_millis(1_000));
        assert!(l.stepped(), "no warm-up: the first report counts");
    }
}
