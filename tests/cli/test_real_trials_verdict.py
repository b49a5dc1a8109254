#!/usr/bin/env python3
"""bench/real_trials.sh's verdicts (section 12 of bench/README.md), from
rounds given to `--report` (the file REAL_DUMP keeps): no timing is
measured here, the rounds are made up so that each verdict has one answer.

The ratio to `cat` is taken round by round, and the verdict counts rounds:
- every round under the target: PASS, "12/12";
- half the rounds over and half under: UNSURE, although the ratio of the
  median times (4.15x on a 4x target... or under it) would have decided;
- 9 rounds of 12 met (3 in 4): PASS; 8 of 12: UNSURE; 3 of 12 (9 missed):
  MISS;
- a cat that drifts 3x from round to round while the rules follow it:
  PASS, each round at 3.8x its own cat;
- peak RSS is judged on its largest round, not the median;
- with REAL_BASE's rounds: its rows and the paired this - REAL_BASE;
- a malformed rounds file is an error naming its line;
- the bench itself on tiny trials (1 step each, 2 rounds, REAL_BASE the
  same build): every row and REAL_BASE's, the rounds each configuration
  first in turn, and `--report` of REAL_DUMP's file prints the same table
  (what is checked is the table's shape, never a time)."""

import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

BENCH = os.path.join(lib.ROOT, "bench", "real_trials.sh")
ROW = "cnn: all twenty rules"


def dump(path, this, cat, base=None, rss_kb=None):
    """Rounds of the cnn_all20 row: wall seconds of this, cat (and base)
    by round; CPU time half the wall time, peak RSS 50 MB unless given."""
    n = len(this)
    rss_kb = rss_kb or [51200] * n
    with open(path, "w") as f:
        f.write("load start 0.50 0.50 0.50\nbytes cnn 1220000000\n")
        for i in range(n):
            runs = [("this", this[i], rss_kb[i]), ("cat", cat[i], 1700)]
            if base:
                runs.append(("base", base[i], 51200))
            for c, wall, rss in runs:
                f.write("run cnn_all20 %s %d %.4f %.3f %.3f %d\n"
                        % (c, i, wall, wall / 2, 0.0, rss))
        f.write("load end 0.50 0.50 0.50\n")


