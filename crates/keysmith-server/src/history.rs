//! The status page's charts: what this server handed out of each sequence
//! and the sequence's runway, sampled every [`SAMPLE_EVERY`] into a ring
//! buffer per name holding the last hour ([`POINTS`] samples), and the inline
//! SVG drawn from it on the server (no script draws anything).
//!
//! The buffer lives in the server's memory: it starts empty at each start
//! and a name's points go when its handle closes. It holds at most
//! [`MAX_NAMES`] names.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// How often each open sequence is sampled.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// What a chart spans.
pub(crate) const WINDOW_SECS: f64 = 3600.0;

/// Samples kept per name: one hour at [`SAMPLE_EVERY`].
pub(crate) const POINTS: usize = 360;

/// The most names sampled.
pub(crate) const MAX_NAMES: usize = 100;

/// One sample of a sequence.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Seconds since the server started.
    at: f64,
    /// Values the server's handle had handed out.
    served: u64,
    /// Seconds to the maximum at the rate of the last minutes, if known.
    runway: Option<f64>,
}

/// The ring buffers, by sequence name.
#[derive(Debug, Default)]
pub(crate) struct History {
    names: Mutex<HashMap<String, VecDeque<Sample>>>,
}

/// The points of one name's charts: `(seconds since the server started,
/// value)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Series {
    /// Values per second between consecutive samples.
    pub(crate) rate: Vec<(f64, f64)>,
    /// Runway in seconds.
    pub(crate) runway: Vec<(f64, f64)>,
}

impl History {
    /// Records a sample of `name` at `at` (seconds since the server
    /// started): `served` values handed out by the server's handle so far,
    /// and the runway if known. A new name past [`MAX_NAMES`] is not
    /// recorded; a name's oldest sample goes past [`POINTS`].
    pub(crate) fn record(&self, name: &str, at: f64, served: u64, runway: Option<f64>) {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if !names.contains_key(name) && names.len() >= MAX_NAMES {
            return;
        }
        let ring = names.entry(name.to_owned()).or_default();
        if ring.len() == POINTS {
            ring.pop_front();
        }
        ring.push_back(Sample { at, served, runway });
    }

    /// Forgets every name not in `open` (their handles closed).
    pub(crate) fn retain(&self, open: &HashSet<String>) {
        self.names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|n, _| open.contains(n));
    }

    /// The chart points of `name` (empty without samples). A rate needs two
    /// samples; a handle opened again between two samples (its count went
    /// down) gives no rate point for that step.
    pub(crate) fn series(&self, name: &str) -> Series {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let Some(ring) = names.get(name) else {
            return Series::default();
        };
        let mut out = Series::default();
        let mut prev: Option<Sample> = None;
        for s in ring {
            if let Some(p) = prev
                && s.served >= p.served
                && s.at > p.at
            {
                out.rate
                    .push((s.at, (s.served - p.served) as f64 / (s.at - p.at)));
            }
            if let Some(r) = s.runway {
                out.runway.push((s.at, r));
            }
            prev = Some(*s);
        }
        out
    }
}

/// An inline SVG line chart of `points` over the hour before `now` (both in
/// seconds since the server started; from the first point on while there is
/// less than an hour of them), scaled from 0 to the largest value,
/// with `label` as its accessible name and tooltip (escaped here). `None`
/// with fewer than two points.
pub(crate) fn sparkline(points: &[(f64, f64)], now: f64, label: &str) -> Option<String> {
    const W: f64 = 240.0;
    const H: f64 = 40.0;
    let shown: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(at, v)| *at >= now - WINDOW_SECS && v.is_finite())
        .collect();
    if shown.len() < 2 {
        return None;
    }
    let top = shown.iter().map(|p| p.1).fold(0.0_f64, f64::max);
    let y = |v: f64| {
        if top > 0.0 {
            H - 2.0 - v / top * (H - 4.0)
        } else {
            H - 2.0
        }
    };
    let from = shown[0].0.max(now - WINDOW_SECS);
    let span = (now - from).max(1.0);
    let x = |at: f64| ((at - from) / span * W).clamp(0.0, W);
    let mut line = String::new();
    for (i, (at, v)) in shown.iter().enumerate() {
        let _ = write!(
            line,
            "{}{:.1},{:.1}",
            if i == 0 { "" } else { " " },
            x(*at),
            y(*v)
        );
    }
    let label = crate::html::escape(label);
    Some(format!(
        "<svg class=\"chart\" role=\"img\" aria-label=\"{label}\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" xmlns=\"http://www.w3.org/2000/svg\" data-points=\"{n}\">\
         <title>{label}</title>\
         <line x1=\"0\" y1=\"{base}\" x2=\"{W}\" y2=\"{base}\" stroke=\"#d8dde3\" stroke-width=\"1\"/>\
         <polyline fill=\"none\" stroke=\"#2f6fb3\" stroke-width=\"1.5\" points=\"{line}\"/></svg>",
        n = shown.len(),
        base = H - 2.0,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_come_from_consecutive_samples_and_skip_a_reopened_handle() {
        let h = History::default();
        h.record("a", 0.0, 0, None);
        h.record("a", 10.0, 100, Some(5000.0));
        h.record("a", 20.0, 300, Some(4000.0));
        // Reopened: the count starts again.
        h.record("a", 30.0, 50, Some(3500.0));
        h.record("a", 40.0, 150, None);
        let s = h.series("a");
        assert_eq!(s.rate, vec![(10.0, 10.0), (20.0, 20.0), (40.0, 10.0)]);
        assert_eq!(
            s.runway,
            vec![(10.0, 5000.0), (20.0, 4000.0), (30.0, 3500.0)]
        );
        assert_eq!(h.series("b"), Series::default());
    }

    #[test]
    fn the_ring_keeps_an_hour_and_at_most_max_names() {
        let h = History::default();
        for i in 0..POINTS + 5 {
            h.record("a", i as f64 * 10.0, i as u64, None);
        }
        let s = h.series("a");
        assert_eq!(s.rate.len(), POINTS - 1);
        assert_eq!(s.rate[0].0, 60.0);
        for n in 0..MAX_NAMES + 3 {
            h.record(&format!("n{n}"), 0.0, 0, None);
        }
        let names = h.names.lock().unwrap().len();
        assert_eq!(names, MAX_NAMES);
        h.retain(&HashSet::from(["a".to_owned()]));
        assert_eq!(h.names.lock().unwrap().len(), 1);
    }

    #[test]
    fn the_chart_spans_the_last_hour_and_escapes_its_label() {
        assert_eq!(sparkline(&[(0.0, 1.0)], 0.0, "x"), None);
        // A point older than the hour is left out.
        let svg = sparkline(
            &[(0.0, 9.0), (3600.0, 0.0), (5400.0, 2.0), (7200.0, 4.0)],
            7200.0,
            "<b>&\"",
        )
        .unwrap();
        assert!(svg.contains("data-points=\"3\""), "{svg}");
        // Less than an hour of points: they span the chart.
        let young = sparkline(&[(100.0, 1.0), (150.0, 2.0)], 200.0, "y").unwrap();
        assert!(young.contains("points=\"0.0,20.0 120.0,2.0\""), "{young}");
        assert!(
            svg.contains("points=\"0.0,38.0 120.0,20.0 240.0,2.0\""),
            "{svg}"
        );
        assert!(svg.contains("<title>&lt;b&gt;&amp;&quot;</title>"), "{svg}");
        assert!(!svg.contains("<script"));
    }
}
