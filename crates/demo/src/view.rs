//! Text rendering: the live terminal view, plain progress lines and the summary. Pure
//! functions of the demo's state; the runner decides when to print them.

use std::fmt::Write as _;
use std::time::Duration;

use crate::state::{Balance, Event, Outcome, Sample, replica_number};

/// What the owner grid's cells mean.
pub(crate) const GRID_LEGEND: &str = "partition owners (rN = replica-N; #n = the partition's n-th term this run,\n\
                                       each with a higher fence; * = lease of a replica that is gone)";

/// Widest line the partition lists and the owner grid aim for.
const WIDTH: usize = 78;

/// ANSI colours in the plot's palette order (blue, orange, red, teal, green, ...).
const ANSI: [&str; 10] = ["34", "33", "31", "36", "32", "93", "35", "95", "91", "90"];

/// One running replica, as its own coordinator sees itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicaRow {
    /// Replica id.
    pub(crate) id: String,
    /// Partitions its view says it owns, sorted.
    pub(crate) owned: Vec<String>,
    /// Still settling (claims nothing yet).
    pub(crate) settling: bool,
    /// The coordinator's last error, if any.
    pub(crate) error: Option<String>,
}

/// Everything one screen shows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame<'a> {
    /// First line: store, sizes, lease.
    pub(crate) header: &'a str,
    /// Since the demo started.
    pub(crate) now: Duration,
    /// Partition names, in order.
    pub(crate) partitions: &'a [String],
    /// The last poll of the store.
    pub(crate) sample: &'a Sample,
    /// The running replicas.
    pub(crate) replicas: &'a [ReplicaRow],
    /// The script so far.
    pub(crate) events: &'a [Event],
    /// Colour owners with ANSI escapes.
    pub(crate) color: bool,
}

/// The live view, one `\n`-separated screen.
pub(crate) fn render(f: &Frame<'_>) -> String {
    let alive: Vec<String> = f.replicas.iter().map(|r| r.id.clone()).collect();
    let balance = Balance::of(&f.sample.owners, &alive);
    let mut out = String::new();
    let _ = writeln!(out, "{} · t = {}", f.header, secs(f.now));
    out.push('\n');
    let _ = writeln!(
        out,
        "{}",
        group_line(f.partitions.len(), f.sample, &balance)
    );
    out.push('\n');
    out.push_str(&replica_table(f.replicas, f.color));
    out.push('\n');
    let _ = writeln!(out, "{GRID_LEGEND}");
    out.push_str(&owner_grid(f.partitions, f.sample, &alive, f.color));
    out.push('\n');
    let _ = writeln!(out, "events");
    for e in f.events {
        let _ = writeln!(out, "  {}", event_line(e, f.now));
    }
    out
}

/// Live replicas (the heartbeat set), cap and floor, and the balance over the
/// running replicas.
pub(crate) fn group_line(partitions: usize, sample: &Sample, balance: &Balance) -> String {
    let n = sample.heartbeats.len();
    let (cap, floor) = if n == 0 {
        (0, 0)
    } else {
        (partitions.div_ceil(n), partitions / n)
    };
    format!(
        "live replicas {n} ({}) · cap {cap} · floor {floor} · owned {}/{} · spread {}",
        sample.heartbeats.join(" "),
        balance.owned,
        balance.total,
        balance.spread
    )
}

/// One line per running replica: id, count, owned partitions.
pub(crate) fn replica_table(rows: &[ReplicaRow], color: bool) -> String {
    let id_w = rows.iter().map(|r| r.id.len()).max().unwrap_or(0).max(7);
    let mut out = format!("{:<id_w$}  owned  partitions\n", "replica");
    for r in rows {
        let list = if r.settling && r.owned.is_empty() {
            "(settling)".to_owned()
        } else {
            truncate_list(&r.owned, WIDTH.saturating_sub(id_w + 9))
        };
        let error = r
            .error
            .as_deref()
            .map(|e| format!("  [{e}]"))
            .unwrap_or_default();
        let id = paint(&format!("{:<id_w$}", r.id), &r.id, color);
        let _ = writeln!(out, "{id}  {:>5}  {list}{error}", r.owned.len());
    }
    out
}

