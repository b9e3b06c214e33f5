//! The partition set, as steps: this replica's copy of the group's set (read whenever
//! the set's version moves, so that the group can be restored if Redis loses it), and
//! the three ways this replica changes the group's set: seeding a group that does not
//! exist from its configured list, restoring one Redis lost from its copy, and applying
//! a newer versioned list. One step at a time; each step is one store call the driver
//! makes ([`SetOp`]), whose answer ([`SetAnswer`]) gives the next.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use leasehold_election::Fence;

use crate::store::ops::read::set_checksum;
use crate::store::ops::restore::Restored;
use crate::store::protocol::{
    AddReply, Adopt, AdoptReply, AdoptStep, Origin, RemoveReply, RestoreStep, SetInfo, SetPage,
};
use crate::store::{SET_CHUNK, STATUS_PAGE};
use crate::view::ListDifference;

/// The group's set as this replica last read it in full.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SetCopy {
    pub(crate) life: String,
    pub(crate) set_version: u64,
    pub(crate) version: u64,
    pub(crate) digest: String,
    pub(crate) lease: Duration,
    pub(crate) highest_fence: Fence,
    pub(crate) weighted: bool,
    pub(crate) weights_version: u64,
    pub(crate) drained: Vec<String>,
    pub(crate) names: Vec<(String, u64)>,
    /// Every preference (partition, replica id), as the first page carried them.
    pub(crate) preferences: Vec<(String, String)>,
    /// The server lifetime it was read in (ticks name it). A failover that lost set
    /// changes promotes a store whose set version is lower, and its next changes reach
    /// the lost versions again with other names: a copy of another lifetime is read
    /// again even if its (life, version) is the group's.
    pub(crate) lifetime: String,
}

/// A step for the driver: one store call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetOp {
    /// Read a page of the set (`set_page`).
    Read {
        offset: usize,
    },
    /// Seed the group from the configured list (`add` in seed mode).
    Seed {
        life: String,
        names: Vec<String>,
        grant_delay: Duration,
        lease: Duration,
        /// The grant delay on a server older than a lease (`Change::Seed`).
        gather: Duration,
    },
    /// A step of a restore.
    Restore(RestoreStep),
    /// A step of adopting this replica's copy into a group seeded again while it was
    /// away (the set's names are listed with `List`).
    Adopt(Adopt),
    /// A step of applying a versioned list.
    Begin {
        version: u64,
    },
    Add {
        version: u64,
        names: Vec<String>,
    },
    List {
        offset: usize,
    },
    Remove {
        version: u64,
        names: Vec<String>,
    },
    Done {
        version: u64,
        digest: String,
    },
}

/// Above how many live members the set is read a page per tick.
const WIDE: usize = 32;

/// What a step's store call answered (`Failed`: it failed; the job stops and is taken up
/// again at a later tick, a seed's at the step that failed).
#[derive(Debug, Clone)]
pub(crate) enum SetAnswer {
    Page(Option<SetPage>),
    Added(AddReply),
    Removed(RemoveReply),
    Ok(bool),
    Listed(Vec<String>),
    Adopted(AdoptReply),
    Failed,
}

/// What this replica is doing to the set.
#[derive(Debug, Clone)]
enum Job {
    /// Reading the set into a new copy.
    Read { copy: SetCopy, offset: usize },
    /// Seeding: the chunk from `next` is in flight.
    Seed { life: String, next: usize },
    /// Restoring `copy`: the chunk from `next` is in flight (`None`: the begin).
    Restore {
        of: Restored,
        copy: Arc<SetCopy>,
        next: Option<usize>,
    },
    /// Applying a versioned list.
    Apply(Apply),
    /// Bringing the group, seeded again from a list while this replica was away (its
    /// life `seeded`), to `copy`, the set this replica saw of its earlier lifetime.
    Adopt {
        copy: Arc<SetCopy>,
        seeded: String,
        at: Adopting,
    },
}

