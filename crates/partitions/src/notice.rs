//! The group's notices: every message a group's replicas, scripts and readers send
//! each other on the prefix's channel, with its encoding and decoding. Nothing else
//! builds or parses a channel message.
//!
//! A notice starts with the group's tag (`<prefix>:{<group>}`, [`GroupKeys::notice`]).
//! The tag alone is [`GroupNotice::Changed`], the message every version has sent since
//! the first (it is also what wakes a single duty's followers, so it stays bare). Every
//! other notice is `<tag>\t<version>\t<kind>\t<fields...>`, fields separated by tabs,
//! at version [`NOTICE_VERSION`]. A reader ignores, and counts
//! (`leasehold_group_unknown_notices_total`), a notice of its group whose version or
//! kind it does not know, and reads the untagged forms older versions send
//! (`<tag>\tstep`, `<tag>\tmoved`, `<tag>\twarm\t...`).
//!
//! The move notice is written by `lua/claim.lua` (it publishes in the script that
//! starts the terms); [`GroupNotice::decode`] is its reader, and a real-Redis test
//! checks the two agree.

use std::time::Duration;

use leasehold_election::Fence;
use leasehold_election::ext::ANY_RELEASE;

use crate::coordinator::warm::Warm;
#[cfg(doc)]
use crate::keys::GroupKeys;

/// The version of the notices this crate sends (the second field of every notice but
/// [`GroupNotice::Changed`]).
pub const NOTICE_VERSION: u32 = 1;

/// One notice of a group ([`GroupAdmin::notices`](crate::GroupAdmin::notices)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupNotice {
    /// Something a replica acts on changed: a partition was freed (a release, a leave,
    /// an expiry), a member's state, the set, a weight, a drain or a preference.
    Changed,
    /// A claim started terms for partitions that changed owner.
    Moved(Moved),
    /// A partition's load stepped (a jump of its damped average): replicas tick.
    LoadStep,
    /// A message of a warm move, between the owner and the receiver of a partition.
    WarmMove(WarmMove),
    /// Notices may have been missed: the subscription was lost a while and is back (or
    /// this reader fell behind). A reader that keeps state from notices reads again.
    Missed,
}

/// A claim's notice: `replica` started new terms for `partitions`, and the ledger of
/// moves has their entries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Moved {
    /// The group's incarnation (a random id each time the group is created: a
    /// different one means Redis lost the group and it was made again).
    pub incarnation: String,
    /// The ledger's newest entry before this claim's (`None`: the ledger was empty). A
    /// reader whose last entry is this one missed nothing.
    pub after: Option<String>,
    /// The id of this claim's last ledger entry.
    pub last: String,
    /// The replica that claimed.
    pub replica: String,
    /// Where it serves ([`GroupConfigBuilder::advertise`](crate::GroupConfigBuilder)), if
    /// it said.
    pub address: Option<String>,
    /// Each partition taken, with its new term's fence.
    pub partitions: Vec<(String, Fence)>,
}

/// A warm move's message ([`GroupNotice::WarmMove`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmMove(pub(crate) Warm);

impl WarmMove {
    /// The partition being handed over.
    pub fn partition(&self) -> &str {
        match &self.0 {
            Warm::Prepare { partition, .. } | Warm::Ready { partition, .. } => partition,
        }
    }

    /// The replica that owns it now.
    pub fn from(&self) -> &str {
        match &self.0 {
            Warm::Prepare { from, .. } | Warm::Ready { from, .. } => from,
        }
    }

    /// The replica it goes to.
    pub fn to(&self) -> &str {
        match &self.0 {
            Warm::Prepare { to, .. } | Warm::Ready { to, .. } => to,
        }
    }

    /// Whether this is the receiver's answer (it is ready), rather than the owner's
    /// request to prepare.
    pub fn is_ready(&self) -> bool {
        matches!(self.0, Warm::Ready { .. })
    }
}

/// A message of this group's that this version cannot read: a newer version's, or a
/// kind it does not know. Ignored (and counted) by every reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unknown;

