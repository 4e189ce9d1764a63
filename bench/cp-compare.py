#!/usr/bin/env python3
"""`longhaul cp` against globus-url-copy and scp in one run, on the same host settings.
Run it through bench/cp-compare.sh (packages, build, clean-up trap); see docs/cp-bench.md.

Cases (each tool pushes from a page-cache-warm source to a destination directory on the
same file system, served by a server process started here):
  loopback  one SIZE file over 127.0.0.1: longhaul cp, globus-url-copy -fast -p 4, and
            `longhaul bench --bytes SIZE` as the memory-to-memory reference; also
            globus-url-copy -verify-checksum (GridFTP checking every byte, as cp does)
  lfn       the same over `longhaul emulate` (RATE, RTT; client in namespace a, servers in
            namespace b); globus-url-copy -fast -p 4 -tcp-bs BDP
  lfn-jumbo the lfn case with 9000-byte frames, as the record teams ran their paths
  small     FILES small files (1-16 KiB, 10 directories): longhaul cp -r against scp -r
            through a private sshd on 127.0.0.1

Measured for every run: wall seconds of the client process (start to exit, so connection
set-up is included for every tool alike), throughput = bytes / wall, CPU seconds of both
ends (client: rusage of the process and its children from wait4; server: utime + stime +
cutime + cstime of the server's main process before and after, once its per-connection
children are reaped), the time an fsync of the copy (syncfs for a tree) takes afterwards
(GridFTP, scp and longhaul cp without --sync leave dirty pages), and a digest check of the
copy; over the emulated path also the bottleneck's drops and use.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
GB = 1e9


# ---------------------------------------------------------------- units and small helpers

def parse_rate(text):
    """'1G' -> 1e9 bit/s."""
    t = text.strip()
    mult = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
    if t and t[-1].lower() in mult:
        return int(float(t[:-1]) * mult[t[-1].lower()])
    return int(float(t))


def parse_duration(text):
    """'180ms' -> 0.18 s."""
    t = text.strip()
    if t.endswith("ms"):
        return float(t[:-2]) / 1e3
    if t.endswith("us"):
        return float(t[:-2]) / 1e6
    return float(t.rstrip("s"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu(pid):
    """utime + stime + cutime + cstime of a process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 14..17 (1-based) of the whole line; the split drops the first two.
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICK


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += f.read().split()
    except OSError:
        pass
    return out


def wrap(ns, argv):
    return (["ip", "netns", "exec", ns] + argv) if ns else argv


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def file_digest(path):
    if shutil.which("b3sum"):
        out = subprocess.run(["b3sum", "--no-names", path], capture_output=True, text=True, check=True)
        return "blake3:" + out.stdout.strip()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def tree_digest(root):
    """{relative path: sha256} of every regular file under root."""
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def make_durable(path):
    """Seconds to make a copy durable: fsync of a file; syncfs of the file system under a
    tree (one journal commit for thousands of files, as `sync -f` does)."""
    t0 = time.monotonic()
    if os.path.isdir(path):
        subprocess.run(["sync", "-f", path], check=True)
    else:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.monotonic() - t0


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


# ---------------------------------------------------------------- processes

class Run:
    """Everything the run starts, so that it can be stopped (also from the shell's trap via
    WORK/pids, one process-group id a line)."""

    def __init__(self, work):
        self.work = work
        self.servers = []

    def record(self, pgid):
        with open(os.path.join(self.work, "pids"), "a") as f:
            f.write(f"{pgid}\n")

    def serve(self, name, argv, ready, env=None):
        """Starts a server in its own process group; ready(proc, log_path) -> bool."""
        log_path = os.path.join(self.work, f"{name}.log")
        logf = open(log_path, "w")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        self.record(p.pid)
        self.servers.append(p)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if p.poll() is not None:
                break
            if ready(p, log_path):
                return p
            time.sleep(0.05)
        text = open(log_path).read()
        self.stop(p)
        raise RuntimeError(f"server {name} did not start: {shlex.join(argv)}\n{text}")

    def stop(self, p):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if p in self.servers:
            self.servers.remove(p)

    def stop_all(self):
        for p in list(self.servers):
            self.stop(p)


def listening(ns, port):
    def ready(_p, _log):
        out = subprocess.run(wrap(ns, ["ss", "-Hltn", f"sport = :{port}"]), capture_output=True, text=True)
        return bool(out.stdout.strip())
    return ready


def log_says(text):
    def ready(_p, log_path):
        with open(log_path) as f:
            return text in f.read()
    return ready


