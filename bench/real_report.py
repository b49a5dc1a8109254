#!/usr/bin/env python3
"""bench/real_report.py ROUNDS - section 12's summary (bench/README.md)
from the rounds bench/real_trials.sh measured.

Each line of ROUNDS is one of
    bytes TRIAL N                      the trial's event files, bytes
    load WHEN L1 L5 L15                the load average at "start" / "end"
    run ROW CONFIG ROUND WALL USER SYS MAXRSS_KB
where CONFIG is "this" (the build under test), "cat" (cat of the same
event files, the baseline) or "base" (REAL_BASE's build), run in the same
round, back to back.  A row's ratio is taken round by round (this round's
wall time over this round's cat): a round's load hits both alike.  The
verdict is PASS when at least three rounds in four meet the target, MISS
when at least three in four miss it, otherwise UNSURE: the rounds straddle
the target and a verdict from them would be a coin toss.  Peak RSS is
judged on its largest value over the rounds.

bench/real_trials.sh --report ROUNDS runs this on a file REAL_DUMP kept;
tests/cli/test_real_trials_verdict.py does so with made-up rounds."""

import statistics
import sys

# (label, row, trial, target ratio to cat or None for info)
ROWS = [
    ("fw 20 grads: VG alone", "fw_vg", "fw", 1.25),
    ("fw 20 grads: twelve rules", "fw_twelve", "fw", 3),
    ("cnn: twelve rules", "cnn_twelve", "cnn", 3),
    ("cnn: all twenty rules", "cnn_all20", "cnn", 4),
    ("cnn: DeadRelu alone", "cnn_deadrelu", "cnn", None),
]
RSS_MB = 64  # peak RSS target, MB (strictly under)
FMT = "%-60s %-9s %-11s %-22s %-9s %-8s %s"


def quartiles(xs):
    """(median, lower quartile, upper quartile) of xs."""
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q2, q1, q3


def verdict(ratios, target):
    """PASS when at least 3 rounds in 4 meet `ratio <= target`, MISS when
    at least 3 in 4 miss it, UNSURE between (a coin toss)."""
    met = sum(r <= target for r in ratios)
    return "PASS" if 4 * met >= 3 * len(ratios) else \
        "MISS" if 4 * (len(ratios) - met) >= 3 * len(ratios) else "UNSURE"


def spread(xs, f="%.2f"):
    m, q1, q3 = quartiles(xs)
    return (f + " [" + f + " " + f + "]") % (m, q1, q3)


def read(path):
    """{trial: bytes}, {when: "l1 l5 l15"}, {row: {config: [(wall, cpu,
    rss_kb) by round]}}; a malformed line is an error naming it."""
    nbytes, load, runs = {}, {}, {}
    try:
        f = open(path)
    except OSError as e:
        sys.exit("%s: %s" % (path, e.strerror))
    with f:
        for n, line in enumerate(f, 1):
            w = line.split()
            try:
                if not w:
                    continue
                if w[0] == "bytes" and len(w) == 3:
                    nbytes[w[1]] = int(w[2])
                elif w[0] == "load" and len(w) == 5:
                    load[w[1]] = " ".join(w[2:])
                elif w[0] == "run" and len(w) == 8:
                    wall, user, sys_, rss = (float(x) for x in w[4:])
                    rounds = runs.setdefault(w[1], {}).setdefault(w[2], {})
                    rounds[int(w[3])] = (wall, user + sys_, rss)
                else:
                    raise ValueError("expected bytes, load or run with their fields")
            except ValueError as e:
                sys.exit("%s:%d: %s: %r" % (path, n, e, line.rstrip("\n")))
    ordered = {}
    for row, configs in runs.items():
        ordered[row] = {}
        for config, rounds in configs.items():
            if "this" not in configs or "cat" not in configs or \
                    sorted(rounds) != sorted(configs["this"]):
                sys.exit("%s: row %s: %s's rounds are not this's and cat's" % (path, row, config))
            ordered[row][config] = [rounds[r] for r in sorted(rounds)]
    return nbytes, load, ordered