def report(path):
    p = subprocess.run(["bash", BENCH, "--report", path], capture_output=True, text=True,
                       timeout=lib.TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def row(out, label):
    """The report's row that starts with `label`, split in its columns
    (one space or more apart, after the label), or None."""
    for line in out.splitlines():
        if line.startswith(label):
            return line[len(label):].split()
    return None


def tiny_run(c, tmp):
    s = c.scope("the bench on tiny trials")
    smrules = os.path.abspath(os.path.join(lib.ROOT, lib.SMRULES))
    build = os.path.relpath(os.path.dirname(smrules), lib.ROOT)
    rounds = os.path.join(tmp, "rounds.txt")
    env = dict(os.environ, REAL_FW_STEPS="1", REAL_CNN_STEPS="1", REAL_REPEAT="2",
               REAL_BASE=os.path.dirname(smrules), REAL_DUMP=rounds, BENCH_DIR=tmp)
    try:
        p = subprocess.run(["bash", BENCH, build], capture_output=True, text=True, env=env,
                           timeout=lib.TIMEOUT * 10)
    except subprocess.TimeoutExpired:
        s.ok(False, "the bench finishes (hang guard)")
        return
    if not s.ok(p.returncode == 0, "the bench runs", p.stderr[-2000:] + p.stdout[-2000:]):
        return
    out = p.stdout
    for label in ("fw 20 grads: VG alone", "fw 20 grads: twelve rules", "cnn: twelve rules",
                  ROW, "cnn: DeadRelu alone"):
        r = row(out, label + " (wall s)")
        want = ("info",) if "DeadRelu" in label else ("PASS", "MISS", "UNSURE")
        s.ok(r is not None and r[-1] in want, label + ": a wall row, verdict one of %s" % (want,),
             out)
        s.ok(row(out, "REAL_BASE's " + label + " (wall s)") is not None,
             label + ": REAL_BASE's row", out)
        r = row(out, label + ": this - REAL_BASE, wall s")
        s.ok(r is not None and r[-2] == "-" and r[-1] == "info",
             label + ": this - REAL_BASE", out)
    firsts = {}
    with open(rounds) as f:
        for line in f:
            w = line.split()
            if w[0] == "run":
                firsts.setdefault((w[1], w[3]), w[2])
    s.ok(len(firsts) == 10 and all(firsts[(r, "0")] == "this" and firsts[(r, "1")] == "cat"
                                   for r, _ in firsts),
         "5 rows x 2 rounds; this first in round 0, cat in round 1", str(firsts))
    rc, again, err = report(rounds)
    s.ok(rc == 0 and again.strip() == out[out.index("== summary 12"):].strip(),
         "--report on REAL_DUMP's file prints the same table", err + again)


def main():
    c = lib.Checker("test_real_trials_verdict")
    tmp = tempfile.mkdtemp(prefix="smr-realbench-")
    wall = ROW + " (wall s)"
    try:
        def case(name, this, cat, **kw):
            s = c.scope(name)
            p = os.path.join(tmp, name.replace(" ", "_") + ".txt")
            dump(p, this, cat, **kw)
            rc, out, err = report(p)
            s.ok(rc == 0, "report runs", err[-2000:])
            return s, out

        s, out = case("all rounds under", [0.35] * 12, [0.1] * 12)
        r = row(out, wall)
        s.ok(r is not None and r[:6] == ["0.350", "cat", "0.100", "3.50", "[3.50", "3.50]"]
             and r[6:] == ["12/12", "<=", "4x", "PASS"], "3.50x, 12/12, PASS", out)
        s.ok("RESULT real_cnn_all20_ratio 3.500" in out and
             "RESULT real_cnn_all20_verdict PASS" in out, "RESULT lines", out)

        # six rounds at 3.7x, six at 4.6x: a coin toss, whatever the medians say
        s, out = case("a coin toss", [0.37, 0.46] * 6, [0.1] * 12)
        r = row(out, wall)
        s.ok(r is not None and r[3:6] == ["4.15", "[3.70", "4.60]"] and r[6] == "6/12"
             and r[-1] == "UNSURE", "4.15x [3.70 4.60], 6/12, UNSURE", out)

        s, out = case("nine rounds in twelve", [0.39] * 9 + [0.41] * 3, [0.1] * 12)
        r = row(out, wall)
        s.ok(r is not None and r[6] == "9/12" and r[-1] == "PASS", "9/12: PASS", out)
        s, out = case("eight rounds in twelve", [0.39] * 8 + [0.41] * 4, [0.1] * 12)
        r = row(out, wall)
        s.ok(r is not None and r[6] == "8/12" and r[-1] == "UNSURE", "8/12: UNSURE", out)
        s, out = case("three rounds in twelve", [0.39] * 3 + [0.41] * 9, [0.1] * 12)
        r = row(out, wall)
        s.ok(r is not None and r[6] == "3/12" and r[-1] == "MISS", "3/12: MISS", out)

        cat = [0.1, 0.3] * 6
        s, out = case("a drifting cat", [3.8 * x for x in cat], cat)
        r = row(out, wall)
        s.ok(r is not None and r[3:6] == ["3.80", "[3.80", "3.80]"] and r[-1] == "PASS",
             "each round at 3.8x its own cat: PASS", out)

        s, out = case("one round over 64 MB", [0.35] * 12, [0.1] * 12,
                      rss_kb=[51200] * 11 + [70 * 1024])
        r = row(out, ROW + " peak RSS MB")
        s.ok(r is not None and r[0] == "70.0" and r[-1] == "MISS", "the largest round: 70.0, MISS",
             out)

        s, out = case("paired with REAL_BASE", [0.35] * 12, [0.1] * 12, base=[0.55] * 12)
        r = row(out, "REAL_BASE's " + wall)
        s.ok(r is not None and r[3] == "5.50" and r[-1] == "MISS", "REAL_BASE's row: 5.50x, MISS",
             out)
        r = row(out, ROW + ": this - REAL_BASE, wall s")
        s.ok(r is not None and r[:4] == ["-0.200", "-", "-0.200", "[-0.200"] and r[5] == "12/12",
             "this - REAL_BASE: -0.200 s, faster in 12/12 rounds", out)
        s.ok("RESULT real_cnn_all20_minus_base_wall_s -0.2000" in out, "RESULT of the difference",
             out)

        s = c.scope("a malformed rounds file")
        p = os.path.join(tmp, "bad.txt")
        with open(p, "w") as f:
            f.write("bytes cnn 1220000000\nrun cnn_all20 this 0 0.35 x 0 100\n")
        rc, out, err = report(p)
        s.ok(rc != 0 and "bad.txt:2:" in err, "an error naming line 2", err + out)
        rc, out, err = report(os.path.join(tmp, "absent.txt"))
        s.ok(rc != 0 and "absent.txt: No such file" in err and "Traceback" not in err,
             "a missing file: one line saying so", err + out)
        tiny_run(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
