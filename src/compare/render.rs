//! Output: the Markdown tables on standard output, the CSV summary, and the chart of detection
//! against cost (SVG, by the `compare-chart` crate when the `chart` feature is on).

use super::score::{CompareReport, SummaryRow};
use super::suite::Case;
use super::Detector;

/// A count: whole numbers plainly, fractions (k/N over seeds) with two decimals.
fn num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else {
        format!("{x:.2}")
    }
}

fn ratio(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// A Markdown table with padded columns.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter().map(|r| r[i].chars().count()).chain([header[i].chars().count()]).max().unwrap_or(0).max(3)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("| {} |", padded.join(" | "))
    };
    let mut out = vec![line(header.iter().map(|s| s.to_string()).collect())];
    out.push(format!("|{}|", widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("|")));
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n")
}

/// The tables on standard output: per class, per case, and the cost of each detector.
pub fn print_tables(report: &CompareReport, cases: &[Case], detectors: &[Detector]) {
    let runs: usize = report.detectors.iter().map(|d| d.runs).sum();
    driver::out!(
        "ferrite compare: {} cases, {} detectors, {runs} runs on {} workers in {:.1} s (peak RSS {:.0} MiB)",
        report.cases.len(),
        report.detectors.len(),
        report.jobs,
        report.wall_s,
        report.peak_rss_mib
    );
    let mut classes: Vec<&str> = Vec::new();
    for d in detectors {
        for c in &d.claim.classes {
            if !classes.contains(c) {
                classes.push(c);
            }
        }
    }
    for class in classes {
        let rows: Vec<Vec<String>> = report
            .summary
            .iter()
            .filter(|r| r.class == class)
            .map(|r| {
                vec![
                    r.detector.clone(),
                    r.cases.to_string(),
                    r.bugs.to_string(),
                    num(r.tp),
                    num(r.fp),
                    num(r.fn_),
                    ratio(r.precision),
                    ratio(r.recall),
                    ratio(r.f1),
                    format!("{:.2}", r.time_s),
                    format!("{:.0}", r.peak_rss_mib),
                ]
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        driver::out!("");
        driver::out!("## {class}");
        driver::out!(
            "{}",
            table(
                &[
                    "detector",
                    "cases",
                    "bugs",
                    "TP",
                    "FP",
                    "FN",
                    "precision",
                    "recall",
                    "F1",
                    "time (s)",
                    "peak RSS (MiB)"
                ],
                &rows
            )
        );
    }
    // Who found what.
    driver::out!("");
    driver::out!("## cases");
    let mut header: Vec<&str> = vec!["case", "truth"];
    header.extend(detectors.iter().map(|d| d.name.as_str()));
    let rows: Vec<Vec<String>> = report
        .cases
        .iter()
        .zip(cases)
        .map(|(c, case)| {
            let truth = if case.bugs.is_empty() {
                "bug-free".to_string()
            } else {
                let mut v: Vec<String> = case
                    .bugs
                    .iter()
                    .map(|b| format!("{}{}", b.class, if b.harmful == Some(true) { "*" } else { "" }))
                    .collect();
                v.dedup();
                v.join(" ")
            };
            let mut row = vec![c.name.clone(), truth];
            for d in detectors {
                row.push(match c.detectors.get(&d.name) {
                    None => String::new(),
                    Some(cd) if cd.bugs.is_empty() => {
                        let mut s = if cd.fp > 0.0 { format!("FP {}", num(cd.fp)) } else { "ok".into() };
                        push_beyond(&mut s, cd);
                        s
                    }
                    Some(cd) => {
                        let mut s = format!("{}/{}", num(cd.tp), cd.bugs.len());
                        if cd.fp > 0.0 {
                            s.push_str(&format!(" FP {}", num(cd.fp)));
                        }
                        push_beyond(&mut s, cd);
                        s
                    }
                });
            }
            row
        })
        .collect();
    driver::out!("{}", table(&header, &rows));
    driver::out!(
        "(k/n: labelled bugs of the detector's classes found, averaged over seeds; FP: false positives; ok: \
         nothing to find and nothing reported; blank: not run; *: harmful after recovery; beyond k/n: runs \
         that found a bug the case says is beyond the detector's definition, not scored)"
    );
    driver::out!("");
    driver::out!("## cost");
    let rows: Vec<Vec<String>> = report
        .detectors
        .iter()
        .map(|d| {
            vec![
                d.name.clone(),
                d.cases.to_string(),
                d.runs.to_string(),
                format!("{:.2}", d.time_s),
                format!("{:.2}", d.wall_s),
                format!("{:.1}", d.instructions as f64 / 1e6),
                format!("{:.0}", d.peak_rss_mib),
                ratio(d.f1),
            ]
        })
        .collect();
    driver::out!(
        "{}",
        table(
            &["detector", "cases", "runs", "run time (s)", "phase wall (s)", "M guest insns", "peak RSS (MiB)", "F1"],
            &rows
        )
    );
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The summary table as CSV.
pub fn summary_csv(rows: &[SummaryRow]) -> String {
    let opt = |x: Option<f64>| x.map_or_else(String::new, |v| format!("{v:.4}"));
    let mut out = String::from("detector,class,cases,bugs,tp,fp,fn,precision,recall,f1,time_s,peak_rss_mib\n");
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{:.4},{:.4},{:.4},{},{},{},{:.3},{:.1}\n",
            csv_field(&r.detector),
            csv_field(&r.class),
            r.cases,
            r.bugs,
            r.tp,
            r.fp,
            r.fn_,
            opt(r.precision),
            opt(r.recall),
            opt(r.f1),
            r.time_s,
            r.peak_rss_mib
        ));
    }
    out
}

/// The chart of detection (F1 over each detector's claimed classes) against cost (summed run
/// time), one point per detector, as SVG.
#[cfg(feature = "chart")]
pub fn chart(detectors: &[super::score::DetectorOut], path: &std::path::Path) -> Result<(), String> {
    let points: Vec<compare_chart::Point> = detectors
        .iter()
        .map(|d| compare_chart::Point {
            label: format!("{} (F1 {}, {:.1} s)", d.name, ratio(d.f1), d.time_s),
            cost: d.time_s,
            score: d.f1.unwrap_or(0.0),
        })
        .collect();
    compare_chart::write_svg(&points, path)
}

/// Appends what a detector found of the bugs beyond its definition (`beyond k/n`, not scored).
fn push_beyond(s: &mut String, cd: &super::score::CaseDetector) {
    for b in &cd.beyond {
        s.push_str(&format!(" (beyond {}/{})", b.found, b.of));
    }
}
