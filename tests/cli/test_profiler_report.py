#!/usr/bin/env python3
"""ProfilerReport (docs/profiler-report.md) against every case of tests/fixtures/profiler:

- EXPECT.json `profiler_report`: how the run ends (ending_step, whether the
  condition was met at the end), per sub-rule RuleTriggered, Violations,
  Datapoints and windows whose condition was met, the triggered and
  condition-met lists, and the report files written;
- sub-rule parameters passed as "<Rule>_<param>" (docs/profiler-report.md#parameters): with the
  non-default parameter sets of `expect`, each sub-rule ends as its own run
  does (except MaxInitializationTime, whose clock never advances under
  ProfilerReport, and runs that change the window length);
- parameter errors (unknown rule, unknown parameter, bad value);
- the HTML report: one self-contained file (no external references, no
  scripts), every <svg> chart draws at least one shape of non-zero size,
  and it renders in headless Chromium to a screenshot that is not blank
  (skipped, with a line saying so, when chromium is not installed).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib
from html.parser import HTMLParser

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import test_profiler_framework as tpf  # noqa: E402

SUB_RULES = ("CPUBottleneck", "IOBottleneck", "LowGPUUtilization", "StepOutlier",
             "GPUMemoryIncrease", "BatchSize", "MaxInitializationTime", "LoadBalancing",
             "OverallSystemUsage", "Dataloader", "OverallFrameworkMetrics")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def report_dir(out):
    return os.path.join(out, "ProfilerReport", "profiler-output")


def run_report(case_dir, tmp, params=None, name="ProfilerReport"):
    out = os.path.join(tmp, "out")
    return tpf.run_rules(case_dir, [(name, "ProfilerReport", params or {})], tmp), out


# ------------------------------------------------------- profiler_report

def check_expectations(sc, res, out, exp):
    rep = (res or {}).get("report") or {}
    det = rep.get("Details") or {}
    met = exp["rule_condition_met"]
    sc.eq("evaluated windows (ending_step)", res.get("evaluated_steps"), exp["ending_step"])
    sc.eq("Details.ending_step", det.get("ending_step"), exp["ending_step"])
    sc.eq("Details.ended_with", det.get("ended_with"), exp["ended_with"])
    sc.eq("status", res.get("status"), "IssuesFound" if met else "NoIssuesFound")
    # the end-of-rule trigger is reported on the last evaluated window
    sc.eq("triggered_steps", res.get("triggered_steps"),
          [exp["ending_step"] - 1] if met else [])
    sc.eq("triggered", det.get("triggered"), exp["triggered"])
    sc.eq("condition_met", det.get("condition_met"), exp["condition_met"])
    subs = det.get("subrules") or {}
    files = os.path.join(report_dir(out), "profiler-reports")
    listed = sorted(os.listdir(files)) if os.path.isdir(files) else []
    sc.eq("report files", listed, exp["report_files"])
    sc.eq("Details.report_files", det.get("report_files"), exp["report_files"])
    for rule, want in exp["subrules"].items():
        got = subs.get(rule) or {}
        for key in ("RuleTriggered", "Violations", "Datapoints", "windows_condition_met"):
            sc.eq("%s %s" % (rule, key), got.get(key), want[key])
        path = os.path.join(files, rule + ".json")
        try:
            filed = lib.load_json(path)
        except (OSError, ValueError) as e:
            sc.ok(False, "%s.json readable" % rule, str(e))
            continue
        for key in ("RuleTriggered", "Violations", "Datapoints"):
            sc.eq("%s.json %s" % (rule, key), filed.get(key), want[key])
        sc.ok(isinstance(filed.get("Details"), dict) and isinstance(filed.get("RuleParameters"), str),
              "%s.json has Details and RuleParameters" % rule)


# ------------------------------------------------ <Rule>_<param> overrides

def override_params(expect):
    """ProfilerReport parameters from each rule's non-default run, and the
    rules whose outcome they must reproduce."""
    params, rules = {}, {}
    for rule in SUB_RULES:
        runs = expect.get(rule) or []
        if len(runs) < 2 or rule == "MaxInitializationTime":
            continue
        p = runs[1]["params"]
        if "scan_interval_us" in p:
            continue
        # the oracle called the rule classes directly; SageMaker's
        # validators (and smrules) reject percentiles above 100
        if any("threshold" in k and isinstance(v, (int, float)) and v > 100
               and rule != "LoadBalancing" for k, v in p.items()):
            continue
        for k, v in p.items():
            params["%s_%s" % (rule, k)] = v
        rules[rule] = runs[1]
    return params, rules


def check_overrides(c, name, path, expect, tmp):
    params, rules = override_params(expect)
    if not params:
        return
    r, out = run_report(path, tmp, params)
    sc = c.scope("%s overrides" % name, r)
    if not sc.process(r):
        return
    res = ((r.obj or {}).get("rules") or [{}])[0]
    subs = ((res.get("report") or {}).get("Details") or {}).get("subrules") or {}
    for rule, want in rules.items():
        got = subs.get(rule) or {}
        for key in ("RuleTriggered", "Violations", "Datapoints"):
            sc.eq("%s %s %s" % (rule, want["params"], key), got.get(key), want[key])
        sc.eq("%s windows_condition_met" % rule, got.get("windows_condition_met"),
              want["condition_met_count"])


def check_param_errors(c, path, tmp):
    bad = [({"Nope_threshold": 1}, "unknown rule"),
           ({"CPUBottleneck_nope": 1}, "unknown parameter"),
           ({"threshold": 1}, "no <Rule>_ prefix"),
           ({"CPUBottleneck_threshold": 150}, "percentile above 100"),
           ({"StepOutlier_stddev": -1}, "negative value")]
    for params, what in bad:
        r, _ = run_report(path, tmp, params)
        sc = c.scope("parameter error (%s)" % what, r)
        sc.process(r, want_json=False)
        sc.ok(r.rc not in (0, 1) and r.rc is not None and r.rc > 0, "rejected",
              "exit %s" % r.rc)
    r, _ = run_report(path, tmp, {"cpubottleneck_threshold": 40, "OverallSystemUsage_scan_interval_us": 1,
                                  "opt_out_telemetry": True})
    sc = c.scope("parameter aliases", r)
    if sc.process(r):
        res = ((r.obj or {}).get("rules") or [{}])[0]
        sc.ok(res.get("status") in ("IssuesFound", "NoIssuesFound"), "accepted",
              "status %s: %s" % (res.get("status"), res.get("message")))
        params = lib.load_json(os.path.join(report_dir(os.path.join(tmp, "out")), "profiler-reports",
                                            "CPUBottleneck.json")).get("RuleParameters", "")
        sc.ok(params.startswith("threshold:40"), "CPUBottleneck_threshold reached the sub-rule", params)


# ------------------------------------------------------------ the HTML

EXTERNAL = [
    (re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I), "http(s) src/href"),
    (re.compile(r"<script\b", re.I), "<script>"),
    (re.compile(r"@import", re.I), "@import"),
    (re.compile(r"url\(\s*['\"]?\s*(?:https?:)?//", re.I), "url(http...)"),
    (re.compile(r"<link\b", re.I), "<link>"),
    (re.compile(r"<iframe\b|<object\b|<embed\b", re.I), "embedded document"),
]

SHAPES = ("rect", "path", "circle", "polyline", "line", "polygon", "ellipse")


def _f(attrs, k):
    try:
        return float(attrs.get(k, "0"))
    except ValueError:
        return 0.0


def shape_has_size(tag, a):
    if tag == "rect":
        return _f(a, "width") > 0 and _f(a, "height") > 0
    if tag == "circle":
        return _f(a, "r") > 0
    if tag == "ellipse":
        return _f(a, "rx") > 0 and _f(a, "ry") > 0
    if tag == "path":
        return len(re.findall(r"[-\d.]+", a.get("d", ""))) >= 4
    if tag in ("polyline", "polygon"):
        return len(re.findall(r"[-\d.]+,[-\d.]+", a.get("points", ""))) >= 2
    return False


class SvgCollector(HTMLParser):
    """Per <svg>: its title and how many data shapes of non-zero size it
    draws (axis lines do not count)."""

    def __init__(self):
        super().__init__()
        self.charts, self.cur, self.in_title = [], None, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.cur = {"title": "", "shapes": 0}
            self.charts.append(self.cur)
        elif self.cur is not None and tag in SHAPES and tag != "line" and shape_has_size(tag, a):
            self.cur["shapes"] += 1
        elif self.cur is not None and tag == "title":
            self.in_title = True

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "svg":
            self.cur = None
        elif tag == "title":
            self.in_title = False

    def handle_data(self, data):
        if self.cur is not None and self.in_title and not self.cur["title"]:
            self.cur["title"] = data


def check_html(sc, html_path):
    try:
        with open(html_path, encoding="utf-8") as f:
            html = f.read()
    except OSError as e:
        sc.ok(False, "profiler-report.html exists", str(e))
        return None
    sc.ok(html.lstrip().lower().startswith("<!doctype html>"), "HTML document")
    for rx, what in EXTERNAL:
        m = rx.search(html)
        sc.ok(m is None, "no external reference (%s)" % what,
              m and html[max(0, m.start() - 40):m.end() + 40])
    p = SvgCollector()
    p.feed(html)
    sc.ok(len(p.charts) > 0, "has charts")
    empty = [ch["title"] for ch in p.charts if ch["shapes"] < 1]
    sc.ok(not empty, "every chart draws data", "empty: %s" % empty[:5])
    for sec in ("Training job summary", "System usage statistics", "Framework metrics summary",
                "Rules summary", "Step duration analysis", "GPU utilization analysis",
                "Workload balancing", "Data loading analysis", "Batch size", "CPU bottlenecks",
                "I/O bottlenecks", "GPU memory"):
        sc.ok(">%s<" % sec in html, "section '%s'" % sec)
    return len(p.charts)


# ------------------------------------------------------------ screenshot

def png_nonwhite(path, max_rows=1200):
    """(width, height, non-white pixels sampled in the first max_rows rows)
    of an 8-bit RGB/RGBA PNG (rows are unfiltered in order, so decoding
    stops early to stay fast in pure Python)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            depth, ctype = body[8], body[9]
            if depth != 8 or ctype not in (2, 6):
                raise ValueError("unsupported PNG (depth %d, colour type %d)" % (depth, ctype))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    count = 0
    for y in range(min(h, max_rows)):
        ft = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 255
        for x in range(0, stride, bpp * 4):  # every 4th pixel is enough
            if line[x] < 235 or line[x + 1] < 235 or line[x + 2] < 235:
                count += 1
        prev = line
    return w, h, count


