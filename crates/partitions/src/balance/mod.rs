//! The balancing rules, as pure code: [`plan`] (who may claim and who hands over, from
//! one view of the group) and [`state`] (one replica's decisions over time: sessions,
//! settling, hysteresis, orphans, claims). Neither does I/O, reads a clock or draws a
//! random number of its own: time and randomness are passed in.

pub(crate) mod plan;
pub(crate) mod state;
pub(crate) mod weighted;
