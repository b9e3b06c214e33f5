//! Where a graceful leave stands. Plain: tell the group, stop every runner, end the
//! session once the last one has released. Sticky (a rejoin grace): stop every runner
//! without releasing, then mark the session `away` for the grace and exit.

/// Where a graceful leave stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    No,
    /// Waiting for the tick that tells the group this replica is leaving.
    Announcing,
    /// Runners told to stop; waiting for the last one to end.
    Stopping,
    /// The session is being ended.
    Ending,
    /// Sticky: runners told to stop without releasing; waiting for the last one.
    Pausing,
    /// Sticky: the tick that marks the session `away` is due.
    Parking,
    /// Sticky: the tick that marks the session `away` is in flight.
    ParkSent,
    /// Sticky: parked; nothing left to do.
    Parked,
}

impl Leaving {
    /// Whether releases must be refused: a sticky restart keeps every partition.
    pub(crate) fn keeps_leases(self) -> bool {
        matches!(
            self,
            Self::Pausing | Self::Parking | Self::ParkSent | Self::Parked
        )
    }

    /// Whether nothing more is ticked.
    pub(crate) fn done_ticking(self) -> bool {
        matches!(self, Self::Ending | Self::Parked | Self::ParkSent)
    }
}
