#!/usr/bin/env python3
"""What ProfilerReport's HTML says, read as text, on every case of
tests/fixtures/profiler (default windows and --sagemaker-windows):

- shares are never negative and add up: the job summary's phases (initialization,
  training loop, finalization) are >= 0 and sum to 100 %, durations are
  >= 0, "others" is never below 0 %;
- the StepOutlier sentence counts the outliers its tables show, and the
  outlier steps are listed as plain numbers (no quotes or brackets);
- counts read "1 time" / "N times" (never "1 times" or "time(s)");
- the BatchSize sentence only reads like a finding when BatchSize triggered;
- `run` prints where the HTML report was written (stdout with the table,
  stderr with --json, whose stdout stays one JSON document), and the table
  says that profiler rules count windows (not said for tensor rules).
"""

import collections
import html as htmlmod
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


# How often each conditional check must have run over the profiler
# fixtures (two runs each: default and SageMaker windows); counted on the
# fixtures as they are, so a report that stops saying one of these fails.
GUARDS = {"reports": 22, "job phase rows": 1, '"others" shares': 1, "StepOutlier sentences": 1,
          "StepOutlier table rows": 1, "outlier step lists": 1, "BatchSize non-findings": 1}


def text_of(path):
    t = open(path, encoding="utf-8").read()
    t = re.sub(r"<svg.*?</svg>", " ", t, flags=re.S)
    t = re.sub(r"<style.*?</style>", " ", t, flags=re.S)
    t = re.sub(r"</(p|tr|h2|h3|table)>", "\n", t)
    t = re.sub(r"</td>", " | ", t)
    t = htmlmod.unescape(re.sub(r"<[^>]+>", " ", t))
    return "\n".join(re.sub(r"\s+", " ", line).strip() for line in t.splitlines() if line.strip())


def job_rows(text):
    rows = {}
    for name in ("whole job", "initialization", "training loop", "finalization"):
        m = re.search(r"^%s \| [^|]* \| (-?[\d.]+) \| (-?[\d.]+) \|" % name, text, re.M)
        if m:
            rows[name] = (float(m.group(1)), float(m.group(2)))
    return rows


def check_text(sc, text, res, seen):
    """The checks of one report; `seen` counts which conditional checks ran
    (main requires each at least once over the fixtures)."""
    rows = job_rows(text)
    if "initialization" in rows:
        seen["job phase rows"] += 1
        parts = [rows[k] for k in ("initialization", "training loop", "finalization")]
        sc.ok(all(d >= 0 and s >= 0 for d, s in parts), "job phases non-negative", str(rows))
        sc.ok(abs(sum(s for _, s in parts) - 100) <= 0.2, "job phase shares add up to 100 %",
              str(rows))
    m = re.search(r'"others" is (-?[\d.]+) %', text) or \
        re.search(r'(-?[\d.]+) % of the time between the first and the last step', text)
    if m:
        seen['"others" shares'] += 1
        sc.ok(float(m.group(1)) >= 0, '"others" is not negative', m.group(0))
    sc.ok("time(s)" not in text and not re.search(r"\b1 times\b", text), "1 time / N times",
          (re.findall(r".{40}(?:time\(s\)|\b1 times).{10}", text) or [""])[0])
    m = re.search(r"StepOutlier found (\d+) outlier steps? among", text)
    table = re.findall(r"^[^|\n]+ \| [^|\n]* \|(?: [-\d.]+ \|){7} (\d+) \|", text, re.M)
    if m:
        seen["StepOutlier sentences"] += 1
        seen["StepOutlier table rows"] += len(table)
        sc.eq("StepOutlier sentence counts the table's outliers", int(m.group(1)),
              sum(int(x) for x in table))
    for line in re.findall(r"Outlier steps: (.*)", text):
        seen["outlier step lists"] += 1
        sc.ok(re.fullmatch(r"none|\d+(, \d+)*(, …)?", line.strip()) is not None,
              "outlier steps as plain numbers", line[:80])
    bs = next((r for r in res if r.get("name") == "ProfilerReport"), {})
    trig = lib.dig(bs, "report.Details.subrules.BatchSize.RuleTriggered")
    if "BatchSize triggered" in text:
        seen["BatchSize findings"] += 1
        sc.ok(trig is None or trig > 0, "BatchSize finding only when it triggered")
    if trig == 0:
        seen["BatchSize non-findings"] += 1
        sc.ok("BatchSize did not trigger" in text, "BatchSize: says it did not trigger")


def main():
    c = lib.Checker("test_profiler_report_text")
    with tempfile.TemporaryDirectory(prefix="smrules-rtext-") as tmp:
        rules = os.path.join(tmp, "r.yaml")
        with open(rules, "w") as f:
            f.write("rules:\n  - rule: ProfilerReport\n")
        seen = collections.Counter()
        cases = c.cases("profiler")
        for case, path in cases:
            for extra in ([], ["--sagemaker-windows"]):
                out = os.path.join(tmp, case + "".join(extra))
                r = lib.run_json(["run", "--trial", path, "--rules", rules, "--json", "--fresh",
                                  "--output", out] + extra, timeout=max(lib.TIMEOUT, 300))
                sc = c.scope("%s%s" % (case, " " + extra[0] if extra else ""), r)
                if not sc.process(r):
                    continue
                html_path = os.path.join(out, "ProfilerReport", "profiler-output",
                                         "profiler-report.html")
                sc.ok("ProfilerReport: HTML report written to %s" % html_path in r.err,
                      "--json: the report's path on stderr", r.err[-300:])
                if sc.ok(os.path.isfile(html_path), "report written"):
                    seen["reports"] += 1
                    check_text(sc, text_of(html_path), (r.obj or {}).get("rules", []), seen)
        # each conditional check ran on some fixture: none can pass empty
        if not lib.CASE_FILTER:
            for what, n in GUARDS.items():
                c.at_least(n, seen[what], what)
        # the table: path on stdout, and the note about windows
        case_path = lib.cases("profiler")[0][1]
        out = os.path.join(tmp, "table")
        rc, so, se = lib.run(["run", "--trial", case_path, "--rules", rules, "--fresh",
                              "--output", out], timeout=max(lib.TIMEOUT, 300))
        html_path = os.path.join(out, "ProfilerReport", "profiler-output", "profiler-report.html")
        c.ok(("ProfilerReport: HTML report written to %s\n" % html_path) in so,
             "table: report path on stdout", so[-400:])
        c.ok("Profiler rules count time windows, not steps" in so, "table: windows note")
        rc, so, se = lib.run(["run", "--trial", os.path.join(lib.FIXTURES, "trials",
                                                             "healthy_mlp_digits"),
                              "--fresh", "--output", os.path.join(tmp, "tensor")])
        c.ok(rc == 0 and "time windows" not in so and "HTML report" not in so,
             "tensor rules: no windows note, no report path", so[-300:])
    c.finish()


if __name__ == "__main__":
    main()
