#!/usr/bin/env python3
"""One yardstick of several path models, in one sitting (issue 29): longhaul beside iperf3
and globus-url-copy on each. Run it through bench/paths.sh (packages, build, clean-up).

Path models (each a long fat path between two namespaces, RATE x RTT, MTU, BUFFER, LOSS):
  a  `longhaul emulate` as it is (offloads, real-time priority, its own rate limiter)
  b  the same with --no-offload --no-realtime (one packet per read, normal priority)
  c  a kernel shaper on the sending host's own interface (tbf, burst of 4 MTU, drop-tail
     limit BUFFER) in front of a plain delay line (the emulator unshaped, --no-offload
     --no-realtime): a data-transfer node whose NIC or site link is slower than the WAN
  d  model a with jitter (--jitter 2ms --jitter-model normal)
  e  model a with one competing CUBIC flow (iperf3, -w 2BDP) in the data's direction for
     the whole of each run; its rate is reported beside the tool's

Tools on each path (the client in namespace a, servers in namespace b):
  iperf3      iperf3 -c -t SECS -w 2BDP -C cubic (tuned by hand), a -> b
  bench       longhaul bench -t SECS (defaults), a -> b; also the first second its
              delivered rate reached 0.95 of the bottleneck and the rate it held
  gridftp     globus-url-copy -fast -p 4 -tcp-bs BDP, a pull of the SIZE file (b -> a)
  cp          longhaul cp, a pull of the same file (b -> a), defaults
Every longhaul build given (--build LABEL=PATH, repeatable: before/after in one sitting)
runs bench and cp; iperf3 and globus-url-copy run once per path. Rates are shares of
RATE: bytes / wall for the copies (connection set-up included), the tools' own figures
for the memory-to-memory tests. CPU seconds per GB of both ends for the copies.
"""

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("cpc", os.path.join(HERE, "cp-compare.py"))
cpc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpc)

MODELS = {
    "a": "emulator",
    "b": "emulator, no offload, normal priority",
    "c": "tbf at the sender + delay line",
    "d": "emulator, jitter 2 ms normal",
    "e": "emulator + 1 CUBIC flow",
}


def emulator_flags(model, a):
    """`longhaul emulate up` flags of a model (c: the delay line only)."""
    path = ["--rtt", a.rtt, "--mtu", str(a.mtu)]
    shaped = ["--rate", a.rate, "--buffer", a.buffer] + (["--loss", a.loss] if a.loss else [])
    plain = ["--no-offload", "--no-realtime"]
    return {
        "a": path + shaped,
        "b": path + shaped + plain,
        "c": path + plain + (["--loss", a.loss] if a.loss else []),
        "d": path + shaped + ["--jitter", "2ms", "--jitter-model", "normal"],
        "e": path + shaped,
    }[model]


def tbf(ns, a, bdp):
    """A tbf shaper at RATE on the namespace's own interface (its egress)."""
    buffer = a.buffer
    if buffer.endswith("bdp"):
        limit = int(float(buffer[:-3]) * bdp)
    elif buffer.endswith("pkt"):
        limit = int(buffer[:-3]) * a.mtu
    else:
        # Bytes, with the emulator's units (1MB = 10^6, 1MiB = 2^20).
        units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6,
                 "gb": 10**9, "b": 1}
        low = buffer.lower()
        unit = next((u for u in units if low.endswith(u)), None)
        limit = int(float(low[:-len(unit)]) * units[unit]) if unit else int(buffer)
    limit = max(limit, 64 * a.mtu)
    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "lh0", "root",
                    "tbf", "rate", a.rate.replace("G", "gbit").replace("M", "mbit"),
                    "burst", str(4 * a.mtu), "limit", str(limit)], check=True)


class Competitor:
    """One iperf3 CUBIC flow from `src_ns` to an iperf3 server in `dst_ns`, for as long as a
    measurement runs; `stop()` returns its mean rate (bit/s) over that time."""

    def __init__(self, bench, src_ns, dst_ns, dst_ip, two_bdp, secs):
        self.port = cpc.free_port()
        self.srv = bench.run.serve(f"competitor-{self.port}",
                                   cpc.wrap(dst_ns, ["iperf3", "-s", "-p", str(self.port), "-1"]),
                                   cpc.listening(dst_ns, self.port))
        self.out = os.path.join(bench.work, f"competitor-{self.port}.json")
        self.p = subprocess.Popen(
            cpc.wrap(src_ns, ["iperf3", "-c", dst_ip, "-p", str(self.port), "-t", str(secs),
                              "-C", "cubic", "-w", str(two_bdp), "-J"]),
            stdout=open(self.out, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        bench.run.record(self.p.pid)
        self.bench = bench
        time.sleep(2)  # past its slow start before the measured tool starts

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, 2)  # SIGINT: iperf3 ends its test and prints the JSON
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, 9)
                self.p.wait()
        self.bench.run.stop(self.srv)
        # Its rate while the measured tool ran: the intervals after its 2 s head start
        # (an interrupted client's own totals are not the receiver's).
        try:
            intervals = json.load(open(self.out))["intervals"]
            rates = [i["sum"]["bits_per_second"] for i in intervals if i["sum"]["start"] >= 2]
            return sum(rates) / len(rates) if rates else None
        except (OSError, ValueError, KeyError, TypeError):
            return None


