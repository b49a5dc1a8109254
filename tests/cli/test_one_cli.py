#!/usr/bin/env python3
"""One CLI: every command answers the same way.

  help       every command's --help (and -h) exits 0 with the help on stdout
             and nothing on stderr; `smrules help CMD` prints the same;
             `demo-trainer --help` too; `help NOSUCH` suggests a command
  options    a misspelt option gets "did you mean --trial?" and a pointer
             to --help, in a few lines (not the whole help), exit 2; an
             option missing its value says so; an unknown command gets the
             nearest one
  runhelp    run --help says --timeout and --profile work with a launched
             command, lists -j/--jobs and AWS_ENDPOINT_URL_S3
  widths     the run table's columns are as wide as their content (a TYPE
             longer than 26 characters, a long instance name), describe's
             columns never run into each other
  tensor     --mode in any case; a name never saved gets the nearest
             saved name; a step without the tensor names the nearest saved
             steps; --values of a 64x64 tensor is summarised as NumPy does
             (edge items around "...", 8 digits after the point), the
             printed numbers being the values --json gives; --steps all
             prints a scalar (or a reduction) at every saved step, as a
             table, CSV or JSON, equal to one `tensor --json` per step
"""

import csv
import io
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

COMMANDS = ("run", "validate", "list", "describe", "inspect", "tensor", "monitor")
EXPLODING = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")


def run(args):
    return lib.run_json(args)


def test_help(c):
    for cmd in COMMANDS:
        for flag in ("--help", "-h"):
            r = run([cmd, flag])
            sc = c.scope("help: %s %s" % (cmd, flag), r)
            sc.eq("exit 0", r.rc, 0)
            sc.ok(r.out.startswith("usage: smrules %s" % cmd), "usage on stdout", r.out[:80])
            sc.eq("nothing on stderr", r.err, "")
        direct = run([cmd, "--help"])
        r = run(["help", cmd])
        sc = c.scope("help: smrules help %s" % cmd, r)
        sc.eq("exit 0", r.rc, 0)
        sc.eq("the same text as %s --help" % cmd, r.out, direct.out)
    r = run(["help"])
    c.scope("help: smrules help", r).ok(r.rc == 0 and "commands:" in r.out, "general help")
    r = run(["help", "tensr"])
    sc = c.scope("help: smrules help tensr", r)
    sc.eq("exit 2", r.rc, 2)
    sc.ok("did you mean tensor?" in r.err, "suggests tensor", r.err)
    demo = os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer")
    p = subprocess.run([demo, "--help"], capture_output=True, text=True, timeout=60)
    sc = c.scope("help: demo-trainer --help")
    sc.eq("exit 0", p.returncode, 0)
    sc.ok(p.stdout.startswith("usage: demo-trainer"), "usage on stdout", p.stdout[:80])
    sc.eq("nothing on stderr", p.stderr, "")


def test_options(c):
    cases = [
        (["run", "--trail", EXPLODING], "unknown option '--trail'; did you mean --trial?",
         "run"),
        (["run", "--trial", EXPLODING, "--jsno"], "did you mean --json?", "run"),
        (["tensor", "--trial", EXPLODING, "--nmae", "x", "--step", "0"],
         "did you mean --name?", "tensor"),
        (["inspect", "--trail", EXPLODING], "did you mean --trial?", "inspect"),
        (["monitor", "--outt", "x"], "did you mean --out?", "monitor"),
        (["run", "--trial"], "option '--trial' needs a value", "run"),
        (["tensor", "--trial", EXPLODING, "-s"], "option '-s' needs a value", "tensor"),
        (["run", "--json=1", "--trial", EXPLODING], "option '--json' takes no value", "run"),
    ]
    for args, want, cmd in cases:
        r = run(args)
        sc = c.scope("options: %s" % " ".join(args[:2] + args[-1:]), r)
        sc.eq("exit 2", r.rc, 2)
        sc.ok(want in r.err, "says: %s" % want, r.err)
        sc.ok("'smrules %s --help' lists the options" % cmd in r.err, "points at --help", r.err)
        sc.ok(len(r.err.splitlines()) <= 3, "a few lines, not the help",
              "%d lines" % len(r.err.splitlines()))
        sc.eq("nothing on stdout", r.out, "")
    r = run(["inspec", "--trial", EXPLODING])
    sc = c.scope("options: unknown command", r)
    sc.eq("exit 2", r.rc, 2)
    sc.ok("unknown command 'inspec'; did you mean inspect?" in r.err, "suggests inspect", r.err)


def test_runhelp(c):
    r = run(["run", "--help"])
    sc = c.scope("runhelp", r)
    text = r.out
    sc.ok(re.search(r"--timeout S\s+with --watch or a command", text), "--timeout with a command",
          text)
    sc.ok(re.search(r"--profile DIR\s+with --watch or a command", text),
          "--profile with a command")
    sc.ok(re.search(r"-j N, --jobs N", text), "-j and --jobs")
    sc.ok("AWS_ENDPOINT_URL_S3" in text, "AWS_ENDPOINT_URL_S3")
    sc.ok("124 --timeout" in text, "exit status 124")


