//! Lock statistics for people: [`Report::table`] prints a report in the
//! layout of illumos `lockstat(8)` (`multiarc bench --lockstat`, a mount's
//! `.multiarc/lockstat`). Programs read the report's rows, or serialize
//! it with the `serde` feature.

use crate::lockstat::{LockRow, Report};
use std::fmt::Write as _;

/// `part / whole`, 0 when `whole` is 0.
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The rows by decreasing contended count (then acquisitions, then id).
fn sorted_rows(report: &Report) -> Vec<LockRow> {
    let mut rows = report.rows.clone();
    rows.sort_by(|a, b| {
        b.contended
            .cmp(&a.contended)
            .then(b.acquisitions.cmp(&a.acquisitions))
            .then(a.id.cmp(&b.id))
    });
    rows
}

impl Report {
    /// The report in the layout of `lockstat(8)`: a summary, then the `top`
    /// most contended instances with their count of contended
    /// acquisitions, its share of all contended acquisitions (`indv`) and
    /// the running sum (`cuml`), the mean wait in ns, the instance index
    /// (`Lock`) and class.
    pub fn table(&self, top: usize) -> String {
        table(self, top)
    }
}

fn table(report: &Report, top: usize) -> String {
    let total = report.total_contended();
    let acquisitions = report.total_acquisitions();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Lock contention: {total} of {acquisitions} acquisitions contended ({:.2}%), {} lock instances",
        share(total, acquisitions) * 100.0,
        report.rows.len(),
    );
    let _ = writeln!(
        out,
        "Hottest lock instance: {:.1}% of contended acquisitions, {:.1}% of acquisitions",
        report.hottest_contended_share() * 100.0,
        report.hottest_acquisition_share() * 100.0,
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:>10} {:>4} {:>4} {:>10} {:>8} Class",
        "Count", "indv", "cuml", "avg nsec", "Lock"
    );
    let _ = writeln!(out, "{}", "-".repeat(60));
    let mut cumulative = 0;
    let contended_rows = sorted_rows(report).into_iter().filter(|r| r.contended > 0);
    for row in contended_rows.take(top) {
        cumulative += row.contended;
        let _ = writeln!(
            out,
            "{:>10} {:>3.0}% {:>3.0}% {:>10} {:>8} {}",
            row.contended,
            share(row.contended, total) * 100.0,
            share(cumulative, total) * 100.0,
            row.wait_ns_avg(),
            format!("#{}", row.id.index),
            row.id.class,
        );
    }
    if total == 0 {
        let _ = writeln!(out, "(no contended acquisitions)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockId;

    fn row(class: &'static str, index: u32, acquisitions: u64, contended: u64) -> LockRow {
        LockRow {
            id: LockId::new(class, index),
            acquisitions,
            contended,
            wait_ns_total: contended * 100,
            wait_ns_max: contended * 10,
        }
    }

    #[test]
    fn table_is_sorted_by_contention_with_cumulative_shares() {
        let report = Report {
            rows: vec![row("a", 0, 10, 10), row("b", 1, 10, 0), row("c", 2, 90, 30)],
        };
        let text = table(&report, 10);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("40 of 110 acquisitions"), "{text}");
        assert!(lines[1].contains("75.0% of contended"), "{text}");
        let rows: Vec<Vec<&str>> = lines[5..]
            .iter()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            vec![
                vec!["30", "75%", "75%", "100", "#2", "c"],
                vec!["10", "25%", "100%", "100", "#0", "a"],
            ]
        );
        assert_eq!(table(&report, 1).lines().count(), 6);
        assert!(table(&Report::default(), 5).contains("(no contended acquisitions)"));
    }
}
