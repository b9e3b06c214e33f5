//! Min, median and max of a series, percentiles, rounded to µs.

use serde::{Deserialize, Serialize};

/// Min, median and max of a series, in the series' unit, with its nearest-rank 50th
/// and 99th percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The smallest value.
    pub min: f64,
    /// The middle value (the mean of the two middle values for an even count).
    pub median: f64,
    /// The largest value.
    pub max: f64,
    /// The nearest-rank median (the lower middle value for an even count); 0 in
    /// reports from before it.
    #[serde(default)]
    pub p50: f64,
    /// The nearest-rank 99th percentile (the largest value below 100 values); 0 in
    /// reports from before it.
    #[serde(default)]
    pub p99: f64,
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
        let at = |q: f64| percentile(&sorted, q).map_or(0.0, round3);
        Some(Self {
            min: round3(min),
            median: round3(median),
            max: round3(max),
            p50: at(0.5),
            p99: at(0.99),
        })
    }
}

/// The 50th and 99th percentiles and the maximum of a series (nearest rank), in the
/// series' unit; all 0 for an empty series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// The median (the lower middle value for an even count).
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The largest value.
    pub max: f64,
}

impl Percentiles {
    /// Summarises `values` (rounded to 3 decimals). NaNs sort last.
    pub fn of(values: &[f64]) -> Self {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| percentile(&sorted, q).map_or(0.0, round3);
        Self {
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        }
    }
}

/// The nearest-rank `q`-quantile (0 < q ≤ 1) of `sorted` (ascending): the smallest
/// value with at least a fraction `q` of the values at or below it. `None` if empty.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied()
}

/// The median of `values` (the mean of the two middle values for an even count);
/// `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    Summary::of(values).map(|s| s.median)
}

/// The largest of `values`; `None` if empty. NaNs are ignored.
pub fn max_of(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    values.into_iter().filter(|v| !v.is_nan()).reduce(f64::max)
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
                max: 5.0,
                p50: 3.0,
                p99: 5.0,
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
                max: 10.0,
                p50: 2.0,
                p99: 10.0,
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
                max: 1.235,
                p50: 1.235,
                p99: 1.235,
            }
        );
        assert_eq!(round3(-0.0004), -0.0);
    }

    #[test]
    fn empty_series_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(median(&[]), None);
        assert_eq!(max_of([]), None);
        assert_eq!(Percentiles::of(&[]), Percentiles::default());
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let values: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        assert_eq!(
            Percentiles::of(&values),
            Percentiles {
                p50: 100.0,
                p99: 198.0,
                max: 200.0
            }
        );
        let one = Percentiles::of(&[0.0125]);
        assert_eq!((one.p50, one.p99, one.max), (0.013, 0.013, 0.013));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.51), Some(3.0));
        assert_eq!(percentile(&[1.0, 2.0], 0.0), Some(1.0));
    }

    #[test]
    fn median_and_max_of_runs() {
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(max_of([3.0, f64::NAN, 7.5, 1.0]), Some(7.5));
    }
}
