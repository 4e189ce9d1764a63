#!/usr/bin/env python3
"""`longhaul sync` against rsync and a full `longhaul cp`, in one run over an emulated path.
Run it through bench/sync-compare.sh (packages, build, emulator, sshd, clean-up trap).

Cases (the client pushes from namespace a to namespace b):
  big   a SIZE file of random bytes whose destination copy is the same file before PERCENT %
        of its BLOCK-aligned blocks were rewritten at random places (fixed seed): rsync -a
        over ssh and to an rsync daemon (its delta algorithm), longhaul sync over ssh and to
        a longhaul serve daemon, and a full longhaul cp (ssh and daemon). The destination is
        put back to the old version before every run; longhaul's hash caches are emptied
        at both ends, so both ends hash their copy (the cache helps only the next run).
  tree  FILES files of 1-16 KiB in 10 directories, synced once (the initial copy, shown),
        then again with nothing changed (the measured run; longhaul's hash caches warm).

Measured for every run: wall seconds of the client (ssh login included where there is
ssh), bytes on the wire each way (the emulator's counters of what each end offered to the
bottleneck, headers and retransmissions included), CPU seconds of the client (rusage of it
and its children: the ssh client too) and of the far end (the serving process's CPU; for
ssh, sshd's, which collects the CPU of every session process it reaped: sshd itself, the
far rsync or longhaul), and whether the destination equals the source afterwards.
"""

import argparse
import hashlib
import importlib.util
import json
import math
import os
import random
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
_spec = importlib.util.spec_from_file_location("cp_compare", os.path.join(HERE, "cp-compare.py"))
cpc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpc)
proc_cpu, quiesce, run_client, json_lines, log = cpc.proc_cpu, cpc.quiesce, cpc.run_client, cpc.json_lines, cpc.log

GB = 1e9
TOOLS = ["rsync-ssh", "rsyncd", "rsyncd-inplace", "lh-sync-ssh", "lh-sync-daemon",
         "lh-sync-inplace-ssh", "lh-sync-inplace-daemon", "lh-cp-ssh", "lh-cp-daemon"]


def parse_size(text):
    t = text.strip().lower().rstrip("b")
    m = "kmgt"
    if t.endswith("i"):
        return int(float(t[:-2]) * 1024 ** (m.index(t[-2]) + 1))
    if t and t[-1] in m:
        return int(float(t[:-1]) * 1000 ** (m.index(t[-1]) + 1))
    return int(t)


def digest(path):
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def tree_digest(root):
    return cpc.tree_digest(root)