def columns(header, names):
    """The start of each named column in a header line."""
    return [header.index(n) for n in names]


def test_widths(c, tmp):
    rules = os.path.join(tmp, "wide.yaml")
    long_name = "ExplodingTensorInstanceWithAVeryLongName"
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: ExplodingTensor\n    name: %s\n"
                "  - rule: FeatureImportanceOverweight\n" % long_name)
    r = run(["run", "--trial", EXPLODING, "--rules", rules, "--fresh",
             "--output", os.path.join(tmp, "out")])
    sc = c.scope("widths: run table", r)
    if not sc.process(want_json=False):
        return
    lines = r.out.splitlines()
    head = [ln for ln in lines if ln.startswith("RULE")]
    if not sc.ok(len(head) == 1, "one header", r.out):
        return
    at = columns(head[0], ("TYPE", "STATUS", "EVALUATED"))
    rows = [ln for ln in lines if ln.startswith((long_name, "FeatureImportanceOverweight"))]
    sc.eq("two rows", len(rows), 2)
    for row in rows:
        name, typ = row.split()[:2]
        sc.eq("%s: TYPE starts under TYPE" % name, row.index(" " + typ, len(name)) + 1, at[0])
        sc.ok(row[at[1] - 1] == " " and row[at[1]:].split()[0] in
              ("IssuesFound", "NoIssuesFound", "NoData", "Error", "InProgress"),
              "%s: STATUS starts under STATUS" % name, row)
    r = run(["describe", "LossNotDecreasing"])
    sc = c.scope("widths: describe", r)
    lines = r.out.splitlines()
    head = [ln for ln in lines if ln.strip().startswith("NAME")]
    if not sc.ok(len(head) == 1, "one header", r.out):
        return
    at = columns(head[0], ("TYPE", "DEFAULT", "VALID", "DESCRIPTION"))
    rows = lines[lines.index(head[0]) + 1:]
    checked = 0
    for row in rows:
        if not row.strip() or row.startswith("     "):
            continue  # an alias line
        for col in at:
            sc.ok(row[col - 2:col] == "  ", "two spaces before column %d" % col, row)
        checked += 1
    sc.ok(checked >= 7, "every parameter row checked", "%d" % checked)


def floats_in(text):
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d*(?:e[-+]\d+)?|[-+]?\d+e[-+]\d+", text)]


