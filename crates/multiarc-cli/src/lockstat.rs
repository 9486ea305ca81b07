//! Lock statistics ([`multiarc_lock::lockstat::Report`]) for people and
//! programs: a table in the layout of illumos `lockstat(8)` (`bench
//! --lockstat`, the mount's `.multiarc/lockstat`), or JSON.

use multiarc_lock::lockstat::{LockRow, Report};
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

/// The report in the layout of `lockstat(8)`: a summary, then the `top`
/// most contended instances with their count of contended acquisitions,
/// its share of all contended acquisitions (`indv`) and the running sum
/// (`cuml`), the mean wait in ns, the instance index (`Lock`) and class.
pub fn table(report: &Report, top: usize) -> String {
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

/// The report as one JSON object: totals, the two hottest-instance shares
/// and every row (sorted as in [`table`]). No command prints it today; it is
/// the report's documented machine-readable form (the lock crate's `serde`
/// feature serialises the raw report instead).
#[allow(dead_code)]
pub fn json(report: &Report) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "{{\"total_acquisitions\":{},\"total_contended\":{},\"hottest_contended_share\":{},\"hottest_acquisition_share\":{},\"rows\":[",
        report.total_acquisitions(),
        report.total_contended(),
        json_number(report.hottest_contended_share()),
        json_number(report.hottest_acquisition_share()),
    );
    for (i, row) in sorted_rows(report).iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"class\":");
        json_string(&mut out, row.id.class);
        let _ = write!(
            out,
            ",\"index\":{},\"acquisitions\":{},\"contended\":{},\"wait_ns_total\":{},\"wait_ns_max\":{},\"wait_ns_avg\":{}}}",
            row.id.index,
            row.acquisitions,
            row.contended,
            row.wait_ns_total,
            row.wait_ns_max,
            row.wait_ns_avg(),
        );
    }
    out.push_str("]}");
    out
}

/// A finite f64 as a JSON number (shares are always finite).
fn json_number(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        "null".to_string()
    }
}

/// Appends `s` as a JSON string literal.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use multiarc_lock::LockId;

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

    #[test]
    fn json_escapes_class_names() {
        let report = Report {
            rows: vec![row("we\"ird\\\n", 3, 4, 2)],
        };
        assert_eq!(
            json(&report),
            "{\"total_acquisitions\":4,\"total_contended\":2,\"hottest_contended_share\":1,\
             \"hottest_acquisition_share\":1,\"rows\":[{\"class\":\"we\\\"ird\\\\\\n\",\"index\":3,\
             \"acquisitions\":4,\"contended\":2,\"wait_ns_total\":200,\"wait_ns_max\":20,\"wait_ns_avg\":100}]}"
        );
    }
}
