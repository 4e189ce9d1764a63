//! A real OpenSSH server on a "far host" for the ssh start-up tests: a network namespace
//! joined to this one by a veth pair (a private /30 in 10.233.0.0/16), host and user keys
//! made with `ssh-keygen` in a scratch directory, and `/usr/sbin/sshd -D -e -f CONFIG`
//! running inside the namespace. The client side runs here with `-e "ssh -p PORT -i KEY
//! ..."` and `--remote-longhaul` naming the binary under test.
//!
//! [`SshLab`] cleans up on drop, also when a test fails: sshd and every process left in
//! the namespace are killed, the namespace (and with it the veth pair) deleted, the
//! scratch directory removed. [`SshLab::start`] returns `None` (after printing why) when
//! not root or when sshd or ssh-keygen are missing, so the tests skip visibly.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{cp_command, is_root, longhaul, Proc, Scratch, BIN};

const SSHD: &str = "/usr/sbin/sshd";
/// sshd's port inside the namespace (not 22, so that `-p` is exercised).
pub const SSH_PORT: u16 = 2222;

static LAB_SEQ: AtomicU32 = AtomicU32::new(0);

/// A far host with sshd, reachable from this namespace (or, [`SshLab::start_isolated`],
/// only through ssh).
pub struct SshLab {
    /// Declared first: killed before the namespace goes. `None` when isolated (sshd runs
    /// per connection as ssh's ProxyCommand).
    sshd: Option<Proc>,
    /// Extra ssh options (the ProxyCommand of an isolated lab).
    proxy: Option<String>,
    ns: String,
    veth: String,
    /// The far host's address.
    pub addr: String,
    /// This host's address on the link to the far host (what the far host reaches this
    /// one at; unreachable in an isolated lab).
    pub near: String,
    dir: Scratch,
    key: PathBuf,
    log: Arc<Mutex<String>>,
}

impl SshLab {
    /// Starts the far host, or `None` with a SKIP message when this machine cannot.
    pub fn start(test: &str) -> Option<SshLab> {
        Self::start_with(test, false)
    }

    /// A far host with no network path from here at all: no veth; ssh reaches it through
    /// `ProxyCommand=ip netns exec NS sshd -i` (sshd speaking on a pipe), so the far
    /// longhaul starts but its port cannot be reached.
    pub fn start_isolated(test: &str) -> Option<SshLab> {
        Self::start_with(test, true)
    }

    /// A far host without longhaul: its sessions get `PATH=/usr/bin:/bin` and a cache
    /// directory of their own ([`SshLab::far_cache`], as `XDG_CACHE_HOME`), so a copy
    /// that does not name `--remote-longhaul` finds no longhaul there.
    pub fn start_bare(test: &str) -> Option<SshLab> {
        Self::start_configured(test, false, true)
    }

    fn start_with(test: &str, isolated: bool) -> Option<SshLab> {
        Self::start_configured(test, isolated, false)
    }