impl GroupNotice {
    /// The message for this notice on the channel of the group whose tag is `tag`;
    /// `None` for a notice that is never sent (`Missed`), or a warm move with a tab or
    /// a line break in a name.
    pub(crate) fn encode(&self, tag: &str) -> Option<String> {
        let v = NOTICE_VERSION;
        match self {
            Self::Changed => Some(tag.to_owned()),
            Self::LoadStep => Some(format!("{tag}\t{v}\tstep")),
            Self::Missed => None,
            Self::WarmMove(WarmMove(warm)) => {
                let (kind, partition, from, to, fence, within) = match warm {
                    Warm::Prepare {
                        partition,
                        from,
                        to,
                        fence,
                        within,
                    } => ("prepare", partition, from, to, fence, within.as_millis()),
                    Warm::Ready {
                        partition,
                        from,
                        to,
                        fence,
                    } => ("ready", partition, from, to, fence, 0),
                };
                (clean(partition) && clean(from) && clean(to)).then(|| {
                    format!(
                        "{tag}\t{v}\t{kind}\t{partition}\t{from}\t{to}\t{}\t{within}",
                        fence.get()
                    )
                })
            }
            Self::Moved(m) => {
                let names_clean = m.partitions.iter().all(|(p, _)| clean(p));
                let address = m.address.as_deref().unwrap_or("");
                if !(clean(&m.incarnation) && clean(&m.replica) && clean(address) && names_clean) {
                    return None;
                }
                let mut s = format!(
                    "{tag}\t{v}\tmoved\t{}\t{}\t{}\t{}\t{address}",
                    m.incarnation,
                    m.after.as_deref().unwrap_or(""),
                    m.last,
                    m.replica,
                );
                for (p, f) in &m.partitions {
                    s.push('\t');
                    s.push_str(p);
                    s.push('\t');
                    s.push_str(&f.get().to_string());
                }
                Some(s)
            }
        }
    }

    /// What `message` on the channel says to readers of the group whose tag is `tag`:
    /// `None` if it is not the group's (another group's, a duty's), `Some(Err)` if it
    /// is the group's but of an unknown version or kind.
    pub(crate) fn decode(tag: &str, message: &str) -> Option<Result<Self, Unknown>> {
        if message == ANY_RELEASE {
            return Some(Ok(Self::Missed));
        }
        let rest = message.strip_prefix(tag)?;
        if rest.is_empty() {
            return Some(Ok(Self::Changed));
        }
        let rest = rest.strip_prefix('\t')?;
        let mut fields = rest.split('\t');
        let first = fields.next()?;
        let decoded = match first {
            // The untagged forms of older versions.
            "step" if fields.clone().next().is_none() => Some(Self::LoadStep),
            "moved" if fields.clone().next().is_none() => Some(Self::Missed),
            "warm" => decode_warm(fields),
            v if v == NOTICE_VERSION.to_string() => match fields.next() {
                Some("step") if fields.next().is_none() => Some(Self::LoadStep),
                Some(kind @ ("prepare" | "ready")) => {
                    let mut again = std::iter::once(kind).chain(fields);
                    decode_warm_fields(&mut again)
                }
                Some("moved") => decode_moved(fields),
                _ => None,
            },
            _ => None,
        };
        Some(decoded.ok_or(Unknown))
    }
}

fn clean(s: &str) -> bool {
    !s.contains(['\t', '\n', '\r'])
}

fn decode_warm<'a>(mut fields: impl Iterator<Item = &'a str>) -> Option<GroupNotice> {
    decode_warm_fields(&mut fields)
}

fn decode_warm_fields<'a>(f: &mut impl Iterator<Item = &'a str>) -> Option<GroupNotice> {
    let (kind, partition, from, to) = (f.next()?, f.next()?, f.next()?, f.next()?);
    let fence = Fence(f.next()?.parse().ok()?);
    let within = Duration::from_millis(f.next()?.parse().ok()?);
    if f.next().is_some() {
        return None;
    }
    let (partition, from, to) = (partition.to_owned(), from.to_owned(), to.to_owned());
    let warm = match kind {
        "prepare" => Warm::Prepare {
            partition,
            from,
            to,
            fence,
            within,
        },
        "ready" => Warm::Ready {
            partition,
            from,
            to,
            fence,
        },
        _ => return None,
    };
    Some(GroupNotice::WarmMove(WarmMove(warm)))
}

