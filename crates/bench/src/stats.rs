//! Latency summaries: percentiles of a set of durations, in milliseconds.

use std::time::Duration;

use serde::Serialize;

/// Percentiles of one set of samples, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub samples: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Summary {
    /// Nearest-rank percentiles; an empty set gives zeros.
    pub fn of(samples: &[Duration]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut sorted: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let index = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
            sorted[index.clamp(1, sorted.len()) - 1]
        };
        Self {
            samples: sorted.len(),
            mean_ms: sorted.iter().sum::<f64>() / sorted.len() as f64,
            p50_ms: rank(50.0),
            p90_ms: rank(90.0),
            p99_ms: rank(99.0),
            max_ms: sorted[sorted.len() - 1],
        }
    }
}

/// The median of a few durations (start-up runs), in milliseconds.
pub fn median_ms(samples: &[Duration]) -> f64 {
    Summary::of(samples).p50_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let summary = Summary::of(&samples);
        assert_eq!(
            (summary.p50_ms, summary.p90_ms, summary.p99_ms, summary.max_ms),
            (50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(summary.samples, 100);
        assert!((summary.mean_ms - 50.5).abs() < 1e-9);
        assert_eq!(Summary::of(&[]), Summary::default());
        assert_eq!(median_ms(&[Duration::from_millis(7)]), 7.0);
    }
}
