//! `--plot`: the ownership timeline as an SVG chart. One row per partition, time
//! across, one colour per owner; script events are numbered vertical lines, listed
//! above the chart with the measured hand-over time.

use std::path::Path;
use std::time::Duration;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::BoxError;
use crate::state::{Event, Outcome, Span, Timeline, replica_number};
use crate::view::secs;

/// Tableau 10: distinct, and legible for the common colour-vision deficiencies.
const PALETTE: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(89, 161, 79),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
    RGBColor(186, 176, 172),
];

const WIDTH: u32 = 1200;
const LEGEND: u32 = 250;
const LABEL_ROW: u32 = 20;

/// Writes the chart to `path`.
///
/// # Errors
/// If the file cannot be written.
pub(crate) fn write(
    path: &Path,
    timeline: &Timeline,
    events: &[Event],
    title: &str,
) -> Result<(), BoxError> {
    std::fs::write(path, svg(timeline, events, title)?)?;
    Ok(())
}

/// The chart as SVG text.
pub(crate) fn svg(timeline: &Timeline, events: &[Event], title: &str) -> Result<String, BoxError> {
    let rows = timeline.partitions.len().max(1);
    let row_px = (600 / rows).clamp(3, 18) as u32;
    // The title, a row per event label, then the row of the events' badges.
    let top = 56 + LABEL_ROW * events.len() as u32 + 24;
    let height = top + row_px * rows as u32 + 60;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let (main, legend) = root.split_horizontally(WIDTH - LEGEND);
        main.draw(&Text::new(
            title.to_owned(),
            (10, 12),
            ("sans-serif", 22).into_font().color(&BLACK),
        ))?;
        let end = timeline.end.as_secs_f64().max(0.001);
        let p = rows as f64;
        let mut chart = ChartBuilder::on(&main)
            .margin_top(top as i32)
            .margin_left(10)
            .margin_right(20)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..end, -0.5f64..p - 0.5)?;
        let label = |y: &f64| {
            let r = y.round();
            if (y - r).abs() > 1e-6 || r < 0.0 || r >= p {
                return String::new();
            }
            timeline
                .partitions
                .get(rows - 1 - r as usize)
                .cloned()
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("seconds since the start")
            .y_labels(rows.min(40) + 1)
            .y_label_formatter(&label)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 15))
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(225, 225, 225))
            .draw()?;

        let row = |i: usize| (rows - 1 - i) as f64;
        let half = if row_px >= 6 { 0.42 } else { 0.5 };
        let pieces = pieces(timeline);
        for piece in &pieces {
            let color = owner_color(&piece.span.owner);
            let color = if piece.faded { fade(color) } else { color };
            let y = row(piece.span.partition);
            chart.draw_series(std::iter::once(Rectangle::new(
                [
                    (piece.span.start.as_secs_f64(), y - half),
                    (piece.span.end.as_secs_f64(), y + half),
                ],
                color.filled(),
            )))?;
        }

        // Each event: a vertical line from a numbered badge just above the chart down
        // to the axis, and its label in a numbered list above the badges, left-aligned:
        // no label crosses a line, however close the events or long the labels.
        let (_, bottom) = chart.backend_coord(&(0.0, -0.5));
        let label_y = |k: usize| 56 + (LABEL_ROW * k as u32) as i32;
        let badge_y = label_y(events.len()) + 6;
        let xs: Vec<i32> = events
            .iter()
            .map(|e| chart.backend_coord(&(e.at.as_secs_f64(), 0.0)).0)
            .collect();
        for x in &xs {
            main.draw(&PathElement::new(
                vec![(*x, badge_y), (*x, bottom)],
                RGBColor(40, 40, 40).stroke_width(2),
            ))?;
        }
        let font = ("sans-serif", 16).into_font().color(&BLACK);
        let badge_font = ("sans-serif", 14).into_font().color(&WHITE);
        for (k, (e, x)) in events.iter().zip(&xs).enumerate() {
            let number = (k + 1).to_string();
            main.draw(&Text::new(
                format!("{number}  {}", event_label(e, cold_start(timeline, e.at))),
                (10, label_y(k)),
                font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
            main.draw(&Rectangle::new(
                [(x - 9, badge_y - 9), (x + 9, badge_y + 9)],
                RGBColor(40, 40, 40).filled(),
            ))?;
            main.draw(&Text::new(
                number,
                (*x, badge_y),
                badge_font.clone().pos(Pos::new(HPos::Center, VPos::Center)),
            ))?;
        }

        let pale = pieces
            .iter()
            .find(|p| p.faded)
            .map(|p| fade(owner_color(&p.span.owner)));
        draw_legend(&legend, timeline, pale, top as i32)?;
        root.present()?;
    }
    Ok(out)
}

