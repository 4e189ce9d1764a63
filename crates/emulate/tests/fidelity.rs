//! Fidelity of `longhaul emulate` through the real TUN path: namespaces, TUN devices, the
//! packet loops and the link model together. Root only (skipped with a message otherwise).
//! Tests run one at a time (they share two CPU cores with the emulator), each bounded to a
//! few seconds, and every emulator is removed by its guard, also on failure.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use longhaul_emulate::{EmulateError, Emulator, EmulatorConfig, End};
use longhaul_linkem::{Jitter, LinkConfig, LossModel, QueueLimit, Reorder};
use longhaul_sys::netns;
use longhaul_sys::timer::monotonic_ns;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn root() -> bool {
    if longhaul_sys::process::is_root() {
        return true;
    }
    eprintln!("SKIPPED: emulator fidelity tests need root (namespaces and TUN devices)");
    false
}

fn start(tag: &str, cfg: impl FnOnce(&mut EmulatorConfig), link: LinkConfig) -> Emulator {
    let name = format!("t{}{tag}", std::process::id());
    let mut c = EmulatorConfig::symmetric(&name, link);
    cfg(&mut c);
    Emulator::start(c).expect("start emulator")
}

/// Runs `f` on a thread inside `end`'s namespace.
fn at<T: Send + 'static>(
    emu: &Emulator,
    end: End,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let ns = emu.netns(end);
    std::thread::spawn(move || {
        netns::enter(&ns).expect("enter namespace");
        f()
    })
}

const PORT: u16 = 7000;
const IP_UDP_HDR: usize = 28;

/// One received datagram: sequence number, send and receive time (CLOCK_MONOTONIC ns,
/// which all namespaces share), UDP payload length.
#[derive(Clone, Copy)]
struct Got {
    seq: u64,
    sent_ns: u64,
    recv_ns: u64,
    len: usize,
}

/// Receives datagrams at b until `idle` passes without one (after the first) or `limit`.
fn receiver(
    emu: &Emulator,
    idle: Duration,
    limit: Duration,
) -> (JoinHandle<Vec<Got>>, mpsc::Receiver<()>) {
    let (ready_tx, ready_rx) = mpsc::channel();
    let h = at(emu, End::B, move || {
        let sock = UdpSocket::bind(SocketAddr::new(End::B.ipv4().into(), PORT)).unwrap();
        longhaul_sys::socket::set_receive_buffer(&sock, 64 << 20, true).unwrap();
        sock.set_read_timeout(Some(idle)).unwrap();
        ready_tx.send(()).unwrap();
        let start = Instant::now();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while start.elapsed() < limit {
            match sock.recv(&mut buf) {
                Ok(n) if n >= 16 => got.push(Got {
                    seq: u64::from_le_bytes(buf[..8].try_into().unwrap()),
                    sent_ns: u64::from_le_bytes(buf[8..16].try_into().unwrap()),
                    recv_ns: monotonic_ns(),
                    len: n,
                }),
                Ok(_) => {}
                Err(_) if got.is_empty() => {}
                Err(_) => break,
            }
        }
        got
    });
    (h, ready_rx)
}