/// Where an adopt is.
#[derive(Debug, Clone)]
enum Adopting {
    Begin,
    /// The copy's names (with their weights) from this one.
    Names(usize),
    /// Listing the set, gathering the names the copy lacks.
    List {
        offset: usize,
        extra: Vec<String>,
    },
    /// Removing them, from this one.
    Remove {
        extra: Vec<String>,
        next: usize,
    },
    Done,
}

#[derive(Debug, Clone)]
enum Apply {
    /// A new group just seeded takes the list's version as a whole.
    SeedBegin,
    Begin,
    Add(usize),
    List {
        offset: usize,
        extra: Vec<String>,
    },
    Remove {
        extra: Vec<String>,
        next: usize,
    },
    Done,
}

/// The difference between `configured` and a complete `copy` of the group's set;
/// `None` when they hold the same names, or when the configured list's version is
/// newer (it is being applied: the group's set is about to become it).
fn difference_between(configured: &Configured, copy: &SetCopy) -> Option<ListDifference> {
    if configured.version > copy.version {
        return None;
    }
    let here: BTreeSet<&str> = configured.names.iter().map(String::as_str).collect();
    let group: BTreeSet<&str> = copy.names.iter().map(|(n, _)| n.as_str()).collect();
    let only_here: Vec<&str> = here.difference(&group).copied().collect();
    let only_in_group: Vec<&str> = group.difference(&here).copied().collect();
    if only_here.is_empty() && only_in_group.is_empty() {
        return None;
    }
    let sample = |names: &[&str]| {
        names
            .iter()
            .take(ListDifference::SAMPLE)
            .map(|n| (*n).to_owned())
            .collect()
    };
    Some(ListDifference {
        only_here: only_here.len(),
        only_in_group: only_in_group.len(),
        only_here_sample: sample(&only_here),
        only_in_group_sample: sample(&only_in_group),
        configured_version: configured.version,
        group_version: copy.version,
    })
}

/// An adopt's next step after the answer to step `at` (`None`: it is over, done or
/// refused; the next tick decides again).
fn adopted(copy: &SetCopy, at: Adopting, answer: SetAnswer) -> Option<Adopting> {
    match (at, answer) {
        (Adopting::Begin, SetAnswer::Adopted(AdoptReply::Done)) => Some(Adopting::Names(0)),
        (Adopting::Names(from), SetAnswer::Adopted(AdoptReply::Done)) => {
            let next = from + SET_CHUNK;
            Some(if next < copy.names.len() {
                Adopting::Names(next)
            } else {
                Adopting::List {
                    offset: 0,
                    extra: Vec::new(),
                }
            })
        }
        (Adopting::List { offset, mut extra }, SetAnswer::Listed(page)) => {
            if page.is_empty() {
                return Some(if extra.is_empty() {
                    Adopting::Done
                } else {
                    Adopting::Remove { extra, next: 0 }
                });
            }
            let wanted: BTreeSet<&str> = copy.names.iter().map(|(n, _)| n.as_str()).collect();
            let n = page.len();
            extra.extend(page.into_iter().filter(|p| !wanted.contains(p.as_str())));
            Some(Adopting::List {
                offset: offset + n,
                extra,
            })
        }
        (Adopting::Remove { extra, next }, SetAnswer::Adopted(AdoptReply::Done)) => {
            let next = next + SET_CHUNK;
            Some(if next < extra.len() {
                Adopting::Remove { extra, next }
            } else {
                Adopting::Done
            })
        }
        // Done, refused midway (an operator ended it after its hold), or failed.
        _ => None,
    }
}

/// This replica's configured list.
#[derive(Debug, Clone)]
pub(crate) struct Configured {
    pub(crate) names: Arc<[String]>,
    /// Its version (0: unversioned, a seed only).
    pub(crate) version: u64,
    pub(crate) digest: String,
    /// This replica's lease (no grant for this long after the group is created).
    pub(crate) lease: Duration,
    /// This replica's renew interval: on a server that has granted on its own history
    /// for more than a lease, a new group grants after this long instead (the replicas
    /// started together join meanwhile).
    pub(crate) gather: Duration,
}