class Paths(cpc.Bench):
    def __init__(self, a):
        a.emu_name = a.emu_name or f"pth{os.getpid()}"
        super().__init__(a)
        self.rate_bps = cpc.parse_rate(a.rate)
        self.rtt_s = cpc.parse_duration(a.rtt)
        self.bdp = int(self.rate_bps * self.rtt_s / 8)
        self.have_cp = True

    def up(self, model):
        a = self.a
        subprocess.run([self.lh_first, "emulate", "up", a.emu_name, "--daemon"] + emulator_flags(model, a),
                       check=True, stdout=subprocess.DEVNULL)
        cpc.netns_hosts(a.emu_name)
        if model == "c":
            for end in ("a", "b"):
                tbf(f"lh-{a.emu_name}-{end}", a, self.bdp)
        # The emulator's counters see the shaped rate only where it shapes.
        self.emulating = model != "c"

    def down(self):
        subprocess.run([self.lh_first, "emulate", "down", self.a.emu_name],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.emulating = False

    def with_competitor(self, model, direction, run):
        """Runs `run()`; on model e with a competing flow in `direction` (a_to_b or b_to_a)."""
        if model != "e":
            return run(), None
        n = self.a.emu_name
        src, dst, ip = ((f"lh-{n}-a", f"lh-{n}-b", "10.99.0.2") if direction == "a_to_b"
                        else (f"lh-{n}-b", f"lh-{n}-a", "10.99.0.1"))
        c = Competitor(self, src, dst, ip, 2 * self.bdp, 3600)
        try:
            row = run()
        finally:
            other = c.stop()
        return row, other

    def path(self, model, src, src_digest):
        a = self.a
        n = a.emu_name
        na, nb, host = f"lh-{n}-a", f"lh-{n}-b", "10.99.0.2"
        self.up(model)
        rows = []
        try:
            gsrv, gport = self.gridftp_server(f"{model}-gridftp", nb, host)
            dst_dir = os.path.join(self.work, "dst")
            os.makedirs(dst_dir, exist_ok=True)
            same = lambda p: cpc.file_digest(p) == src_digest  # noqa: E731

            def note(row, tool, build, other):
                row.update(model=model, tool_name=tool, build=build, competitor_bps=other)
                rows.append(row)

            # iperf3, tuned by hand, a -> b
            iport = cpc.free_port()
            isrv = self.run.serve(f"{model}-iperf3", cpc.wrap(nb, ["iperf3", "-s", "-p", str(iport)]),
                                  cpc.listening(nb, iport))
            self.data_dir = "a_to_b"
            row, other = self.with_competitor(model, "a_to_b", lambda: self.measure(
                model, "iperf3", cpc.wrap(na, ["iperf3", "-c", host, "-p", str(iport), "-t", str(a.secs),
                                               "-w", str(2 * self.bdp), "-C", "cubic", "-J"]),
                isrv, None, 1, None, None, parse=parse_iperf3))
            note(row, "iperf3", "-", other)
            self.run.stop(isrv)

            # globus-url-copy, a pull b -> a
            self.data_dir = "b_to_a"
            gargs = ["-fast", "-p", "4", "-tcp-bs", str(self.bdp)]
            row, other = self.with_competitor(model, "b_to_a", lambda: self.measure(
                model, "globus-url-copy pull",
                cpc.wrap(na, ["globus-url-copy"] + gargs + [f"ftp://{host}:{gport}{src}",
                                                             f"file://{dst_dir}/big"]),
                gsrv, os.path.getsize(src), 1, os.path.join(dst_dir, "big"), same))
            note(row, "gridftp", "-", other)
            self.run.stop(gsrv)

            for label, lh in a.builds:
                self.lh = lh
                root = os.path.join(self.work, f"root-{label}")
                os.makedirs(root, exist_ok=True)
                if not os.path.exists(os.path.join(root, "big")):
                    os.link(src, os.path.join(root, "big"))
                lsrv, lport = self.longhaul_server(f"{model}-{label}-serve", nb, host, root)
                try:
                    self.data_dir = "a_to_b"
                    row, other = self.with_competitor(model, "a_to_b", lambda: self.measure(
                        model, f"longhaul bench {label}",
                        cpc.wrap(na, [lh, "bench", f"{host}:{lport}", "-t", str(a.secs), "--json"]),
                        lsrv, None, 1, None, None, env=self.env, parse=self.parse_bench_held))
                    note(row, "bench", label, other)
                    self.data_dir = "b_to_a"
                    row, other = self.with_competitor(model, "b_to_a", lambda: self.measure(
                        model, f"longhaul cp pull {label}",
                        cpc.wrap(na, [lh, "cp", "--json", "--no-progress",
                                      f"longhaul://{host}:{lport}/big", os.path.join(dst_dir, "big")]),
                        lsrv, os.path.getsize(src), 1, os.path.join(dst_dir, "big"), same, env=self.env,
                        parse=self.parse_cp))
                    note(row, "cp", label, other)
                finally:
                    self.run.stop(lsrv)
        finally:
            self.run.stop_all()
            self.down()
        return rows

    def parse_bench_held(self, path):
        row = self.parse_bench(path)
        lines = cpc.json_lines(path)
        end = next((l for l in reversed(lines) if l.get("type") == "end"), None)
        if end:
            row["held_bps"] = end["summary"].get("held_rate_bps")
            row["tool_cpu_s_per_gb"] = {k: end["summary"][k]["cpu_seconds_per_gb"]
                                        for k in ("sender", "receiver")}
        t95, series = None, []
        for i in (l for l in lines if l.get("type") == "interval"):
            series.append([i["end"], i["bits_per_second"], i.get("held_rate_bps")])
            if t95 is None and i["bits_per_second"] >= 0.95 * self.rate_bps:
                t95 = i["end"]
        row["t95_s"] = t95
        row["series"] = series
        return row


def parse_iperf3(path):
    try:
        end = json.load(open(path))["end"]
    except (OSError, ValueError, KeyError):
        return {}
    return {"tool_gbit_s": end["sum_received"]["bits_per_second"] / 1e9,
            "tool_bytes": end["sum_received"]["bytes"],
            "retransmits": end["sum_sent"].get("retransmits")}


def share(row, rate_bps):
    bps = row.get("tool_gbit_s")
    if row["tool_name"] in ("gridftp", "cp") or bps is None:
        bps = row["gbit_s"] if row.get("exit_code") == 0 else 0
    return 100 * bps * 1e9 / rate_bps


def table(rows, a, rate_bps):
    labels = [lbl for lbl, _ in a.builds]
    head = ["path", "iperf3", "gridftp pull"]
    for lbl in labels:
        head += [f"bench {lbl}", f"cp pull {lbl}", f"cp/gridftp {lbl}", f"cp s/GB {lbl}"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in a.models:
        mine = [r for r in rows if r["model"] == m]

        def pick(tool, build="-"):
            return next((r for r in mine if r["tool_name"] == tool and r["build"] == build), None)

        def cell(r):
            if not r:
                return "-"
            s = f"{share(r, rate_bps):.1f} %"
            if r.get("competitor_bps"):
                s += f" (other {100 * r['competitor_bps'] / rate_bps:.0f} %)"
            if r["tool_name"] == "bench" and r.get("t95_s") is not None:
                s += f", 0.95 at {r['t95_s']:.0f} s"
            elif r["tool_name"] == "bench":
                s += ", never 0.95"
            if not r.get("verified", True) and r["tool_name"] in ("gridftp", "cp"):
                s += " UNVERIFIED"
            return s
        g = pick("gridftp")
        cells = [f"({m}) {MODELS[m]}", cell(pick("iperf3")), cell(g)]
        for lbl in labels:
            c = pick("cp", lbl)
            ratio = (f"{share(c, rate_bps) / share(g, rate_bps):.2f}x"
                     if c and g and share(g, rate_bps) > 0 else "-")
            cpu = (f"{c['client_cpu_s'] / (c['bytes'] / 1e9):.2f} / {c['server_cpu_s'] / (c['bytes'] / 1e9):.2f}"
                   if c else "-")
            cells += [cell(pick("bench", lbl)), cell(c), ratio, cpu]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def held_table(rows, a):
    """bench's held rate over time per path and build (Mbit/s at the end of chosen seconds),
    and when its delivery first reached 0.95 of the bottleneck."""
    marks = [1, 2, 3, 5, 7, 10, 15, 20, 30, 60]
    rows = [r for r in rows if r["tool_name"] == "bench" and r.get("series")]
    if not rows:
        return ""
    last = max(e for r in rows for e, _, _ in r["series"])
    marks = [m for m in marks if m <= last + 0.5]
    out = ["| path | build | " + " | ".join(f"{m} s" for m in marks) + " | 0.95 at |",
           "|---|---|" + "---|" * len(marks) + "---|"]
    for r in rows:
        cells = []
        for m in marks:
            held = next((h for e, _, h in r["series"] if e >= m - 0.05), None)
            cells.append(f"{held / 1e6:.0f}" if held else "-")
        t95 = r.get("t95_s")
        out.append(f"| ({r['model']}) | {r['build']} | " + " | ".join(cells)
                   + f" | {f'{t95:.0f} s' if t95 is not None else 'never'} |")
    return "\n".join(out)


def stage_table(rows, a):
    """The pulling client's CPU s/GB by stage, per path and build (builds that report it)."""
    out = ["| path | build | client s/GB | cipher | hash | disk | socket and the rest |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        st = r.get("cpu_by_stage")
        if r["tool_name"] != "cp" or not st or not r.get("bytes"):
            continue
        gb = r["bytes"] / 1e9
        out.append(f"| ({r['model']}) | {r['build']} | {(r.get('tool_client_cpu_s') or r['client_cpu_s']) / gb:.2f} | "
                   + " | ".join(f"{st[k] / gb:.2f}" for k in ("cipher_seconds", "hash_seconds",
                                                             "disk_seconds", "socket_and_rest_seconds"))
                   + " |")
    return "\n".join(out) if len(out) > 2 else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--big", required=True, help="the page-cache-warm source file")
    ap.add_argument("--build", action="append", required=True, metavar="LABEL=PATH",
                    help="a longhaul binary to measure (repeatable)")
    ap.add_argument("--models", default="a,b,c,d,e")
    ap.add_argument("--secs", type=int, default=20)
    ap.add_argument("--rate", default="1G")
    ap.add_argument("--rtt", default="150ms")
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--buffer", default="1bdp")
    ap.add_argument("--loss", default=None)
    ap.add_argument("--emu-name", default=None)
    ap.add_argument("--client-timeout", type=float, default=300)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    a.models = [m for m in a.models.split(",") if m]
    bad = [m for m in a.models if m not in MODELS]
    if bad:
        sys.exit(f"unknown path model {bad}; known: {', '.join(MODELS)}")
    a.builds = [tuple(b.split("=", 1)) for b in a.build]
    a.longhaul = a.builds[0][1]
    bench = Paths(a)
    bench.lh_first = a.builds[0][1]
    digest = cpc.file_digest(a.big)
    rows = []
    try:
        for m in a.models:
            cpc.log(f"== path ({m}) {MODELS[m]}: {a.rate} x {a.rtt}, MTU {a.mtu}, buffer {a.buffer}"
                    + (f", loss {a.loss}" if a.loss else ""))
            rows += bench.path(m, a.big, digest)
    finally:
        bench.run.stop_all()
        bench.down()
        for end in ("a", "b"):
            subprocess.run(["rm", "-rf", f"/etc/netns/lh-{a.emu_name}-{end}"])
    for r in rows:
        r.pop("error", None) if r.get("exit_code") == 0 else None
    with open(a.out, "w") as f:
        json.dump({"rate": a.rate, "rtt": a.rtt, "mtu": a.mtu, "buffer": a.buffer, "loss": a.loss,
                   "secs": a.secs, "builds": a.builds, "rows": rows}, f, indent=1)
    print(f"\n{a.rate} x {a.rtt}, MTU {a.mtu}, buffer {a.buffer}" + (f", loss {a.loss}" if a.loss else "")
          + f"; {os.path.getsize(a.big) >> 20} MiB pulls, {a.secs} s tests; share of the bottleneck"
          + " (cp s/GB: client / server CPU seconds per GB)\n")
    print(table(rows, a, bench.rate_bps))
    held = held_table(rows, a)
    if held:
        print("\nbench's held rate (Mbit/s) at the end of each second named:\n")
        print(held)
    stages = stage_table(rows, a)
    if stages:
        print("\nThe pulling client's CPU by stage (s/GB; the tool's own figures):\n")
        print(stages)
    print(f"\nraw: {a.out}")


if __name__ == "__main__":
    main()
