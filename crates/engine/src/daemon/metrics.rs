//! What `longhaul serve --metrics ADDR` tells a Prometheus scraper: the server's counters
//! ([`ServerMetrics`], bumped where connections and sessions end), their text exposition
//! ([`render`], no I/O), and the small HTTP endpoint that serves it ([`serve_metrics`]).
//!
//! Per-session rates go into a histogram (the mean payload rate of each session that
//! moved data), and bytes per exported area into a counter labelled by the area's name:
//! both bounded in their labels whatever the number of sessions.
//!
//! The endpoint answers `GET /metrics` and nothing else, one connection at a time, each
//! with a read of at most [`MAX_REQUEST`] bytes within [`REQUEST_TIMEOUT`]: a scraper on
//! an operator's network, not a web server. Put it on a loopback or management address.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bounds of the session-rate histogram's buckets, bit/s (1 Mbit/s to 100 Gbit/s);
/// the last bucket (`+Inf`) takes the rest.
pub const RATE_BUCKETS: [f64; 6] = [1e6, 1e7, 1e8, 1e9, 1e10, 1e11];

/// Why a connection was turned away before it proved anything, for the `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its TLS handshake failed.
    Tls,
    /// It sent no hello (closed, timed out, or no random nonce here).
    NoHello,
    /// An older client without TLS, told which version this server speaks.
    OldProtocol,
    /// A first message that is not a hello, or malformed.
    Protocol,
    /// Every session slot was taken.
    Busy,
    /// A data connection that did not prove its session's secret.
    DataAuth,
    /// A session that failed before the proof of the token (a wrong token among them).
    Auth,
}

impl Refusal {
    const ALL: [Refusal; 7] = [
        Refusal::Tls,
        Refusal::NoHello,
        Refusal::OldProtocol,
        Refusal::Protocol,
        Refusal::Busy,
        Refusal::DataAuth,
        Refusal::Auth,
    ];

    fn label(self) -> &'static str {
        match self {
            Refusal::Tls => "tls",
            Refusal::NoHello => "no_hello",
            Refusal::OldProtocol => "old_protocol",
            Refusal::Protocol => "protocol",
            Refusal::Busy => "busy",
            Refusal::DataAuth => "data_auth",
            Refusal::Auth => "auth",
        }
    }
}

/// The server's counters since it started; every field only grows, but `active`.
#[derive(Debug, Default)]
pub struct ServerMetrics {
    /// Connections accepted (before any check).
    pub connections: AtomicU64,
    refused: [AtomicU64; 7],
    /// Sessions whose client proved the token and that ended well.
    pub sessions_ok: AtomicU64,
    /// Sessions whose client proved the token and that failed.
    pub sessions_failed: AtomicU64,
    /// Sessions under way (holding a slot).
    pub active: AtomicU64,
    /// Payload bytes this server sent (bench data, pulled files).
    pub bytes_sent: AtomicU64,
    /// Payload bytes this server received (bench data, pushed files).
    pub bytes_received: AtomicU64,
    /// Sessions by the bucket of their mean rate ([`RATE_BUCKETS`], then `+Inf`), not
    /// cumulative.
    rates: [AtomicU64; RATE_BUCKETS.len() + 1],
    /// The sum of those sessions' rates, bit/s.
    rate_sum: AtomicU64,
    /// Bytes sent and received per exported area.
    areas: Mutex<BTreeMap<String, (u64, u64)>>,
}

