#!/usr/bin/env python3
"""The system-metrics recorder (`smrules monitor --out DIR`, `run --profile
DIR`) writes like the rest of smrules (docs/security.md): the profiler
folder is also where the training job's own profiler output goes, so what
the job planted there is never written through or waited on.

- a symbolic link planted at the minute's file: nothing is appended to its
  target; the file is named in a clear error and recording goes on;
- a FIFO planted there (with and without a reader): the recorder neither
  blocks nor writes into it, and `--duration` still ends it;
- a link planted at system/training_job_end.ts: `run --profile -- CMD`
  does not create the link's target.
A benign control records into a regular minute file.

The tests wait for lines the recorder prints, never for a duration."""

import os
import signal
import stat
import subprocess
import tempfile
import time

import lib

TRAINER = os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer")


def minute_paths(out, node="algo-1"):
    """The minute files of now and of the next two minutes (a test may
    cross a minute's end)."""
    now = int(time.time()) // 60 * 60
    paths = []
    for m in (now, now + 60, now + 120):
        hour = time.strftime("%Y%m%d%H", time.gmtime(m))
        d = os.path.join(out, "system", "incremental", hour)
        os.makedirs(d, exist_ok=True)
        paths.append(os.path.join(d, "%010d.%s.json" % (m, node)))
    return paths


def monitor(out, extra=()):
    return lib.Running(["monitor", "--out", out, "--interval-ms", "20"] + list(extra))


def check_link(c, tmp):
    sc = c.scope("a link planted at the minute's file")
    out = os.path.join(tmp, "link-prof")
    victim = os.path.join(tmp, "victim.txt")
    with open(victim, "w") as f:
        f.write("precious\n")
    for p in minute_paths(out):
        os.symlink(victim, p)
    m = monitor(out)
    line = m.wait_line(r"is a symbolic link")
    sc.ok(line is not None and "incremental" in line, "a clear error names the file",
          "".join(m.err_lines)[-400:])
    sc.ok(m.proc.poll() is None, "recording goes on after it")
    m.signal(signal.SIGTERM)
    rc, _, err = m.finish()
    with open(victim) as f:
        sc.eq("nothing was appended to the link's target", f.read(), "precious\n")
    sc.ok(rc != 0 and "could not be written" in err, "the exit status says samples were lost",
          "rc %s: %s" % (rc, err[-300:]))


def check_fifo(c, tmp, with_reader):
    what = "with a reader" if with_reader else "without a reader"
    sc = c.scope("a FIFO planted at the minute's file, " + what)
    out = os.path.join(tmp, "fifo-prof-%d" % with_reader)
    readers = []
    for p in minute_paths(out):
        os.mkfifo(p)
        if with_reader:
            readers.append(os.open(p, os.O_RDONLY | os.O_NONBLOCK))
    m = monitor(out, ["--duration", "600"])
    line = m.wait_line(r"is a FIFO")
    sc.ok(line is not None, "a clear error names the FIFO", "".join(m.err_lines)[-400:])
    sc.ok(m.proc.poll() is None, "recording goes on after it")
    m.signal(signal.SIGTERM)
    rc, _, _ = m.finish()
    sc.ok(rc not in (lib.TIMEOUT_RC, -signal.SIGKILL), "it stops when asked", "rc %s" % rc)
    for fd in readers:
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            data = b""
        sc.ok(data == b"", "nothing was written into the FIFO", repr(data[:100]))
        os.close(fd)


def check_fifo_duration(c, tmp):
    sc = c.scope("a FIFO at the minute's file and --duration")
    out = os.path.join(tmp, "fifo-dur")
    for p in minute_paths(out):
        os.mkfifo(p)
    m = monitor(out, ["--duration", "0.5"])
    rc, _, err = m.finish()
    sc.ok(rc != lib.TIMEOUT_RC, "--duration ends the recording", err[-300:])
    sc.ok("is a FIFO" in err, "the FIFO is named", err[-300:])


def check_control(c, tmp):
    sc = c.scope("benign control: a regular minute file")
    out = os.path.join(tmp, "plain")
    m = monitor(out, ["--duration", "0.3"])
    rc, _, err = m.finish()
    sc.eq("exit 0", rc, 0)
    files = []
    for dirpath, _, names in os.walk(os.path.join(out, "system", "incremental")):
        files += [os.path.join(dirpath, n) for n in names]
    sc.ok(files and all(stat.S_ISREG(os.lstat(f).st_mode) for f in files),
          "readings land in regular minute files", err[-300:])
    sc.ok(any(os.path.getsize(f) > 0 for f in files), "and they are not empty")


def check_end_marker(c, tmp):
    sc = c.scope("a link planted at system/training_job_end.ts")
    prof = os.path.join(tmp, "end-prof")
    trial = os.path.join(tmp, "end-trial")
    os.makedirs(os.path.join(prof, "system"))
    target = os.path.join(tmp, "created-through-link")
    os.symlink(target, os.path.join(prof, "system", "training_job_end.ts"))
    rules = os.path.join(tmp, "end-rules.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: CPUBottleneck\n")
    r = subprocess.run([lib.SMRULES, "run", "--trial", trial, "--rules", rules, "--profile", prof,
                        "--fresh", "--output", os.path.join(tmp, "end-out"), "--",
                        TRAINER, trial, "--steps", "3", "--interval-ms", "0"],
                       capture_output=True, text=True, timeout=lib.TIMEOUT, cwd=lib.ROOT)
    sc.ok(r.returncode in (0, 1), "the run ends normally", "rc %s: %s" % (r.returncode, r.stderr[-300:]))
    sc.ok(not os.path.lexists(target), "the link's target was not created")
    sc.ok("training_job_end.ts" in r.stderr and "symbolic link" in r.stderr,
          "the refusal is said", r.stderr[-400:])


def main():
    c = lib.Checker("test_recorder_confined")
    with tempfile.TemporaryDirectory(prefix="smrules-rec-") as tmp:
        check_control(c, tmp)
        check_link(c, tmp)
        check_fifo(c, tmp, False)
        check_fifo(c, tmp, True)
        check_fifo_duration(c, tmp)
        check_end_marker(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