#[derive(Debug)]
pub(crate) struct SetSync {
    configured: Configured,
    /// The last complete copy of the group's set.
    copy: Option<Arc<SetCopy>>,
    job: Option<Job>,
    /// The job's next step waits for the next tick: a seed's chunk that failed (nobody
    /// else would complete the set it began), or the next page of a read in a wide
    /// group (N replicas reading the set back to back at once would take the server
    /// for seconds).
    at_tick: bool,
    /// The highest fence the group is known to have issued (ticks carry it).
    highest_fence: Fence,
    /// How the configured list differs from the copy, if it does.
    difference: Option<ListDifference>,
    /// The configured names' checksum, as the group keeps its set's
    /// ([`set_checksum`]).
    checksum: u64,
    /// How many first pages of the set were read (each carries the preferences), and
    /// the preferences the last one carried.
    first_pages: u64,
    preferences: Vec<(String, String)>,
}

impl SetSync {
    pub(crate) fn new(configured: Configured) -> Self {
        let checksum = set_checksum(configured.names.iter().map(String::as_str));
        Self {
            checksum,
            configured,
            copy: None,
            job: None,
            at_tick: false,
            highest_fence: Fence(0),
            difference: None,
            first_pages: 0,
            preferences: Vec::new(),
        }
    }

    /// How many first pages of the set were read so far, and the preferences the last
    /// one carried.
    pub(crate) fn preferences(&self) -> (u64, &[(String, String)]) {
        (self.first_pages, &self.preferences)
    }

    /// How this replica's configured list differs from the group's set, as of the last
    /// complete copy (`None`: it does not, or no copy has been read yet, or this
    /// replica is about to apply its newer versioned list).
    pub(crate) fn difference(&self) -> Option<&ListDifference> {
        self.difference.as_ref()
    }

    /// The copy of the set, if complete.
    pub(crate) fn copy(&self) -> Option<&SetCopy> {
        self.copy.as_deref()
    }

    /// Whether this replica's versioned list differs from the group's at the same
    /// version (the group's is followed).
    pub(crate) fn list_differs(&self, set: Option<&SetInfo>) -> bool {
        self.difference.is_some()
            || set.is_some_and(|set| {
                self.configured.version > 0
                    && set.version == self.configured.version
                    && !set.digest.is_empty()
                    && set.digest != self.configured.digest
            })
    }

    /// A tick's view of the set (`None`: the group does not exist): the first step of a
    /// job to start, if one is due. `life` draws a new group's id.
    pub(crate) fn on_tick(
        &mut self,
        set: Option<&SetInfo>,
        grant_wait: Duration,
        lifetime: &str,
        life: impl FnOnce() -> String,
    ) -> Option<SetOp> {
        if let Some(set) = set {
            self.highest_fence = self.highest_fence.max(set.highest_fence);
        }
        if self.at_tick && set.is_none() {
            // The group it was seeding or reading is gone (Redis lost it): start again.
            self.at_tick = false;
            self.job = None;
        }
        if self.job.is_some() {
            return std::mem::take(&mut self.at_tick)
                .then(|| self.step())
                .flatten();
        }
        let job = match set {
            None => match &self.copy {
                // Redis lost the group: restore it from the set this replica saw.
                Some(copy) => Some(self.restore(copy.clone())),
                // Nobody here saw it (or it never existed): seed it.
                None => Some(Job::Seed {
                    life: life(),
                    next: 0,
                }),
            },
            Some(set) => self.due(set, grant_wait, lifetime),
        };
        self.job = job;
        self.step()
    }