impl ServerMetrics {
    /// Counts a connection turned away.
    pub fn refused(&self, why: Refusal) {
        self.refused[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a session under way until the guard returned is dropped.
    pub fn session_started(self: &Arc<Self>) -> ActiveSession {
        self.active.fetch_add(1, Ordering::Relaxed);
        ActiveSession(self.clone())
    }

    /// Counts a session's payload, moved in `seconds` (its rate goes into the histogram
    /// when both are above zero), in exported area `area` if any.
    pub fn moved(&self, sent: u64, received: u64, seconds: f64, area: Option<&str>) {
        self.bytes_sent.fetch_add(sent, Ordering::Relaxed);
        self.bytes_received.fetch_add(received, Ordering::Relaxed);
        let bytes = sent.saturating_add(received);
        if bytes > 0 && seconds > 0.0 {
            let rate = bytes as f64 * 8.0 / seconds;
            let bucket = RATE_BUCKETS
                .iter()
                .position(|&le| rate <= le)
                .unwrap_or(RATE_BUCKETS.len());
            self.rates[bucket].fetch_add(1, Ordering::Relaxed);
            self.rate_sum.fetch_add(rate as u64, Ordering::Relaxed);
        }
        if let Some(name) = area {
            let mut areas = self.areas.lock().unwrap_or_else(|p| p.into_inner());
            let entry = areas.entry(name.to_string()).or_default();
            entry.0 = entry.0.saturating_add(sent);
            entry.1 = entry.1.saturating_add(received);
        }
    }

    /// The counters as they are now, with the memory budget's `(total, reserved, peak)`
    /// and the door's `(evicted, expired)` closings.
    pub fn snapshot(&self, memory: (u64, u64, u64), door_closed: (u64, u64)) -> Snapshot {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            connections: get(&self.connections),
            refused: std::array::from_fn(|i| (Refusal::ALL[i].label(), get(&self.refused[i]))),
            sessions_ok: get(&self.sessions_ok),
            sessions_failed: get(&self.sessions_failed),
            active: get(&self.active),
            bytes_sent: get(&self.bytes_sent),
            bytes_received: get(&self.bytes_received),
            rates: std::array::from_fn(|i| get(&self.rates[i])),
            rate_sum: get(&self.rate_sum),
            areas: self
                .areas
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(name, &(sent, received))| (name.clone(), sent, received))
                .collect(),
            memory_total: memory.0,
            memory_reserved: memory.1,
            memory_peak: memory.2,
            door_evicted: door_closed.0,
            door_expired: door_closed.1,
        }
    }
}

/// A session under way, counted in [`ServerMetrics::active`] while it lives.
pub struct ActiveSession(Arc<ServerMetrics>);