/// An event's label: what happened and what followed.
fn event_label(e: &Event, cold: bool) -> String {
    match &e.outcome {
        Outcome::Converged { after, moved, .. } if cold => {
            format!(
                "{}: cold start, all {moved} owned after {} (a new group grants after one renew interval)",
                e.label,
                secs(*after)
            )
        }
        Outcome::Converged { after, moved, .. } => {
            format!("{}: re-owned in {}, {moved} moved", e.label, secs(*after))
        }
        _ => format!("{}: did not converge", e.label),
    }
}

/// Whether no partition had an owner at `at` (the fleet's first start).
fn cold_start(timeline: &Timeline, at: Duration) -> bool {
    !timeline.spans.iter().any(|s| s.start <= at && at < s.end)
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    timeline: &Timeline,
    pale: Option<RGBColor>,
    top: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = ("sans-serif", 17).into_font().color(&BLACK);
    area.draw(&Text::new("lease holder", (10, top), font.clone()))?;
    let mut y = top + 24;
    let mut entry = |color: RGBColor, text: String| {
        let r = area.draw(&Rectangle::new([(10, y - 7), (28, y + 7)], color.filled()));
        let t = area.draw(&Text::new(
            text,
            (36, y),
            font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ));
        y += 24;
        r.and(t)
    };
    for owner in timeline.owners() {
        entry(owner_color(&owner), owner)?;
    }
    if let Some(pale) = pale {
        entry(pale, "pale: held by a replica".into())?;
        y -= 6;
        area.draw(&Text::new(
            "that is gone until its",
            (36, y),
            font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        area.draw(&Text::new(
            "lease expires",
            (36, y + 18),
            font.clone().pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        y += 48;
    }
    area.draw(&Rectangle::new(
        [(10, y - 7), (28, y + 7)],
        BLACK.stroke_width(1),
    ))?;
    area.draw(&Text::new(
        "white: unowned",
        (36, y),
        font.pos(Pos::new(HPos::Left, VPos::Center)),
    ))?;
    Ok(())
}

/// A span, or the part of it before or after its owner was taken out.
#[derive(Debug, Clone, PartialEq)]
struct Piece {
    span: Span,
    /// The owner was gone by then: only its unexpired lease held the partition.
    faded: bool,
}

/// Splits each span at the time its owner was taken out.
fn pieces(timeline: &Timeline) -> Vec<Piece> {
    let gone = |owner: &str| -> Option<Duration> {
        timeline
            .marks
            .iter()
            .find(|m| m.removed.as_deref() == Some(owner))
            .map(|m| m.at)
    };
    let mut out = Vec::new();
    for span in &timeline.spans {
        match gone(&span.owner) {
            Some(at) if at < span.end => {
                if span.start < at {
                    out.push(Piece {
                        span: Span {
                            end: at,
                            ..span.clone()
                        },
                        faded: false,
                    });
                }
                out.push(Piece {
                    span: Span {
                        start: span.start.max(at),
                        ..span.clone()
                    },
                    faded: true,
                });
            }
            _ => out.push(Piece {
                span: span.clone(),
                faded: false,
            }),
        }
    }
    out
}

fn owner_color(owner: &str) -> RGBColor {
    PALETTE[replica_number(owner).saturating_sub(1) % PALETTE.len()]
}

/// The colour mixed 70 % towards white.
fn fade(c: RGBColor) -> RGBColor {
    let f = |v: u8| v + ((255 - v) as f32 * 0.7) as u8;
    RGBColor(f(c.0), f(c.1), f(c.2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Balance, Mark};

    fn timeline() -> (Timeline, Vec<Event>) {
        let ms = Duration::from_millis;
        let names: Vec<String> = (0..2).map(|i| format!("p{i}")).collect();
        let mut t = Timeline::new(names);
        let o = |a: &str, b: &str| vec![Some(a.to_owned()), Some(b.to_owned())];
        t.record(ms(0), &[None, None]);
        t.record(ms(100), &o("replica-1", "replica-2"));
        t.marks.push(Mark {
            at: ms(200),
            label: "kill replica-2".into(),
            removed: Some("replica-2".into()),
        });
        t.record(ms(400), &o("replica-1", "replica-1"));
        t.marks.push(Mark {
            at: ms(480),
            label: "stop replica-1 (graceful shutdown)".into(),
            removed: Some("replica-1".into()),
        });
        t.finish(ms(500));
        let events = vec![
            Event {
                at: ms(0),
                label: "start 2 replicas".into(),
                outcome: Outcome::Converged {
                    after: ms(100),
                    moved: 2,
                    spread: 0,
                },
            },
            Event {
                at: ms(200),
                label: "kill replica-2".into(),
                outcome: Outcome::TimedOut(Balance::of(&[], &[])),
            },
            Event {
                at: ms(480),
                label: "stop replica-1 (graceful shutdown)".into(),
                outcome: Outcome::Converged {
                    after: ms(10),
                    moved: 2,
                    spread: 0,
                },
            },
        ];
        (t, events)
    }

    #[test]
    fn spans_of_a_removed_owner_fade_after_its_removal() {
        let (t, _) = timeline();
        let got: Vec<_> = pieces(&t)
            .into_iter()
            .map(|p| {
                (
                    p.span.partition,
                    p.span.owner,
                    p.span.start.as_millis(),
                    p.span.end.as_millis(),
                    p.faded,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (1, "replica-2".into(), 100, 200, false),
                (1, "replica-2".into(), 200, 400, true),
                (0, "replica-1".into(), 100, 480, false),
                (0, "replica-1".into(), 480, 500, true),
                (1, "replica-1".into(), 400, 480, false),
                (1, "replica-1".into(), 480, 500, true),
            ]
        );
    }

    #[test]
    fn svg_has_spans_labels_and_legend() {
        let (t, events) = timeline();
        let svg = svg(&t, &events, "demo title").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        for needle in [
            "demo title",
            "start 2 replicas: cold start, all 2 owned after 0.10 s",
            "kill replica-2: did not converge",
            "replica-1",
            "white: unowned",
            "\np0\n",
        ] {
            assert!(svg.contains(needle), "{needle} missing");
        }
        assert!(
            !svg.contains("re-owned in 0.10 s"),
            "the cold start is labelled as such"
        );
        assert_eq!(fade(RGBColor(255, 0, 100)), RGBColor(255, 178, 208));
    }

    /// Every label is listed above the event lines, which start below the list: no
    /// line crosses a label (the "stop" label once ran over the "add" line and read
    /// as the wrong event's).
    #[test]
    fn no_event_line_crosses_a_label() {
        let (t, events) = timeline();
        let svg = svg(&t, &events, "demo title").unwrap();
        let attr = |line: &str, name: &str| -> i32 {
            let rest = &line[line.find(&format!("{name}=\"")).expect(name) + name.len() + 2..];
            rest[..rest.find('"').unwrap()].parse().unwrap()
        };
        let lines: Vec<&str> = svg.lines().collect();
        let label_ys: Vec<i32> = (0..lines.len())
            .filter(|&i| {
                (1..=events.len()).any(|k| lines[i].trim_start().starts_with(&format!("{k}  ")))
            })
            .filter_map(|i| lines[..i].iter().rev().find(|l| l.contains("<text")))
            .map(|l| attr(l, "y"))
            .collect();
        assert_eq!(label_ys.len(), events.len(), "one label per event");
        let line_tops: Vec<i32> = lines
            .iter()
            .filter(|l| l.contains(r#"stroke-width="2""#))
            .map(|l| {
                let points = &l[l.find("points=\"").unwrap() + 8..];
                let first = &points[..points.find(' ').unwrap_or(points.len())];
                first[first.find(',').unwrap() + 1..]
                    .parse::<i32>()
                    .unwrap()
            })
            .collect();
        assert_eq!(line_tops.len(), events.len(), "one line per event");
        let lowest_label = label_ys.iter().max().unwrap();
        assert!(
            line_tops.iter().all(|top| top > lowest_label),
            "lines from {line_tops:?}, labels at {label_ys:?}"
        );
    }
}