def screenshot(html_path, tmp):
    png = os.path.join(tmp, "shot.png")
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", "--user-data-dir=" + os.path.join(tmp, "chromium-profile"),
            "--screenshot=" + png, "--window-size=1280,4000", "file://" + html_path]
    try:
        p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "chromium timed out"
    if not os.path.isfile(png):
        return None, "no screenshot (exit %s): %s" % (p.returncode,
                                                       p.stderr.decode("utf-8", "replace")[-300:])
    return png, ""


def check_screenshot(sc, html_path, tmp):
    png, why = screenshot(html_path, tmp)
    if not sc.ok(png is not None, "chromium screenshot", why):
        return
    try:
        w, h, dark = png_nonwhite(png)
    except (ValueError, zlib.error) as e:
        sc.ok(False, "screenshot decodes", str(e))
        return
    sc.ok(w >= 1000 and h >= 1000, "screenshot size", "%dx%d" % (w, h))
    sc.ok(dark > 2000, "screenshot is not blank", "%d sampled non-white pixels" % dark)


# ------------------------------------------------------------------ main

def one_case(c, name, path):
    exp_all = lib.load_json(os.path.join(path, "EXPECT.json"))
    with tempfile.TemporaryDirectory() as tmp:
        r, out = run_report(path, tmp)
        sc = c.scope(name, r)
        if not sc.process(r):
            return
        res = ((r.obj or {}).get("rules") or [{}])[0]
        check_expectations(sc, res, out, exp_all["profiler_report"])
        html = os.path.join(report_dir(out), "profiler-report.html")
        check_html(sc, html)
        if CHROMIUM:
            check_screenshot(sc, html, tmp)
        check_overrides(c, name, path, exp_all["expect"], tmp)


def main():
    c = lib.Checker("test_profiler_report")
    cases = tpf.profiler_cases()
    c.ok(len(cases) > 0, "profiler fixtures exist", "none under %s" % tpf.fixture_root())
    if not CHROMIUM:
        print("SKIP headless Chromium rendering: no 'chromium' on PATH "
              "(install Debian's chromium package; .ci/deps.sh does)")
    for name, path in cases:  # sequential: the Checker is not thread-safe
        one_case(c, name, path)
    if cases:
        with tempfile.TemporaryDirectory() as tmp:
            check_param_errors(c, cases[0][1], tmp)
    c.finish()


if __name__ == "__main__":
    main()
