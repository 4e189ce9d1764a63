#!/usr/bin/env python3
"""Runs `longhaul bench` and iperf3 in the same run, on the same host settings, and prints
throughput and CPU-seconds-per-GB ratios (longhaul / iperf3).

CPU is measured the same way for both tools: user+system time of the server process
(from /proc/PID/stat) plus that of the client process (resource usage of the child).
Runs alternate between the tools so that drift on a shared machine hits both alike;
the median of the repetitions is reported.

Usage: bench/compare.py [--time 10] [--reps 3] [--streams 1] [--target 127.0.0.1]
                        [--netns-server NS --netns-client NS] [--json]
"""

import argparse
import json
import os
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LONGHAUL = os.path.join(ROOT, "target", "release", "longhaul")
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line.
    return (int(fields[11]) + int(fields[12])) / TICK


def wrap(ns, argv):
    return (["ip", "netns", "exec", ns] + argv) if ns else argv


def run_client(argv):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        sys.exit(f"client failed: {' '.join(argv)}\n{out.stderr}")
    return out.stdout, cpu


def serve(argv, ready):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        line = p.stdout.readline()
        if ready in line:
            return p
        if not line and p.poll() is not None:
            break
    p.kill()
    sys.exit(f"server did not start: {' '.join(argv)}")


def longhaul_once(args, port):
    out, cpu = run_client(
        wrap(args.netns_client, [LONGHAUL, "bench", f"{args.target}:{port}", "-t", str(args.time),
                                 "-P", str(args.streams), "--json"] + args.longhaul_args)
    )
    end = [json.loads(l) for l in out.splitlines() if l.strip()][-1]
    s = end["summary"]
    return s["bits_per_second"], s["bytes"], cpu


def iperf_once(args, port):
    out, cpu = run_client(
        wrap(args.netns_client, ["iperf3", "-c", args.target, "-p", str(port), "-t", str(args.time),
                                 "-P", str(args.streams), "-J"] + args.iperf_args)
    )
    j = json.loads(out)
    recv = j["end"]["sum_received"]
    return recv["bits_per_second"], recv["bytes"], cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time", type=float, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--target", default="127.0.0.1")
    ap.add_argument("--netns-server", default=None)
    ap.add_argument("--netns-client", default=None)
    ap.add_argument("--longhaul-args", default="", help='extra bench flags, e.g. "--send-mode write"')
    ap.add_argument("--iperf-args", default="", help='extra iperf3 flags, e.g. "-Z"')
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.longhaul_args = shlex.split(args.longhaul_args)
    args.iperf_args = shlex.split(args.iperf_args)
    if not shutil.which("iperf3"):
        sys.exit("iperf3 is not installed: apt-get install -y iperf3")
    if not os.path.exists(LONGHAUL):
        subprocess.run(["cargo", "build", "--release", "-p", "longhaul"], cwd=ROOT, check=True)

    lport, iport = free_port(), free_port()
    listen = args.target if args.target != "127.0.0.1" else "127.0.0.1"
    lsrv = serve(wrap(args.netns_server, [LONGHAUL, "serve", "--listen", listen, "--port", str(lport)]),
                 "listening on")
    isrv = serve(wrap(args.netns_server, ["iperf3", "-s", "-B", listen, "-p", str(iport), "--forceflush"]),
                 "Server listening")
    lsrv_pid = int(subprocess.run(["pgrep", "-n", "-f", f"longhaul serve --listen {listen} --port {lport}"],
                                  capture_output=True, text=True).stdout.split()[0])
    isrv_pid = int(subprocess.run(["pgrep", "-n", "-f", f"iperf3 -s -B {listen} -p {iport}"],
                                  capture_output=True, text=True).stdout.split()[0])
    rows = {"longhaul": [], "iperf3": []}
    try:
        # One short unmeasured run of each warms both servers up alike.
        warm = argparse.Namespace(**{**vars(args), "time": 1})
        longhaul_once(warm, lport)
        iperf_once(warm, iport)
        for _ in range(args.reps):
            for name, fn, pid, port in (("longhaul", longhaul_once, lsrv_pid, lport),
                                        ("iperf3", iperf_once, isrv_pid, iport)):
                s0 = proc_cpu(pid)
                bps, nbytes, ccpu = fn(args, port)
                scpu = proc_cpu(pid) - s0
                gb = max(nbytes, 1) / 1e9
                rows[name].append({"bps": bps, "cpu_s_per_gb": (ccpu + scpu) / gb,
                                   "client_cpu_s": ccpu, "server_cpu_s": scpu})
                time.sleep(0.5)
    finally:
        for p in (lsrv, isrv):
            p.kill()
            p.wait()

    med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in rows.items()}
    ratio_bps = med["longhaul"]["bps"] / med["iperf3"]["bps"]
    ratio_cpu = med["longhaul"]["cpu_s_per_gb"] / med["iperf3"]["cpu_s_per_gb"]
    if args.json:
        print(json.dumps({"type": "compare", "streams": args.streams, "seconds": args.time,
                          "reps": args.reps, "median": med, "runs": rows,
                          "throughput_ratio": ratio_bps, "cpu_per_gb_ratio": ratio_cpu}))
        return
    print(f"{args.reps} alternating runs of {args.time:g} s, {args.streams} stream(s), target {args.target}")
    for k in ("longhaul", "iperf3"):
        m = med[k]
        runs = " ".join(f"{r['bps'] / 1e9:.2f}" for r in rows[k])
        print(f"  {k:9} median {m['bps'] / 1e9:6.2f} Gbit/s  CPU {m['cpu_s_per_gb']:.3f} s/GB "
              f"(client {m['client_cpu_s']:.2f} s, server {m['server_cpu_s']:.2f} s)  runs: {runs}")
    print(f"  throughput ratio longhaul/iperf3: {ratio_bps:.2f}   (>= 1.0 is the goal)")
    print(f"  CPU s/GB ratio   longhaul/iperf3: {ratio_cpu:.2f}   (<= 1.0 is the goal)")


if __name__ == "__main__":
    main()
