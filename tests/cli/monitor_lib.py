"""Helpers shared by the tests of `smrules monitor` and of profiling a run:
building the stand-in NVML library, recording, reading a recording back,
and an independent check of SageMaker's system-metrics format
(docs/formats.md, "System metrics")."""

import json
import os
import re
import subprocess
import time

import lib

FAKE_NVML_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "fake_nvml.c")

# The metrics the monitor writes: Type -> {Name pattern: Dimension}
METRICS = {
    "cpu": {r"cpu\d+": ("CPUUtilization", "I/OWaitPercentage")},
    "memory": {r"MemoryUsedPercent": ("",)},
    "gpu": {r"gpu\d+": ("GPUUtilization", "GPUMemoryUtilization")},
    "network": {r"ReceiveBytesPerSecond|TransmitBytesPerSecond": ("Algorithm",)},
    "i/o": {r"ReadThroughputInBytesPerSecond|WriteThroughputInBytesPerSecond|IOPS": ("",)},
}
PERCENT = ("CPUUtilization", "I/OWaitPercentage", "GPUUtilization", "GPUMemoryUtilization")
KEYS = ["Type", "Name", "Dimension", "Value", "NodeId", "Timestamp"]
FILE_RE = re.compile(r"^(\d{10})\.(algo-\d+)\.json$")


def build_fake_nvml(tmp):
    """Compile the stand-in into tmp/nvml/libnvidia-ml.so.1; returns the folder."""
    d = os.path.join(tmp, "nvml")
    os.makedirs(d, exist_ok=True)
    so = os.path.join(d, "libnvidia-ml.so.1")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-o", so, FAKE_NVML_SRC],
                   check=True)
    return d


def monitor_env(nvml_dir=None, **fake):
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    if nvml_dir:
        env["LD_LIBRARY_PATH"] = nvml_dir
    for k, v in fake.items():
        env["FAKE_NVML_" + k.upper()] = str(v)
    return env


def start_monitor(out, args=(), env=None):
    return subprocess.Popen([lib.SMRULES, "monitor", "--out", out] + list(args),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=lib.ROOT)


def record(out, args=(), env=None, timeout=lib.TIMEOUT):
    """Run the monitor to completion (it needs --duration); (rc, stderr)."""
    p = start_monitor(out, args, env)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        return lib.TIMEOUT_RC, err.decode("utf-8", "replace") + "\n[test] timed out"
    return p.returncode, err.decode("utf-8", "replace")


def system_files(profiler_dir):
    out = []
    for dirpath, _, files in os.walk(os.path.join(profiler_dir, "system")):
        out += [os.path.join(dirpath, f) for f in files]
    return sorted(out)


def readings(profiler_dir):
    """Every line of every system file, parsed (file order, line order)."""
    rows = []
    for path in system_files(profiler_dir):
        if path.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                rows += [json.loads(line) for line in f]
    return rows


def rounds(rows, dimension, name_re=r".*"):
    """{timestamp: [values of that dimension]} in first-seen order."""
    out = {}
    for r in rows:
        if r["Dimension"] == dimension and re.fullmatch(name_re, r["Name"]):
            out.setdefault(r["Timestamp"], []).append(r["Value"])
    return out


def format_problems(profiler_dir, node="algo-1", t0=None, t1=None):
    """Independent check of the layout and of every line; a list of problems."""
    problems = []
    files = system_files(profiler_dir)
    if not files:
        return ["no system files"]
    for path in files:
        relp = os.path.relpath(path, os.path.join(profiler_dir, "system"))
        if relp == "training_job_end.ts":  # SageMaker's end marker
            continue
        parts = relp.split(os.sep)
        m = FILE_RE.match(parts[-1])
        if len(parts) != 3 or parts[0] != "incremental" or not m:
            problems.append("%s: not incremental/<YYYYMMDDHR>/<10 digits>.<node>.json" % relp)
            continue
        minute = int(m.group(1))
        if minute % 60 or m.group(2) != node:
            problems.append("%s: not a minute start / node %s" % (relp, node))
        if parts[1] != time.strftime("%Y%m%d%H", time.gmtime(minute)):
            problems.append("%s: hour folder does not match the minute (UTC)" % relp)
        with open(path, "rb") as f:
            data = f.read()
        if not data.endswith(b"\n"):
            problems.append("%s: last line incomplete" % relp)
        for no, line in enumerate(data.decode("utf-8").splitlines(), 1):
            problems += ["%s:%d: %s" % (relp, no, p) for p in line_problems(line, minute, node, t0, t1)]
        if len(problems) > 20:
            break
    return problems


