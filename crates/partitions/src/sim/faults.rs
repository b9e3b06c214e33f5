//! The faults the simulation throws: crashes, pauses, partitions of the network,
//! server restarts and failovers (lossy ones too), data loss, and healing.

use std::time::Duration;

use rand::RngExt;
use rand::seq::IndexedRandom;
use tokio::time::Instant;

use super::link::Mode;
use super::{Ev, FAULTS, LEASE, SHUTDOWN_LIMIT, World, oracle};
use crate::store::ops;
use crate::store::protocol::Protocol;

impl World {
    /// Ends every fault: links clean, every replica running, drains lifted.
    pub(super) async fn heal(&mut self) {
        self.note("heal: links clean, every replica started, drains lifted".into());
        for r in self.replicas.values() {
            r.link.set_mode(Mode::Clean);
        }
        self.admin_link.set_mode(Mode::Clean);
        for (_, p) in std::mem::take(&mut self.dups) {
            p.handle.abort();
        }
        let ids: Vec<String> = self.replicas.keys().cloned().collect();
        for id in &ids {
            self.start_replica(id);
        }
        // Every replica, not only those the run drained and did not undrain yet: a
        // failover that lost an undrain's write brings the drain back.
        self.drained.clear();
        for id in ids {
            self.undrain(&id).await;
        }
        // Every fault's effect is over a few leases after the heal (a sticky replica
        // parked just before it is back at once).
        self.span(LEASE * 4);
    }

    pub(super) async fn chaos(&mut self) {
        let enabled: Vec<(&str, u32)> = FAULTS
            .iter()
            .copied()
            .filter(|(f, _)| self.options.faults.contains(f))
            .collect();
        let total: u32 = enabled.iter().map(|(_, w)| w).sum();
        if total == 0 {
            return;
        }
        let mut roll = self.rng.random_range(0..total);
        let mut fault = "";
        for (f, w) in enabled {
            if roll < w {
                fault = f;
                break;
            }
            roll -= w;
        }
        let id = self.pick_replica();
        let grace = self.replicas[&id].grace;
        self.faults.kind = fault;
        if matches!(fault, "kill" | "stop" | "dup" | "lossy" | "hole") {
            self.faults.faulted.insert(id.clone(), Instant::now());
            self.faults.striking = Some(id.clone());
        }
        match fault {
            // A crash, then a restart after a while.
            "kill" => {
                if let Some(p) = self.procs.remove(&id) {
                    let back = Duration::from_millis(self.rng.random_range(50..4_000));
                    self.note(format!(
                        "kill {id} (pid {}), back in {} ms",
                        p.pid,
                        back.as_millis()
                    ));
                    p.handle.abort();
                    if grace.is_some() {
                        // Back well within its grace (5 s at least): nothing it held
                        // moves.
                        self.faults.sticky_kills.push(oracle::StickyKill {
                            replica: id.clone(),
                            at: Instant::now(),
                            back: Instant::now() + back,
                            span: self.faults.spans.len(),
                        });
                    }
                    self.at(Instant::now() + back, Ev::Start(id));
                    self.span(back.max(LEASE) + LEASE * 3);
                }
            }
            // A graceful stop (sticky ones park), then a restart within their grace or
            // after it.
            "stop" => {
                if let Some(p) = self.procs.remove(&id) {
                    let back = match grace {
                        Some(g) if self.rng.random_bool(0.8) => {
                            Duration::from_millis(self.rng.random_range(50..2_000)).min(g / 2)
                        }
                        Some(g) => g + LEASE,
                        None => Duration::from_millis(self.rng.random_range(50..3_000)),
                    };
                    self.note(format!(
                        "stop {id} (pid {}{}), back in {} ms",
                        p.pid,
                        if grace.is_some() { ", sticky" } else { "" },
                        back.as_millis()
                    ));
                    let started = Instant::now();
                    if tokio::time::timeout(SHUTDOWN_LIMIT, p.handle.shutdown())
                        .await
                        .is_err()
                    {
                        self.faults.stuck.push(format!(
                            "shutdown of {id} (pid {}) did not return within {SHUTDOWN_LIMIT:?}",
                            p.pid
                        ));
                    }
                    let took = started.elapsed();
                    self.at(Instant::now() + back, Ev::Start(id));
                    self.span(took + back + LEASE * 3);
                }
            }
            // A second process with the same replica id, for a while.
            "dup" => {
                let p = self.spawn(&id);
                let d = Duration::from_millis(self.rng.random_range(200..3_000));
                self.note(format!(
                    "duplicate of {id} (pid {}) for {} ms",
                    p.pid,
                    d.as_millis()
                ));
                let pid = p.pid;
                self.dups.insert(pid, p);
                self.at(Instant::now() + d, Ev::KillPid(pid));
                self.span(d + LEASE * 3);
            }
            // Lossy replies.
            "lossy" => {
                let d = Duration::from_millis(self.rng.random_range(200..3_000));
                let mode = Mode::Lossy {
                    fail: self.rng.random_range(0.0..0.2),
                    lose: self.rng.random_range(0.0..0.3),
                    twice: self.rng.random_range(0.0..0.3),
                    late: self.rng.random_range(0.0..0.2),
                };
                self.note(format!(
                    "lossy link of {id} for {} ms: {mode:?}",
                    d.as_millis()
                ));
                self.replicas[&id].link.set_mode(mode);
                self.at(Instant::now() + d, Ev::Heal(id));
                self.span(d + LEASE * 3);
            }
            // A black hole (a paused process, a cut network).
            "hole" => {
                let d = Duration::from_millis(self.rng.random_range(100..2_500));
                self.note(format!("black hole of {id} for {} ms", d.as_millis()));
                self.replicas[&id].link.set_mode(Mode::Hole {
                    until: Instant::now() + d,
                });
                self.at(Instant::now() + d, Ev::Heal(id));
                self.span(d + LEASE * 3);
            }
            // The partition set changes.
            "set" => self.change_set().await,
            // Drains.
            "drain" => {
                if !self.drained.contains(&id) {
                    self.note(format!("drain {id}"));
                    let r = self.admin.drain(&id).await;
                    self.note(format!("  -> {r:?}"));
                    if r.is_ok() {
                        self.drained.push(id.clone());
                        let d = Duration::from_millis(self.rng.random_range(500..4_000));
                        self.at(Instant::now() + d, Ev::Undrain(id));
                    }
                    // A drain of every replica leaves nothing served: that is the
                    // operator's doing, not a fault of the group.
                    self.span(LEASE * 6);
                }
            }
            // Weights.
            "weight" => {
                let listed = self.listing.listed_now();
                if let Some(p) = listed.choose(&mut self.rng).cloned() {
                    let w = *[1u64, 2, 3, 5, 8, 20]
                        .choose(&mut self.rng)
                        .expect("weights");
                    self.note(format!("weight {p} = {w}"));
                    let r = self.admin.set_weight(&p, w).await;
                    self.note(format!("  -> {r:?}"));
                    self.span(LEASE * 4);
                }
            }
            // A failover that loses the last writes: the replica's link is cut now, the
            // primary dies a moment later, and the replica is promoted.
            "failover" => {
                let d = Duration::from_millis(self.rng.random_range(0..800));
                self.schedule.seq += 1;
                let id = self.schedule.seq;
                self.note(format!(
                    "the replica misses every write from now; promoted in {} ms",
                    d.as_millis()
                ));
                self.faults
                    .replicas_cut
                    .insert(id, (Instant::now(), self.store.snapshot()));
                self.at(Instant::now() + d, Ev::Promote(id));
                self.span(d + LEASE * 4);
            }
            // Redis restarted without its data.
            _ => self.wipe().await,
        }
        self.faults.kind = "";
        self.faults.striking = None;
        // Now and then the admin's link is lossy too.
        let admin_mode = if self.options.faults.contains(&"lossy") && self.rng.random_bool(0.2) {
            Mode::Lossy {
                fail: 0.0,
                lose: 0.0,
                twice: 0.5,
                late: 0.0,
            }
        } else {
            Mode::Clean
        };
        self.admin_link.set_mode(admin_mode);
    }