def test_tensor(c):
    base = ["tensor", "--trial", EXPLODING, "--fresh"]
    upper = run(base + ["--name", "MSELoss_output_0", "--step", "4", "--mode", "TRAIN", "--json"])
    for mode in ("train", "Train"):
        r = run(base + ["--name", "MSELoss_output_0", "--step", "4", "--mode", mode, "--json"])
        sc = c.scope("tensor: --mode %s" % mode, r)
        sc.eq("exit 0", r.rc, 0)
        sc.eq("the same value as --mode TRAIN", r.obj, upper.obj)
    r = run(base + ["--name", "MSELoss_output", "--step", "4"])
    sc = c.scope("tensor: a name never saved", r)
    sc.eq("exit 4", r.rc, 4)
    sc.ok("did you mean 'MSELoss_output_0'?" in r.err, "suggests the saved name", r.err)
    r = run(base + ["--name", "MSELoss_output", "--step", "4", "--json"])
    sc = c.scope("tensor: a name never saved, --json", r)
    sc.ok("did you mean 'MSELoss_output_0'?" in (r.error_obj().get("message") or ""),
          "the JSON error says it too", r.out)
    r = run(base + ["--name", "gradient/Sequential_0.bias", "--step", "21"])
    sc = c.scope("tensor: a step never saved", r)
    sc.eq("exit 4", r.rc, 4)
    sc.ok("nearest saved steps: 20 and 22 (13 saved, 0..23)" in r.err or
          "nearest saved steps: 20 (11 saved, 0..20)" in r.err, "names the nearest steps", r.err)
    r = run(base + ["--name", "gradient/Sequential_0.bias", "--step", "22"])
    sc = c.scope("tensor: a step without this tensor", r)
    sc.ok("nearest saved steps: 20 (11 saved, 0..20)" in r.err, "names the nearest step", r.err)
    r = run(base + ["--name", "MSELoss_output_0", "--step", "5", "--mode", "train"])
    sc = c.scope("tensor: a TRAIN step never saved", r)
    sc.ok("nearest saved TRAIN steps: 4 and 6 (11 saved, 0..20)" in r.err,
          "names the nearest TRAIN steps", r.err)

    # --values of 64x64: summarised, the numbers those of --json
    args = base + ["--name", "Sequential_0.weight", "--step", "0", "--values"]
    table, full = run(args), run(args + ["--json"])
    sc = c.scope("tensor: --values of 64x64", table)
    if sc.ok(table.rc == 0 and full.rc == 0, "exit 0") and \
            sc.ok("\nvalues\n" in table.out, "a values block", table.out[-300:]):
        text = table.out[table.out.index("\nvalues\n") + 8:]
        rows = text.strip().split("\n [")
        sc.eq("rows shown: 3 and 3", len(rows), 6)
        sc.ok("\n ...\n" in text, "'...' between them", text[:300])
        sc.ok(len(text.splitlines()) < 20, "a screenful", "%d lines" % len(text.splitlines()))
        sc.ok(all(len(x.split(".")[-1]) <= 8 for x in re.findall(r"\d+\.\d+", text)),
              "at most 8 digits after the point")
        got = floats_in(text)
        vals = full.obj["values"]
        want = []
        for r_ in (0, 1, 2, 61, 62, 63):
            for k in (0, 1, 2, 61, 62, 63):
                want.append(vals[r_ * 64 + k])
        sc.eq("36 numbers", len(got), 36)
        sc.ok(len(got) == 36 and all(abs(g - w) <= 5e-9 + 1e-8 * abs(w)
                                     for g, w in zip(got, want)),
              "the edge items, row by row, as --json gives them", "%s vs %s" % (got[:4], want[:4]))
        sc.ok(text.count("...") == 7, "one '...' per row and one between rows",
              "%d" % text.count("..."))
    r = run(base + ["--name", "Sequential_0.weight", "--step", "0", "--all-values"])
    sc = c.scope("tensor: --all-values", r)
    sc.ok("..." not in r.out, "no summary")
    sc.eq("every element", len(floats_in(r.out[r.out.find("\nvalues\n"):])), 4096)

    # --steps all
    insp = run(["inspect", "--trial", EXPLODING, "--fresh", "--json"])
    steps = [t for t in insp.obj["tensors"] if t["name"] == "MSELoss_output_0"][0]["steps"]
    one = {}
    for s in steps:
        o = run(base + ["--name", "MSELoss_output_0", "--step", str(s), "--values", "--json"]).obj
        one[s] = (o["mode"], o["mode_step"], o["values"][0] if isinstance(o["values"], list)
                  else o["values"])
    r = run(base + ["--name", "MSELoss_output_0", "--steps", "all", "--csv"])
    sc = c.scope("tensor: --steps all --csv", r)
    sc.eq("exit 0", r.rc, 0)
    got = list(csv.DictReader(io.StringIO(r.out)))
    sc.eq("one row per saved step", [int(x["step"]) for x in got], steps)

    def same(a, b):
        if isinstance(b, str):
            return a == b
        return float(a) == b
    sc.ok(all(x["mode"] == one[int(x["step"])][0] and int(x["mode_step"]) == one[int(x["step"])][1]
              and same(x["value"].lower().replace("infinity", "inf"), one[int(x["step"])][2])
              for x in got), "each value as `tensor --json` at that step", r.out[:300])
    r = run(base + ["--name", "MSELoss_output_0", "--steps", "all"])
    sc = c.scope("tensor: --steps all (table)", r)
    sc.eq("exit 0", r.rc, 0)
    sc.ok(r.out.startswith("    STEP  MODE     MODE_STEP  VALUE\n"), "header", r.out[:80])
    sc.eq("rows", len(r.out.splitlines()) - 1, len(steps))
    r = run(base + ["--name", "MSELoss_output_0", "--steps", "all", "--mode", "eval", "--json"])
    sc = c.scope("tensor: --steps all --mode eval --json", r)
    sc.eq("the EVAL steps", [(x["step"], x["mode_step"]) for x in (r.obj or {}).get("steps", [])],
          [(22, 0), (23, 1)])
    r = run(base + ["--name", "Sequential_0.weight", "--steps", "all", "--reduction", "l2",
                    "--json"])
    sc = c.scope("tensor: --steps all --reduction l2", r)
    red = [x["value"] for x in (r.obj or {}).get("steps", [])]
    sc.eq("one per step", len(red), 13)
    o = run(base + ["--name", "Sequential_0.weight", "--step", "8", "--reduction", "l2",
                    "--json"]).obj
    sc.ok(len(red) == 13 and red[4] == o["reduction"]["value"], "step 8 as tensor --reduction",
          "%s vs %s" % (red[4:5], o["reduction"]["value"]))
    r = run(base + ["--name", "Sequential_0.weight", "--steps", "all"])
    sc = c.scope("tensor: --steps all of a matrix", r)
    sc.eq("exit 2", r.rc, 2)
    sc.ok("add --reduction R" in r.err, "says to add a reduction", r.err)
    sc.eq("no table", r.out, "")
    r = run(base + ["--name", "x", "--steps", "some"])
    c.scope("tensor: --steps some", r).eq("exit 2", r.rc, 2)


def main():
    c = lib.Checker("test_one_cli")
    with tempfile.TemporaryDirectory(prefix="smrules-onecli-") as tmp:
        for fn in (test_help, test_options, test_runhelp, test_tensor):
            fn(c)
        test_widths(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