def quiesce(pid, timeout=10):
    """Waits until a forking server has reaped its per-connection children."""
    deadline = time.monotonic() + timeout
    while children(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def run_client(argv, out_path, env=None, timeout=600, sample=None):
    """Runs a client; returns (exit code, wall seconds, CPU seconds incl. its children,
    [sample() about every 0.2 s while it runs])."""
    samples = []
    with open(out_path, "w") as out:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = t0 + timeout
        next_sample = t0
        try:
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if sample and time.monotonic() >= next_sample:
                    samples.append(sample())
                    next_sample += 0.2
                if time.monotonic() > deadline:
                    log(f"  client still running after {timeout:g} s: killed")
                    p.kill()
                    pid, status, ru = os.wait4(p.pid, 0)
                    break
                time.sleep(0.005)
        except BaseException:
            p.kill()
            os.wait4(p.pid, 0)
            raise
        wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_utime + ru.ru_stime, samples


def cruise_share(samples, rate_bps):
    """Share of the bottleneck used while the middle 80 % of a run's bytes crossed it, from
    (emulator uptime s, a->b wire bytes out) samples; None without enough samples."""
    pts = sorted({p for p in samples if p})
    if len(pts) < 10 or pts[-1][1] - pts[0][1] <= 0:
        return None
    b0, total = pts[0][1], pts[-1][1] - pts[0][1]

    def time_at(frac):
        want = b0 + frac * total
        for (ta, ba), (tb, bb) in zip(pts, pts[1:]):
            if bb >= want:
                return ta + (tb - ta) * ((want - ba) / (bb - ba) if bb > ba else 0)
        return pts[-1][0]
    t10, t90 = time_at(0.1), time_at(0.9)
    if t90 <= t10:
        return None
    return 0.8 * total * 8 / (t90 - t10) / rate_bps


def netns_hosts(name):
    """globus-gridftp-server resolves its own address at start-up; inside a fresh
    namespace nothing answers DNS, so give `ip netns exec` a hosts file for emulator
    NAME's two ends."""
    for end in ("a", "b"):
        d = f"/etc/netns/lh-{name}-{end}"
        os.makedirs(d, exist_ok=True)
        with open("/etc/hosts") as f:
            hosts = f.read()
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write(hosts + f"\n10.99.0.1 lh-{name}-a\n10.99.0.2 lh-{name}-b\n")


def json_lines(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


# ---------------------------------------------------------------- the benchmark

class Bench:
    def __init__(self, args):
        self.a = args
        self.work = args.work
        self.lh = args.longhaul
        self.run = Run(self.work)
        self.results = []
        self.env = dict(os.environ, HOME=os.path.join(self.work, "home"))
        os.makedirs(self.env["HOME"], exist_ok=True)
        self.have_cp = self.detect_cp()
        # The direction data crosses the emulated bottleneck: a_to_b for a push (client in
        # namespace a), b_to_a for a pull.
        self.data_dir = "a_to_b"

    def detect_cp(self):
        ok = subprocess.run([self.lh, "cp", "--help"], capture_output=True).returncode == 0
        serve_help = subprocess.run([self.lh, "serve", "--help"], capture_output=True, text=True).stdout
        if ok and "--root" in serve_help:
            return True
        log("note: this longhaul has no `cp` / `serve --root` yet: the longhaul cp rows are skipped")
        return False

    # -- one measured copy
    def measure(self, case, tool, argv, server, nbytes, nfiles, dest, verify, env=None, parse=None,
                keep=False):
        """Runs one client against a started server, then syncs and verifies the copy (and
        deletes it unless `keep`)."""
        spid = server.pid
        quiesce(spid)
        link0 = self.link_counters()
        load = os.getloadavg()[0]
        s0 = proc_cpu(spid)
        out_path = os.path.join(self.work, f"{case}-{tool.replace(' ', '_')}.out")
        log(f"[{case}] {tool}: {shlex.join(argv)}")
        rc, wall, ccpu, samples = run_client(argv, out_path, env=env, timeout=self.a.client_timeout,
                                             sample=self.wire_sample if getattr(self, "emulating", False) else None)
        quiesce(spid)
        scpu = proc_cpu(spid) - s0
        link1 = self.link_counters()
        text = open(out_path, errors="replace").read()
        parsed = parse(out_path) if parse else {}
        if nbytes is None:  # a timed run: the bytes it moved
            nbytes = parsed.get("tool_bytes") or 1
        row = {"case": case, "tool": tool, "command": shlex.join(argv), "exit_code": rc,
               "wall_s": wall, "bytes": nbytes, "files": nfiles,
               "gbit_s": nbytes * 8 / wall / 1e9, "files_per_s": nfiles / wall,
               "client_cpu_s": ccpu, "server_cpu_s": scpu,
               "cpu_s_per_gb": (ccpu + scpu) / (nbytes / GB), "loadavg_1min_before": load}
        row.update(parsed)
        if link0 and link1:
            row["bottleneck"] = {k: link1[k] - link0[k] for k in link0}
            row["bottleneck"]["cruise_share"] = cruise_share(samples, parse_rate(self.a.rate))
            pts = [p for p in samples if p]
            if pts:
                # When the first MiB had crossed the bottleneck, counted from the client's start.
                first = next((t for t, b in pts if b - pts[0][1] >= 1 << 20), None)
                row["bottleneck"]["first_mib_s"] = first - pts[0][0] if first is not None else None
                row["bottleneck"]["samples"] = [[round(t - pts[0][0], 3), b - pts[0][1]] for t, b in pts]
        if rc != 0:
            row["error"] = text[-2000:]
            log(f"  FAILED (exit {rc}): {text[-600:]}")
        if dest is not None and rc == 0 and os.path.exists(dest):
            row["sync_s"] = make_durable(dest)
            row["durable_s"] = wall + row["sync_s"]
            row["verified"] = verify(dest)
        else:
            row["verified"] = False
        self.results.append(row)
        log(f"  {wall:.2f} s, {row['gbit_s']:.3f} Gbit/s, {nfiles / wall:.0f} files/s, CPU client "
            f"{ccpu:.2f} s server {scpu:.2f} s ({row['cpu_s_per_gb']:.2f} s/GB), verified {row['verified']}")
        if dest is not None and not keep:
            # Everything in the destination directory goes, also part files and manifests
            # of a failed run, so that no later run resumes from it.
            parent = os.path.dirname(dest)
            for name in os.listdir(parent):
                remove(os.path.join(parent, name))
        return row

    def wire_sample(self):
        """(emulator uptime s, a->b wire bytes out) from the stats file it rewrites every
        250 ms, or None."""
        try:
            with open(f"/run/longhaul/emulate-{self.a.emu_name}.json") as f:
                st = json.load(f)["stats"]
            return (st["uptime_ns"] / 1e9, st[self.data_dir]["link"]["bytes_out"])
        except (OSError, ValueError, KeyError):
            return None

    def link_counters(self):
        """The emulated bottleneck's a->b counters while the emulator runs, else None."""
        if not getattr(self, "emulating", False):
            return None
        out = subprocess.run([self.lh, "emulate", "stats", self.a.emu_name, "--json"], capture_output=True, text=True)
        try:
            link = json.loads(out.stdout)["stats"][self.data_dir]["link"]
        except (ValueError, KeyError):
            return None
        return {k: link[k] for k in ("segments_out", "bytes_out", "dropped_queue_segments")}

    @staticmethod
    def parse_cp(path):
        lines = json_lines(path)
        start = next((l for l in lines if l.get("type") == "start"), {})
        end = next((l for l in reversed(lines) if l.get("type") == "end"), {})
        return {"tool_gbit_s": end.get("bits_per_second", 0) / 1e9 if end else None,
                "tool_seconds": end.get("seconds"), "streams": end.get("streams", start.get("streams")),
                "chunk_bytes": end.get("chunk_bytes", start.get("chunk_bytes")),
                "tool_client_cpu_s": end.get("cpu_seconds"), "window_bytes": start.get("window_bytes"),
                "congestion": start.get("congestion"), "sent_bytes": end.get("sent_bytes"),
                "first_byte_rtts": end.get("first_byte_rtts"),
                "cpu_by_stage": end.get("cpu_by_stage"),
                "jump_start": (end.get("jump_start") or {}).get("used")
                if isinstance(end.get("jump_start"), dict) else end.get("jump_start")}

    @staticmethod
    def parse_bench(path):
        lines = json_lines(path)
        end = next((l for l in reversed(lines) if l.get("type") == "end"), None)
        if not end:
            return {}
        s = end["summary"]
        return {"tool_gbit_s": s["bits_per_second"] / 1e9, "tool_seconds": s["seconds"],
                "tool_bytes": s["bytes"], "retransmits": s.get("retransmits"),
                "streams": len(end.get("streams", [])), "first_byte_rtts": s.get("first_byte_rtts")}

    def longhaul_server(self, name, ns, listen, root):
        port = free_port()
        argv = [self.lh, "serve", "--listen", listen, "--port", str(port)]
        if self.have_cp:
            argv += ["--root", root]
        return self.run.serve(name, wrap(ns, argv), log_says("listening on"), env=self.env), port

    def gridftp_server(self, name, ns, listen):
        port = free_port()
        # Anonymous clear-text access (a local test, no certificates); as root the anonymous
        # user must be named. Daemon mode forks a process per connection, as deployed.
        argv = ["globus-gridftp-server", "-aa", "-anonymous-user", "root", "-allow-root",
                "-p", str(port), "-control-interface", listen, "-d", "ERROR,WARN"]
        return self.run.serve(name, wrap(ns, argv), listening(ns, port)), port

    # -- one big file, loopback or over the emulated path
    def big_file(self, case, ns_client, ns_server, host, gridftp_args, reps):
        src = self.a.big
        nbytes = os.path.getsize(src)
        digest = self.big_digest
        same = lambda p: file_digest(p) == digest  # noqa: E731
        lh_root = os.path.join(self.work, "lh-root")
        gf_dst = os.path.join(self.work, "gf-dst")
        os.makedirs(lh_root, exist_ok=True)
        os.makedirs(gf_dst, exist_ok=True)
        lsrv, lport = self.longhaul_server(f"{case}-serve", ns_server, host, lh_root)
        gsrv, gport = self.gridftp_server(f"{case}-gridftp", ns_server, host)
        try:
            state = {"streams": None}

            def cp():
                row = self.measure(case, "longhaul cp",
                                   wrap(ns_client, [self.lh, "cp", "--json", "--no-progress", src,
                                                    f"longhaul://{host}:{lport}/big"]),
                                   lsrv, nbytes, 1, os.path.join(lh_root, "big"), same, env=self.env,
                                   parse=self.parse_cp)
                state["streams"] = row.get("streams") or state["streams"]

            def gridftp():
                self.measure(case, "globus-url-copy",
                             wrap(ns_client, ["globus-url-copy"] + gridftp_args +
                                  [f"file://{src}", f"ftp://{host}:{gport}{gf_dst}/big"]),
                             gsrv, nbytes, 1, os.path.join(gf_dst, "big"), same)

            def bench():
                # Memory to memory on the same path, the same bytes and the same number of
                # streams as cp used (cp's default from the spec when cp is not there).
                n = state["streams"] or (2 if ns_client is None else 4)
                self.measure(case, "longhaul bench",
                             wrap(ns_client, [self.lh, "bench", f"{host}:{lport}", "--bytes", str(nbytes),
                                              "-P", str(n), "--json"]),
                             lsrv, nbytes, 1, None, None, env=self.env, parse=self.parse_bench)

            def gridftp_verified():
                # The same integrity guarantee as cp (a checksum of both copies compared
                # after the transfer; GridFTP's default MD5).
                self.measure(case, "globus-url-copy -verify-checksum",
                             wrap(ns_client, ["globus-url-copy"] + gridftp_args + ["-verify-checksum"] +
                                  [f"file://{src}", f"ftp://{host}:{gport}{gf_dst}/big"]),
                             gsrv, nbytes, 1, os.path.join(gf_dst, "big"), same)

            # Pulls over the emulated path (the server sends, data crosses b -> a): the
            # server's root holds a hard link of the source.
            pull_dst = os.path.join(self.work, "pull-dst")
            os.makedirs(pull_dst, exist_ok=True)
            pull_src = os.path.join(lh_root, "pull-src")
            if ns_client is not None and not os.path.exists(pull_src):
                os.link(src, pull_src)

            def pulling(run):
                def go():
                    self.data_dir = "b_to_a"
                    try:
                        run()
                    finally:
                        self.data_dir = "a_to_b"
                return go

            @pulling
            def cp_pull():
                if not os.path.exists(pull_src):  # a push's clean-up empties the root
                    os.link(src, pull_src)
                self.measure(case, "longhaul cp pull",
                             wrap(ns_client, [self.lh, "cp", "--json", "--no-progress",
                                              f"longhaul://{host}:{lport}/pull-src",
                                              os.path.join(pull_dst, "big")]),
                             lsrv, nbytes, 1, os.path.join(pull_dst, "big"), same, env=self.env,
                             parse=self.parse_cp)

            @pulling
            def gridftp_pull():
                self.measure(case, "globus-url-copy pull",
                             wrap(ns_client, ["globus-url-copy"] + gridftp_args +
                                  [f"ftp://{host}:{gport}{src}", f"file://{pull_dst}/big"]),
                             gsrv, nbytes, 1, os.path.join(pull_dst, "big"), same)

            verified = [gridftp_verified] if self.a.gridftp_verify and case == "loopback" else []
            pulls = ([cp_pull] if self.have_cp else []) + [gridftp_pull] if ns_client is not None else []
            tools = ([cp] if self.have_cp else []) + [gridftp, bench] + verified + pulls
            for rep in range(reps):
                # Each repetition starts with the next tool, so drift on a shared machine
                # and the order itself hit every tool alike.
                for i in range(len(tools)):
                    tools[(rep + i) % len(tools)]()
        finally:
            self.run.stop(lsrv)
            self.run.stop(gsrv)

    def loopback(self):
        self.big_file("loopback", None, None, "127.0.0.1", self.a.gridftp_loopback_args, self.a.reps)

    def lfn_jumbo(self):
        self.lfn(case="lfn-jumbo", mtu=9000)

    def lfn(self, case="lfn", mtu=None):
        name = self.a.emu_name
        rate_bps = parse_rate(self.a.rate)
        bdp = int(rate_bps * parse_duration(self.a.rtt) / 8)
        subprocess.run([self.lh, "emulate", "up", name, "--rate", self.a.rate, "--rtt", self.a.rtt,
                        "--mtu", str(mtu or self.a.mtu), "--daemon"], check=True, stdout=subprocess.DEVNULL)
        try:
            netns_hosts(name)
            gargs = [a.replace("BDP", str(bdp)) for a in self.a.gridftp_lfn_args]
            self.emulating = True
            self.big_file(case, f"lh-{name}-a", f"lh-{name}-b", "10.99.0.2", gargs, self.a.lfn_reps)
            self.emulating = False
            stats = subprocess.run([self.lh, "emulate", "stats", name, "--json"], capture_output=True, text=True)
            self.emulator_stats = stats.stdout.strip()
        finally:
            subprocess.run([self.lh, "emulate", "down", name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            for end in ("a", "b"):
                shutil.rmtree(f"/etc/netns/lh-{name}-{end}", ignore_errors=True)

    # -- many small files
    def make_small(self):
        root = os.path.join(self.work, "small")
        rng = random.Random(4)
        total = 0
        for i in range(self.a.files):
            d = os.path.join(root, f"d{i % 10:02}")
            os.makedirs(d, exist_ok=True)
            n = rng.randint(1024, 16384)
            with open(os.path.join(d, f"f{i:05}.bin"), "wb") as f:
                f.write(rng.randbytes(n))
            total += n
        return root, total

    def sshd(self):
        sdir = os.path.join(self.work, "ssh")
        os.makedirs(sdir, exist_ok=True)
        for key in ("host", "client"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"cp-compare {key}",
                            "-f", os.path.join(sdir, key)], check=True)
        shutil.copy(os.path.join(sdir, "client.pub"), os.path.join(sdir, "authorized_keys"))
        port = free_port()
        conf = os.path.join(sdir, "sshd_config")
        with open(conf, "w") as f:
            f.write(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {sdir}/host
PidFile {sdir}/sshd.pid
AuthorizedKeysFile {sdir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp /usr/lib/openssh/sftp-server
""")
        os.makedirs("/run/sshd", exist_ok=True)
        srv = self.run.serve("sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", conf], listening(None, port))
        client = ["ssh", "-p", str(port), "-i", os.path.join(sdir, "client"), "-o", "BatchMode=yes",
                  "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={sdir}/known_hosts",
                  "-o", "LogLevel=ERROR"]
        return srv, port, client

    def small(self):
        src, nbytes = self.make_small()
        want = tree_digest(src)
        same = lambda p: tree_digest(p) == want  # noqa: E731
        nfiles = self.a.files
        log(f"[small] {nfiles} files, {nbytes / 1e6:.1f} MB in 10 directories")
        lh_root = os.path.join(self.work, "lh-root")
        scp_dst = os.path.join(self.work, "scp-dst")
        os.makedirs(lh_root, exist_ok=True)
        srv, port, ssh = self.sshd()
        lsrv, lport = self.longhaul_server("small-serve", None, "127.0.0.1", lh_root)
        # Every run writes a fresh directory and copies are deleted only at the end: ext4
        # skips inodes deleted in the last minutes when it allocates (recently_deleted), so
        # a run right after 10,000 deletions creates its files several times slower, and
        # whichever tool ran second would pay for the first one's clean-up.
        runs = iter(range(1_000_000))
        try:
            def cp():
                name = f"small-{next(runs)}"
                self.measure("small", "longhaul cp -r",
                             [self.lh, "cp", "-r", "--json", "--no-progress", src, f"longhaul://127.0.0.1:{lport}/{name}"],
                             lsrv, nbytes, nfiles, os.path.join(lh_root, name), same, env=self.env,
                             parse=self.parse_cp, keep=True)

            def scp():
                dst = os.path.join(scp_dst, f"run-{next(runs)}")
                os.makedirs(dst, exist_ok=True)
                # scp takes ssh's options but spells the port -P.
                opts = ["-P", ssh[2]] + ssh[3:]
                self.measure("small", "scp -r", ["scp", "-r", "-q"] + opts + [src, f"root@127.0.0.1:{dst}/"],
                             srv, nbytes, nfiles, os.path.join(dst, "small"), same, keep=True)

            tools = ([cp] if self.have_cp else []) + [scp]
            for rep in range(self.a.reps):
                for i in range(len(tools)):
                    tools[(rep + i) % len(tools)]()
        finally:
            self.run.stop(lsrv)
            self.run.stop(srv)
            remove(src)
            remove(lh_root)
            remove(scp_dst)

    # -- report
    def host_info(self):
        def sysctl(k):
            try:
                return open("/proc/sys/" + k.replace(".", "/")).read().strip()
            except OSError:
                return None
        fs = subprocess.run(["df", "--output=fstype,source,target", self.work],
                            capture_output=True, text=True).stdout.splitlines()[-1].split()
        return {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "hostname": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
                "work_dir": self.work, "filesystem": {"type": fs[0], "device": fs[1], "mount": fs[2]},
                "sysctl": {k: sysctl(k) for k in ("net.core.rmem_max", "net.core.wmem_max",
                                                  "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
                                                  "net.ipv4.tcp_congestion_control")},
                "versions": {"longhaul": subprocess.run([self.lh, "--version"], capture_output=True,
                                                        text=True).stdout.strip(),
                             "globus-url-copy": subprocess.run(["globus-url-copy", "-version"], capture_output=True,
                                                               text=True).stderr.strip()
                             or subprocess.run(["globus-url-copy", "-version"], capture_output=True,
                                               text=True).stdout.strip(),
                             "ssh": subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip()}}

    def summary(self):
        return summary(self.results, parse_rate(self.a.rate))

    def report(self, host):
        print(f"\n{host['date_utc']}  {host['hostname']}  {host['cpus']} CPUs  kernel {host['kernel']}  "
              f"files on {host['filesystem']['type']} ({host['filesystem']['device']})")
        print(f"{'case':9} {'tool':32} {'wall s':>7} {'Gbit/s':>7} {'tool Gb/s':>9} {'files/s':>8} "
              f"{'cli CPU':>7} {'srv CPU':>7} {'CPU s/GB':>8} {'sync s':>7} {'ok':>3} {'streams':>7} {'drops':>7} "
              f"{'1st RTT':>7} use%")
        for r in self.results:
            tg = f"{r['tool_gbit_s']:.3f}" if r.get("tool_gbit_s") else "-"
            fs = f"{r['sync_s']:.2f}" if "sync_s" in r else "-"
            ok = "yes" if r["verified"] else ("-" if r["tool"] == "longhaul bench" and r["exit_code"] == 0 else "NO")
            if r["exit_code"] != 0:
                ok = f"exit {r['exit_code']}"
            print(f"{r['case']:9} {r['tool']:32} {r['wall_s']:7.2f} {r['gbit_s']:7.3f} {tg:>9} "
                  f"{r['files_per_s']:8.0f} {r['client_cpu_s']:7.2f} {r['server_cpu_s']:7.2f} "
                  f"{r['cpu_s_per_gb']:8.2f} {fs:>7} {ok:>3} {r.get('streams') or '-':>7} "
                  f"{r['bottleneck']['dropped_queue_segments'] if 'bottleneck' in r else '-':>7} "
                  f"{first_rtts_text(r):>7} {cruise_text(r)}")
        ratios, checks = self.summary()
        for k, v in ratios.items():
            print(f"  {k}: {v:.2f}")
        for k, v in checks.items():
            print(f"  target {k}: {'met' if v else 'NOT met'}")
        if not self.have_cp:
            print("  longhaul cp is not in this build: its rows and ratios are missing")
        return ratios, checks

    def main(self):
        host = self.host_info()
        cases = self.a.cases.split(",")
        failures = 0
        if {"loopback", "lfn", "lfn-jumbo"} & set(cases):
            self.big_digest = file_digest(self.a.big)
        for case in cases:
            try:
                getattr(self, case.replace("-", "_"))()
            except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
                log(f"case {case} failed: {e}")
                failures += 1
        ratios, checks = self.report(host)
        doc = {"type": "cp_compare", "host": host,
               "config": {k: v for k, v in vars(self.a).items()}, "longhaul_cp_available": self.have_cp,
               "big_file_bytes": os.path.getsize(self.a.big),
               "runs": self.results, "ratios": ratios, "targets_met": checks,
               "emulator_stats": json.loads(getattr(self, "emulator_stats", "null") or "null")}
        with open(self.a.out, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"  results: {self.a.out}")
        bad = failures or any(r["exit_code"] != 0 or (r["tool"] != "longhaul bench" and not r["verified"])
                              for r in self.results)
        if bad:
            return 2
        return 0 if all(checks.values()) else 1


def summary(results, rate):
    """Ratios and target checks from the runs (median run by wall time of each tool)."""
    def median(case, tool, key="wall_s"):
        rows = [r for r in results if r["case"] == case and r["tool"] == tool and r["exit_code"] == 0]
        if not rows:
            return None
        rows.sort(key=lambda r: r.get(key, float("inf")))
        return rows[len(rows) // 2]  # median run by wall time
    ratios, checks = {}, {}
    for case, lh, peer, target in (("loopback", "longhaul cp", "globus-url-copy", 1.5),
                                   ("lfn", "longhaul cp", "globus-url-copy", 1.25),
                                   ("lfn-jumbo", "longhaul cp", "globus-url-copy", 1.25),
                                   ("lfn", "longhaul cp pull", "globus-url-copy pull", 1.25),
                                   ("lfn-jumbo", "longhaul cp pull", "globus-url-copy pull", 1.25),
                                   ("small", "longhaul cp -r", "scp -r", 5.0)):
        v = median(case, peer + " -verify-checksum")
        if median(case, lh) and v:
            ratios[f"{case}: {lh} / {peer} -verify-checksum throughput (both verify every byte)"] = \
                v["wall_s"] / median(case, lh)["wall_s"]
        a, b = median(case, lh), median(case, peer)
        if a and b:
            r = b["wall_s"] / a["wall_s"]
            ratios[f"{case}: {lh} / {peer} throughput"] = r
            checks[f"{case}: {lh} >= {target}x {peer}"] = r >= target
            # Best runs: the least disturbed ones on a shared machine.
            fa, fb = (min(x["wall_s"] for x in results if x["case"] == case and x["tool"] == t
                          and x["exit_code"] == 0) for t in (lh, peer))
            ratios[f"{case}: {lh} / {peer} throughput, best run of each"] = fb / fa
            # The same with the sync that makes each copy durable counted in.
            da, db = (median(case, t, "durable_s") for t in (lh, peer))
            if "durable_s" in da and "durable_s" in db:
                ratios[f"{case}: {lh} / {peer} throughput to durable (wall + sync)"] = \
                    db["durable_s"] / da["durable_s"]
            ratios[f"{case}: {lh} / {peer} CPU s per GB"] = a["cpu_s_per_gb"] / b["cpu_s_per_gb"]
    for case in ("loopback", "lfn", "lfn-jumbo"):
        a, ref = median(case, "longhaul cp"), median(case, "longhaul bench")
        if a and ref:
            ratios[f"{case}: longhaul cp / longhaul bench throughput"] = a["gbit_s"] / ref["gbit_s"]
    for case in ("lfn", "lfn-jumbo"):
        for tool in ("longhaul cp", "globus-url-copy", "longhaul bench", "longhaul cp pull",
                     "globus-url-copy pull"):
            a = median(case, tool)
            if not a:
                continue
            share = a["gbit_s"] * 1e9 / rate
            ratios[f"{case}: {tool} share of the bottleneck (file bytes / wall)"] = share
            cruise = a.get("bottleneck", {}).get("cruise_share")
            if cruise:
                ratios[f"{case}: {tool} use of the bottleneck while the middle 80 % of the bytes crossed it"] = cruise
            if tool.startswith("longhaul cp"):
                checks[f"{case}: {tool} >= 90 % of the bottleneck (file bytes / wall)"] = share >= 0.9
                # Issue 15: the first run and the second (jump-start) run, each on its own.
                runs = sorted((x for x in results if x["case"] == case and x["tool"] == tool
                               and x["exit_code"] == 0), key=lambda x: x.get("jump_start") or False)
                for x in runs:
                    which = "with jump-start" if x.get("jump_start") else "without jump-start"
                    ratios[f"{case}: {tool} {which}: share of the bottleneck"] = x["gbit_s"] * 1e9 / rate
                    if x.get("first_byte_rtts") is not None:
                        ratios[f"{case}: {tool} {which}: round trips before the first data byte"] = \
                            x["first_byte_rtts"]
                    drops = x.get("bottleneck", {}).get("dropped_queue_segments")
                    if drops is not None:
                        ratios[f"{case}: {tool} {which}: drops at the bottleneck"] = drops
                if cruise:
                    checks[f"{case}: longhaul cp >= 90 % of the bottleneck (middle 80 % of the bytes)"] = cruise >= 0.9
    return ratios, checks


def first_rtts_text(r):
    """Round trips before longhaul's first data byte (`first_byte_rtts`, docs/startup.md)."""
    v = r.get("first_byte_rtts")
    return f"{v:.2f}" if isinstance(v, (int, float)) else "-"


def cruise_text(r):
    c = r.get("bottleneck", {}).get("cruise_share")
    return f"{100 * c:.1f}" if c else "-"


def render_markdown(path):
    """Prints a results file as the Markdown tables of docs/cp-bench.md (median run by wall
    time of each tool and case, then the ratios)."""
    doc = json.load(open(path))
    h = doc["host"]
    big = doc.get("big_file_bytes") or max((r["bytes"] for r in doc["runs"] if r["case"] != "small"), default=0)
    print(f"Measured {h['date_utc']} on {h['hostname']} ({h['cpus']} cores, kernel {h['kernel']}), "
          f"files on {h['filesystem']['type']}; cases {doc['config']['cases']}, file "
          f"{big / 2**30:g} GiB, {doc['config']['reps']} run(s) per tool on loopback "
          f"and for small files, {doc['config']['lfn_reps']} over the emulated path "
          f"({doc['config']['rate']}, {doc['config']['rtt']}); median by wall time.\n")
    print("| case | tool | wall s | Gbit/s (bytes/wall) | tool's own Gbit/s | files/s | CPU s client | "
          "CPU s server | CPU s/GB (both) | sync s after | verified | bottleneck drops / use % | runs (wall s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    groups = {}
    for r in doc["runs"]:
        groups.setdefault((r["case"], r["tool"]), []).append(r)
    for (case, tool), rows in groups.items():
        rows = sorted(rows, key=lambda r: r["wall_s"])
        m = rows[len(rows) // 2]
        tg = f"{m['tool_gbit_s']:.3f}" if m.get("tool_gbit_s") else "-"
        fps = f"{m['files_per_s']:.0f}" if m["files"] > 1 else "-"
        sync = f"{m['sync_s']:.2f}" if "sync_s" in m else "-"
        ok = "n/a" if tool == "longhaul bench" else ("yes" if all(r["verified"] for r in rows) else "NO")
        failed = [r["exit_code"] for r in rows if r["exit_code"] != 0]
        if failed:
            ok += f" ({len(failed)} of {len(rows)} failed: exit {', '.join(map(str, failed))})"
        runs = " ".join(f"{r['wall_s']:.2f}" for r in rows)
        link = f"{m['bottleneck']['dropped_queue_segments']} / {cruise_text(m)}" if "bottleneck" in m else "-"
        print(f"| {case} | `{tool}` | {m['wall_s']:.2f} | {m['gbit_s']:.3f} | {tg} | {fps} | "
              f"{m['client_cpu_s']:.2f} | {m['server_cpu_s']:.2f} | {m['cpu_s_per_gb']:.2f} | {sync} | {ok} | "
              f"{link} | {runs} |")
    print()
    ratios, checks = summary(doc["runs"], parse_rate(doc["config"]["rate"]))
    for k, v in ratios.items():
        print(f"- {k}: **{v:.2f}**")
    for k, v in checks.items():
        print(f"- target {k}: **{'met' if v else 'not met'}**")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        render_markdown(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="scratch directory (source and destinations live here)")
    ap.add_argument("--big", required=True, help="the page-cache-warm source file")
    ap.add_argument("--longhaul", required=True)
    ap.add_argument("--cases", default="loopback,lfn,lfn-jumbo,small")
    ap.add_argument("--reps", type=int, default=3, help="runs of each tool on loopback and for small files")
    ap.add_argument("--lfn-reps", type=int, default=1, help="runs of each tool over the emulated path")
    ap.add_argument("--no-gridftp-verify", dest="gridftp_verify", action="store_false",
                    help="skip the loopback run of globus-url-copy -verify-checksum (the same integrity guarantee as cp)")
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--rate", default="1G")
    ap.add_argument("--rtt", default="180ms")
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--emu-name", default=f"cpb{os.getpid()}")
    ap.add_argument("--gridftp-loopback-args", default="-fast -p 4")
    ap.add_argument("--gridftp-lfn-args", default="-fast -p 4 -tcp-bs BDP",
                    help="BDP is replaced by rate x RTT / 8 in bytes")
    ap.add_argument("--client-timeout", type=float, default=240)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    args.gridftp_loopback_args = shlex.split(args.gridftp_loopback_args)
    args.gridftp_lfn_args = shlex.split(args.gridftp_lfn_args)
    b = Bench(args)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return b.main()
    finally:
        b.run.stop_all()


if __name__ == "__main__":
    sys.exit(main())