    /// Redis restarts without its data. The group must come back with the set it had,
    /// if a live replica with a clean link had read it; otherwise nothing is sure about
    /// the set until the group is back.
    pub(super) async fn wipe(&mut self) {
        let keys = crate::keys::GroupKeys::new("leasehold", "sim");
        let now = Instant::now();
        let page = Protocol::run(&self.store, &keys, &ops::ReadSetPage::new(0, 100_000))
            .await
            .ok()
            .flatten();
        let current = page.as_ref().map(|p| (p.life.clone(), p.set_version));
        let restorers: Vec<String> = self
            .procs
            .iter()
            .filter(|(id, p)| {
                self.replicas[id.as_str()].link.is_clean()
                    && current.is_some()
                    && p.handle.status().set_copy == current
            })
            .map(|(id, _)| id.clone())
            .collect();
        self.note(format!(
            "wipe the store ({} can restore it)",
            if restorers.is_empty() {
                "nobody".to_owned()
            } else {
                restorers.join(", ")
            }
        ));
        self.store.wipe();
        // A wipe while the last one's check is still due: what came back of that one is
        // not known, so nothing is sure from then on until this one's check.
        let overlapping = self.faults.last_wipe.filter(|w| now < *w + LEASE * 3);
        if let Some(w) = overlapping {
            self.listing.unsure_all(w);
        }
        // Within a failover's window replicas may restore a set newer than the
        // promoted store's: nothing is sure until this wipe's check either.
        let after_failover = self.faults.last_failover.filter(|f| now < *f + LEASE * 3);
        self.faults.last_wipe = Some(now);
        let restorable = !restorers.is_empty() && overlapping.is_none() && after_failover.is_none();
        if !restorable {
            self.listing.unsure_all(now);
        }
        self.faults.restorers = restorers;
        self.at(
            now + LEASE * 3,
            Ev::AfterWipe {
                restorable,
                at: now,
            },
        );
        self.span(LEASE * 5);
    }

