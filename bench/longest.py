"""The longest paths (issue 15), measured in one run: see `bench/lfn.sh --longest`.

On one emulated path (436 ms, 1 Gbit/s, MTU 4470, 1-BDP buffer by default; stock sysctls,
a private XDG_CACHE_HOME so the first run is a first run):
  1. a 20 s `longhaul bench` on a first run (no remembered path),
  2. the same again (a second run to the path: jump-start when the build has it),
  3. RUNS x a 40 s bench with --no-jump-start (the start-up and the held rate alone),
printing per run: rate as a share of the bottleneck, drops at the bottleneck (from
`emulate stats`), the largest srtt over the minimum RTT after the start-up, the largest held
rate over the bottleneck rate, the round trips before the first data byte, and whether
jump-start was used. Writes every run's JSON Lines under OUT.
"""
import json, os, statistics, subprocess, sys, tempfile

lh, name, rate_s, rtt_s, mtu, runs, out = sys.argv[1:8]
runs = int(runs)
mult = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
rate = float(rate_s[:-1]) * mult[rate_s[-1]] if rate_s[-1] in mult else float(rate_s)
os.makedirs(out, exist_ok=True)
cache = tempfile.mkdtemp(prefix="longest-cache.")
env = dict(os.environ, XDG_CACHE_HOME=cache)
has_jump = "--no-jump-start" in subprocess.run([lh, "bench", "--help"], capture_output=True, text=True).stdout


def drops():
    s = json.loads(subprocess.run([lh, "emulate", "stats", name, "--json"], capture_output=True,
                                  text=True, check=True).stdout)
    return s["stats"]["a_to_b"]["link"]["dropped_queue_segments"]


addr = subprocess.run([lh, "emulate", "addr", name, "b"], capture_output=True, text=True,
                      check=True).stdout.strip()
# One server for every run (it ends with the emulator's namespaces).
subprocess.run([lh, "emulate", "exec", name, "b", "--", "sh", "-c",
                f"'{lh}' serve --listen '{addr}' >/dev/null 2>&1 &"], check=True, env=env)
subprocess.run(["sleep", "1"])


def bench(label, secs, extra):
    before = drops()
    path = os.path.join(out, f"{label}.jsonl")
    with open(path, "w") as f:
        subprocess.run([lh, "emulate", "exec", name, "a", "--", "timeout", str(secs + 90), lh, "bench",
                        addr, "-t", f"{secs}s", "--json"] + extra, stdout=f, check=True, env=env)
    dropped = drops() - before
    recs = [json.loads(l) for l in open(path) if l.strip()]
    start = next(r for r in recs if r["type"] == "start")
    end = next(r for r in recs if r["type"] == "end")
    ivs = [r for r in recs if r["type"] == "interval"]
    s = end["summary"]
    min_rtt = min((st["min_rtt_ms"] for st in end["streams"] if st.get("min_rtt_ms")), default=None)
    # After the start-up: from two seconds after the first interval with a held rate.
    held_from = next((iv["start"] for iv in ivs if iv.get("held_rate_bps")), None)
    after = [iv for iv in ivs if held_from is not None and iv["start"] >= held_from + 2.0]
    srtt = max((st["rtt_ms"] for iv in after for st in iv["streams"] if st.get("rtt_ms")), default=None)
    # The queue the streams share: per interval the median stream's srtt (one stream's own
    # noise, a delayed ack or its recovery, moves the largest but not the median).
    medians = [statistics.median(r) for iv in after
               if (r := [st["rtt_ms"] for st in iv["streams"] if st.get("rtt_ms")])]
    median_srtt = max(medians, default=None)
    peak = max((iv.get("held_rate_bps") or 0 for iv in ivs), default=0)
    jump = (end.get("jump_start") or start.get("jump_start") or {})
    row = {
        "label": label, "streams": start.get("streams"), "share": s["bits_per_second"] / rate,
        "seconds": s["seconds"], "drops": dropped,
        "srtt_over_min": (srtt / min_rtt) if srtt and min_rtt else None,
        "median_srtt_over_min": (median_srtt / min_rtt) if median_srtt and min_rtt else None,
        "peak_held_over_bottleneck": peak / rate if peak else None,
        "first_byte_rtts": s.get("first_byte_rtts", end.get("first_byte_rtts")),
        "jump_start": jump.get("used") if isinstance(jump, dict) else jump,
    }
    fmt = lambda v, f: "-" if v is None else f % v  # noqa: E731
    print(f"{label:<24} {row['share']*100:5.1f} % of the bottleneck  drops {dropped:<6} "
          f"srtt/min {fmt(row['srtt_over_min'], '%.3f'):<6} (median stream "
          f"{fmt(row['median_srtt_over_min'], '%.3f'):<6}) held/bottleneck "
          f"{fmt(row['peak_held_over_bottleneck'], '%.3f'):<6} first-byte RTTs "
          f"{fmt(row['first_byte_rtts'], '%.1f'):<4} jump {row['jump_start']}", flush=True)
    return row


rows = [bench("first-run-20s", 20, []), bench("second-run-20s", 20, [])]
for i in range(runs):
    rows.append(bench(f"held-40s-{i + 1}", 40, ["--no-jump-start"] if has_jump else []))
held = [r for r in rows if r["label"].startswith("held-")]
if held:
    worst = max((r["srtt_over_min"] or 0) for r in held)
    worst_median = max((r["median_srtt_over_min"] or 0) for r in held)
    peak = max((r["peak_held_over_bottleneck"] or 0) for r in held)
    print(f"over {len(held)} x 40 s: largest srtt/min after start-up {worst:.3f} (median "
          f"stream {worst_median:.3f}), drops "
          f"{sum(r['drops'] for r in held)}, largest held rate / bottleneck {peak:.3f}")
json.dump(rows, open(os.path.join(out, "summary.json"), "w"), indent=1)
