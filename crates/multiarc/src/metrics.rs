//! Statistics as metrics: each figure with a conventional name, a kind, a
//! unit and a help text, so that an application can bridge the cache's
//! statistics to its own monitoring. [`Stats::metrics`](crate::Stats::metrics)
//! gives the cache's; the crates above add theirs in the same shape (the
//! object store's, the mounts'). With the `metrics` feature,
//! `record` publishes them through the [`metrics`](https://docs.rs/metrics)
//! facade; without it, the crate has no dependency for this.
//!
//! Names follow Prometheus's conventions: the prefix `multiarc_`, the
//! statistic's own name, then its unit (`_bytes`, `_seconds`) and, for a
//! counter, `_total`. The statistic's own name (`arcstats`' name) stays in
//! [`Metric::stat`]:
//!
//! ```
//! use multiarc::metrics::{Kind, Metric};
//! let m = Metric::counter("evicted_bytes", "Bytes evicted.", 4096);
//! assert_eq!(m.name(), "multiarc_evicted_bytes_total");
//! let c = Metric::gauge("c", "The target size.", 1 << 20);
//! assert_eq!((c.name(), c.kind), ("multiarc_c_bytes".to_string(), Kind::Gauge));
//! ```

/// A metric's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Counts up from zero (since the cache or the mount started).
    Counter,
    /// A current figure (a size, a target, a count of things now).
    Gauge,
}

/// One figure as a metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Metric {
    /// The statistic's own name, as `arcstats` and `to_pairs` give it.
    pub stat: &'static str,
    /// What counts it (`cache`, `object_store`, ...): a label, which tells
    /// apart figures of one name from two components (the cache's and the
    /// object store's `l2_hits`).
    pub component: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// What it counts or measures.
    pub help: String,
    /// The figure as the statistics give it (`stat`'s unit).
    pub value: u64,
}

/// Gauges of bytes whose statistic's name does not say so.
const BYTES_WITHOUT_THE_WORD: [&str; 4] = ["size", "c", "p", "l2_size"];

impl Metric {
    /// A counter.
    pub fn counter(stat: &'static str, help: impl Into<String>, value: u64) -> Metric {
        Metric {
            stat,
            component: "cache",
            kind: Kind::Counter,
            help: help.into(),
            value,
        }
    }

    /// A gauge.
    pub fn gauge(stat: &'static str, help: impl Into<String>, value: u64) -> Metric {
        Metric {
            stat,
            component: "cache",
            kind: Kind::Gauge,
            help: help.into(),
            value,
        }
    }

    /// A metric whose help is the statistic's doc comment, given as a
    /// `stringify!`d `#[doc = "..."]` attribute per line (how the
    /// statistics tables of this crate and the object store's declare
    /// them).
    pub fn from_doc_attrs(stat: &'static str, kind: Kind, doc: &[&str], value: u64) -> Metric {
        Metric {
            stat,
            component: "cache",
            kind,
            help: help_of(doc),
            value,
        }
    }

    /// The same metric, counted by `component`.
    pub fn in_component(mut self, component: &'static str) -> Metric {
        self.component = component;
        self
    }

    /// The conventional name: `multiarc_` + the statistic + its unit +
    /// `_total` for a counter (`evictions` -> `multiarc_evictions_total`,
    /// `l2_rebuild_ms` -> `multiarc_l2_rebuild_seconds_total`, `c` ->
    /// `multiarc_c_bytes`).
    pub fn name(&self) -> String {
        let mut name = format!("multiarc_{}", self.base());
        if BYTES_WITHOUT_THE_WORD.contains(&self.stat) {
            name.push_str("_bytes");
        }
        if self.kind == Kind::Counter {
            name.push_str("_total");
        }
        name
    }

    /// The value in the name's unit (milliseconds become seconds).
    pub fn scaled(&self) -> f64 {
        if self.stat.ends_with("_ms") {
            self.value as f64 / 1000.0
        } else {
            self.value as f64
        }
    }

    fn base(&self) -> String {
        match self.stat.strip_suffix("_ms") {
            Some(base) => format!("{base}_seconds"),
            None => self.stat.to_string(),
        }
    }
}

/// The text of doc attributes as `stringify!` gives them (`doc = " Bytes
/// evicted."`): the quoted parts joined, unescaped as far as help needs.
fn help_of(doc: &[&str]) -> String {
    let parts: Vec<String> = doc
        .iter()
        .filter_map(|attr| {
            let start = attr.find('"')? + 1;
            let end = attr.rfind('"')?;
            (start <= end).then(|| {
                attr[start..end]
                    .trim()
                    .replace("\\\"", "\"")
                    .replace("\\'", "'")
            })
        })
        .filter(|p| !p.is_empty())
        .collect();
    parts.join(" ")
}

