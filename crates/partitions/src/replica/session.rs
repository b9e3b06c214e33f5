//! The session: how this replica stands in its group, and the tokens it uses.

use std::time::Duration;

use leasehold_election::ext::token_with;
use rand::Rng;
use tokio::time::Instant;

use crate::store::protocol::Conflict;

/// How this replica stands in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// The next tick starts (or resumes) a session.
    Joining,
    /// Admitted; claims from `settled_at` on.
    Member { settled_at: Instant },
    /// Refused by the group; the next tick asks again.
    Refused(Conflict),
}

/// This replica's session.
#[derive(Debug)]
pub(crate) struct Session {
    replica: String,
    /// This process's token for the current session: a session it starts is named by
    /// it; a session it resumes keeps its own name, but only this token may tick it.
    process: String,
    /// The session's token: every partition of the session names it.
    token: String,
    standing: Standing,
    /// Whether a session has been admitted before (a later join settles briefly).
    joined_once: bool,
    /// The incarnation of the group the session lives in (its join's reply said): every
    /// tick and claim of the session names it, and the group refuses another.
    incarnation: String,
}

/// What a live session answer meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// The session was extended, nothing new.
    Extended,
    /// A new session, claiming from `settled_at`.
    Joined,
    /// A resumed session (a sticky restart): its partitions are to regrant.
    Resumed,
}

impl Session {
    pub(crate) fn new(replica: &str, rng: &mut impl Rng) -> Self {
        let process = token_with(replica, rng);
        Self {
            replica: replica.to_owned(),
            token: process.clone(),
            process,
            standing: Standing::Joining,
            joined_once: false,
            incarnation: String::new(),
        }
    }

    pub(crate) fn incarnation(&self) -> &str {
        &self.incarnation
    }

    pub(crate) fn process(&self) -> &str {
        &self.process
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    pub(crate) fn member(&self) -> bool {
        matches!(self.standing, Standing::Member { .. })
    }

    pub(crate) fn joined(&self) -> bool {
        self.joined_once
    }

    pub(crate) fn conflict(&self) -> Option<Conflict> {
        match self.standing {
            Standing::Refused(c) => Some(c),
            _ => None,
        }
    }

    /// Still settling, not admitted, or refused: claiming nothing.
    pub(crate) fn settling(&self, now: Instant) -> bool {
        match self.standing {
            Standing::Member { settled_at } => now < settled_at,
            _ => true,
        }
    }

    /// The group said the session is live; `resumed` the token of an `away` session this
    /// join took over; `settle` how long a new session settles; `incarnation` the
    /// group's (a session joined or resumed lives in it from now on).
    pub(crate) fn live(
        &mut self,
        resumed: Option<&str>,
        settle: Duration,
        incarnation: &str,
        now: Instant,
    ) -> Admitted {
        if !self.member() || resumed.is_some() {
            self.incarnation = incarnation.to_owned();
        }
        if let Some(t) = resumed {
            let again = self.member() && self.token == t;
            self.token = t.to_owned();
            self.standing = Standing::Member { settled_at: now };
            self.joined_once = true;
            return if again {
                Admitted::Extended
            } else {
                Admitted::Resumed
            };
        }
        if self.member() {
            return Admitted::Extended;
        }
        self.standing = Standing::Member {
            settled_at: now + settle,
        };
        self.joined_once = true;
        Admitted::Joined
    }

    /// The session has ended: the next one starts with a new token.
    pub(crate) fn lost(&mut self, rng: &mut impl Rng) {
        self.process = token_with(&self.replica, rng);
        self.token = self.process.clone();
        self.standing = Standing::Joining;
    }

    pub(crate) fn refused(&mut self, c: Conflict) {
        self.standing = Standing::Refused(c);
    }
}