class SyncBench:
    def __init__(self, a):
        self.a = a
        self.work = a.work
        self.lh = a.longhaul
        self.run = cpc.Run(self.work)
        self.far = a.far
        self.ns_a, self.ns_b = f"lh-{a.emu_name}-a", f"lh-{a.emu_name}-b"
        self.ssh = a.ssh_opts
        self.rows = []
        self.home = os.path.join(self.work, "home")
        self.cache_a = os.path.join(self.work, "cache-a")
        self.cache_b = os.path.join(self.work, "cache-b")
        os.makedirs(self.home, exist_ok=True)
        # Each end's chunk-hash cache in the scratch directory, not the user's.
        self.env_a = dict(os.environ, HOME=self.home, XDG_CACHE_HOME=self.cache_a)
        self.env_b = dict(os.environ, HOME=self.home, XDG_CACHE_HOME=self.cache_b)
        self.far_lh = f"env XDG_CACHE_HOME={shlex.quote(self.cache_b)} {shlex.quote(self.lh)}"
        self.tools = [t for t in a.tools.split(",") if t]
        for t in self.tools:
            if t not in TOOLS:
                sys.exit(f"unknown tool {t} (known: {','.join(TOOLS)})")
        self.have_sync = subprocess.run([self.lh, "sync", "--help"], capture_output=True).returncode == 0
        if not self.have_sync:
            log("note: `longhaul sync --help` fails: this longhaul has no sync yet, the "
                "lh-sync-* rows are skipped (rsync and longhaul cp still run)")

    # -- servers in b
    def start_servers(self):
        self.far_root = os.path.join(self.work, "far")
        os.makedirs(self.far_root, exist_ok=True)
        self.lh_port = cpc.free_port()
        self.lh_srv = self.run.serve(
            "lh-serve", cpc.wrap(self.ns_b, [self.lh, "serve", "--listen", self.far, "--port", str(self.lh_port),
                                             "--root", self.far_root]),
            cpc.log_says("listening on"), env=self.env_b)
        self.rsync_port = cpc.free_port()
        conf = os.path.join(self.work, "rsyncd.conf")
        with open(conf, "w") as f:
            f.write(f"""pid file = {self.work}/rsyncd.pid
use chroot = no
[far]
    path = {self.far_root}
    read only = no
    uid = root
    gid = root
""")
        self.rsyncd = self.run.serve(
            "rsyncd", cpc.wrap(self.ns_b, ["rsync", "--daemon", "--no-detach", f"--config={conf}",
                                           f"--address={self.far}", f"--port={self.rsync_port}"]),
            cpc.listening(self.ns_b, self.rsync_port))

    def server_for(self, tool):
        if tool in ("rsync-ssh", "lh-sync-ssh", "lh-sync-inplace-ssh", "lh-cp-ssh"):
            return self.a.sshd_pid
        return self.rsyncd.pid if tool.startswith("rsyncd") else self.lh_srv.pid

    def argv(self, tool, src, rel_dst):
        """The client command pushing `src` into the directory `rel_dst` (below the far root,
        with a trailing `/`; empty: the root itself): every tool puts `src` inside it."""
        dst = os.path.join(self.far_root, rel_dst)
        ssh_dst = f"root@{self.far}:{dst}"
        daemon_dst = f"longhaul://{self.far}:{self.lh_port}/{rel_dst}"
        lh_ssh = ["-e", f"ssh {self.ssh}", "--remote-longhaul", self.far_lh]
        return {
            "rsync-ssh": ["rsync", "-a", "-e", f"ssh {self.ssh}", src, ssh_dst],
            "rsyncd": ["rsync", "-a", src, f"rsync://{self.far}:{self.rsync_port}/far/{rel_dst}"],
            "rsyncd-inplace": ["rsync", "-a", "--inplace", src,
                               f"rsync://{self.far}:{self.rsync_port}/far/{rel_dst}"],
            "lh-sync-ssh": [self.lh, "sync", "--json"] + lh_ssh + [src, ssh_dst],
            "lh-sync-daemon": [self.lh, "sync", "--json", src, daemon_dst],
            "lh-sync-inplace-ssh": [self.lh, "sync", "--json", "--inplace"] + lh_ssh + [src, ssh_dst],
            "lh-sync-inplace-daemon": [self.lh, "sync", "--json", "--inplace", src, daemon_dst],
            "lh-cp-ssh": [self.lh, "cp", "--json", "--no-progress", "-r"] + lh_ssh + [src, ssh_dst],
            "lh-cp-daemon": [self.lh, "cp", "--json", "--no-progress", "-r", src, daemon_dst],
        }[tool]

    def wire(self):
        out = subprocess.run([self.lh, "emulate", "stats", self.a.emu_name, "--json"],
                             capture_output=True, text=True)
        try:
            st = json.loads(out.stdout)["stats"]
            return st["a_to_b"]["link"]["bytes_in"], st["b_to_a"]["link"]["bytes_in"]
        except (ValueError, KeyError):
            return None

    def measure(self, case, tool, src, rel_dst, nbytes, same, phase=""):
        if tool.startswith("lh-sync") and not self.have_sync:
            return None
        srv = self.server_for(tool)
        quiesce(srv)
        w0, s0 = self.wire(), proc_cpu(srv)
        argv = cpc.wrap(self.ns_a, self.argv(tool, src, rel_dst))
        label = f"{case}{'-' + phase if phase else ''}-{tool}"
        out_path = os.path.join(self.work, f"{label}.out")
        log(f"[{case}{' ' + phase if phase else ''}] {tool}: {shlex.join(argv)}")
        rc, wall, ccpu, _ = run_client(argv, out_path, env=self.env_a, timeout=self.a.client_timeout)
        quiesce(srv)
        scpu, w1 = proc_cpu(srv) - s0, self.wire()
        text = open(out_path, errors="replace").read()
        end = next((l for l in reversed(json_lines(out_path)) if l.get("type") == "end"), {})
        ok = rc == 0 and same()
        row = {"case": case, "phase": phase or None, "tool": tool, "command": shlex.join(argv),
               "exit_code": rc, "verified": ok, "wall_s": round(wall, 3), "bytes": nbytes,
               "client_cpu_s": round(ccpu, 3), "far_cpu_s": round(scpu, 3),
               "client_cpu_s_per_gb": round(ccpu / (nbytes / GB), 3),
               "far_cpu_s_per_gb": round(scpu / (nbytes / GB), 3)}
        if w0 and w1:
            row["wire_a_to_b"], row["wire_b_to_a"] = w1[0] - w0[0], w1[1] - w0[1]
        if end:
            row["end"] = end
        if rc != 0:
            row["error"] = text[-2000:]
            log(f"  FAILED (exit {rc}): {text[-600:]}")
        self.rows.append(row)
        with open(self.a.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        wire = (f"wire a->b {row['wire_a_to_b'] / 1e6:9.1f} MB, b->a {row['wire_b_to_a'] / 1e6:7.1f} MB"
                if "wire_a_to_b" in row else "wire n/a")
        print(f"{case:4} {phase:8} {tool:15} {wall:8.2f} s  {wire}  CPU client {ccpu:6.2f} s "
              f"({row['client_cpu_s_per_gb']:5.2f} s/GB) far {scpu:6.2f} s ({row['far_cpu_s_per_gb']:5.2f} s/GB)  "
              f"{'ok' if ok else 'FAILED'}", flush=True)
        return row

    # -- one big file, a few blocks changed
    def big(self):
        size, block = self.a.size, self.a.block
        src = os.path.join(self.work, "src", "big")
        dst = os.path.join(self.far_root, "big")
        nblocks = size // block
        k = max(1, math.ceil(nblocks * self.a.percent / 100))
        rng = random.Random(self.a.seed)
        picks = sorted(rng.sample(range(nblocks), k))
        log(f"[big] {size / 2**30:.2f} GiB, {k} of {nblocks} blocks of {block >> 20} MiB rewritten "
            f"(seed {self.a.seed}): {picks}")
        old = {}
        with open(src, "r+b") as f:
            for i in picks:
                f.seek(i * block)
                old[i] = f.read(block)
                f.seek(i * block)
                f.write(rng.randbytes(block))
        os.utime(src)  # a new mtime, as any rewrite gives (already, unless in the same tick)
        want = digest(src)
        st_old = os.stat(dst)

        def reset():
            # The destination back to the old version: its blocks, its mtime, synced and warm.
            with open(dst, "r+b") as f:
                for i, b in old.items():
                    f.seek(i * block)
                    f.write(b)
                f.truncate(size)
                os.fsync(f.fileno())
            os.utime(dst, ns=(st_old.st_atime_ns, st_old.st_mtime_ns))
            for d in (self.cache_a, self.cache_b):
                shutil.rmtree(d, ignore_errors=True)
            subprocess.run(["cat", src, dst], stdout=subprocess.DEVNULL, check=True)

        for tool in self.tools:
            if tool.startswith("lh-sync") and not self.have_sync:
                continue
            reset()
            self.measure("big", tool, src, "", size, lambda: digest(dst) == want)

    # -- a tree with nothing changed
    def tree(self):
        root = os.path.join(self.work, "src", "tree")
        rng = random.Random(4)
        total = 0
        for i in range(self.a.files):
            d = os.path.join(root, f"d{i % 10:02}")
            os.makedirs(d, exist_ok=True)
            n = rng.randint(1024, 16384)
            with open(os.path.join(d, f"f{i:05}.bin"), "wb") as f:
                f.write(rng.randbytes(n))
            total += n
        # Old enough that every file's hashes may be cached (CacheLimits::settle).
        subprocess.run(["touch", "-d", "-1 hour", *[os.path.join(dp, n) for dp, _, ns in os.walk(root) for n in ns]],
                       check=True)
        want = tree_digest(root)
        log(f"[tree] {self.a.files} files, {total / 1e6:.1f} MB in 10 directories")
        for tool in self.tools:
            if (tool.startswith("lh-cp") or "inplace" in tool
                    or (tool.startswith("lh-sync") and not self.have_sync)):
                continue
            rel = f"tree-{tool}"
            os.makedirs(os.path.join(self.far_root, rel), exist_ok=True)
            same = lambda: tree_digest(os.path.join(self.far_root, rel, "tree")) == want  # noqa: E731
            self.measure("tree", tool, root, rel + "/", total, same, phase="initial")
            self.measure("tree", tool, root, rel + "/", total, same, phase="again")

    def verdicts(self):
        def row(case, tool, phase=None):
            return next((r for r in self.rows if r["case"] == case and r["tool"] == tool
                         and r["phase"] == phase and r["verified"]), None)

        print("\nthe issue's bars (same run):")

        def say(what, value, ok):
            v = "not measured" if value is None else f"{value} -> {'met' if ok else 'NOT met'}"
            print(f"  {what}: {v}")
        for via, sync, rs, cp in (("ssh", "lh-sync-ssh", "rsync-ssh", "lh-cp-ssh"),
                                  ("daemon", "lh-sync-daemon", "rsyncd", "lh-cp-daemon"),
                                  ("ssh --inplace", "lh-sync-inplace-ssh", "rsync-ssh", "lh-cp-ssh"),
                                  ("daemon --inplace", "lh-sync-inplace-daemon", "rsyncd-inplace",
                                   "lh-cp-daemon")):
            s, r, c = row("big", sync), row("big", rs), row("big", cp)
            x = round(r["wall_s"] / s["wall_s"], 2) if s and r else None
            say(f"big, {via}: rsync wall / longhaul sync wall >= 5", x, x is not None and x >= 5)
            y = (round(c["wire_a_to_b"] / s["wire_a_to_b"], 1)
                 if s and c and s.get("wire_a_to_b") and c.get("wire_a_to_b") else None)
            say(f"big, {via}: full cp wire bytes / sync wire bytes >= 10", y, y is not None and y >= 10)
            if s:
                print(f"  big, {via}: CPU s/GB at each end, longhaul sync: client {s['client_cpu_s_per_gb']}, "
                      f"far {s['far_cpu_s_per_gb']} (rsync: {r['client_cpu_s_per_gb'] if r else '-'}, "
                      f"{r['far_cpu_s_per_gb'] if r else '-'})")
            if "inplace" in via:
                continue
            s, r = row("tree", sync, "again"), row("tree", rs, "again")
            say(f"tree again, {via}: longhaul sync <= 1.5 s", s and s["wall_s"], bool(s) and s["wall_s"] <= 1.5)
            x = round(r["wall_s"] / s["wall_s"], 2) if s and r else None
            say(f"tree again, {via}: rsync wall / longhaul sync wall >= 3", x, x is not None and x >= 3)

    def main(self):
        self.start_servers()
        try:
            src_dir = os.path.join(self.work, "src")
            if "big" in self.a.cases:
                # The far copy is the old version, made before the source is changed.
                shutil.copy2(os.path.join(src_dir, "big"), os.path.join(self.far_root, "big"))
                self.big()
                os.unlink(os.path.join(self.far_root, "big"))
            if "tree" in self.a.cases:
                self.tree()
            self.verdicts()
        finally:
            self.run.stop_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--longhaul", required=True)
    ap.add_argument("--emu-name", required=True)
    ap.add_argument("--far", required=True, help="b's address on the emulated path")
    ap.add_argument("--ssh-opts", required=True, help="ssh options reaching root@FAR")
    ap.add_argument("--sshd-pid", type=int, required=True)
    ap.add_argument("--size", type=parse_size, default=4 << 30)
    ap.add_argument("--block", type=parse_size, default=4 << 20)
    ap.add_argument("--percent", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--cases", default="big,tree")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--client-timeout", type=float, default=900)
    ap.add_argument("--out", required=True)
    SyncBench(ap.parse_args()).main()


if __name__ == "__main__":
    main()