/// Sends `count` datagrams of `payload` bytes from a to b, paced at `pps`.
fn sender(emu: &Emulator, count: u64, payload: usize, pps: u64) -> JoinHandle<u64> {
    at(emu, End::A, move || {
        let sock = UdpSocket::bind(SocketAddr::new(End::A.ipv4().into(), 0)).unwrap();
        longhaul_sys::socket::set_send_buffer(&sock, 16 << 20, true).unwrap();
        sock.connect(SocketAddr::new(End::B.ipv4().into(), PORT))
            .unwrap();
        let mut buf = vec![0u8; payload.max(16)];
        let start = Instant::now();
        let mut seq = 0;
        while seq < count && start.elapsed() < Duration::from_secs(15) {
            let due = (start.elapsed().as_secs_f64() * pps as f64) as u64;
            while seq < due.min(count) {
                buf[..8].copy_from_slice(&seq.to_le_bytes());
                buf[8..16].copy_from_slice(&monotonic_ns().to_le_bytes());
                if sock.send(&buf).is_ok() {
                    seq += 1;
                }
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        seq
    })
}

fn flood(emu: &Emulator, count: u64, payload: usize, pps: u64) -> (u64, Vec<Got>) {
    let (rx, ready) = receiver(emu, Duration::from_millis(500), Duration::from_secs(20));
    ready.recv().unwrap();
    let sent = sender(emu, count, payload, pps).join().unwrap();
    (sent, rx.join().unwrap())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn in_order(got: &[Got]) -> bool {
    got.windows(2).all(|w| w[0].seq < w[1].seq)
}

/// How late a timer wake-up may run on a busy virtual machine (see
/// [`rtt_matches_configuration`]).
const TIMER_WAKEUP_ALLOWANCE: Duration = Duration::from_micros(100);

/// Median of 60 UDP ping-pongs a -> b -> a through an emulator with one-way `delay`.
fn ping_median(tag: &str, delay: Duration) -> f64 {
    let link = LinkConfig {
        delay,
        ..LinkConfig::default()
    };
    let emu = start(tag, |_| {}, link);
    let (ready_tx, ready_rx) = mpsc::channel();
    let echo = at(&emu, End::B, move || {
        let sock = UdpSocket::bind(SocketAddr::new(End::B.ipv4().into(), PORT)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 64];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            if n == 1 && buf[0] == 0xff {
                break;
            }
            sock.send_to(&buf[..n], from).unwrap();
        }
    });
    ready_rx.recv().unwrap();
    let probe = at(&emu, End::A, move || {
        let sock = UdpSocket::bind(SocketAddr::new(End::A.ipv4().into(), 0)).unwrap();
        sock.connect(SocketAddr::new(End::B.ipv4().into(), PORT))
            .unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut rtts = Vec::new();
        let mut buf = [0u8; 64];
        for i in 0u64..60 {
            let t0 = Instant::now();
            sock.send(&i.to_le_bytes()).unwrap();
            if sock.recv(&mut buf).is_ok() {
                rtts.push(t0.elapsed().as_secs_f64());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        sock.send(&[0xff]).unwrap();
        rtts
    });
    let rtts = probe.join().unwrap();
    echo.join().unwrap();
    assert!(
        rtts.len() >= 55,
        "only {} of 60 probes came back",
        rtts.len()
    );
    median(rtts)
}

/// The emulator adds the configured delay: the RTT through a 50 ms emulator, less the RTT
/// through the same path with no delay (the TUN devices, the packet loops and the wake-ups
/// of both ends), is 50 ms within 1 %, plus [`TIMER_WAKEUP_ALLOWANCE`] for each of the two
/// releases a delayed round trip waits for on a timer.
///
/// The packet loop wakes 30 us before a release and spins; on this project's virtual
/// machines a timer wake-up runs 100-250 us late when the host is busy, so the loop
/// learns how late and releases packets that much early (at most 250 us). Without that a
/// delayed round trip measured 50.4-50.56 ms here, with it 0.09-0.18 ms more than the
/// configured 50 ms over the no-delay path.
#[test]
fn rtt_matches_configuration() {
    let _s = serial();
    if !root() {
        return;
    }
    let rtt = Duration::from_millis(50);
    let base = ping_median("rt0", Duration::ZERO);
    let m = ping_median("rtt", rtt / 2);
    let want = rtt.as_secs_f64();
    let tol = (0.2e-3f64).max(0.01 * want) + 2.0 * TIMER_WAKEUP_ALLOWANCE.as_secs_f64();
    eprintln!(
        "rtt: configured {:.3} ms, median measured {:.3} ms, with no delay {:.3} ms",
        want * 1e3,
        m * 1e3,
        base * 1e3
    );
    assert!(
        base < 2e-3,
        "the emulated path with no delay has a median RTT of {base} s (over 2 ms)"
    );
    assert!(
        (m - base - want).abs() <= tol,
        "median RTT {m} s less {base} s with no delay vs configured {want} s (tolerance {tol} s)"
    );
}

#[test]
fn udp_flood_gets_the_rate_and_the_queueing_delay() {
    let _s = serial();
    if !root() {
        return;
    }
    let rate_bps = 100_000_000u64;
    let buffer = 100_000u64;
    let link = LinkConfig {
        rate_bps: Some(rate_bps),
        queue: QueueLimit::Bytes(buffer),
        ..LinkConfig::default()
    };
    let emu = start("rate", |_| {}, link);
    let payload = 1372; // 1400-byte IP packets
    let pkt_bits = ((payload + IP_UDP_HDR) * 8) as f64;
    let pps = (2.0 * rate_bps as f64 / pkt_bits) as u64; // twice the rate: overload
    let (sent, got) = flood(&emu, pps * 2, payload, pps);
    let stats = emu.stats();
    assert!(
        got.len() > 1000,
        "only {} of {sent} datagrams arrived",
        got.len()
    );
    assert!(in_order(&got), "datagrams were reordered without --reorder");
    // Delivered rate over the steady part (after the queue filled).
    let t_first = got[0].recv_ns;
    let steady: Vec<&Got> = got
        .iter()
        .filter(|g| g.recv_ns > t_first + 300_000_000)
        .collect();
    let bits: f64 = steady[1..]
        .iter()
        .map(|g| ((g.len + IP_UDP_HDR) * 8) as f64)
        .sum();
    let secs = (steady[steady.len() - 1].recv_ns - steady[0].recv_ns) as f64 / 1e9;
    let measured = bits / secs;
    eprintln!("rate: configured {rate_bps} bit/s, delivered {measured:.0} bit/s over {secs:.2} s");
    assert!(
        (measured / rate_bps as f64 - 1.0).abs() <= 0.02,
        "delivered {measured} bit/s vs configured {rate_bps}"
    );
    // Queueing delay under overload: about buffer / rate. The sender sends in bursts, so
    // the first datagrams of a burst find the queue drained a little since the previous
    // one; those that fill it up again see it full: take the 90th percentile.
    let mut owd: Vec<f64> = steady
        .iter()
        .map(|g| (g.recv_ns - g.sent_ns) as f64 / 1e9)
        .collect();
    owd.sort_by(|a, b| a.total_cmp(b));
    let p90 = owd[owd.len() * 9 / 10];
    let m = owd[owd.len() / 2];
    let want = buffer as f64 * 8.0 / rate_bps as f64;
    eprintln!(
        "queueing delay: expected {:.3} ms, one-way median {:.3} ms, p90 {:.3} ms",
        want * 1e3,
        m * 1e3,
        p90 * 1e3
    );
    assert!(
        (p90 / want - 1.0).abs() <= 0.10,
        "one-way delay p90 {p90} s vs buffer/rate {want} s"
    );
    assert!(
        stats.a_to_b.link.dropped_queue_segments > 0,
        "overload dropped nothing at the queue"
    );
    assert_eq!(
        stats.faults(),
        0,
        "packets lost outside the model: {stats:?}"
    );
}

/// Sends 1e5 small datagrams through a lossy link; returns (sent, received, stats).
fn lossy_flood(tag: &str, loss: LossModel) -> (u64, Vec<Got>, longhaul_emulate::EmulatorStats) {
    let link = LinkConfig {
        loss,
        ..LinkConfig::default()
    };
    let emu = start(tag, |c| c.seed = 7, link);
    let (sent, got) = flood(&emu, 100_000, 64, 50_000);
    let stats = emu.stats();
    assert_eq!(sent, 100_000, "sender could not send everything in time");
    assert_eq!(
        stats.faults(),
        0,
        "packets lost outside the model: {stats:?}"
    );
    let out = stats.a_to_b.link.segments_out;
    assert!(
        got.len() as u64 <= out && out - got.len() as u64 <= 20,
        "received {} but the model delivered {out}: the path lost packets outside the model",
        got.len()
    );
    assert!(in_order(&got), "datagrams were reordered without --reorder");
    (sent, got, stats)
}

#[test]
fn bernoulli_loss_within_three_sigma() {
    let _s = serial();
    if !root() {
        return;
    }
    let p = 0.01;
    let (sent, got, _) = lossy_flood("bern", LossModel::Bernoulli { p });
    let measured = 1.0 - got.len() as f64 / sent as f64;
    let sigma = (p * (1.0 - p) / sent as f64).sqrt();
    eprintln!(
        "loss: configured {p}, measured {measured:.5} over {sent} packets (sigma {sigma:.5})"
    );
    assert!(
        (measured - p).abs() <= 3.0 * sigma,
        "loss {measured} vs {p} (3 sigma = {})",
        3.0 * sigma
    );
}

#[test]
fn gilbert_elliott_mean_burst_length() {
    let _s = serial();
    if !root() {
        return;
    }
    let (p, r) = (0.01, 0.25);
    let model = LossModel::GilbertElliott {
        p,
        r,
        one_minus_h: 1.0,
        one_minus_k: 0.0,
    };
    let (sent, got, _) = lossy_flood("ge", model);
    let (mut lost, mut bursts, mut next) = (0u64, 0u64, 0u64);
    for g in &got {
        if g.seq > next {
            lost += g.seq - next;
            bursts += 1;
        }
        next = g.seq + 1;
    }
    let mean_burst = lost as f64 / bursts.max(1) as f64;
    let loss = lost as f64 / sent as f64;
    eprintln!(
        "gilbert-elliott: mean burst {mean_burst:.3} (want {}), loss {loss:.4} (want {:.4})",
        1.0 / r,
        model.mean_loss()
    );
    assert!(
        (mean_burst * r - 1.0).abs() <= 0.15,
        "mean burst {mean_burst} vs {}",
        1.0 / r
    );
    assert!(
        (loss / model.mean_loss() - 1.0).abs() <= 0.2,
        "loss {loss} vs {}",
        model.mean_loss()
    );
}

#[test]
fn jitter_keeps_order_and_reorder_breaks_it() {
    let _s = serial();
    if !root() {
        return;
    }
    let jitter = LinkConfig {
        delay: Duration::from_millis(5),
        jitter: Some(Jitter::Uniform {
            max: Duration::from_millis(2),
        }),
        ..LinkConfig::default()
    };
    let emu = start("jit", |_| {}, jitter.clone());
    let (_, got) = flood(&emu, 10_000, 64, 10_000);
    drop(emu);
    assert!(
        got.len() >= 9_990,
        "lost {} of 10000 without loss configured",
        10_000 - got.len()
    );
    assert!(in_order(&got), "jitter without --reorder reordered packets");
    let reorder = LinkConfig {
        reorder: Some(Reorder {
            probability: 0.05,
            extra: Duration::from_millis(1),
        }),
        ..jitter
    };
    let emu = start("reo", |_| {}, reorder);
    let (_, got) = flood(&emu, 10_000, 64, 10_000);
    let stats = emu.stats();
    let late = got.windows(2).filter(|w| w[0].seq > w[1].seq).count();
    eprintln!(
        "reorder 5%: {late} inversions, model held back {}",
        stats.a_to_b.link.reordered_packets
    );
    assert!(late > 100, "only {late} inversions with 5 % reordering");
}

fn tcp_transfer(emu: &Emulator, ip_b: IpAddr, bytes: usize) -> usize {
    let (ready_tx, ready_rx) = mpsc::channel();
    let server = at(emu, End::B, move || {
        let l = TcpListener::bind(SocketAddr::new(ip_b, 5001)).unwrap();
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        loop {
            let n = s.read(&mut buf).expect("read (timeout?)");
            if n == 0 {
                break;
            }
            for (i, b) in buf[..n].iter().enumerate() {
                assert_eq!(
                    *b,
                    ((total + i) % 251) as u8,
                    "corrupt byte at offset {}",
                    total + i
                );
            }
            total += n;
        }
        total
    });
    ready_rx.recv().unwrap();
    let client = at(emu, End::A, move || {
        let mut s =
            TcpStream::connect_timeout(&SocketAddr::new(ip_b, 5001), Duration::from_secs(5))
                .unwrap();
        s.set_write_timeout(Some(Duration::from_secs(15))).unwrap();
        let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        s.write_all(&data).unwrap();
    });
    client.join().expect("client");
    server.join().expect("server")
}

#[test]
fn tcp_with_jumbo_frames_and_loss_arrives_intact() {
    let _s = serial();
    if !root() {
        return;
    }
    let link = LinkConfig {
        rate_bps: Some(500_000_000),
        queue: QueueLimit::Bytes(2_000_000),
        delay: Duration::from_millis(5),
        loss: LossModel::Bernoulli { p: 0.003 },
        ..LinkConfig::default()
    };
    let emu = start("tcp", |c| c.mtu = 9000, link);
    let n = 24 << 20;
    assert_eq!(tcp_transfer(&emu, End::B.ipv4().into(), n), n);
    assert_eq!(tcp_transfer(&emu, End::B.ipv6().into(), n / 4), n / 4);
    let stats = emu.stats();
    eprintln!(
        "tcp: {} super-packets read, {} cut around lost segments, {} segments lost",
        stats.a_to_b.reads, stats.a_to_b.split_packets, stats.a_to_b.link.dropped_loss_segments
    );
    assert!(
        stats.a_to_b.link.segments_in > stats.a_to_b.reads,
        "no GSO super-packets seen"
    );
    // 500 Mbit/s: a 9000-byte segment takes 144 us > the 100 us burst bound, so every
    // super-packet is written one segment at a time, spaced as on the wire.
    assert!(
        stats.a_to_b.writes + stats.a_to_b.in_flight_packets >= stats.a_to_b.link.segments_out,
        "super-packets were not cut to the burst bound: {} writes (+{} in flight) for {} segments",
        stats.a_to_b.writes,
        stats.a_to_b.in_flight_packets,
        stats.a_to_b.link.segments_out
    );
    assert!(
        stats.a_to_b.split_packets > 0,
        "no super-packet was cut: the split path went untested"
    );
}

#[test]
fn bad_configurations_and_names_in_use_leave_nothing() {
    let _s = serial();
    if !root() {
        return;
    }
    let name = format!("t{}bad", std::process::id());
    let too_small = LinkConfig {
        queue: QueueLimit::Bytes(100),
        ..LinkConfig::default()
    };
    let err = Emulator::start(EmulatorConfig::symmetric(&name, too_small)).unwrap_err();
    assert!(matches!(err, EmulateError::Config(_)), "{err}");
    assert!(
        !netns::exists(&format!("lh-{name}-a")),
        "a failed start left a namespace"
    );
    let emu = Emulator::start(EmulatorConfig::symmetric(&name, LinkConfig::default())).unwrap();
    let err = Emulator::start(EmulatorConfig::symmetric(&name, LinkConfig::default())).unwrap_err();
    assert!(matches!(err, EmulateError::NameInUse { .. }), "{err}");
    assert!(emu.is_running());
    assert_loops_pinned();
    drop(emu);
    assert!(!netns::exists(&format!("lh-{name}-a")) && !netns::exists(&format!("lh-{name}-b")));
}

/// The two real-time packet loops of a running emulator (threads `lh-emulate-ab` and
/// `-ba` of this process) are pinned so they cannot hold every core of a small host:
/// both on the last CPU with fewer than four, each its own CPU otherwise.
fn assert_loops_pinned() {
    let cpus = longhaul_sys::process::allowed_cpus().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut pinned = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if !comm.starts_with("lh-emulate-") {
                continue;
            }
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            let list = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap_or("")
                .trim()
                .to_string();
            pinned.push(list);
        }
        let want = if cpus.len() >= 4 {
            vec![
                cpus[cpus.len() - 1].to_string(),
                cpus[cpus.len() - 2].to_string(),
            ]
        } else {
            vec![cpus[cpus.len() - 1].to_string(); 2]
        };
        pinned.sort();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        if pinned == want_sorted {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "packet loops allowed on {pinned:?}, expected {want:?} (of {cpus:?})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