impl Drop for ActiveSession {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One reading of every figure [`render`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// See [`ServerMetrics::connections`].
    pub connections: u64,
    /// Refusals by reason label.
    pub refused: [(&'static str, u64); 7],
    /// See [`ServerMetrics::sessions_ok`].
    pub sessions_ok: u64,
    /// See [`ServerMetrics::sessions_failed`].
    pub sessions_failed: u64,
    /// See [`ServerMetrics::active`].
    pub active: u64,
    /// See [`ServerMetrics::bytes_sent`].
    pub bytes_sent: u64,
    /// See [`ServerMetrics::bytes_received`].
    pub bytes_received: u64,
    /// Sessions by rate bucket ([`RATE_BUCKETS`], then `+Inf`), not cumulative.
    pub rates: [u64; RATE_BUCKETS.len() + 1],
    /// The sum of those sessions' rates, bit/s.
    pub rate_sum: u64,
    /// Bytes sent and received per exported area, by name.
    pub areas: Vec<(String, u64, u64)>,
    /// The memory budget, bytes (`serve --memory`).
    pub memory_total: u64,
    /// What sessions hold of it now.
    pub memory_reserved: u64,
    /// The most they ever held at once.
    pub memory_peak: u64,
    /// Connections not yet proven closed to make room for newcomers (a flood).
    pub door_evicted: u64,
    /// Connections not yet proven closed at their deadline.
    pub door_expired: u64,
}

/// The Prometheus text exposition (format 0.0.4) of `s`.
pub fn render(s: &Snapshot) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
        out.push_str(&format!(
            "# HELP longhaul_{name} {help}\n# TYPE longhaul_{name} {kind}\n"
        ));
        for (labels, v) in samples {
            out.push_str(&format!("longhaul_{name}{labels} {v}\n"));
        }
    };
    let one = |v: u64| [(String::new(), v)];
    metric(
        "connections_total",
        "counter",
        "Connections accepted.",
        &one(s.connections),
    );
    let refused: Vec<(String, u64)> = s
        .refused
        .iter()
        .map(|(l, v)| (format!("{{reason=\"{l}\"}}"), *v))
        .collect();
    metric(
        "refused_total",
        "counter",
        "Connections and sessions turned away before they proved the token, by reason.",
        &refused,
    );
    metric(
        "sessions_total",
        "counter",
        "Sessions that proved the token and ended, by outcome.",
        &[
            ("{outcome=\"ok\"}".into(), s.sessions_ok),
            ("{outcome=\"failed\"}".into(), s.sessions_failed),
        ],
    );
    metric(
        "sessions_active",
        "gauge",
        "Sessions under way.",
        &one(s.active),
    );
    metric(
        "bytes_total",
        "counter",
        "Payload bytes moved by this server, by direction.",
        &[
            ("{direction=\"sent\"}".into(), s.bytes_sent),
            ("{direction=\"received\"}".into(), s.bytes_received),
        ],
    );
    let mut below = 0;
    let mut buckets: Vec<(String, u64)> = RATE_BUCKETS
        .iter()
        .zip(&s.rates)
        .map(|(le, n)| {
            below += n;
            (format!("_bucket{{le=\"{le:e}\"}}"), below)
        })
        .collect();
    let count = below + s.rates[RATE_BUCKETS.len()];
    buckets.push(("_bucket{le=\"+Inf\"}".into(), count));
    buckets.push(("_sum".into(), s.rate_sum));
    buckets.push(("_count".into(), count));
    metric(
        "session_rate_bits_per_second",
        "histogram",
        "Mean payload rate of each session that moved data.",
        &buckets,
    );
    // Area names are letters, digits, `.`, `_` and `-`: nothing to escape in a label.
    let areas: Vec<(String, u64)> = s
        .areas
        .iter()
        .flat_map(|(name, sent, received)| {
            [
                (format!("{{area=\"{name}\",direction=\"sent\"}}"), *sent),
                (
                    format!("{{area=\"{name}\",direction=\"received\"}}"),
                    *received,
                ),
            ]
        })
        .collect();
    metric(
        "area_bytes_total",
        "counter",
        "Payload bytes moved by this server per exported area, by direction.",
        &areas,
    );
    metric(
        "door_closed_total",
        "counter",
        "Connections closed before they proved the token: evicted for newcomers, or at \
         their deadline.",
        &[
            ("{why=\"evicted\"}".into(), s.door_evicted),
            ("{why=\"deadline\"}".into(), s.door_expired),
        ],
    );
    metric(
        "memory_budget_bytes",
        "gauge",
        "The memory budget sessions reserve from (serve --memory).",
        &one(s.memory_total),
    );
    metric(
        "memory_reserved_bytes",
        "gauge",
        "Memory the sessions under way hold of the budget.",
        &one(s.memory_reserved),
    );
    metric(
        "memory_reserved_peak_bytes",
        "gauge",
        "The most memory sessions ever held at once.",
        &one(s.memory_peak),
    );
    out
}

/// Longest request head read from a scraper.
pub const MAX_REQUEST: usize = 4096;
/// How long a scraper has to send its request, and to take the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Answers scrapers on `listener` for as long as the process runs, one at a time;
/// `snapshot` reads the figures at each scrape.
pub fn serve_metrics(listener: TcpListener, snapshot: Arc<dyn Fn() -> Snapshot + Send + Sync>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = answer(conn, &*snapshot);
    }
}

