//! A mount's metrics in Prometheus's text format, served over HTTP at
//! `GET /metrics` on the address `--metrics` names: every figure of
//! `arcstats` (under its conventional name, see `multiarc::metrics`, with a
//! `component` label), the FUSE operations (a count and a latency histogram
//! per `op`), and the daemon's memory.
//!
//! The server is one thread answering one connection at a time (a scrape
//! is a few kilobytes, taken every few seconds); a connection that does not
//! send its request within a few seconds is dropped. It takes no lock the
//! filesystem takes for long: the figures are the same snapshots `arcstats`
//! reads.

use crate::control::Controlled;
use crate::fuse_ops::{FuseOps, OpFigures, BOUNDS};
use multiarc::metrics::{Kind, Metric};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a client may take to send its request, or to take the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request read.
const MAX_REQUEST: usize = 16 << 10;

/// What a scrape reports.
pub(crate) struct Sources {
    pub(crate) mount: Arc<dyn Controlled>,
    pub(crate) ops: Arc<FuseOps>,
}

/// The metrics server of a mount; stops when dropped.
pub(crate) struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` (port 0: one the system chooses) and serves.
    pub(crate) fn start(addr: SocketAddr, sources: Sources) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| io::Error::new(e.kind(), format!("--metrics {addr}: {e}")))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("multiarc-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    match conn {
                        Ok(stream) => {
                            if let Err(e) = answer(stream, &sources) {
                                log::debug!("metrics {addr}: {e}");
                            }
                        }
                        Err(e) => log::debug!("metrics {addr}: accept: {e}"),
                    }
                }
            })?;
        log::info!("serving metrics on http://{addr}/metrics");
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    #[cfg(test)]
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request and answers it.
fn answer(mut stream: TcpStream, sources: &Sources) -> io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 2048];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
        if request.len() > MAX_REQUEST {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            );
        }
    }
    let line = String::from_utf8_lossy(&request);
    let mut parts = line.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => {
            let body = render(
                &sources.mount.metrics(),
                &sources.ops.figures(),
                &process_memory(),
            );
            respond(
                &mut stream,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                &body,
            )
        }
        ("GET", _) => respond(&mut stream, "404 Not Found", "text/plain", "try /metrics\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", ""),
    }
}

fn respond(stream: &mut TcpStream, status: &str, kind: &str, body: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

/// The daemon's resident memory now and at its peak (`VmRSS`, `VmHWM`),
/// in bytes.
fn process_memory() -> Vec<Metric> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    let mut out = Vec::new();
    if let Some(rss) = field("VmRSS:") {
        out.push(
            Metric::gauge(
                "process_resident_memory_bytes",
                "The daemon's resident memory (VmRSS).",
                rss,
            )
            .in_component("process"),
        );
    }
    if let Some(peak) = field("VmHWM:") {
        out.push(
            Metric::gauge(
                "process_peak_resident_memory_bytes",
                "The daemon's peak resident memory (VmHWM).",
                peak,
            )
            .in_component("process"),
        );
    }
    out
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The text format: a family per name (its `# HELP` and `# TYPE` once, in
/// the order names first appear), then the FUSE operations' histograms.
pub(crate) fn render(metrics: &[Metric], ops: &[OpFigures], process: &[Metric]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut families: BTreeMap<String, Vec<&Metric>> = BTreeMap::new();
    for m in metrics.iter().chain(process) {
        let name = m.name();
        if !families.contains_key(&name) {
            order.push(name.clone());
        }
        families.entry(name).or_default().push(m);
    }
    let mut out = String::new();
    for name in &order {
        let members = &families[name];
        let first = members[0];
        let kind = match first.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# HELP {name} {}", escape_help(&first.help));
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for m in members {
            let _ = writeln!(
                out,
                "{name}{{component=\"{}\"}} {}",
                escape_label(m.component),
                m.scaled()
            );
        }
    }
    if !ops.is_empty() {
        let _ = writeln!(
            out,
            "# HELP multiarc_fuse_operations_total FUSE requests served, by operation."
        );
        let _ = writeln!(out, "# TYPE multiarc_fuse_operations_total counter");
        for f in ops {
            let _ = writeln!(
                out,
                "multiarc_fuse_operations_total{{op=\"{}\"}} {}",
                f.op.name(),
                f.count
            );
        }
        let h = "multiarc_fuse_operation_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {h} Time from a FUSE request's arrival at the filesystem to its reply."
        );
        let _ = writeln!(out, "# TYPE {h} histogram");
        for f in ops {
            let op = f.op.name();
            for (bound, count) in BOUNDS.iter().zip(f.cumulative) {
                let _ = writeln!(out, "{h}_bucket{{op=\"{op}\",le=\"{bound}\"}} {count}");
            }
            let _ = writeln!(out, "{h}_bucket{{op=\"{op}\",le=\"+Inf\"}} {}", f.count);
            let _ = writeln!(out, "{h}_sum{{op=\"{op}\"}} {}", f.sum_seconds);
            let _ = writeln!(out, "{h}_count{{op=\"{op}\"}} {}", f.count);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuse_ops::Op;

    #[test]
    fn families_have_help_and_type_once_and_a_label_per_component() {
        let metrics = vec![
            Metric::counter("l2_hits", "Memory misses the L2 served.", 3),
            Metric::gauge("c", "The target\nsize.", 1024),
            Metric::counter("l2_hits", "Block reads from the L2.", 5).in_component("object_store"),
            Metric::counter("l2_rebuild_ms", "Rebuild time.", 1500),
        ];
        let text = render(&metrics, &[], &[]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "# HELP multiarc_l2_hits_total Memory misses the L2 served.",
                "# TYPE multiarc_l2_hits_total counter",
                "multiarc_l2_hits_total{component=\"cache\"} 3",
                "multiarc_l2_hits_total{component=\"object_store\"} 5",
                "# HELP multiarc_c_bytes The target\\nsize.",
                "# TYPE multiarc_c_bytes gauge",
                "multiarc_c_bytes{component=\"cache\"} 1024",
                "# HELP multiarc_l2_rebuild_seconds_total Rebuild time.",
                "# TYPE multiarc_l2_rebuild_seconds_total counter",
                "multiarc_l2_rebuild_seconds_total{component=\"cache\"} 1.5",
            ]
        );
    }

    #[test]
    fn operations_are_a_histogram_per_op() {
        let ops = FuseOps::new();
        drop(ops.start(Op::Read));
        let text = render(&[], &ops.figures(), &[]);
        assert!(text.contains("multiarc_fuse_operations_total{op=\"read\"} 1\n"));
        assert!(text.contains("# TYPE multiarc_fuse_operation_duration_seconds histogram\n"));
        assert!(text.contains(
            "multiarc_fuse_operation_duration_seconds_bucket{op=\"read\",le=\"+Inf\"} 1\n"
        ));
        assert!(text.contains("multiarc_fuse_operation_duration_seconds_count{op=\"read\"} 1\n"));
    }

    struct Nothing;

    impl Controlled for Nothing {
        fn metrics(&self) -> Vec<Metric> {
            vec![Metric::counter("hits", "Hits.", 7)]
        }
        fn max_bytes(&self) -> u64 {
            0
        }
        fn set_max_bytes(&self, _: u64) -> Result<(), String> {
            Ok(())
        }
        fn set_lockstat(&self, _: bool) {}
    }

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn the_server_answers_scrapes_and_refuses_the_rest() {
        let server = MetricsServer::start(
            "127.0.0.1:0".parse().unwrap(),
            Sources {
                mount: Arc::new(Nothing),
                ops: Arc::new(FuseOps::new()),
            },
        )
        .unwrap();
        let addr = server.addr();
        let answer = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("multiarc_hits_total{component=\"cache\"} 7\n"));
        assert!(answer.contains("multiarc_process_resident_memory_bytes"));
        assert!(get(addr, "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        // A client that sends nothing and closes does not stop the server.
        drop(TcpStream::connect(addr).unwrap());
        assert!(get(addr, "GET /metrics HTTP/1.0\r\n\r\n").contains("200 OK"));
        drop(server);
        assert!(TcpStream::connect(addr).is_err(), "still listening");
    }
}