/// Owner and fence of every partition, in columns.
pub(crate) fn owner_grid(
    partitions: &[String],
    sample: &Sample,
    alive: &[String],
    color: bool,
) -> String {
    let cells: Vec<(String, Option<&String>)> = partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let owner = sample.owners.get(i).and_then(Option::as_ref);
            let term = sample.terms.get(i).copied().unwrap_or(0);
            let text = match owner {
                Some(o) => {
                    let gone = if alive.contains(o) { "" } else { "*" };
                    format!("{p} {}{gone} #{term}", short(o))
                }
                None => format!("{p} --"),
            };
            (text, owner)
        })
        .collect();
    let w = cells
        .iter()
        .map(|(t, _)| t.chars().count())
        .max()
        .unwrap_or(1);
    let cols = (WIDTH / (w + 2)).max(1);
    let mut out = String::new();
    for row in cells.chunks(cols) {
        let line: Vec<String> = row
            .iter()
            .map(|(t, owner)| {
                let padded = format!("{t:<w$}");
                match owner {
                    Some(o) => paint(&padded, o, color),
                    None => padded,
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// One event and its outcome.
pub(crate) fn event_line(e: &Event, now: Duration) -> String {
    let outcome = match &e.outcome {
        Outcome::Waiting(b) => format!(
            "waiting {}: {}/{} owned, spread {}",
            secs(now.saturating_sub(e.at)),
            b.owned,
            b.total,
            b.spread
        ),
        Outcome::Converged {
            after,
            moved,
            spread,
        } => format!(
            "re-owned in {} · {moved} moved · spread {spread}",
            secs(*after)
        ),
        Outcome::TimedOut(b) => format!(
            "NOT converged: {}/{} owned, spread {}",
            b.owned, b.total, b.spread
        ),
    };
    format!("{:>9}  {:<36} {outcome}", secs(e.at), e.label)
}

/// A plain progress line while waiting for convergence (no redraw), with why it waits
/// (`why`), if known.
pub(crate) fn progress_line(
    now: Duration,
    e: &Event,
    heartbeats: usize,
    why: Option<&str>,
) -> String {
    match &e.outcome {
        Outcome::Waiting(b) => format!(
            "[{:>8}]   waiting {}: {}/{} owned by running replicas, spread {}, {heartbeats} in the heartbeat set{}",
            secs(now),
            secs(now.saturating_sub(e.at)),
            b.owned,
            b.total,
            b.spread,
            why.map(|w| format!(": {w}")).unwrap_or_default()
        ),
        Outcome::Converged {
            after,
            moved,
            spread,
        } => format!(
            "[{:>8}]   re-owned in {} · {moved} moved · spread {spread}",
            secs(now),
            secs(*after)
        ),
        Outcome::TimedOut(b) => format!(
            "[{:>8}]   NOT converged: {}/{} owned, spread {}",
            secs(now),
            b.owned,
            b.total,
            b.spread
        ),
    }
}

/// The group as the store has it: partition, owner, fence and lease left, in two
/// columns.
pub(crate) fn status_table(partitions: &[String], sample: &Sample) -> String {
    let cells: Vec<String> = partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let owner = sample.owners.get(i).cloned().flatten();
            let fence = sample.fences.get(i).copied().unwrap_or(0);
            let left = sample
                .remaining
                .get(i)
                .copied()
                .flatten()
                .map(|d| format!("{} ms", d.as_millis()))
                .unwrap_or_else(|| "-".to_owned());
            format!(
                "{p:<5} {:<11} {fence:>16} {left:>8}",
                owner.as_deref().unwrap_or("-")
            )
        })
        .collect();
    let half = cells.len().div_ceil(2);
    let w = cells.iter().map(String::len).max().unwrap_or(0);
    let head = format!(
        "{:<5} {:<11} {:>16} {:>8}",
        "part.", "owner", "fence", "lease"
    );
    let mut out = if cells.len() > 1 {
        format!("{head:<w$}    {head}\n")
    } else {
        format!("{head}\n")
    };
    for r in 0..half {
        let left = &cells[r];
        match cells.get(r + half) {
            Some(right) => {
                let _ = writeln!(out, "{left:<w$}    {right}");
            }
            None => {
                let _ = writeln!(out, "{left}");
            }
        }
    }
    out
}

/// The table printed at the end, and the final line the tests read.
pub(crate) fn summary(events: &[Event], last: &Balance, heartbeats: usize) -> String {
    let label_w = events
        .iter()
        .map(|e| e.label.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut out = format!(
        "{:<label_w$}  {:>9}  {:>11}  {:>5}  {:>6}\n",
        "event", "at", "re-owned in", "moved", "spread"
    );
    for e in events {
        let (after, moved, spread) = match &e.outcome {
            Outcome::Converged {
                after,
                moved,
                spread,
            } => (secs(*after), moved.to_string(), spread.to_string()),
            Outcome::Waiting(b) | Outcome::TimedOut(b) => {
                ("timed out".to_owned(), "-".to_owned(), b.spread.to_string())
            }
        };
        let _ = writeln!(
            out,
            "{:<label_w$}  {:>9}  {after:>11}  {moved:>5}  {spread:>6}",
            e.label,
            secs(e.at)
        );
    }
    let _ = writeln!(
        out,
        "final: {}/{} partitions owned by {} running replicas ({heartbeats} in the heartbeat set), spread {}",
        last.owned,
        last.total,
        last.counts.len(),
        last.spread
    );
    out
}

/// Seconds with two decimals: `2.41 s`.
pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// `replica-3` → `r3`.
fn short(replica: &str) -> String {
    match replica_number(replica) {
        0 => replica.to_owned(),
        n => format!("r{n}"),
    }
}

/// `text` in the colour of `replica`, if `color`.
fn paint(text: &str, replica: &str, color: bool) -> String {
    if !color {
        return text.to_owned();
    }
    let code = ANSI[replica_number(replica).saturating_sub(1) % ANSI.len()];
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Space-separated, cut to `max` characters with a `+N` tail.
fn truncate_list(items: &[String], max: usize) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let tail = format!(" +{}", items.len() - i);
        let sep = usize::from(!out.is_empty());
        if out.len() + sep + item.len() > max.saturating_sub(tail.len()) && i + 1 < items.len() {
            out.push_str(&tail);
            return out;
        }
        if sep == 1 {
            out.push(' ');
        }
        out.push_str(item);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Sample {
        Sample {
            owners: vec![
                Some("replica-1".into()),
                Some("replica-2".into()),
                None,
                Some("replica-1".into()),
            ],
            fences: vec![3, 7, 2, 1],
            terms: vec![1, 2, 1, 1],
            remaining: vec![Some(Duration::from_millis(1500)), None, None, None],
            heartbeats: vec!["replica-1".into(), "replica-2".into()],
        }
    }

    fn partitions() -> Vec<String> {
        (0..4).map(|i| format!("p{i:02}")).collect()
    }

    #[test]
    fn grid_shows_owner_fence_and_gone_holders() {
        let grid = owner_grid(&partitions(), &sample(), &["replica-1".into()], false);
        assert_eq!(
            grid, "p00 r1 #1   p01 r2* #2  p02 --      p03 r1 #1\n",
            "{grid}"
        );
        let colored = owner_grid(&partitions(), &sample(), &["replica-1".into()], true);
        assert!(colored.contains("\x1b[34mp00 r1 #1 "));
    }

    #[test]
    fn group_line_uses_the_heartbeat_set() {
        let b = Balance::of(&sample().owners, &["replica-1".into()]);
        assert_eq!(
            group_line(4, &sample(), &b),
            "live replicas 2 (replica-1 replica-2) · cap 2 · floor 2 · owned 2/4 · spread 0"
        );
    }

    #[test]
    fn replica_table_lists_partitions() {
        let rows = [
            ReplicaRow {
                id: "replica-1".into(),
                owned: vec!["p00".into(), "p03".into()],
                settling: false,
                error: None,
            },
            ReplicaRow {
                id: "replica-5".into(),
                owned: vec![],
                settling: true,
                error: Some("boom".into()),
            },
        ];
        assert_eq!(
            replica_table(&rows, false),
            "replica    owned  partitions\n\
             replica-1      2  p00 p03\n\
             replica-5      0  (settling)  [boom]\n"
        );
    }

    #[test]
    fn long_lists_are_cut_with_a_count() {
        let items: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
        let cut = truncate_list(&items, 30);
        assert!(cut.len() <= 30, "{cut}");
        assert!(cut.starts_with("p00 p01"));
        assert!(cut.ends_with(" +34"), "{cut}");
        assert_eq!(truncate_list(&items[..2], 30), "p00 p01");
    }

    #[test]
    fn events_and_summary() {
        let ms = Duration::from_millis;
        let waiting = Event {
            at: ms(5000),
            label: "kill replica-2 (abort: no release)".into(),
            outcome: Outcome::Waiting(Balance::of(&sample().owners, &["replica-1".into()])),
        };
        assert_eq!(
            event_line(&waiting, ms(6500)),
            "   5.00 s  kill replica-2 (abort: no release)   waiting 1.50 s: 2/4 owned, spread 0"
        );
        assert!(
            progress_line(ms(6500), &waiting, 2, None).contains("2/4 owned by running replicas")
        );
        assert!(
            progress_line(ms(6500), &waiting, 2, Some("settling"))
                .ends_with("2 in the heartbeat set: settling")
        );
        assert_eq!(
            progress_line(
                ms(7410),
                &Event {
                    outcome: Outcome::Converged {
                        after: ms(2410),
                        moved: 8,
                        spread: 1
                    },
                    ..waiting.clone()
                },
                3,
                None
            ),
            "[  7.41 s]   re-owned in 2.41 s · 8 moved · spread 1"
        );
        let done = Event {
            outcome: Outcome::Converged {
                after: ms(2410),
                moved: 8,
                spread: 1,
            },
            ..waiting.clone()
        };
        assert!(event_line(&done, ms(9000)).ends_with("re-owned in 2.41 s · 8 moved · spread 1"));
        let last = Balance::of(&sample().owners, &["replica-1".into(), "replica-2".into()]);
        let s = summary(&[done, waiting], &last, 2);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[0],
            "event                                      at  re-owned in  moved  spread"
        );
        assert_eq!(
            lines[1],
            "kill replica-2 (abort: no release)     5.00 s       2.41 s      8       1"
        );
        assert!(lines[2].contains("timed out"));
        assert_eq!(
            lines[3],
            "final: 3/4 partitions owned by 2 running replicas (2 in the heartbeat set), spread 1"
        );
    }

    #[test]
    fn status_table_has_raw_fences() {
        let t = status_table(&partitions(), &sample());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[0].starts_with("part. owner"));
        assert!(
            lines[1].starts_with("p00   replica-1                  3  1500 ms    p02   -"),
            "{t}"
        );
        assert!(lines[2].contains("p01   replica-2                  7        -    p03"));
    }

    #[test]
    fn render_has_every_section() {
        let rows = [ReplicaRow {
            id: "replica-1".into(),
            owned: vec!["p00".into(), "p03".into()],
            settling: false,
            error: None,
        }];
        let screen = render(&Frame {
            header: "leasehold fleet demo",
            now: Duration::from_secs(3),
            partitions: &partitions(),
            sample: &sample(),
            replicas: &rows,
            events: &[],
            color: false,
        });
        for needle in [
            "t = 3.00 s",
            "live replicas 2",
            "replica-1      2  p00 p03",
            "p01 r2* #2",
            "events",
        ] {
            assert!(screen.contains(needle), "{needle} missing from\n{screen}");
        }
    }
}
