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
use super::view::{Overview, PageJson, PartitionRow};

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

#[derive(Serialize)]
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
        let Some(page) = &frame.page else {
            let error = frame.error.as_deref().unwrap_or("not read yet");
            return event(
                "group",
                &GroupError {
                    group: &frame.group,
                    error,
                },
            );
        };
        let same = self
            .partitions
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(p, &page.partitions));
        let new = frame.moves_total.saturating_sub(self.moves);
        let kept = frame.moves.len();
        let from = kept.saturating_sub(usize::try_from(new).unwrap_or(usize::MAX));
        let json = PageJson {
            head: &page.head,
            partitions: (!same).then_some(page.partitions.as_slice()),
            moves: Some(&frame.moves[from..]),
            error: frame.error.as_deref(),
        };
        self.partitions = Some(page.partitions.clone());
        self.moves = frame.moves_total;
        event("group", &json)
    }
}

fn overview_event(frame: &OverviewFrame) -> Event {
    let json = OverviewJson {
        overview: frame.overview.as_deref(),
        error: frame.error.as_deref(),
    };
    event("overview", &json)
}
