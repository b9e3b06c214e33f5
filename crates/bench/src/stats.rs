//! Min, median and max of a series, rounded to µs.

use serde::Serialize;

/// Min, median and max of a series, in the series' unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// The smallest value.
    pub min: f64,
    /// The middle value (the mean of the two middle values for an even count).
    pub median: f64,
    /// The largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `values` (rounded to 3 decimals); `None` if there are none. NaNs
    /// sort last.
    pub fn of(values: &[f64]) -> Option<Self> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let (&min, &max) = (sorted.first()?, sorted.last()?);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Some(Self {
            min: round3(min),
            median: round3(median),
            max: round3(max),
        })
    }
}

/// Rounds to 3 decimals (µs when the unit is ms).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_count_takes_the_middle_value() {
        let s = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!(
            s,
            Summary {
                min: 1.0,
                median: 3.0,
                max: 5.0
            }
        );
    }

    #[test]
    fn even_count_averages_the_middle_pair() {
        let s = Summary::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(
            s,
            Summary {
                min: 1.0,
                median: 3.0,
                max: 10.0
            }
        );
    }

    #[test]
    fn single_value_and_rounding() {
        let s = Summary::of(&[1.23456]).unwrap();
        assert_eq!(
            s,
            Summary {
                min: 1.235,
                median: 1.235,
                max: 1.235
            }
        );
        assert_eq!(round3(-0.0004), -0.0);
    }

    #[test]
    fn empty_series_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
    }
}