/// Publishes `metrics` through the `metrics` facade (whatever recorder
/// the application installed): counters with `absolute`, gauges with
/// `set`, each under [`Metric::name`] with `labels`, described once.
#[cfg(feature = "metrics")]
pub fn record(metrics: &[Metric], labels: &[(&'static str, String)]) {
    let labels: Vec<metrics::Label> = labels
        .iter()
        .map(|(k, v)| metrics::Label::new(*k, v.clone()))
        .collect();
    for m in metrics {
        let name = m.name();
        match m.kind {
            Kind::Counter => {
                metrics::describe_counter!(name.clone(), m.help.clone());
                let mut labels = labels.clone();
                labels.push(metrics::Label::new("component", m.component));
                metrics::counter!(name, labels).absolute(m.scaled() as u64);
            }
            Kind::Gauge => {
                metrics::describe_gauge!(name.clone(), m.help.clone());
                let mut labels = labels.clone();
                labels.push(metrics::Label::new("component", m.component));
                metrics::gauge!(name, labels).set(m.scaled());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_their_unit_and_kind() {
        let m = |stat, kind| Metric {
            stat,
            component: "cache",
            kind,
            help: String::new(),
            value: 1500,
        };
        assert_eq!(m("hits", Kind::Counter).name(), "multiarc_hits_total");
        assert_eq!(m("mru_bytes", Kind::Gauge).name(), "multiarc_mru_bytes");
        assert_eq!(m("p", Kind::Gauge).name(), "multiarc_p_bytes");
        assert_eq!(
            m("hash_elements", Kind::Gauge).name(),
            "multiarc_hash_elements"
        );
        let ms = m("l2_rebuild_ms", Kind::Counter);
        assert_eq!(ms.name(), "multiarc_l2_rebuild_seconds_total");
        assert_eq!(ms.scaled(), 1.5);
    }

    #[test]
    fn help_is_the_doc_comment() {
        assert_eq!(
            help_of(&["doc = \" Bytes of \\\"evicted\\\"\"", "doc = \" buffers.\""]),
            "Bytes of \"evicted\" buffers."
        );
        assert_eq!(help_of(&[]), "");
    }

    #[test]
    fn the_caches_statistics_are_all_metrics_with_help() {
        let stats = crate::Stats::default();
        let metrics = stats.metrics();
        let pairs = stats.to_pairs();
        assert_eq!(metrics.len(), pairs.len());
        for (m, (stat, _)) in metrics.iter().zip(&pairs) {
            assert_eq!(m.stat, *stat);
            assert!(!m.help.is_empty(), "{stat} has no help");
        }
        let kind = |s: &str| metrics.iter().find(|m| m.stat == s).unwrap().kind;
        assert_eq!(kind("hits"), Kind::Counter);
        assert_eq!(kind("evictions"), Kind::Counter);
        assert_eq!(kind("mru_bytes"), Kind::Gauge);
        assert_eq!(kind("p"), Kind::Gauge);
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn record_publishes_through_the_facade() {
        use ::metrics::{
            Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder,
            SharedString, Unit,
        };
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex};

        /// A recorder keeping the last value of every series.
        #[derive(Default)]
        struct Last(Arc<Mutex<HashMap<String, f64>>>);
        struct Cell(String, Arc<Mutex<HashMap<String, f64>>>);
        impl CounterFn for Cell {
            fn increment(&self, v: u64) {
                *self.1.lock().unwrap().entry(self.0.clone()).or_default() += v as f64;
            }
            fn absolute(&self, v: u64) {
                self.1.lock().unwrap().insert(self.0.clone(), v as f64);
            }
        }
        impl GaugeFn for Cell {
            fn increment(&self, v: f64) {
                *self.1.lock().unwrap().entry(self.0.clone()).or_default() += v;
            }
            fn decrement(&self, v: f64) {
                *self.1.lock().unwrap().entry(self.0.clone()).or_default() -= v;
            }
            fn set(&self, v: f64) {
                self.1.lock().unwrap().insert(self.0.clone(), v);
            }
        }
        fn series(key: &Key) -> String {
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            format!("{}{{{}}}", key.name(), labels.join(","))
        }
        impl Recorder for Last {
            fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
            fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
            fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
            fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
                Counter::from_arc(Arc::new(Cell(series(key), Arc::clone(&self.0))))
            }
            fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
                Gauge::from_arc(Arc::new(Cell(series(key), Arc::clone(&self.0))))
            }
            fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
                Histogram::noop()
            }
        }

        let recorder = Last::default();
        let seen = Arc::clone(&recorder.0);
        let metrics = [
            Metric::counter("hits", "Hits.", 42),
            Metric::gauge("c", "The target.", 1 << 20),
            Metric::counter("l2_rebuild_ms", "Rebuild time.", 2500),
        ];
        ::metrics::with_local_recorder(&recorder, || {
            record(&metrics, &[("mount", "/mnt/a".to_string())]);
        });
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen["multiarc_hits_total{mount=/mnt/a,component=cache}"],
            42.0
        );
        assert_eq!(
            seen["multiarc_c_bytes{mount=/mnt/a,component=cache}"],
            (1 << 20) as f64
        );
        assert_eq!(
            seen["multiarc_l2_rebuild_seconds_total{mount=/mnt/a,component=cache}"],
            2.0
        );
    }
}
