//! SVG charts of `keysmith-bench compare`, `clients`, `names` and `leader` (plotters, SVG backend only).

use plotters::prelude::*;

use super::rows::{Report, human};

pub(crate) const DURABLE: RGBColor = RGBColor(31, 119, 180);
pub(crate) const NOT_DURABLE: RGBColor = RGBColor(255, 127, 14);
pub(crate) const LIMIT: RGBColor = RGBColor(120, 120, 120);

/// A horizontal bar per row: values per second on a log scale, coloured by
/// whether the value is durable before it is returned. Skipped rows keep
/// their line, with the reason.
pub fn throughput_svg(r: &Report) -> anyhow::Result<String> {
    let rows = &r.rows;
    let n = rows.len().max(1);
    let height = 80 + 22 * n as u32;
    let max = rows
        .iter()
        .filter_map(|r| r.values_per_sec)
        .fold(10.0f64, f64::max);
    let top = 10f64.powf(max.log10().ceil() + 0.3);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "values per second, log scale ({} s per row, one run); blue: durable before returned, orange: not, grey: baselines (bare atomic, no-op route, bare fsync loop)",
                    r.seconds
                ),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(400)
            .build_cartesian_2d((1f64..top).log_scale(), 0f64..n as f64)
            .map_err(err)?;
        let names: Vec<String> = rows
            .iter()
            .map(|r| format!("{}: {}", r.group, r.name))
            .collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n * 2 + 1)
            .y_label_formatter(&|y| {
                // Labels sit at the middle of each bar (i + 0.5).
                let i = (n as f64 - y - 0.5).round();
                if (n as f64 - y - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < n {
                    names[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .x_label_formatter(&|x| human(*x))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        for (i, row) in rows.iter().enumerate() {
            let y0 = (n - 1 - i) as f64 + 0.15;
            let y1 = y0 + 0.7;
            match row.values_per_sec {
                Some(v) if v > 1.0 => {
                    let baseline = (row.group == "limit" && !row.guarantees.durable)
                        || row.name.starts_with("GET /livez")
                        || row.name.starts_with("bare fsync loop");
                    let color = if baseline {
                        LIMIT
                    } else if row.guarantees.durable {
                        DURABLE
                    } else {
                        NOT_DURABLE
                    };
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [(1.0, y0), (v, y1)],
                            color.filled(),
                        )))
                        .map_err(err)?;
                    chart
                        .draw_series(std::iter::once(Text::new(
                            human(v),
                            (v * 1.08, y0 + 0.55),
                            ("sans-serif", 11),
                        )))
                        .map_err(err)?;
                }
                _ => {
                    chart
                        .draw_series(std::iter::once(Text::new(
                            row.note.clone(),
                            (1.5, y0 + 0.55),
                            ("sans-serif", 11)
                                .into_font()
                                .color(&RGBColor(150, 150, 150)),
                        )))
                        .map_err(err)?;
                }
            }
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Latency percentiles at a fixed request rate, one group of bars per route.
pub fn latency_svg(r: &Report) -> anyhow::Result<Option<String>> {
    if r.latency.is_empty() {
        return Ok(None);
    }
    let n = r.latency.len();
    let max = r
        .latency
        .iter()
        .map(|l| l.p999_us.max(l.p99_us))
        .fold(1.0f64, f64::max);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (900, 120 + 90 * n as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let rate = r.latency[0].rate;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("latency at {rate:.0} requests/s (µs, log scale): p50, p99, p99.9"),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(260)
            .build_cartesian_2d((1f64..max * 3.0).log_scale(), 0f64..n as f64)
            .map_err(err)?;
        let names: Vec<String> = r.latency.iter().map(|l| l.name.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n * 2 + 1)
            .y_label_formatter(&|y| {
                let i = (n as f64 - y - 0.5).round();
                if (n as f64 - y - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < n {
                    names[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        let shades = [
            RGBColor(158, 202, 225),
            RGBColor(66, 146, 198),
            RGBColor(8, 69, 148),
        ];
        for (i, l) in r.latency.iter().enumerate() {
            let base = (n - 1 - i) as f64 + 0.1;
            for (k, (label, v)) in [("p50", l.p50_us), ("p99", l.p99_us), ("p99.9", l.p999_us)]
                .into_iter()
                .enumerate()
            {
                let y0 = base + 0.27 * k as f64;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(1.0, y0), (v.max(1.0), y0 + 0.24)],
                        shades[k].filled(),
                    )))
                    .map_err(err)?;
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{label} {v:.0}"),
                        (v.max(1.0) * 1.05, y0 + 0.2),
                        ("sans-serif", 11),
                    )))
                    .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(Some(svg))
}

pub(crate) fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e}")
}

/// `keysmith-bench names`: per store, the create rate, the first-use rate
/// (each against the same store's run with the fewest names) and the hot
/// sequence's `next` (against the server with one name), over the name
/// count on a log scale. Flat at 1.0 is the goal.
pub fn names_svg(rows: &[super::names::Row]) -> anyhow::Result<String> {
    use super::names::StoreKind;
    let max_n = rows.iter().map(|r| r.names).max().unwrap_or(10).max(10) as f64;
    let min_n = rows.iter().map(|r| r.names).min().unwrap_or(1).max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "rate with N names / rate with the fewest names (hot next: / one name); 1.0 is flat",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d((min_n / 2.0..max_n * 2.0).log_scale(), 0f64..1.6f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("names")
            .x_label_formatter(&|x| human(*x))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        let stores = [StoreKind::Sqlite, StoreKind::Postgres];
        type Measure = fn(&super::names::Row, &super::names::Row) -> f64;
        let measures: [(&str, Measure); 4] = [
            ("creates", |r, l| r.create_per_sec / l.create_per_sec),
            ("first uses", |r, l| {
                r.first_use_per_sec / l.first_use_per_sec
            }),
            ("hot next during eviction", |r, _| {
                r.hot_per_sec / r.hot_one_name_per_sec
            }),
            ("hot next after", |r, _| {
                r.hot_idle_per_sec / r.hot_idle_one_name_per_sec
            }),
        ];
        let colors = [
            DURABLE,
            NOT_DURABLE,
            RGBColor(44, 160, 44),
            RGBColor(148, 103, 189),
        ];
        for (si, store) in stores.iter().enumerate() {
            let mut of: Vec<&super::names::Row> =
                rows.iter().filter(|r| r.store == *store).collect();
            of.sort_by_key(|r| r.names);
            let Some(least) = of.first().copied() else {
                continue;
            };
            for (mi, (label, f)) in measures.iter().enumerate() {
                let points: Vec<(f64, f64)> =
                    of.iter().map(|r| (r.names as f64, f(r, least))).collect();
                let style = ShapeStyle {
                    color: colors[mi].to_rgba(),
                    filled: si == 0,
                    stroke_width: if si == 0 { 2 } else { 1 },
                };
                let store = if si == 0 { "SQLite" } else { "PostgreSQL" };
                line(&mut chart, points, style, format!("{label}, {store}"))?;
            }
        }
        legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// `keysmith-bench leader`: per store, the leader-ordered and the cached
/// sequence's `next` over HTTP and the store's bare durable-write loop, over
/// the connection count, both axes on a log scale.
pub fn leader_svg(rows: &[super::leader::LeaderRow]) -> anyhow::Result<String> {
    let max = rows
        .iter()
        .flat_map(|r| [r.cached_per_sec, r.leader_per_sec, r.bare_loop_per_sec])
        .fold(10.0f64, f64::max);
    let min = rows
        .iter()
        .flat_map(|r| [r.cached_per_sec, r.leader_per_sec, r.bare_loop_per_sec])
        .filter(|v| *v > 0.0)
        .fold(max, f64::min);
    let max_conns = rows
        .iter()
        .map(|r| r.connections)
        .max()
        .unwrap_or(64)
        .max(2) as f64;
    let mut stores: Vec<&str> = Vec::new();
    for r in rows {
        if !stores.contains(&r.store.as_str()) {
            stores.push(&r.store);
        }
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "POST next per second over HTTP (log scale): leader-ordered, cached, and the store's bare durable-write loop",
                ("sans-serif", 15),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (0.8f64..max_conns * 1.25).log_scale(),
                (min / 2.0..max * 2.0).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("connections")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| human(*y))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        type Measure = fn(&super::leader::LeaderRow) -> f64;
        let measures: [(&str, Measure, RGBColor); 3] = [
            ("leader-ordered", |r| r.leader_per_sec, DURABLE),
            ("cached", |r| r.cached_per_sec, NOT_DURABLE),
            ("bare durable-write loop", |r| r.bare_loop_per_sec, LIMIT),
        ];
        for (si, store) in stores.iter().enumerate() {
            let mut of: Vec<_> = rows.iter().filter(|r| r.store == *store).collect();
            of.sort_by_key(|r| r.connections);
            for (label, f, color) in measures {
                let points: Vec<(f64, f64)> =
                    of.iter().map(|r| (r.connections as f64, f(r))).collect();
                let style = ShapeStyle {
                    color: color.to_rgba(),
                    filled: si == 0,
                    stroke_width: if si == 0 { 2 } else { 1 },
                };
                line(&mut chart, points, style, format!("{label}, {store}"))?;
            }
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// One series of a line chart: a line through `points` with a dot at each,
/// under `label` in the legend.
fn line<'a, CT: CoordTranslate<From = (f64, f64)>>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    points: Vec<(f64, f64)>,
    style: ShapeStyle,
    label: String,
) -> anyhow::Result<()> {
    chart
        .draw_series(std::iter::once(PathElement::new(points.clone(), style)))
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 3, style)))
        .map_err(err)?;
    Ok(())
}

/// The legend of a line chart's series, boxed, at `at`.
fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    at: SeriesLabelPosition,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(at)
        .draw()
        .map_err(err)
}