    /// The job a tick that found the group calls for.
    fn due(&self, set: &SetInfo, grant_wait: Duration, lifetime: &str) -> Option<Job> {
        let window = !grant_wait.is_zero();
        if let Some(copy) = &self.copy {
            // Created again, not granting yet: a newer set this replica saw wins over a
            // seed (from some replica's configured list) or an older restore.
            let newer = match set.origin {
                Origin::Seed => copy.life != set.life,
                Origin::Restore => copy.life == set.life && copy.set_version > set.set_version,
                Origin::Adopt | Origin::Unknown => false,
            };
            // A restore of this very copy whose replica stopped midway: complete it.
            let unfinished = set.origin == Origin::Restore
                && copy.life == set.life
                && copy.set_version == set.set_version
                && set.count < set.restore_count;
            if (window && newer) || unfinished {
                return Some(self.restore(copy.clone()));
            }
            // Seeded again from a list while this replica (and every replica that saw
            // the set) was away, and granting already: the operator's changes this
            // copy holds are brought back, as their add and remove would (adopt.lua
            // refuses if an operator changed the new group since). Or an adopt under
            // way, or stopped midway: go on with it if it is of this very copy (else
            // adopt.lua refuses, and this replica reads the group's set).
            let seeded_over = !window
                && set.origin == Origin::Seed
                && copy.life != set.life
                && copy.version >= set.version;
            let adopting = !window && set.origin == Origin::Adopt && copy.life != set.life;
            if seeded_over || adopting {
                return Some(Job::Adopt {
                    copy: copy.clone(),
                    seeded: set.life.clone(),
                    at: Adopting::Begin,
                });
            }
        }
        let fresh = self.copy.as_ref().is_some_and(|c| {
            c.life == set.life && c.set_version == set.set_version && c.lifetime == lifetime
        });
        if !fresh {
            // Not while the group is being created: its set is still growing (a seed
            // changes it chunk by chunk), and a copy read now would be read again.
            return (!window).then(|| Job::Read {
                copy: SetCopy {
                    lifetime: lifetime.to_owned(),
                    ..SetCopy::default()
                },
                offset: 0,
            });
        }
        let c = &self.configured;
        let newer_list = c.version > set.version
            || (c.version > 0 && c.version == set.version && set.digest.is_empty());
        (newer_list && !window).then_some(Job::Apply(Apply::Begin))
    }

    fn restore(&self, copy: Arc<SetCopy>) -> Job {
        Job::Restore {
            of: Restored {
                life: copy.life.clone(),
                set_version: copy.set_version,
                grant_delay: copy.lease.max(self.configured.lease),
                count: copy.names.len(),
            },
            copy,
            next: None,
        }
    }

    /// The step the current job is at.
    fn step(&self) -> Option<SetOp> {
        let c = &self.configured;
        let chunk = |from: usize| -> Vec<String> {
            c.names.iter().skip(from).take(SET_CHUNK).cloned().collect()
        };
        Some(match self.job.as_ref()? {
            Job::Read { offset, .. } => SetOp::Read { offset: *offset },
            Job::Seed { life, next } => SetOp::Seed {
                life: life.clone(),
                names: chunk(*next),
                grant_delay: c.lease,
                lease: c.lease,
                gather: c.gather,
            },
            Job::Restore { of, copy, next } => SetOp::Restore(match next {
                None => RestoreStep::Begin {
                    of: of.clone(),
                    version: copy.version,
                    digest: copy.digest.clone(),
                    lease: copy.lease.max(c.lease),
                    highest_fence: copy.highest_fence.max(self.highest_fence),
                    weighted: copy.weighted,
                    weights_version: copy.weights_version,
                    drained: copy.drained.clone(),
                    preferences: copy.preferences.clone(),
                    names: copy.names.iter().take(SET_CHUNK).cloned().collect(),
                },
                Some(from) => RestoreStep::Add {
                    of: of.clone(),
                    names: copy
                        .names
                        .iter()
                        .skip(*from)
                        .take(SET_CHUNK)
                        .cloned()
                        .collect(),
                },
            }),
            Job::Adopt { copy, seeded, at } => {
                let step = match at {
                    Adopting::Begin => AdoptStep::Begin {
                        seeded: seeded.clone(),
                        version: copy.version,
                        digest: copy.digest.clone(),
                        highest_fence: copy.highest_fence.max(self.highest_fence),
                        drained: copy.drained.clone(),
                        preferences: copy.preferences.clone(),
                    },
                    Adopting::Names(from) => AdoptStep::Names(
                        copy.names
                            .iter()
                            .skip(*from)
                            .take(SET_CHUNK)
                            .cloned()
                            .collect(),
                    ),
                    Adopting::List { offset, .. } => return Some(SetOp::List { offset: *offset }),
                    Adopting::Remove { extra, next } => AdoptStep::Remove(
                        extra.iter().skip(*next).take(SET_CHUNK).cloned().collect(),
                    ),
                    Adopting::Done => AdoptStep::Done,
                };
                SetOp::Adopt(Adopt {
                    life: copy.life.clone(),
                    set_version: copy.set_version,
                    step,
                })
            }
            Job::Apply(Apply::Begin | Apply::SeedBegin) => SetOp::Begin { version: c.version },
            Job::Apply(Apply::Add(from)) => SetOp::Add {
                version: c.version,
                names: chunk(*from),
            },
            Job::Apply(Apply::List { offset, .. }) => SetOp::List { offset: *offset },
            Job::Apply(Apply::Remove { extra, next }) => SetOp::Remove {
                version: c.version,
                names: extra.iter().skip(*next).take(SET_CHUNK).cloned().collect(),
            },
            Job::Apply(Apply::Done) => SetOp::Done {
                version: c.version,
                digest: c.digest.clone(),
            },
        })
    }

