#!/usr/bin/env python3
"""Recordings of `smrules monitor` read by smrules' own profiler reader:

- a recording under CPU-bound "training" (busy children on every core) with
  the stand-in NVML reporting an idle GPU makes CPUBottleneck fire; the same
  with a busy GPU does not (the GPU readings decide);
- OverallSystemUsage reports the recording's CPU, GPU, network and memory
  statistics, with the stand-in's GPU readings exactly;
- ProfilerReport renders the system sections from the recording (system
  usage table, GPU utilization charts, CPU bottlenecks), every chart draws
  data, and it renders in headless Chromium (skipped without chromium).
"""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import monitor_lib as ml  # noqa: E402
import test_profiler_report as tpr  # noqa: E402


def record_under_load(out, nvml, gpu_util):
    """40 rounds at 100 ms while every core is busy (the burners run from
    before the first round to after the last, however long that takes)."""
    burners = ml.start_burners(os.cpu_count() or 2)
    try:
        rc, err, _ = ml.record_rounds(out, 40, ["--interval-ms", "100"],
                                      ml.monitor_env(nvml, gpus=1, util=gpu_util, mem_used=2000,
                                                     mem_total=8000))
    finally:
        ml.stop_burners(burners)
    return rc, err


def run_rules(prof, tmp, entries, label):
    path = os.path.join(tmp, label + ".yaml")
    with open(path, "w") as f:
        f.write("rules:\n")
        for rule, params in entries:
            f.write("  - rule: %s\n" % rule)
            if params:
                f.write("    parameters: {%s}\n" % ", ".join("%s: %s" % kv for kv in params.items()))
    return lib.run_json(["run", "--trial", prof, "--rules", path, "--json", "--fresh",
                         "--output", os.path.join(tmp, "out-" + label)], timeout=max(lib.TIMEOUT, 300))


def by_name(res):
    return {r["name"]: r for r in (res.obj or {}).get("rules", [])}


def test_cpu_bottleneck(c, tmp, nvml):
    for util, fires in ((3, True), (95, False)):
        prof = os.path.join(tmp, "rec-gpu%d" % util)
        rc, err = record_under_load(prof, nvml, util)
        sc = c.scope("recording under CPU load, GPU at %d %%" % util)
        if not sc.ok(rc == 0, "monitor exit 0", err[-300:]):
            continue
        r = run_rules(prof, tmp, [("CPUBottleneck", {"patience": 10}),
                                  ("OverallSystemUsage", None)], "cpu%d" % util)
        sc = c.scope("CPUBottleneck on the recording, GPU at %d %%" % util, r)
        if not sc.process(r):
            continue
        cb = by_name(r).get("CPUBottleneck", {})
        rep = cb.get("report") or {}
        sc.ok(rep.get("Datapoints", 0) >= 30, "snapshots read", str(rep.get("Datapoints")))
        if fires:
            sc.ok(cb.get("triggered_steps"), "fires", lib.short(cb))
            sc.ok(rep.get("Violations", 0) * 2 > rep.get("Datapoints", 0),
                  "most snapshots are bottlenecks", "%s of %s" % (rep.get("Violations"),
                                                                  rep.get("Datapoints")))
            sc.eq("exit code", r.rc, 1)
        else:
            sc.eq("does not fire", cb.get("triggered_steps"), [])
            sc.eq("no bottleneck snapshots", rep.get("Violations"), 0)
        osu = (by_name(r).get("OverallSystemUsage", {}).get("report") or {}).get("Details") or {}
        gpu = lib.dig(osu, "GPU.algo-1") or {}
        sc.eq("OverallSystemUsage GPU p50 is the stand-in's reading", gpu.get("p50"), float(util))
        sc.eq("OverallSystemUsage GPU memory p50 (2000 of 8000)",
              lib.dig(osu, "GPU memory.algo-1.p50"), 25.0)
        sc.ok((lib.dig(osu, "CPU.algo-1.p95") or 0) > 90, "OverallSystemUsage CPU p95 > 90",
              lib.short(lib.dig(osu, "CPU")))
        for key in ("Network", "CPU memory", "I/O"):
            sc.ok(isinstance(lib.dig(osu, key + ".algo-1"), dict), "OverallSystemUsage has %s" % key,
                  lib.short(sorted(osu)))


def test_report(c, tmp):
    prof = os.path.join(tmp, "rec-gpu3")
    r = run_rules(prof, tmp, [("ProfilerReport", {"CPUBottleneck_patience": 10})], "report")
    sc = c.scope("ProfilerReport on the recording", r)
    if not sc.process(r):
        return
    html_path = os.path.join(tmp, "out-report", "ProfilerReport", "profiler-output",
                             "profiler-report.html")
    try:
        with open(html_path, encoding="utf-8") as f:
            html = f.read()
    except OSError as e:
        sc.ok(False, "profiler-report.html written", str(e))
        return
    for sec in ("System usage statistics", "GPU utilization analysis", "CPU bottlenecks",
                "Workload balancing"):
        sc.ok(">%s<" % sec in html, "section '%s'" % sec)
    sc.ok("No system metrics were found" not in html, "system metrics found")
    # the rows of the system usage table, read from its own section only
    m = re.search(r'<section id="system">(.*?)</section>', html, re.S)
    system = m.group(1) if m else ""
    rows = {}
    for cells in re.findall(r"<tr>(.*?)</tr>", system, re.S):
        td = re.findall(r"<td[^>]*>(.*?)</td>", cells)
        if len(td) == 8:  # node, metric, unit, max, p99, p95, p50, min
            rows[(td[0], td[1])] = dict(zip(("max", "p99", "p95", "p50", "min"),
                                            (float(x) for x in td[3:])))
    sc.at_least(4, rows, "rows of the system usage table")
    cpu, gpu = rows.get(("algo-1", "CPU"), {}), rows.get(("algo-1", "GPU"), {})
    sc.ok(cpu.get("p95", 0) > 90, "CPU row: p95 > 90 % under load", lib.short(cpu))
    sc.eq("GPU row: p50 is the stand-in's 3 %", gpu.get("p50"), 3.0)
    sc.eq("GPU memory row: p50 2000 of 8000 MB", rows.get(("algo-1", "GPU memory"), {}).get("p50"),
          25.0)
    p = tpr.SvgCollector()
    p.feed(html)
    sc.ok(len(p.charts) > 0, "has charts")
    sc.ok(not [ch for ch in p.charts if ch["shapes"] < 1], "every chart draws data")
    if tpr.CHROMIUM:
        tpr.check_screenshot(sc, html_path, tmp)
    else:
        print("SKIP headless Chromium rendering: no 'chromium' on PATH")


def main():
    c = lib.Checker("test_monitor_rules")
    with tempfile.TemporaryDirectory(prefix="smrules-monrules-") as tmp:
        nvml = ml.build_fake_nvml(tmp)
        test_cpu_bottleneck(c, tmp, nvml)
        test_report(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