def report(path):
    nbytes, load, runs = read(path)
    rows = [r for r in ROWS if r[1] in runs]
    if not rows:
        sys.exit("%s: no rounds" % path)
    has_base = any("base" in runs[r[1]] for r in rows)
    nrounds = len(runs[rows[0][1]]["this"])

    def gbps(trial):
        row = next((r[1] for r in rows if r[2] == trial), None)
        if row is None or trial not in nbytes:
            return "-"
        return "%.1f" % (nbytes[trial] / 1e9 / statistics.median(x[0] for x in runs[row]["cat"]))

    print()
    print("== summary 12 (%d rounds, load average %s at the end; cat of the event files:"
          " fw %s GB/s, cnn %s GB/s)" % (nrounds, load.get("end", "?"), gbps("fw"), gbps("cnn")))
    print("   a round runs a row's smrules%s and its cat back to back, each first in turn;"
          % (", REAL_BASE's smrules" if has_base else ""))
    print("   RATIO is the median of the rounds' ratios [lower upper quartiles]; a verdict is PASS")
    print("   when 3 rounds in 4 (MET) meet the target, MISS when 3 in 4 miss it, UNSURE (a coin"
          " toss) between;")
    print("   peak RSS is the largest of the rounds")
    if has_base:
        print("   this - REAL_BASE: the rounds' differences, median [quartiles], MET the rounds"
              " where this was faster")
    print(FMT % ("BENCHMARK", "MEASURED", "BASELINE", "RATIO [QUARTILES]", "MET", "TARGET",
                 "VERDICT"))
    results = []
    for label, row, trial, target in rows:
        gb = nbytes.get(trial, 0) / 1e9
        cat = runs[row]["cat"]
        configs = [("this", label)]
        if "base" in runs[row]:
            configs.append(("base", "REAL_BASE's " + label))
        for config, name in configs:
            me = runs[row][config]
            ratios = [a[0] / c[0] for a, c in zip(me, cat)]
            wall = statistics.median(x[0] for x in me)
            catw = statistics.median(x[0] for x in cat)
            if target is None:
                met, tgt, v = "-", "-", "info"
            else:
                met = "%d/%d" % (sum(r <= target for r in ratios), len(ratios))
                tgt, v = "<= %gx" % target, verdict(ratios, target)
            print(FMT % (name + " (wall s)", "%.3f" % wall, "cat %.3f" % catw,
                         spread(ratios), met, tgt, v))
            # CPU time: the ratio of the medians (cat's CPU time is a few
            # ticks of 10 ms, too coarse to divide by round by round)
            cpu = statistics.median(x[1] for x in me)
            catc = statistics.median(x[1] for x in cat)
            cratio = cpu / catc if catc > 0 else float("inf")
            if gb > 0:
                print(FMT % (name + " (cpu s per GB)", "%.3f" % (cpu / gb),
                             "cat %.3f" % (catc / gb), "%.2f" % cratio, "-", "-", "info"))
            rss = max(x[2] for x in me) / 1024
            print(FMT % (name + " peak RSS MB", "%.1f" % rss, "-", "max of %d" % len(me), "-",
                         "< %d" % RSS_MB, "PASS" if rss < RSS_MB else "MISS"))
            if config == "this":
                m, q1, q3 = quartiles(ratios)
                results += [("real_%s_ratio" % row, "%.3f" % m),
                            ("real_%s_ratio_q1" % row, "%.3f" % q1),
                            ("real_%s_ratio_q3" % row, "%.3f" % q3),
                            ("real_%s_cpu_ratio" % row, "%.3f" % cratio),
                            ("real_%s_rss_mb" % row, "%.1f" % rss)]
                if target is not None:
                    results.append(("real_%s_verdict" % row, v))
        if "base" in runs[row]:
            me, base = runs[row]["this"], runs[row]["base"]
            for i, what in ((0, "wall"), (1, "cpu")):
                d = [a[i] - b[i] for a, b in zip(me, base)]
                print(FMT % ("%s: this - REAL_BASE, %s s" % (label, what),
                             "%+.3f" % quartiles(d)[0], "-", spread(d, "%+.3f"),
                             "%d/%d" % (sum(x < 0 for x in d), len(d)), "-", "info"))
                results.append(("real_%s_minus_base_%s_s" % (row, what), "%.4f" % quartiles(d)[0]))
    for k, v in results:
        print("RESULT %s %s" % (k, v))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench/real_report.py ROUNDS")
    report(sys.argv[1])
