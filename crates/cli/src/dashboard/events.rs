//! `GET /events`: one viewer's stream of Server-Sent Events. An `overview` event for
//! each read of the groups and duties, and (with `?group=`) a `group` event for each
//! read of that group, carrying only what this viewer has not had: the partitions when
//! they changed, the moves since its last event.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::Event;
use futures::Stream;
use serde::Serialize;
use tokio::sync::watch;

use super::feed::{Frame, GroupFrame, OverviewFrame};
use super::view::{GroupPage, Overview, PageJson, PartitionRow};

type Rx = watch::Receiver<Option<Frame>>;

/// One viewer: its receivers, and what it has been sent.
struct Viewer {
    overview: Rx,
    group: Option<Rx>,
    /// The partitions last sent (compared by pointer: a reader hands on the same list
    /// while nothing changed).
    partitions: Option<Arc<Vec<PartitionRow>>>,
    /// How many of the reader's moves were sent.
    moves: u64,
}

/// The stream of one viewer of the overview and, if `group`, of a group.
pub fn stream(overview: Rx, group: Option<Rx>) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut overview = overview;
    overview.mark_changed();
    let group = group.map(|mut g| {
        g.mark_changed();
        g
    });
    let viewer = Viewer {
        overview,
        group,
        partitions: None,
        moves: 0,
    };
    futures::stream::unfold(viewer, |mut v| async move {
        let event = v.next().await?;
        Some((Ok(event), v))
    })
}

/// Waits for a change of `rx`; forever if there is none to watch. `None` once the
/// reader is gone (never while this viewer holds a receiver).
async fn changed(rx: Option<&mut Rx>) -> Option<Option<Frame>> {
    match rx {
        Some(rx) => {
            rx.changed().await.ok()?;
            Some(rx.borrow_and_update().clone())
        }
        None => std::future::pending().await,
    }
}

fn event<T: Serialize>(name: &str, data: &T) -> Event {
    Event::default()
        .event(name)
        .json_data(data)
        .unwrap_or_else(|_| Event::default().comment("unserialisable"))
}

/// The overview, or why it could not be read (with the last good one, if any).
#[derive(Serialize)]
struct OverviewJson<'a> {
    #[serde(flatten)]
    overview: Option<&'a Overview>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// A group that was never read, and why.
#[derive(Debug, Serialize)]
struct GroupError<'a> {
    group: &'a str,
    error: &'a str,
}

impl Viewer {
    async fn next(&mut self) -> Option<Event> {
        loop {
            let frame = tokio::select! {
                f = changed(Some(&mut self.overview)) => f?,
                f = changed(self.group.as_mut()) => f?,
            };
            match frame {
                Some(Frame::Overview(o)) => return Some(overview_event(&o)),
                Some(Frame::Group(g)) => return Some(self.group_event(&g)),
                // Not read yet.
                None => {}
            }
        }
    }

    fn group_event(&mut self, frame: &GroupFrame) -> Event {
        match self.group_update(frame) {
            Ok(update) => match &frame.page {
                Some(page) => Event::default()
                    .event("group")
                    .data(group_json(update, page)),
                None => event("group", &update),
            },
            Err(error) => event("group", &error),
        }
    }

    /// What this viewer is sent of `frame`, and notes that it has it: the page with the
    /// partitions if they changed and the moves it has not had; or the error, if the
    /// group was never read.
    fn group_update<'f>(&mut self, frame: &'f GroupFrame) -> Result<PageJson<'f>, GroupError<'f>> {
        let Some(page) = &frame.page else {
            return Err(GroupError {
                group: &frame.group,
                error: frame.error.as_deref().unwrap_or("not read yet"),
            });
        };
        let same = self
            .partitions
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, &page.partitions));
        let new = frame.moves_total.saturating_sub(self.moves);
        let kept = frame.moves.len();
        let from = kept.saturating_sub(usize::try_from(new).unwrap_or(usize::MAX));
        self.partitions = Some(page.partitions.clone());
        self.moves = frame.moves_total;
        Ok(PageJson {
            head: &page.head,
            partitions: (!same).then_some(page.partitions.as_slice()),
            moves: Some(&frame.moves[from..]),
            error: frame.error.as_deref(),
        })
    }
}

/// The data of a `group` event: `update` serialized but for its partitions, which
/// `page` serialized once for every viewer ([`GroupPage::partitions_json`]) and which
/// are added to the object as they are.
fn group_json(mut update: PageJson<'_>, page: &GroupPage) -> String {
    let with_partitions = update.partitions.take().is_some();
    let mut json = serde_json::to_string(&update).unwrap_or_else(|_| "{}".to_owned());
    if with_partitions && json.ends_with('}') {
        json.pop();
        if !json.ends_with('{') {
            json.push(',');
        }
        json.push_str("\"partitions\":");
        json.push_str(page.partitions_json());
        json.push('}');
    }
    json
}