    /// The answer to the step in flight, in a group of `members` live members: the next
    /// step, if any (none yet if it waits for the next tick). `changed`: whether the
    /// group's set changed (look again at once).
    pub(crate) fn on_answer(&mut self, answer: SetAnswer, members: usize) -> (Option<SetOp>, bool) {
        let Some(job) = self.job.take() else {
            return (None, false);
        };
        let total = self.configured.names.len();
        let (next, changed) = match (job, answer) {
            // A seed that stopped midway would leave the group with part of the set
            // (an unversioned list only seeds): its chunk goes again at the next tick
            // (a chunk that did get in adds nothing twice).
            (seed @ Job::Seed { .. }, SetAnswer::Failed) => {
                self.at_tick = true;
                (Some(seed), false)
            }
            (_, SetAnswer::Failed) => (None, false),
            (Job::Read { mut copy, offset }, SetAnswer::Page(Some(page))) => {
                if offset == 0 {
                    // The first page carries every preference: take them now, not once
                    // the copy is complete (claims wait for them: see ReplicaMachine).
                    self.preferences.clone_from(&page.preferences);
                    self.first_pages += 1;
                }
                let consistent =
                    offset == 0 || (page.life == copy.life && page.set_version == copy.set_version);
                if !consistent {
                    // The set changed while it was read: read it again.
                    (
                        Some(Job::Read {
                            copy: SetCopy {
                                lifetime: copy.lifetime,
                                ..SetCopy::default()
                            },
                            offset: 0,
                        }),
                        false,
                    )
                } else {
                    // The group's set holds the configured names (the same checksum
                    // and count, every weight 1): they are the copy, and the other
                    // pages need no reading (N replicas reading P names each would
                    // cost the server N × P / 1,000 pages in a cold start).
                    let same = offset == 0
                        && !page.weighted
                        && page.count == total
                        && page.checksum == Some(self.checksum);
                    let n = page.names.len();
                    if same {
                        copy.names = self
                            .configured
                            .names
                            .iter()
                            .map(|p| (p.clone(), 1))
                            .collect();
                    } else {
                        copy.names.extend(page.names);
                    }
                    copy.life = page.life;
                    copy.set_version = page.set_version;
                    copy.version = page.version;
                    copy.digest = page.digest;
                    copy.lease = page.lease;
                    copy.highest_fence = page.highest_fence;
                    copy.weighted = page.weighted;
                    copy.weights_version = page.weights_version;
                    copy.drained = page.drained;
                    if offset == 0 {
                        copy.preferences = page.preferences;
                    }
                    if same || n < STATUS_PAGE {
                        self.difference = difference_between(&self.configured, &copy);
                        self.copy = Some(Arc::new(copy));
                        (None, false)
                    } else {
                        self.at_tick = members > WIDE;
                        (
                            Some(Job::Read {
                                copy,
                                offset: offset + n,
                            }),
                            false,
                        )
                    }
                }
            }
            (Job::Read { .. }, SetAnswer::Page(None)) => (None, false),
            (Job::Seed { life, next }, SetAnswer::Added(AddReply::Added(_))) => {
                let next = next + SET_CHUNK;
                if next < total {
                    (Some(Job::Seed { life, next }), true)
                } else if self.configured.version > 0 {
                    (Some(Job::Apply(Apply::SeedBegin)), true)
                } else {
                    (None, true)
                }
            }
            (Job::Seed { .. }, _) => (None, true),
            (Job::Restore { of, copy, next }, SetAnswer::Ok(true)) => {
                // The begin brought the first chunk.
                let from = next.map_or(SET_CHUNK, |n| n + SET_CHUNK);
                if from < copy.names.len() {
                    (
                        Some(Job::Restore {
                            of,
                            copy,
                            next: Some(from),
                        }),
                        true,
                    )
                } else {
                    (None, true)
                }
            }
            (Job::Restore { .. }, _) => (None, true),
            (
                Job::Adopt {
                    at: Adopting::Begin,
                    copy,
                    ..
                },
                SetAnswer::Adopted(AdoptReply::Refused(_)),
            ) => {
                // The group keeps its set (an operator changed it since its seed, or it
                // is not the one this replica saw): this copy is history. Read the
                // group's instead, so that it is not offered again.
                (
                    Some(Job::Read {
                        copy: SetCopy {
                            lifetime: copy.lifetime.clone(),
                            ..SetCopy::default()
                        },
                        offset: 0,
                    }),
                    false,
                )
            }
            (Job::Adopt { copy, seeded, at }, answer) => match adopted(&copy, at, answer) {
                Some(at) => (Some(Job::Adopt { copy, seeded, at }), true),
                None => (None, true),
            },
            (Job::Apply(step), answer) => match self.apply(step, answer) {
                Some(next) => (Some(Job::Apply(next)), true),
                None => (None, true),
            },
            (_, _) => (None, false),
        };
        self.job = next;
        if self.at_tick {
            return (None, changed);
        }
        (self.step(), changed)
    }