/// One scrape: the request head, then the answer, then the connection closes.
fn answer(mut conn: TcpStream, snapshot: &dyn Fn() -> Snapshot) -> io::Result<()> {
    conn.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    conn.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n.min(MAX_REQUEST - head.len())]);
    }
    let (status, body) = match request_target(&head) {
        Some("/metrics") => ("200 OK", render(&snapshot())),
        Some(_) => (
            "404 Not Found",
            "only /metrics is served here\n".to_string(),
        ),
        None => ("400 Bad Request", "expected GET /metrics\n".to_string()),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(reply.as_bytes())
}

/// The path of a `GET` (or `HEAD`-less) request line, without its query; `None` for
/// anything else.
fn request_target(head: &[u8]) -> Option<&str> {
    let line = head.split(|&b| b == b'\r' || b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    (method == "GET" && parts.next()?.starts_with("HTTP/"))
        .then(|| target.split('?').next().unwrap_or(target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_figure_with_its_type() {
        let m = ServerMetrics::default();
        m.connections.fetch_add(3, Ordering::Relaxed);
        m.refused(Refusal::Tls);
        m.refused(Refusal::Auth);
        m.refused(Refusal::Auth);
        m.moved(10, 2048, 1.0, None);
        // 2.5 Gbit/s and 40 Mbit/s, one in an area; a session that moved nothing is no rate.
        m.moved(0, 312_500_000, 1.0, Some("physics"));
        m.moved(5_000_000, 0, 1.0, Some("physics"));
        m.moved(0, 0, 1.0, None);
        m.sessions_ok.fetch_add(1, Ordering::Relaxed);
        let text = render(&m.snapshot((1 << 30, 0, 0), (0, 0)));
        for line in [
            "# TYPE longhaul_connections_total counter",
            "longhaul_connections_total 3",
            "longhaul_refused_total{reason=\"tls\"} 1",
            "longhaul_refused_total{reason=\"auth\"} 2",
            "longhaul_refused_total{reason=\"busy\"} 0",
            "longhaul_sessions_total{outcome=\"ok\"} 1",
            "longhaul_bytes_total{direction=\"sent\"} 5000010",
            "longhaul_bytes_total{direction=\"received\"} 312502048",
            "# TYPE longhaul_session_rate_bits_per_second histogram",
            "longhaul_session_rate_bits_per_second_bucket{le=\"1e6\"} 1",
            "longhaul_session_rate_bits_per_second_bucket{le=\"1e8\"} 2",
            "longhaul_session_rate_bits_per_second_bucket{le=\"1e9\"} 2",
            "longhaul_session_rate_bits_per_second_bucket{le=\"1e10\"} 3",
            "longhaul_session_rate_bits_per_second_bucket{le=\"+Inf\"} 3",
            "longhaul_session_rate_bits_per_second_count 3",
            "longhaul_session_rate_bits_per_second_sum 2540016464",
            "longhaul_area_bytes_total{area=\"physics\",direction=\"sent\"} 5000000",
            "longhaul_area_bytes_total{area=\"physics\",direction=\"received\"} 312500000",
            "# TYPE longhaul_sessions_active gauge",
            "longhaul_memory_budget_bytes 1073741824",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
        // Every sample line is `name{labels} value`, the value an integer.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = l.rsplit_once(' ').unwrap();
            assert!(name.starts_with("longhaul_"), "{l}");
            value.parse::<u64>().unwrap();
        }
    }

    #[test]
    fn only_a_get_of_metrics_is_answered() {
        assert_eq!(
            request_target(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some("/metrics")
        );
        assert_eq!(
            request_target(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Some("/metrics")
        );
        assert_eq!(request_target(b"GET / HTTP/1.1\r\n\r\n"), Some("/"));
        assert_eq!(request_target(b"POST /metrics HTTP/1.1\r\n\r\n"), None);
        assert_eq!(request_target(b"GET /metrics\r\n\r\n"), None);
        assert_eq!(request_target(b"\xff\xfe"), None);
        assert_eq!(request_target(b""), None);
    }
}