/// The `overview` event of `frame`, its data serialized once for every viewer.
fn overview_event(frame: &OverviewFrame) -> Event {
    let data = frame.json.get_or_init(|| {
        let json = OverviewJson {
            overview: frame.overview.as_deref(),
            error: frame.error.as_deref(),
        };
        serde_json::to_string(&json).unwrap_or_else(|_| "{}".to_owned())
    });
    Event::default().event("overview").data(data.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::alerts::AlertClock;
    use crate::dashboard::view::group_page;
    use crate::output::MoveJson;
    use leasehold_partitions::{GroupStatus, PartitionOwner};

    fn status(owners: &[&str]) -> GroupStatus {
        let mut s = GroupStatus::default();
        s.partitions = owners
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mut p = PartitionOwner::default();
                p.partition = format!("p{i}");
                p.owner = Some((*o).to_owned());
                p
            })
            .collect();
        s
    }

    fn moved(n: u64) -> MoveJson {
        MoveJson {
            id: format!("{n}-0"),
            partition: "p0".into(),
            from: None,
            to: "a".into(),
            cause: "new".into(),
            old_fence: None,
            new_fence: n,
            ended: None,
            started: "2026-12-06T21:00:00.000Z".into(),
            unowned_ms: None,
            held_ms: None,
            state_bytes: None,
        }
    }

    /// A frame of `owners`, handing on `last`'s partitions if the same, with the moves
    /// `1..=total` of which the reader keeps the last `kept`.
    fn frame(owners: &[&str], last: Option<&GroupFrame>, total: u64, kept: u64) -> GroupFrame {
        let rows = last.and_then(|l| l.page.as_ref()).map(|p| &p.partitions);
        let page = group_page("lh", "g", &status(owners), &mut AlertClock::default(), rows);
        GroupFrame {
            group: "g".into(),
            page: Some(Arc::new(page)),
            error: None,
            moves: Arc::new((total - kept + 1..=total).map(moved).collect()),
            moves_total: total,
        }
    }

    fn viewer() -> Viewer {
        Viewer {
            overview: watch::channel(None).1,
            group: None,
            partitions: None,
            moves: 0,
        }
    }

    fn fences(update: &PageJson<'_>) -> Vec<u64> {
        update.moves.unwrap().iter().map(|m| m.new_fence).collect()
    }

    #[test]
    fn a_viewer_gets_the_partitions_when_they_change_and_each_move_once() {
        let mut v = viewer();
        let f1 = frame(&["a", "a"], None, 3, 3);
        let u = v.group_update(&f1).unwrap();
        assert_eq!(u.partitions.map(<[_]>::len), Some(2), "the first time");
        assert_eq!(fences(&u), [1, 2, 3]);
        // Nothing changed: no partitions, no moves.
        let f2 = frame(&["a", "a"], Some(&f1), 3, 3);
        let u = v.group_update(&f2).unwrap();
        assert!(u.partitions.is_none());
        assert!(fences(&u).is_empty());
        // One owner changed and two moves came.
        let f3 = frame(&["a", "b"], Some(&f2), 5, 5);
        let u = v.group_update(&f3).unwrap();
        assert_eq!(u.partitions.unwrap()[1].owner.as_deref(), Some("b"));
        assert_eq!(fences(&u), [4, 5]);
        // A viewer that joins late gets what the reader kept.
        let mut late = viewer();
        let f4 = frame(&["a", "b"], Some(&f3), 600, 500);
        let u = late.group_update(&f4).unwrap();
        assert!(u.partitions.is_some());
        assert_eq!(fences(&u).len(), 500);
        assert_eq!(fences(&u)[0], 101);
        // A viewer that fell behind more than the reader keeps gets those it kept.
        let u = v.group_update(&f4).unwrap();
        assert_eq!(fences(&u).len(), 500);
    }

    #[test]
    fn the_partitions_are_serialized_once_and_spliced_into_each_viewers_event() {
        let f = frame(&["a", "b"], None, 2, 2);
        let page = f.page.as_ref().unwrap();
        let mut v = viewer();
        let whole = serde_json::to_value(v.group_update(&f).unwrap()).unwrap();
        let mut w = viewer();
        let spliced = group_json(w.group_update(&f).unwrap(), page);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&spliced).unwrap(),
            whole
        );
        let once = page.partitions_json().as_ptr();
        let mut x = viewer();
        let _ = group_json(x.group_update(&f).unwrap(), page);
        assert_eq!(page.partitions_json().as_ptr(), once, "serialized once");
        // Without partitions (unchanged since the viewer's last): no key at all.
        let again = group_json(x.group_update(&f).unwrap(), page);
        let again: serde_json::Value = serde_json::from_str(&again).unwrap();
        assert!(again.get("partitions").is_none(), "{again}");
    }

    #[test]
    fn a_group_never_read_is_its_error() {
        let mut v = viewer();
        let f = GroupFrame {
            group: "g".into(),
            page: None,
            error: Some("no group".into()),
            moves: Arc::default(),
            moves_total: 0,
        };
        let e = v.group_update(&f).err().unwrap();
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"group": "g", "error": "no group"})
        );
    }
}
