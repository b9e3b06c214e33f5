//! The balancing rules, as pure functions of one replica's view of the group: [`plan`]
//! (by count: who may claim and who hands over) and [`weighted`] (by weight and
//! capacity), and [`prefer`] (which partitions preferences pick, never how many). They
//! do no I/O, read no clock and draw no random number; what they share
//! over time (hysteresis, orphans) is [`crate::replica::policy`]. [`step`] is one
//! member's decision step on them (how much to claim, what to hand over), which the
//! replicas take every tick and [`whatif`] takes for each member of a snapshot of a
//! group to plan a change.

pub(crate) mod plan;
pub(crate) mod prefer;
pub(crate) mod receive;
pub(crate) mod step;
pub(crate) mod weighted;
pub(crate) mod whatif;
