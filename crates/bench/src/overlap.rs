//! Two owners at once, judged by local deadlines: the checks of `--lose-writes`.
//!
//! A term is *entitled* to run until its holder's local deadline: the send time of its
//! last successful acquire or renewal plus the lease (the library's own deadline is
//! that minus its safety margin, so this errs towards finding an overlap). A later term
//! of the same duty or partition that starts before an earlier term of **another**
//! holder is entitled to end overlaps it, whether or not that holder noticed in time:
//! a holder cut off from the new primary would have gone on working until then. A
//! term of the same holder (the same process) is no overlap: it knew its earlier term
//! had ended.
//!
//! Fences must grow from term to term: a term whose fence is not above every fence
//! issued before it (by start time) is a repeat, and a fenced resource could no longer
//! tell the two holders apart.

use serde::Serialize;

use crate::clock::span_ms;
use crate::stats::round3;

/// One term of a duty or partition, on the wall clock every process shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Who held it: a replica id (with its incarnation, for partition replicas).
    pub holder: String,
    /// Its fence.
    pub fence: u64,
    /// When its duty or callback started (wall µs).
    pub start_us: u64,
    /// Until when its holder may believe it holds the term (wall µs): its last
    /// successful send + the lease, or when its process died or released it on
    /// purpose. `None`: still running when the run ended.
    pub entitled_until_us: Option<u64>,
}

/// A term that started while an earlier term of another holder was still entitled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overlap {
    /// The new term's holder.
    pub holder: String,
    /// Its fence.
    pub fence: u64,
    /// When it started (wall µs).
    pub start_us: u64,
    /// The earlier holder entitled the longest after that start.
    pub previous: String,
    /// That holder's fence.
    pub previous_fence: u64,
    /// How long that holder was still entitled after the new term started (ms;
    /// `null`: until the end of the run).
    pub overlap_ms: Option<f64>,
}

/// A term whose fence was not above every fence of the terms that started before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FenceRepeat {
    /// The term's holder.
    pub holder: String,
    /// Its fence.
    pub fence: u64,
    /// The highest fence issued before it.
    pub highest_before: u64,
    /// Whose term that was.
    pub highest_holder: String,
}

/// Sorted by start (then fence): the order the checks read terms in.
fn by_start(terms: &[Term]) -> Vec<&Term> {
    let mut sorted: Vec<&Term> = terms.iter().collect();
    sorted.sort_by_key(|t| (t.start_us, t.fence));
    sorted
}

/// Every term of `terms` (one duty's or one partition's, any order) that started
/// while an earlier-started term of another holder was entitled; at most one entry per
/// term (against the holder entitled longest).
pub fn overlaps(terms: &[Term]) -> Vec<Overlap> {
    let sorted = by_start(terms);
    let mut out = Vec::new();
    for (i, t) in sorted.iter().enumerate() {
        let worst = sorted[..i]
            .iter()
            .filter(|e| e.holder != t.holder)
            .filter(|e| e.entitled_until_us.is_none_or(|until| until > t.start_us))
            .max_by_key(|e| e.entitled_until_us.unwrap_or(u64::MAX));
        if let Some(e) = worst {
            out.push(Overlap {
                holder: t.holder.clone(),
                fence: t.fence,
                start_us: t.start_us,
                previous: e.holder.clone(),
                previous_fence: e.fence,
                overlap_ms: e
                    .entitled_until_us
                    .map(|until| round3(span_ms(t.start_us, until))),
            });
        }
    }
    out
}

/// Every term of `terms` (one duty's or one partition's, any order) whose fence is
/// not above every fence of the terms that started before it.
pub fn fence_repeats(terms: &[Term]) -> Vec<FenceRepeat> {
    let sorted = by_start(terms);
    let mut out = Vec::new();
    let mut highest: Option<&Term> = None;
    for t in sorted {
        if let Some(h) = highest
            && t.fence <= h.fence
        {
            out.push(FenceRepeat {
                holder: t.holder.clone(),
                fence: t.fence,
                highest_before: h.fence,
                highest_holder: h.holder.clone(),
            });
        }
        if highest.is_none_or(|h| t.fence > h.fence) {
            highest = Some(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(holder: &str, fence: u64, start_us: u64, until: Option<u64>) -> Term {
        Term {
            holder: holder.into(),
            fence,
            start_us,
            entitled_until_us: until,
        }
    }

    #[test]
    fn a_new_holder_before_the_old_deadline_overlaps() {
        let terms = [
            term("follower", 2, 5_000, None),
            term("child", 1, 1_000, Some(6_000)),
        ];
        let o = overlaps(&terms);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].holder, "follower");
        assert_eq!(o[0].previous, "child");
        assert_eq!(o[0].overlap_ms, Some(1.0));
        assert!(fence_repeats(&terms).is_empty());
    }

    #[test]
    fn after_the_deadline_or_by_the_same_holder_is_no_overlap() {
        let terms = [
            term("a", 1, 1_000, Some(6_000)),
            term("a", 2, 2_000, Some(9_000)),
            term("b", 3, 9_000, None),
        ];
        assert!(overlaps(&terms).is_empty());
        // Still running at the end: everyone after it overlaps.
        let open = [term("a", 1, 1_000, None), term("b", 2, 50_000, None)];
        assert_eq!(overlaps(&open)[0].overlap_ms, None);
    }

    #[test]
    fn a_fence_not_above_every_earlier_one_repeats() {
        let terms = [
            term("a", 5, 1_000, Some(2_000)),
            term("b", 5, 3_000, Some(4_000)),
            term("c", 4, 5_000, Some(6_000)),
            term("d", 6, 7_000, None),
        ];
        let r = fence_repeats(&terms);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].fence, r[0].highest_before), (5, 5));
        assert_eq!(r[1].highest_holder, "a");
    }
}