fn decode_moved<'a>(mut f: impl Iterator<Item = &'a str>) -> Option<GroupNotice> {
    let incarnation = f.next()?.to_owned();
    let after = Some(f.next()?).filter(|s| !s.is_empty()).map(str::to_owned);
    let last = f.next()?.to_owned();
    let replica = f.next()?.to_owned();
    let address = Some(f.next()?).filter(|s| !s.is_empty()).map(str::to_owned);
    let mut partitions = Vec::new();
    while let Some(p) = f.next() {
        let fence = Fence(f.next()?.parse().ok()?);
        partitions.push((p.to_owned(), fence));
    }
    if last.is_empty() || replica.is_empty() || partitions.is_empty() {
        return None;
    }
    Some(GroupNotice::Moved(Moved {
        incarnation,
        after,
        last,
        replica,
        address,
        partitions,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "lh:{g}";

    fn round_trip(n: &GroupNotice) -> GroupNotice {
        let wire = n.encode(TAG).expect("encodes");
        GroupNotice::decode(TAG, &wire)
            .expect("the group's")
            .expect("known")
    }

    #[test]
    fn every_notice_reads_back_as_itself() {
        let moved = GroupNotice::Moved(Moved {
            incarnation: "abc".into(),
            after: Some("1-0".into()),
            last: "2-1".into(),
            replica: "r1".into(),
            address: Some("10.0.0.7:8080".into()),
            partitions: vec![("t-1".into(), Fence(7)), ("t-2".into(), Fence(9))],
        });
        let first = GroupNotice::Moved(Moved {
            incarnation: "abc".into(),
            after: None,
            last: "2-1".into(),
            replica: "r1".into(),
            address: None,
            partitions: vec![("t-1".into(), Fence(7))],
        });
        let prepare = GroupNotice::WarmMove(WarmMove(Warm::Prepare {
            partition: "p".into(),
            from: "a".into(),
            to: "b".into(),
            fence: Fence(3),
            within: Duration::from_millis(250),
        }));
        let ready = GroupNotice::WarmMove(WarmMove(Warm::Ready {
            partition: "p".into(),
            from: "a".into(),
            to: "b".into(),
            fence: Fence(3),
        }));
        for n in [
            GroupNotice::Changed,
            GroupNotice::LoadStep,
            moved,
            first,
            prepare,
            ready,
        ] {
            assert_eq!(round_trip(&n), n);
        }
        assert_eq!(GroupNotice::Changed.encode(TAG).as_deref(), Some(TAG));
    }

    #[test]
    fn older_versions_untagged_forms_are_read() {
        let read = |m: &str| GroupNotice::decode(TAG, m);
        assert_eq!(read("lh:{g}\tstep"), Some(Ok(GroupNotice::LoadStep)));
        assert_eq!(read("lh:{g}\tmoved"), Some(Ok(GroupNotice::Missed)));
        let warm = read("lh:{g}\twarm\tready\tp\ta\tb\t3\t0").unwrap().unwrap();
        assert!(matches!(warm, GroupNotice::WarmMove(w) if w.is_ready() && w.to() == "b"));
    }

    #[test]
    fn other_groups_and_duties_messages_are_not_the_groups() {
        assert_eq!(GroupNotice::decode(TAG, "lh:{h}"), None);
        assert_eq!(GroupNotice::decode(TAG, "lh:{g}x"), None);
        assert_eq!(GroupNotice::decode(TAG, "lh:{gg}\t1\tstep"), None);
        assert_eq!(GroupNotice::decode(TAG, "lh:lease:billing"), None);
        assert_eq!(
            GroupNotice::decode(TAG, ANY_RELEASE),
            Some(Ok(GroupNotice::Missed))
        );
    }

    #[test]
    fn an_unknown_version_or_kind_is_the_groups_but_never_misread() {
        for m in [
            "lh:{g}\t2\tmoved\tabc\t\t2-1\tr1\t\tt-1\t7",
            "lh:{g}\t1\tteleport\tx",
            "lh:{g}\t1\tmoved\tabc\t\t2-1\tr1\t\tt-1\tnot-a-fence",
            "lh:{g}\t1\tmoved\tabc\t\t2-1\tr1\t",
            "lh:{g}\t1\tstep\textra",
            "lh:{g}\tsomething",
            "lh:{g}\t",
        ] {
            assert_eq!(GroupNotice::decode(TAG, m), Some(Err(Unknown)), "{m:?}");
        }
    }

    #[test]
    fn names_with_tabs_are_never_sent() {
        let bad = GroupNotice::WarmMove(WarmMove(Warm::Ready {
            partition: "p\tq".into(),
            from: "a".into(),
            to: "b".into(),
            fence: Fence(3),
        }));
        assert_eq!(bad.encode(TAG), None);
        assert_eq!(GroupNotice::Missed.encode(TAG), None);
    }
}