def line_problems(line, minute, node, t0, t1):
    try:
        obj = json.loads(line, object_pairs_hook=list)
    except ValueError as e:
        return ["not JSON: %s" % e]
    if [k for k, _ in obj] != KEYS:
        return ["keys %s, expected %s" % ([k for k, _ in obj], KEYS)]
    o = dict(obj)
    out = []
    if not all(isinstance(o[k], str) for k in ("Type", "Name", "Dimension", "NodeId")):
        out.append("Type, Name, Dimension and NodeId must be strings")
    if not all(isinstance(o[k], float) for k in ("Value", "Timestamp")):
        out.append("Value and Timestamp must be JSON floats")
        return out
    names = METRICS.get(o["Type"])
    if names is None:
        return out + ["unknown Type %r" % o["Type"]]
    if not any(re.fullmatch(p, o["Name"]) and o["Dimension"] in dims for p, dims in names.items()):
        out.append("Name/Dimension %r/%r not SageMaker's for %s" % (o["Name"], o["Dimension"], o["Type"]))
    if o["NodeId"] != node:
        out.append("NodeId %r" % o["NodeId"])
    if o["Value"] < 0 or (o["Dimension"] in PERCENT or o["Name"] == "MemoryUsedPercent") \
            and o["Value"] > 100:
        out.append("Value %r out of range" % o["Value"])
    if round(o["Value"], 2) != o["Value"]:
        out.append("Value %r has more than two decimals" % o["Value"])
    if not minute <= o["Timestamp"] < minute + 60:
        out.append("Timestamp %r outside the file's minute" % o["Timestamp"])
    if t0 is not None and not t0 <= o["Timestamp"] <= t1:
        out.append("Timestamp %r outside the recording [%r, %r]" % (o["Timestamp"], t0, t1))
    return out


def meminfo_used_percent():
    kv = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            kv[k] = int(v.split()[0])
    return 100.0 * (kv["MemTotal"] - kv["MemAvailable"]) / kv["MemTotal"]


def proc_stat_busy():
    """(busy, total) jiffies summed over the cores, from /proc/stat."""
    busy = total = 0
    with open("/proc/stat") as f:
        for line in f:
            if re.match(r"cpu\d", line):
                v = [int(x) for x in line.split()[1:9]]
                total += sum(v)
                busy += sum(v) - v[3] - v[4]
    return busy, total


def start_burners(n, seconds=None):
    """n CPU-bound children (busy loops), each running when this returns
    (it prints a line once it loops).  With `seconds` they end by
    themselves; without, they burn until the caller kills them (tests that
    need load for as long as something else takes must not guess how long
    that is)."""
    code = ("import time\nend = time.time() + float(%r)\nprint('burning', flush=True)\n"
            "while time.time() < end: pass\n" % ("inf" if seconds is None else seconds))
    procs = [subprocess.Popen(["python3", "-c", code], stdout=subprocess.PIPE) for _ in range(n)]
    for p in procs:
        if p.stdout.readline() != b"burning\n":
            raise RuntimeError("a CPU burner did not start")
    return procs


def stop_burners(procs):
    for p in procs:
        p.kill()
        p.wait()
        p.stdout.close()


def round_times(profiler_dir):
    """Timestamps of the rounds written so far (a round's cpu0
    CPUUtilization line; complete lines only: the monitor may be writing)."""
    out = []
    for path in system_files(profiler_dir):
        if not path.endswith(".json"):
            continue
        with open(path, "rb") as f:
            data = f.read()
        for line in data[:data.rfind(b"\n") + 1].splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("Name") == "cpu0" and r.get("Dimension") == "CPUUtilization":
                out.append(r["Timestamp"])
    return sorted(out)


def wait_rounds(profiler_dir, n, after=None, proc=None, limit=lib.TIMEOUT):
    """Wait until the recording holds n rounds (stamped later than `after`,
    when given); False if `proc` exited first or after `limit` seconds (a
    hang guard).  The tests count rounds instead of assuming how many a
    duration gives."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if len([t for t in round_times(profiler_dir) if after is None or t > after]) >= n:
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def record_rounds(out, n, args=(), env=None):
    """Run the monitor until it has written n rounds, then SIGTERM it;
    (rc, stderr, seconds it ran)."""
    import signal
    t0 = time.time()
    p = start_monitor(out, args, env)
    wait_rounds(out, n, proc=p)
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=lib.TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        return lib.TIMEOUT_RC, err.decode("utf-8", "replace") + "\n[test] timed out", 0
    return p.returncode, err.decode("utf-8", "replace"), time.time() - t0
