//! `longhaul serve --memory`: the server holds what its budget allows under item 3's
//! attacks, and a real client is served meanwhile. A real server process, real
//! sockets, real files:
//!
//! - after a session that raised the listener's receive buffer (a 128 MiB window, as
//!   root), unauthenticated connections get the default buffer, not the raised one
//!   (read from the server's side with `ss -tm`: `rb` is each socket's receive buffer);
//! - a push asking for 128 MiB chunks on 8 streams (1 GiB held at once before the budget)
//!   gets smaller chunks and the server's peak RSS (`VmHWM`) stays under a ceiling, while
//!   a plain copy finishes next to it and the idle connections stay open;
//! - a push that cannot fit at all is refused with what to lower.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use support::{cp_command, is_root, run, spawn_piped, write_file, Rng, Scratch, Server, MIB};

/// Peak resident memory of a process, bytes.
fn vm_hwm(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// The receive buffers (`rb` of `ss -tm`) of the server's ends of connections from
/// `clients` (local ports of this process).
fn server_side_rcvbufs(server_port: u16, clients: &[u16]) -> Vec<u64> {
    let out = Command::new("ss")
        .args(["-tmnH", "state", "established"])
        .arg(format!("( sport = :{server_port} )"))
        .output()
        .expect("ss (iproute2) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rbs = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let peer_port: Option<u16> = line
            .split_whitespace()
            .nth(3)
            .and_then(|peer| peer.rsplit(':').next())
            .and_then(|p| p.parse().ok());
        // skmem is on the same line or the next, depending on the ss version.
        let mem = if line.contains("skmem") {
            line.to_string()
        } else {
            lines.next().unwrap_or_default().to_string()
        };
        if peer_port.is_some_and(|p| clients.contains(&p)) {
            let rb = mem
                .split([',', '('])
                .find_map(|f| f.strip_prefix("rb"))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no rb in {mem:?}"));
            rbs.push(rb);
        }
    }
    rbs
}

/// A file of `size` bytes that is data all through (holes are not sent).
fn data_file(path: &std::path::Path, size: u64, rng: &mut Rng) {
    let block = rng.bytes(MIB as usize);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..size / MIB {
        f.write_all(&i.to_le_bytes()).unwrap();
        f.write_all(&block[8..]).unwrap();
    }
    f.flush().unwrap();
}

#[test]
fn the_memory_budget_holds_under_attack_and_a_real_client_is_served() {
    if !is_root() {
        eprintln!("skipped: raising the listener's buffer past rmem_max needs root");
        return;
    }
    let mut rng = Rng::from_env("server_memory");
    let home = Scratch::new("mem-home");
    let src = Scratch::in_target_dir("mem-src");
    let root = Scratch::in_target_dir("mem-root");
    let server = Server::start_with(&home.0, &root.0, &["--memory", "1GiB"]);
    assert!(
        server.log().contains("memory 0 of 1024 MiB reserved"),
        "the budget is logged at start:\n{}",
        server.log()
    );
    let port: u16 = server.addr.rsplit(':').next().unwrap().parse().unwrap();
    let small = src.join("small");
    write_file(&small, &rng.bytes(256 * 1024), 0o644);

    // A session whose window needs a larger scale than the default: the listener's
    // buffer is raised for its data connections.
    let wide = run(
        cp_command(&home.0)
            .args(["--no-progress", "--window", "128MiB", "-P", "1"])
            .arg(&small)
            .arg(server.remote("wide")),
        Duration::from_secs(60),
    );
    wide.assert_ok();
    let log = server.log_with("received into wide");
    assert!(
        log.contains("reserved"),
        "the session line says what it held:\n{log}"
    );

    // (a) Unauthenticated connections afterwards: the default buffer each.
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            // A TLS record header promising more than is sent: the server waits.
            s.write_all(&[22, 3, 1, 2, 0]).unwrap();
            s
        })
        .collect();
    let ports: Vec<u16> = idle
        .iter()
        .map(|s| s.local_addr().unwrap().port())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let rbs = server_side_rcvbufs(port, &ports);
    assert_eq!(rbs.len(), ports.len(), "ss shows every connection");
    let largest = *rbs.iter().max().unwrap();
    eprintln!("unauthenticated sockets' receive buffers: largest {largest} bytes");
    assert!(
        largest <= 4 * MIB,
        "an unauthenticated socket holds a receive buffer of {largest} bytes (the raised \
         listener's), not the default"
    );

    // (b) A push asking for 128 MiB chunks on 8 streams, and a plain copy beside it.
    let big = src.join("big");
    data_file(&big, 1024 * MIB, &mut rng);
    let before = vm_hwm(server.pid());
    let mut cmd = cp_command(&home.0);
    cmd.args(["--no-progress", "--json", "--chunk", "128MiB", "-P", "8"])
        .arg(&big)
        .arg(server.remote("big"));
    let heavy = spawn_piped(&mut cmd);
    let plain = run(
        cp_command(&home.0)
            .args(["--no-progress"])
            .arg(&small)
            .arg(server.remote("plain")),
        Duration::from_secs(120),
    );
    plain.assert_ok();
    let heavy = heavy.wait(Duration::from_secs(240));
    heavy.assert_ok();
    let chunk = heavy.json_of("start")["chunk_bytes"].as_u64().unwrap();
    let peak = vm_hwm(server.pid());
    eprintln!(
        "server VmHWM {} MiB before the push, {} MiB after; chunks {} MiB",
        before / MIB,
        peak / MIB,
        chunk / MIB
    );
    assert!(chunk < 128 * MIB, "the chunks were cut to fit: {chunk}");
    assert!(
        peak < 512 * MIB,
        "the server's peak RSS reached {} MiB (8 streams x 128 MiB chunks)",
        peak / MIB
    );
    support::assert_same_bytes(&big, &root.join("big"));
    support::assert_same_bytes(&small, &root.join("plain"));
    drop(idle);

    // (c) What cannot fit at all is refused, with what to lower.
    let refused = run(
        cp_command(&home.0)
            .args(["--no-progress", "--chunk", "1GiB", "-P", "24"])
            .arg(&small)
            .arg(server.remote("refused")),
        Duration::from_secs(60),
    );
    refused.assert_failed();
    assert!(
        refused.describe().contains("--streams"),
        "the refusal says what to lower:\n{}",
        refused.describe()
    );
}
