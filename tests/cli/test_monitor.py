#!/usr/bin/env python3
"""`smrules monitor` (docs/profiler.md, "Profiling your own machine"):

- with a stand-in NVML library (built here, found through LD_LIBRARY_PATH)
  every round has GPUUtilization and GPUMemoryUtilization per GPU with the
  stand-in's readings; without the library: one notice, no GPU lines, exit 0;
- the files pass an independent check of SageMaker's format (layout, file
  naming by minute and UTC hour, key order, names, units, value ranges);
- sampling never runs faster than the interval (whether it keeps to its
  grid without drift is timed by `make bench`, 8: a loaded machine delays
  rounds by any amount);
- CPU-burning children show in CPUUtilization, in agreement with /proc/stat
  over the same time; MemoryUsedPercent agrees with /proc/meminfo; a
  writing child shows in the disk metrics where the machine has a disk;
- SIGTERM and SIGINT stop it with exit 0 and every file ends with a
  complete line;
- bad options are usage errors (exit 2) that name the option.

No check depends on how fast the machine is: the test counts the rounds
written (monitor_lib.wait_rounds) instead of assuming how many a duration
gives, and load lasts until the rounds it must show were written.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import monitor_lib as ml  # noqa: E402


def test_gpus(c, tmp, nvml):
    out = os.path.join(tmp, "gpu")
    t0 = time.time()
    rc, err, took = ml.record_rounds(out, 10, ["--interval-ms", "100"],
                                     ml.monitor_env(nvml, gpus=3, util=7, mem_used=3000,
                                                    mem_total=12000))
    t1 = time.time()
    sc = c.scope("monitor with stand-in NVML")
    sc.eq("exit code", rc, 0)
    sc.ok("3 GPUs" in err, "start notice counts the GPUs", err.strip())
    probs = ml.format_problems(out, t0=t0, t1=t1)
    sc.ok(not probs, "format", "; ".join(probs[:5]))
    rows = ml.readings(out)
    util = ml.rounds(rows, "GPUUtilization")
    mem = ml.rounds(rows, "GPUMemoryUtilization")
    sc.at_least(10, util, "rounds with GPU readings")
    # a machine may delay or skip a tick, never sample twice in one
    sc.ok(len(util) <= took / 0.1 + 1, "at most one round per 100 ms",
          "%d rounds in %.2f s" % (len(util), took))
    sc.ok(all(v == [7.0, 8.0, 9.0] for v in util.values()), "GPUUtilization gpu0..gpu2 = 7, 8, 9",
          lib.short(list(util.values())[:3]))
    sc.ok(all(v == [25.0, 25.0, 25.0] for v in mem.values()), "GPUMemoryUtilization = used/total",
          lib.short(list(mem.values())[:3]))
    names = [r["Name"] for r in rows if r["Type"] == "gpu"][:6]
    sc.eq("GPU names", names, ["gpu0", "gpu0", "gpu1", "gpu1", "gpu2", "gpu2"])


def test_no_gpu(c, tmp):
    out = os.path.join(tmp, "nogpu")
    rc, err = ml.record(out, ["--interval-ms", "200", "--duration", "0.5"], ml.monitor_env())
    sc = c.scope("monitor without NVML")
    sc.eq("exit code", rc, 0)
    sc.eq("one notice about the missing library", err.count("libnvidia-ml.so.1"), 1)
    rows = ml.readings(out)
    sc.ok(rows, "CPU metrics written")
    sc.ok(not [r for r in rows if r["Type"] == "gpu"], "no GPU lines")
    probs = ml.format_problems(out)
    sc.ok(not probs, "format", "; ".join(probs[:5]))


def test_cpu_and_memory(c, tmp):
    out = os.path.join(tmp, "cpu")
    p = ml.start_monitor(out, ["--interval-ms", "250"], ml.monitor_env())
    started = ml.wait_rounds(out, 1, proc=p)
    before = ml.proc_stat_busy()
    burn0 = time.time()
    burners = ml.start_burners(2)
    # six rounds that sampled only the burn (the first round after burn0
    # partly covers the time before)
    burning = ml.wait_rounds(out, 7, after=burn0, proc=p)
    after = ml.proc_stat_busy()
    burn1 = time.time()
    ml.stop_burners(burners)
    mem_now = ml.meminfo_used_percent()
    ml.wait_rounds(out, 1, after=time.time(), proc=p)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=lib.TIMEOUT)
    sc = c.scope("CPU-burning children")
    sc.eq("exit code", p.returncode, 0)
    sc.ok(started and burning, "rounds written before and during the burn")
    rows = ml.readings(out)
    cores = os.cpu_count()
    cpu = ml.rounds(rows, "CPUUtilization")
    sc.ok(all(len(v) == cores for v in cpu.values()), "one reading per core per round",
          "%d cores" % cores)
    # the rounds inside the burn: their mean machine load must agree with
    # /proc/stat over the burn, and the burn shows as a busy machine
    ts = sorted(cpu)
    inner = [sum(cpu[t]) / len(cpu[t]) for prev, t in zip(ts, ts[1:]) if prev >= burn0 and t <= burn1]
    want = 100.0 * (after[0] - before[0]) / max(1, after[1] - before[1])
    got = sum(inner) / max(1, len(inner))
    sc.ok(len(inner) >= 4 and abs(got - want) < 15, "mean CPUUtilization agrees with /proc/stat",
          "monitor %.1f %%, /proc/stat %.1f %% over %d rounds" % (got, want, len(inner)))
    sc.ok(max(max(v) for v in cpu.values()) > 90, "a burned core reads > 90 %")
    mem = [v for vs in ml.rounds(rows, "", "MemoryUsedPercent").values() for v in vs]
    sc.ok(mem and abs(mem[-1] - mem_now) < 3, "MemoryUsedPercent agrees with /proc/meminfo",
          "monitor %s, /proc/meminfo %.2f" % (mem[-1:], mem_now))
    iow = ml.rounds(rows, "I/OWaitPercentage")
    sc.ok(len(iow) == len(cpu) and all(0 <= x <= 100 for v in iow.values() for x in v),
          "I/OWaitPercentage per core per round")
    net = ml.rounds(rows, "Algorithm")
    sc.ok(all(len(v) == 2 for v in net.values()) and len(net) == len(cpu),
          "network receive and transmit bytes per second each round")


def test_disk(c, tmp):
    """A child writing and syncing 64 MiB shows in WriteThroughput, where
    the machine exposes a whole disk (/sys/block/*/device)."""
    disks = [d for d in os.listdir("/sys/block") if os.path.exists("/sys/block/%s/device" % d)] \
        if os.path.isdir("/sys/block") else []
    out = os.path.join(tmp, "disk")
    p = ml.start_monitor(out, ["--interval-ms", "200"], ml.monitor_env())
    ml.wait_rounds(out, 1, proc=p)
    data = os.path.join(tmp, "big.bin")
    subprocess.run(["dd", "if=/dev/zero", "of=" + data, "bs=1M", "count=64", "conv=fsync"],
                   capture_output=True)
    ml.wait_rounds(out, 1, after=time.time(), proc=p)  # a round that saw all of it
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=lib.TIMEOUT)
    os.unlink(data)
    rows = ml.readings(out)
    sc = c.scope("I/O-heavy child")
    wr = [sum(v) for v in ml.rounds(rows, "", "WriteThroughputInBytesPerSecond").values()]
    if not disks:
        print("SKIP disk throughput: no whole disk under /sys/block on this machine")
        sc.ok(not wr, "no disk lines without a disk")
        return
    ts = ml.round_times(out)
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    written = sum(w * g for w, g in zip(wr[1:], gaps))  # bytes/s over each round's own span
    sc.ok(written >= 32 * 2 ** 20, "WriteThroughput adds up to the data written",
          "%.1f MiB seen of 64 MiB" % (written / 2 ** 20))


def test_signals(c, tmp):
    for sig, delay in ((signal.SIGTERM, 0.33), (signal.SIGINT, 0.47), (signal.SIGTERM, 0.61)):
        out = os.path.join(tmp, "sig%d-%g" % (sig, delay))
        p = ml.start_monitor(out, ["--interval-ms", "10"], ml.monitor_env())
        ml.wait_rounds(out, 1, proc=p)  # files exist; then the signal at some phase
        time.sleep(delay)
        p.send_signal(sig)
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
        sc = c.scope("stop on %s after %gs" % (signal.Signals(sig).name, delay))
        sc.eq("exit code", p.returncode, 0)
        files = [f for f in ml.system_files(out)]
        sc.ok(files, "files written")
        for f in files:
            with open(f, "rb") as fh:
                data = fh.read()
            sc.ok(data.endswith(b"\n"), "%s ends with a complete line" % os.path.basename(f))
        probs = ml.format_problems(out)
        sc.ok(not probs, "every line complete and well-formed", "; ".join(probs[:3]))


def test_usage(c, tmp):
    cases = [
        (["monitor"], "--out"),
        (["monitor", "--out", tmp, "--interval-ms", "5"], "--interval-ms"),
        (["monitor", "--out", tmp, "--interval-ms", "12x"], "--interval-ms"),
        (["monitor", "--out", tmp, "--node", "worker-1"], "--node"),
        (["monitor", "--out", tmp, "--duration", "-1"], "--duration"),
        (["monitor", "--out", tmp, "extra"], "extra"),
    ]
    for args, word in cases:
        rc, _, err = lib.run(args)
        sc = c.scope("usage: %s" % " ".join(args[1:]))
        sc.eq("exit code", rc, 2)
        sc.ok(word in err, "message names %s" % word, err.strip()[:200])
    rc, out, _ = lib.run(["monitor", "--help"])
    c.ok(rc == 0 and "--interval-ms" in out, "monitor --help")
    # the folder cannot be created: exit 3 naming the path
    blocker = os.path.join(tmp, "file")
    open(blocker, "w").close()
    rc, _, err = lib.run(["monitor", "--out", blocker, "--duration", "0.05", "--interval-ms", "10"])
    sc = c.scope("unwritable --out")
    sc.eq("exit code", rc, 3)
    sc.ok(blocker in err, "message names the path", err.strip()[:300])


def test_node_from_env(c, tmp):
    for env, want in (({"SLURM_NODEID": "2"}, "algo-3"), ({"GROUP_RANK": "0"}, "algo-1"),
                      ({"SM_CURRENT_HOST": "algo-4", "NODE_RANK": "1"}, "algo-4"),
                      ({"NODE_RANK": "1"}, "algo-2")):
        out = os.path.join(tmp, "node-" + want + "-" + "-".join(env))
        e = ml.monitor_env()
        for k in ("SLURM_NODEID", "GROUP_RANK", "NODE_RANK", "SM_CURRENT_HOST"):
            e.pop(k, None)
        e.update(env)
        rc, _ = ml.record(out, ["--interval-ms", "50", "--duration", "0.12"], e)
        names = {os.path.basename(f).split(".")[1] for f in ml.system_files(out)}
        c.ok(rc == 0 and names == {want}, "node from %s is %s" % (env, want), str(names))


def main():
    c = lib.Checker("test_monitor")
    with tempfile.TemporaryDirectory(prefix="smrules-monitor-") as tmp:
        nvml = ml.build_fake_nvml(tmp)
        test_gpus(c, tmp, nvml)
        test_no_gpu(c, tmp)
        test_cpu_and_memory(c, tmp)
        test_disk(c, tmp)
        test_signals(c, tmp)
        test_usage(c, tmp)
        test_node_from_env(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