    fn start_configured(test: &str, isolated: bool, bare: bool) -> Option<SshLab> {
        if !is_root() {
            eprintln!("SKIP {test}: needs root (network namespaces, sshd)");
            return None;
        }
        for tool in [SSHD, "/usr/bin/ssh-keygen", "/usr/bin/ssh"] {
            if !Path::new(tool).exists() {
                eprintln!("SKIP {test}: {tool} is missing (apt-get install -y openssh-server openssh-client)");
                return None;
            }
        }
        let seq = LAB_SEQ.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let ns = format!("lhssh-{pid}-{seq}");
        let veth = format!("lhs{:x}{seq}", pid % 0xfffff);
        let dir = Scratch::new(&format!("sshd-{seq}"));
        // A /30 chosen from the pid and the sequence, skipping one already in use.
        let used = String::from_utf8_lossy(
            &Command::new("ip")
                .args(["-o", "addr"])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned();
        let (near, far) = (0..256u32)
            .map(|i| (pid.wrapping_mul(7).wrapping_add(seq * 13 + i * 97)) % 16384)
            .map(|n| {
                (
                    format!("10.233.{}.{}", n / 64, (n % 64) * 4 + 1),
                    format!("10.233.{}.{}", n / 64, (n % 64) * 4 + 2),
                )
            })
            .find(|(a, b)| !used.contains(&format!("{a}/")) && !used.contains(&format!("{b}/")))
            .expect("a free /30 in 10.233.0.0/16");
        let mut lab_ns = NsGuard {
            ns: ns.clone(),
            veth: veth.clone(),
        };
        let ip = |args: &[&str]| {
            let st = Command::new("ip").args(args).status().unwrap();
            assert!(st.success(), "ip {args:?} failed");
        };
        ip(&["netns", "add", &ns]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        if !isolated {
            let peer = format!("{veth}p");
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", &peer, "netns", &ns,
            ]);
            ip(&["addr", "add", &format!("{near}/30"), "dev", &veth]);
            ip(&["link", "set", &veth, "up"]);
            ip(&["-n", &ns, "addr", "add", &format!("{far}/30"), "dev", &peer]);
            ip(&["-n", &ns, "link", "set", &peer, "up"]);
        }

        let keygen = |name: &str| {
            let st = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(name))
                .status()
                .unwrap();
            assert!(st.success(), "ssh-keygen {name}");
        };
        keygen("host_key");
        keygen("user key"); // a space in the path: -e must quote it
        std::fs::copy(dir.join("user key.pub"), dir.join("authorized_keys")).unwrap();
        let cfg = dir.join("sshd_config");
        std::fs::write(
            &cfg,
            format!(
                "Port {SSH_PORT}\nListenAddress {far}\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile {}\n{}",
                dir.join("host_key").display(),
                dir.join("authorized_keys").display(),
                dir.join("sshd.pid").display(),
                if bare {
                    format!(
                        "SetEnv PATH=/usr/bin:/bin XDG_CACHE_HOME={}\n",
                        dir.join("far-cache").display()
                    )
                } else {
                    String::new()
                },
            ),
        )
        .unwrap();
        // sshd's privilege separation directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        if isolated {
            lab_ns.ns.clear();
            lab_ns.veth.clear();
            return Some(SshLab {
                sshd: None,
                proxy: Some(format!(
                    "-o \"ProxyCommand=ip netns exec {ns} {SSHD} -i -f {}\"",
                    cfg.display()
                )),
                ns,
                veth: String::new(),
                addr: far,
                near: near.clone(),
                key: dir.join("user key"),
                dir,
                log: Arc::default(),
            });
        }
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns, SSHD, "-D", "-e", "-f"])
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let sshd = Proc(child);
        // Wait for "Server listening on" (no sleeping), then keep draining sshd's log.
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("Server listening on") {
                    let _ = tx.send(());
                }
                let mut l = sink.lock().unwrap();
                if l.len() < 1 << 20 {
                    l.push_str(&line);
                    l.push('\n');
                }
            }
        });
        if rx.recv_timeout(Duration::from_secs(20)).is_err() {
            panic!(
                "sshd did not start listening; it said:\n{}",
                log.lock().unwrap()
            );
        }
        // The lab owns the namespace and the veth pair from here.
        lab_ns.ns.clear();
        lab_ns.veth.clear();
        Some(SshLab {
            sshd: Some(sshd),
            proxy: None,
            ns,
            veth,
            addr: far,
            near: near.clone(),
            key: dir.join("user key"),
            dir,
            log,
        })
    }

    /// The `-e` value: ssh with the test port, key (quoted: its path has a space) and no
    /// host-key checks.
    pub fn rsh(&self) -> String {
        format!(
            "ssh -p {SSH_PORT} -i '{}' -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR {}",
            self.key.display(),
            self.proxy.as_deref().unwrap_or("")
        )
    }

    /// `root@ADDR:PATH`.
    pub fn remote(&self, path: &Path) -> OsString {
        let mut s = OsString::from(format!("root@{}:", self.addr));
        s.push(path);
        s
    }

    /// `longhaul cp -e RSH --remote-longhaul BIN`; add the arguments.
    pub fn cp(&self, home: &Path) -> Command {
        let mut c = cp_command(home);
        c.args(["-e", &self.rsh(), "--remote-longhaul", BIN]);
        c
    }

    /// `longhaul bench -e RSH --remote-longhaul BIN`; add the arguments.
    pub fn bench(&self, home: &Path) -> Command {
        let mut c = longhaul(home);
        c.args(["bench", "-e", &self.rsh(), "--remote-longhaul", BIN]);
        c
    }

    /// Pids of `longhaul ssh-server` processes on the far host.
    pub fn far_processes(&self) -> Vec<u32> {
        longhaul_sys::netns::processes_in(&self.ns)
            .unwrap_or_default()
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| c.split(|&b| b == 0).any(|a| a == b"ssh-server"))
                    .unwrap_or(false)
            })
            .collect()
    }

    /// TCP ports listening on the far host other than sshd's (`ss -ltn` there).
    pub fn other_listeners(&self) -> Vec<String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, "ss", "-Hltn"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.contains(&format!(":{SSH_PORT} ")))
            .map(str::to_string)
            .collect()
    }

    /// Waits up to `limit` for no `ssh-server` process and no listening port but sshd's
    /// on the far host; panics saying what is left.
    pub fn assert_far_gone(&self, limit: Duration, ctx: &str) {
        let deadline = Instant::now() + limit;
        loop {
            let (procs, ports) = (self.far_processes(), self.other_listeners());
            if procs.is_empty() && ports.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "{ctx}: {limit:?} on, the far host still has ssh-server processes {procs:?} and listeners {ports:?}\nsshd log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A firewall on the far host that lets only ssh in: an nft rule in its namespace
    /// drops every TCP packet from outside to any other port (as a site that opens ssh
    /// alone). `None`, with a SKIP message, when nft is missing.
    pub fn firewall_all_but_ssh(&self) -> Option<()> {
        self.firewall("")
    }

    /// As [`SshLab::firewall_all_but_ssh`], but stateful as a site's firewall usually
    /// is: connections the far host opens itself get their answers (so it can connect
    /// back to the client), new ones from outside reach ssh alone.
    pub fn firewall_new_inbound_but_ssh(&self) -> Option<()> {
        self.firewall("  ct state established,related accept\n")
    }

    /// Loads the far host's input chain: `first` (rules before it), then every TCP port
    /// but ssh's dropped from outside.
    fn firewall(&self, first: &str) -> Option<()> {
        if !Path::new("/usr/sbin/nft").exists() {
            eprintln!("SKIP: /usr/sbin/nft is missing (apt-get install -y nftables)");
            return None;
        }
        let rules = self.dir.join("firewall.nft");
        std::fs::write(
            &rules,
            format!(
                "table inet lhfw {{\n chain input {{\n  type filter hook input priority 0; \
                 policy accept;\n{first}  iifname != \"lo\" tcp dport != {SSH_PORT} drop\n }}\n}}\n"
            ),
        )
        .unwrap();
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, "nft", "-f"])
            .arg(&rules)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nft: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(())
    }

    /// sshd's log so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The far sessions' `XDG_CACHE_HOME` on a [`SshLab::start_bare`] host.
    pub fn far_cache(&self) -> std::path::PathBuf {
        self.dir.join("far-cache")
    }

    /// Runs `program args` in the far host's mount namespace (sshd's: `ip netns exec` gave
    /// it its own), e.g. to mount a file system only the far sessions see; it goes with
    /// the namespace when the lab is dropped.
    pub fn in_far_mounts(&self, program: &str, args: &[&std::ffi::OsStr]) -> std::process::Output {
        let pid = self.sshd.as_ref().expect("a lab with sshd").0.id();
        Command::new("nsenter")
            .args(["-t", &pid.to_string(), "-m", program])
            .args(args)
            .output()
            .unwrap()
    }

    /// `longhaul cp -e RSH` (no `--remote-longhaul`); add the arguments.
    pub fn cp_plain(&self, home: &Path) -> Command {
        let mut c = cp_command(home);
        c.args(["-e", &self.rsh()]);
        c
    }

    /// The lab's scratch directory (keys, config).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }
}

impl Drop for SshLab {
    fn drop(&mut self) {
        if let Some(sshd) = &mut self.sshd {
            sshd.kill();
        }
        drop(NsGuard {
            ns: std::mem::take(&mut self.ns),
            veth: std::mem::take(&mut self.veth),
        });
    }
}

/// Kills what runs in the namespace, deletes it and the host end of the veth pair.
struct NsGuard {
    ns: String,
    veth: String,
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        if !self.ns.is_empty() {
            for pid in longhaul_sys::netns::processes_in(&self.ns).unwrap_or_default() {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
            let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
        }
        if !self.veth.is_empty() {
            let _ = Command::new("ip")
                .args(["link", "del", &self.veth])
                .stderr(Stdio::null())
                .status();
        }
    }
}
