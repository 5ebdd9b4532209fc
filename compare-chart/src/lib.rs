//! The chart of `ferrite compare`: detection (F1) against cost (run time), one point per
//! detector, as SVG. A crate of its own so that plotters stays out of the `ferrite` binary when
//! its `chart` feature is off; it knows nothing of ferrite but the points it is given.

#![deny(missing_docs)]

use std::path::Path;

/// One detector on the chart.
pub struct Point {
    /// The legend's text.
    pub label: String,
    /// Seconds (a log axis; values below a millisecond are drawn at one).
    pub cost: f64,
    /// F1, from 0 to 1.
    pub score: f64,
}

/// Detection against cost, one point each: cost on a log scale, F1 from 0 to 1, as SVG.
pub fn write_svg(points: &[Point], path: &Path) -> Result<(), String> {
    use plotters::prelude::*;
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let times: Vec<f64> = points.iter().map(|p| p.cost.max(1e-3)).collect();
    let lo = times.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) / 2.0;
    let hi = times.iter().copied().fold(0.0, f64::max).max(lo * 4.0) * 2.0;
    let root = SVGBackend::new(path, (860, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("ferrite compare: detection against cost", ("sans-serif", 22))
        .margin(24)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0f64..1.08f64)
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_labels(10)
        .x_label_formatter(&|v| if *v >= 1.0 { format!("{v:.0}") } else { format!("{v:.2}") })
        .y_label_formatter(&|v| format!("{v:.1}"))
        .x_desc("summed run time over the suite (s, log scale)")
        .y_desc("F1 on claimed classes")
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (p, t)) in points.iter().zip(&times).enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let y = p.score;
        let label = p.label.clone();
        chart
            .draw_series([Circle::new((*t, y), 7, colour.filled())])
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 8, y), 6, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
