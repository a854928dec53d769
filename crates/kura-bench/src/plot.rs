//! Latency against offered load, as in seed 001's figures: two panels, mean
//! and p99.9 latency, against the offered rate of a `--sweep`, one line per
//! report (this run and any `--overlay`). Latency is on a log scale: near
//! saturation it grows by orders of magnitude.

use std::path::Path;

use plotters::prelude::*;

use crate::report::Report;

/// (offered rate, mean µs, p99.9 µs)
type Point = (f64, f64, f64);

/// Which latency of a point a panel shows.
type Pick = fn(&Point) -> f64;

/// One line of the plot.
struct Series {
    label: String,
    points: Vec<Point>,
}

impl Series {
    fn of(report: &Report) -> Series {
        let mut points: Vec<_> = report
            .runs
            .iter()
            .filter_map(|r| {
                let rate = r.offered_rate?;
                Some((rate, r.latency_us.mean, r.latency_us.p999))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        Series {
            label: report.label.clone(),
            points,
        }
    }
}

/// Draws the sweeps of `reports` into the SVG file `path`.
///
/// # Errors
/// A message when no report has a sweep, or drawing or writing fails.
pub fn draw(path: &Path, reports: &[Report]) -> Result<(), String> {
    let series: Vec<Series> = reports
        .iter()
        .map(Series::of)
        .filter(|s| !s.points.is_empty())
        .collect();
    if series.is_empty() {
        return Err("no --sweep results to plot".into());
    }
    let all = || series.iter().flat_map(|s| &s.points);
    let max_rate = all().map(|p| p.0).fold(0.0, f64::max);
    let lat = |f: Pick| {
        let lo = all().map(f).fold(f64::INFINITY, f64::min).max(0.1);
        let hi = all().map(f).fold(0.0, f64::max).max(lo * 2.0);
        (lo / 1.25, hi * 1.25)
    };
    let root = SVGBackend::new(path, (1200, 480)).into_drawing_area();
    let fail = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let panels = root.split_evenly((1, 2));
    let kinds: [(&str, Pick); 2] = [("mean latency", |p| p.1), ("p99.9 latency", |p| p.2)];
    for (area, (title, pick)) in panels.iter().zip(kinds) {
        let (lo, hi) = lat(pick);
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(
                0.0..max_rate * 1.05,
                (lo..hi).log_scale().with_key_points(ticks(lo, hi)),
            )
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .x_desc("offered load (requests/s)")
            .y_desc("latency (µs)")
            .x_label_formatter(&|x| format!("{}k", (x / 1000.0).round()))
            .y_label_formatter(&|y| {
                if *y >= 10.0 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.1}")
                }
            })
            .light_line_style(TRANSPARENT)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()
            .map_err(|e| fail(&e))?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.0, pick(p))).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| fail(&e))?
                .label(s.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(|e| fail(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 14))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))
}

/// Round latencies between `lo` and `hi` to label a log axis with: 1, 2 and
/// 5 times the powers of ten, or every multiple when that gives too few.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let in_range = |steps: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            out.extend(
                steps
                    .iter()
                    .map(|m| m * decade)
                    .filter(|t| (lo..=hi).contains(t)),
            );
            decade *= 10.0;
        }
        out
    };
    let coarse = in_range(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 {
        coarse
    } else {
        in_range(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

#[cfg(test)]
mod tests {
    use super::ticks;

    #[test]
    fn log_ticks_are_round_and_in_range() {
        assert_eq!(
            ticks(3.0, 600.0),
            vec![5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0]
        );
        assert_eq!(
            ticks(2500.0, 9000.0),
            vec![3000.0, 4000.0, 5000.0, 6000.0, 7000.0, 8000.0, 9000.0]
        );
    }
}