    /// Promotes the replica cut off at snapshot `id`: the store goes back to it under a
    /// new server lifetime. Set changes answered since were lost with it, and replicas
    /// may still hold copies of the newer set for a while (a wipe meanwhile may restore
    /// one), so nothing is sure about the set from the cut until the failover's window
    /// has passed.
    pub(super) async fn promote(&mut self, id: u64) {
        let Some((cut, snapshot)) = self.faults.replicas_cut.remove(&id) else {
            return;
        };
        self.note(format!(
            "failover: the replica cut off {} ms ago is promoted",
            cut.elapsed().as_millis()
        ));
        self.store.fail_over_to(snapshot);
        let now = Instant::now();
        // From the cut on, and past the changes answered since (lost with it).
        self.listing.unsure_all(cut);
        self.listing.unsure_all(now);
        self.faults.last_failover = Some(now);
        self.at(now + LEASE * 3, Ev::AfterFailover { at: now });
        self.span(LEASE * 4);
    }

    /// From a failover's end on, the set is what the store has (unless a later wipe or
    /// failover decides).
    pub(super) async fn after_failover(&mut self, at: Instant) {
        if self.faults.last_failover.is_some_and(|f| f > at)
            || self.faults.last_wipe.is_some_and(|w| w > at)
        {
            return;
        }
        let Some(now_set) = self.stored_set().await else {
            // Nobody has created it again yet: look later.
            self.at(Instant::now() + LEASE, Ev::AfterFailover { at });
            return;
        };
        self.note(format!("the set after the failover: {now_set:?}"));
        self.listing.reset(&now_set, Instant::now());
    }

    /// The set as the store has it now, sorted (`None`: no group).
    pub(super) async fn stored_set(&self) -> Option<Vec<String>> {
        let keys = crate::keys::GroupKeys::new("leasehold", "sim");
        let page = Protocol::run(&self.store, &keys, &ops::ReadSetPage::new(0, 100_000))
            .await
            .ok()
            .flatten()?;
        let mut names: Vec<String> = page.names.into_iter().map(|(n, _)| n).collect();
        names.sort();
        Some(names)
    }

    /// The stored group's life, if it exists.
    async fn stored_life(&self) -> Option<String> {
        let keys = crate::keys::GroupKeys::new("leasehold", "sim");
        Protocol::run(&self.store, &keys, &ops::ReadSetPage::new(0, 1))
            .await
            .ok()
            .flatten()
            .map(|p| p.life)
    }

    pub(super) async fn after_wipe(&mut self, restorable: bool, at: Instant) {
        if self.faults.last_wipe.is_some_and(|w| w > at) {
            // Wiped again since: that wipe's check decides.
            return;
        }
        // A replica holding a copy of an earlier lifetime may still bring a group seeded
        // meanwhile back to it (adopt): nothing is sure until no running replica does.
        let life = self.stored_life().await;
        let older_copy = life.as_ref().is_some_and(|life| {
            self.procs
                .values()
                .any(|p| p.handle.status().set_copy.is_some_and(|(l, _)| l != *life))
        });
        if older_copy {
            self.listing.unsure_all(at);
            self.at(Instant::now() + LEASE, Ev::AfterWipe { restorable, at });
            return;
        }
        let Some(now_set) = self.stored_set().await else {
            // Nobody has created it again yet (no live replica): look later.
            self.listing.unsure_all(at);
            self.at(
                Instant::now() + LEASE,
                Ev::AfterWipe {
                    restorable: false,
                    at,
                },
            );
            return;
        };
        // Every replica that could restore it had a fault meanwhile (killed before it
        // saw the group missing, say): then the group may have been seeded from a
        // configured list, as documented, and nothing was sure from the wipe on (even if
        // what the admin saw since happens to agree with the seeded set).
        let excused = self
            .faults
            .restorers
            .iter()
            .all(|r| self.faults.faulted.get(r).is_some_and(|t| *t >= at));
        if restorable && !excused && self.listing.sure() {
            let mut want = self.listing.listed_now();
            want.sort();
            if want != now_set {
                self.faults.stuck.push(format!(
                    "after a wipe the group came back with {now_set:?}, not the set its \
                     replicas saw {want:?}"
                ));
            }
            if want == now_set {
                return;
            }
        }
        // Nothing was sure from the wipe on.
        self.listing.unsure_all(at);
        self.note(format!("the set after the wipe: {now_set:?}"));
        self.listing.reset(&now_set, Instant::now());
    }
}