    /// The versioned list's next step. Creating a group (after a seed) or an unversioned
    /// list: nothing more. A versioned list takes the version first, then adds every
    /// name and removes the others, each step only while the group is still at that
    /// version (a newer list applied meanwhile wins; an older one never undoes this one),
    /// and records its digest last (a replica that finds the digest missing, after a
    /// crash midway, applies it again). Replicas applying the same list at once do no
    /// harm.
    fn apply(&self, step: Apply, answer: SetAnswer) -> Option<Apply> {
        let c = &self.configured;
        match (step, answer) {
            (Apply::SeedBegin, SetAnswer::Ok(true)) => Some(Apply::Done),
            (Apply::Begin, SetAnswer::Ok(true)) => Some(Apply::Add(0)),
            (Apply::Add(from), SetAnswer::Added(AddReply::Added(_))) => {
                let next = from + SET_CHUNK;
                if next < c.names.len() {
                    Some(Apply::Add(next))
                } else {
                    Some(Apply::List {
                        offset: 0,
                        extra: Vec::new(),
                    })
                }
            }
            (Apply::List { offset, mut extra }, SetAnswer::Listed(page)) => {
                if page.is_empty() {
                    return if extra.is_empty() {
                        Some(Apply::Done)
                    } else {
                        Some(Apply::Remove { extra, next: 0 })
                    };
                }
                let wanted: BTreeSet<&str> = c.names.iter().map(String::as_str).collect();
                let n = page.len();
                extra.extend(page.into_iter().filter(|p| !wanted.contains(p.as_str())));
                Some(Apply::List {
                    offset: offset + n,
                    extra,
                })
            }
            (Apply::Remove { extra, next }, SetAnswer::Removed(RemoveReply::Removed(_))) => {
                let next = next + SET_CHUNK;
                if next < extra.len() {
                    Some(Apply::Remove { extra, next })
                } else {
                    Some(Apply::Done)
                }
            }
            // Done, stale (a newer list won), or refused: the job ends.
            _ => None,
        }
    }

    /// The highest fence the group is known to have issued.
    pub(crate) fn highest_fence(&self) -> Fence {
        self.highest_fence
    }
}
