//! What an operator does to the simulated group: scaling, preferences, drains, and
//! changes to the partition set.

use std::time::Duration;

use rand::RngExt;
use rand::seq::IndexedRandom;
use tokio::time::Instant;

use super::{Ev, LEASE, SHUTDOWN_LIMIT, WARM_WAIT, World};

impl World {
    /// The spare replica joins, or leaves gracefully; then waits 1 to 6 s. No fault
    /// span: planned joins and leaves must hand every partition over at once.
    pub(super) async fn scale(&mut self) {
        let Some(mut spare) = self.modes.spare.take() else {
            return;
        };
        match spare.running.take() {
            Some(p) => {
                self.note(format!("scale in: s0 (pid {}) leaves", p.pid));
                let now = Instant::now();
                let wait = if self.modes.warm {
                    WARM_WAIT
                } else {
                    Duration::ZERO
                };
                self.modes
                    .leaves
                    .push((now - LEASE - wait, now + SHUTDOWN_LIMIT + LEASE));
                if tokio::time::timeout(SHUTDOWN_LIMIT, p.handle.shutdown())
                    .await
                    .is_err()
                {
                    self.faults.stuck.push(format!(
                        "shutdown of s0 (pid {}) did not return within {SHUTDOWN_LIMIT:?}",
                        p.pid
                    ));
                }
            }
            None => {
                let p = self.spawn_replica(&spare.replica);
                self.note(format!("scale out: s0 (pid {}) joins", p.pid));
                spare.running = Some(p);
            }
        }
        let gap = Duration::from_millis(spare.rng.random_range(1_000..6_000));
        self.modes.spare = Some(spare);
        self.at(Instant::now() + gap, Ev::Scale);
    }

    /// The operator prefers a listed partition on a replica (now and then one that
    /// never runs), or removes a partition's preference; then waits 0.2 to 3 s. No
    /// fault span: a preference must never leave a partition without an owner.
    pub(super) async fn prefer(&mut self) {
        let Some(rng) = self.modes.prefs.as_mut() else {
            return;
        };
        let listed = self.listing.listed_now();
        let mut ids: Vec<String> = self.replicas.keys().cloned().collect();
        ids.push("ghost".to_owned());
        let p = listed.choose(rng).cloned();
        let on = if rng.random_bool(0.3) {
            None
        } else {
            ids.choose(rng).cloned()
        };
        let gap = Duration::from_millis(rng.random_range(200..3_000));
        if let Some(p) = p {
            match on {
                Some(r) => {
                    self.note(format!("prefer {p} on {r}"));
                    let out = self.admin.prefer(&p, &r).await;
                    self.note(format!("  -> {out:?}"));
                }
                None => {
                    self.note(format!("unprefer {p}"));
                    let out = self.admin.unprefer(&p).await;
                    self.note(format!("  -> {out:?}"));
                }
            }
        }
        self.at(Instant::now() + gap, Ev::Prefer);
    }

    pub(super) fn pick_replica(&mut self) -> String {
        let ids: Vec<String> = self.replicas.keys().cloned().collect();
        ids.choose(&mut self.rng).expect("replicas").clone()
    }

    pub(super) async fn undrain(&mut self, id: &str) {
        self.note(format!("undrain {id}"));
        let r = self.admin.undrain(id).await;
        self.note(format!("  -> {r:?}"));
        self.drained.retain(|d| d != id);
        self.span(LEASE * 4);
    }

    pub(super) async fn change_set(&mut self) {
        let listed = self.listing.listed_now();
        let removed = self.listing.removed_now();
        let roll = self.rng.random_range(0..3);
        let asked = Instant::now();
        if roll == 0 || listed.len() <= 2 {
            // Add a new one, or re-add a removed one.
            let name = match removed.choose(&mut self.rng) {
                Some(n) if self.rng.random_bool(0.5) => n.clone(),
                _ => {
                    self.extra += 1;
                    format!("x{:02}", self.extra)
                }
            };
            self.note(format!("add {name}"));
            let r = self.admin.add([name.as_str()]).await;
            self.note(format!("  -> {r:?}"));
            match r {
                Ok(_) | Err(crate::PartitionsError::AlreadyPresent(_)) => {
                    self.listing.added(&name, asked, Instant::now());
                }
                Err(_) => self.listing.unsure(&name, asked),
            }
        } else {
            let name = listed.choose(&mut self.rng).expect("listed").clone();
            self.note(format!("remove {name}"));
            let r = self.admin.remove([name.as_str()]).await;
            self.note(format!("  -> {r:?}"));
            match r {
                Ok(_) | Err(crate::PartitionsError::UnknownPartition(_)) => {
                    self.listing.removed(&name, asked, Instant::now());
                }
                Err(_) => self.listing.unsure(&name, asked),
            }
        }
        self.span(LEASE * 4);
    }
}
