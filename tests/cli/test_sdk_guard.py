#!/usr/bin/env python3
"""The 1.0 guard: a plugin built against the header as released with 1.0
keeps working with this smrules (docs/plugin-sdk.md#compatibility).

tests/fixtures/sdk-1.0/smrules/ is smrules.h as of 1.0, never edited.
tests/cli/plugins/sdk_guard.c calls every function of that table and fills
every struct, writing what it saw into its report; the Makefile builds it
against the 1.0 header (sdk_guard-1.0.so) and against the current one
(sdk_guard.so), and with -DGUARD_PROFILER as a profiler rule
(sdk_guard_prof*.so).  Here, through the CLI:

- the 1.0 builds and the current builds, run side by side by the current
  smrules, give identical results, reports and side files: a table
  reordered, a member removed or retyped, a struct changed in the middle
  or a constant renumbered makes the 1.0 build call or read the wrong
  thing (or be refused, or crash), and this fails;
- what they report is right where it can be checked by itself (parameters
  as given, a global step's round trip, the query's reductions of a scalar,
  the log line in the report's Warnings, the failure message, the side
  file, the profiler report as the rule set it);
- the headers themselves: every constant of the 1.0 header has the same
  value in the current one, and every struct of 1.0 (smrules_api first) is
  a prefix of today's, member by member, so the message names what moved.
"""

import json
import os
import re
import tempfile

import lib

BUILD = os.path.dirname(lib.SMRULES)
PLUGINS = os.path.join(BUILD, "tests", "plugins")
HEADER = os.path.join(lib.ROOT, "core", "include", "smrules", "smrules.h")
HEADER_1_0 = os.path.join(lib.FIXTURES, "sdk-1.0", "smrules", "smrules.h")
TRIAL = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
OTHER = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")
PROFILER = os.path.join(lib.FIXTURES, "profiler", "pytorch_real", "profiler-output")


def run_pair(tmp, tag, trial, old_so, new_so, params=""):
    """Both builds as two instances of one run; returns (result, out dir)."""
    rules = os.path.join(tmp, tag + ".yaml")
    with open(rules, "w") as f:
        f.write("rules:\n")
        for name, so in (("v1_0", old_so), ("current", new_so)):
            f.write("  - plugin: %s\n    name: %s\n" % (os.path.join(PLUGINS, so), name))
            if params:
                f.write("    parameters: {%s}\n" % params)
    out = os.path.join(tmp, "out-" + tag)
    return lib.run_json(["run", "--trial", lib.rel(trial), "--rules", rules, "--json",
                         "--fresh", "--output", out]), out


def both(sc, r):
    """The two instances' results, the name left out; None unless both ran."""
    got = {x["name"]: x for x in (r.obj or {}).get("rules", [])}
    if not sc.ok(set(got) == {"v1_0", "current"}, "both builds ran", json.dumps(sorted(got))):
        return None, None
    old, new = dict(got["v1_0"]), dict(got["current"])
    old.pop("name")
    new.pop("name")
    return old, new


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def same_files(sc, out, rel):
    """The file from both builds, byte for byte; result.json names the
    instance, which is left out."""
    a, b = read(os.path.join(out, "v1_0", rel)), read(os.path.join(out, "current", rel))
    if rel == "result.json" and a and b:
        a, b = json.loads(a), json.loads(b)
        a["result"].pop("name", None)
        b["result"].pop("name", None)
    sc.ok(a is not None and a == b, "%s is the same from both builds" % rel,
          "1.0: %r, current: %r" % (str(a)[:200], str(b)[:200]))
    return b


def first_difference(a, b, path=""):
    """Where two JSON values first differ (for the failure message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), path + "/" + str(k))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, "%s[%d]" % (path, i))
    return "%s: 1.0 build %s, current build %s" % (path or "/", lib.short(a), lib.short(b))


def check_tensor(c, tmp):
    params = "old_label: other, other: %s" % lib.rel(OTHER)
    r, out = run_pair(tmp, "tensor", TRIAL, "sdk_guard-1.0.so", "sdk_guard.so", params)
    sc = c.scope("tensor guard", r)
    if not sc.process():
        return
    sc.exit_code(r, [1])
    old, new = both(sc, r)
    if new is None:
        return
    sc.ok(old == new, "the 1.0 build's result is the current build's", first_difference(old, new))
    for f in ("report.json", "result.json"):
        same_files(sc, out, f)
    side = same_files(sc, out, "guard/side.json")

    # what the current build saw, checked by itself
    rep = new["report"]
    det = rep["Details"]
    steps = [s for t in lib.run_json(["inspect", "--trial", lib.rel(TRIAL), "--json", "--fresh"])
             .obj["tensors"] for s in t["steps"]]
    steps = sorted(set(steps))
    sc.eq("evaluated every saved step", det.get("invoked"), len(steps))
    sc.eq("triggered at the steps divisible by every (2)", new["triggered_steps"],
          [s for s in steps if s % 2 == 0])
    sc.eq("parameters as given and defaulted", det.get("settings"), {
        "threshold": 1.5, "every": 2, "scan_interval_us": 60000000, "flag": True,
        "label": "other", "colls": ["losses", "gradients"], "nums": [1.0, 2.5],
        "other_is_set": True, "nums_text": "1, 2.5", "py_str_100": "100.0", "py_str_3": "3"})
    sc.ok(det.get("other_tensor_names", 0) > 0, "open_trial read the other trial",
          str(det.get("other_tensor_names")))
    sc.eq("the warning it logged is in the report", rep.get("Warnings"),
          ["guard first saw step 0"])
    sc.eq("the side file", (side or b"").decode(), '{"what":"tensor","n":%d}' % len(steps))
    v = det["first_trigger"]["violations"][0]
    sc.eq("step_mode and global_step round trip", (v["global_step_rc"], v["global_step"]),
          (0, v["step"]))
    val = v.get("value", {})
    sc.eq("a float32 scalar loss", (val.get("dtype"), val.get("float32"), val.get("count")),
          (1, True, 1))
    loss = v.get(v["losses"][0], {})
    x = val.get("get0")
    sc.ok(isinstance(x, float) and loss.get("red", [None])[0] == x
          and loss["red"][1] == x and loss["red"][2] == x and loss["red"][3] == 0
          and loss.get("abs_mean") == abs(x) and val.get("max") == x,
          "one query's reductions of a scalar are its value (std 0)", json.dumps(loss)[:300])
    sc.eq("what was not asked is NaN", val.get("not_asked"), "nan")
    check_query_by_cli(sc, v)
    sc.eq("the raw JSON value", v.get("raw"), [1, {"a": 2}])

    r, out = run_pair(tmp, "fail", TRIAL, "sdk_guard-1.0.so", "sdk_guard.so", "fail_at: 6")
    sc = c.scope("tensor guard failing at step 6", r)
    if sc.process():
        old, new = both(sc, r)
        if new is not None:
            sc.eq("status Error", new["status"], "Error")
            sc.eq("its message", new["message"], "guard failed at step 6 as asked")
            sc.ok(old == new, "the same from the 1.0 build", first_difference(old, new))


REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2", "linf")


def check_query_by_cli(sc, v):
    """One query's statistics and reductions of a gradient, each as
    `smrules tensor` reads it on its own (a path that never calls the
    plugin API)."""
    name = "gradient/Sequential_0.weight"
    got = v.get(name, {})
    if not sc.ok(got.get("status") == 0, "the query read %s at step %d" % (name, v["step"]),
                 json.dumps(got)[:200]):
        return
    base = ["tensor", "--trial", lib.rel(TRIAL), "--name", name, "--step", str(v["step"]),
            "--json", "--fresh"]
    want = []
    for r in REDUCTIONS:
        out = lib.run_json(base + ["--reduction", r]).obj or {}
        want.append(out.get("reduction", {}).get("value"))
    sc.eq("red[] are smrules tensor --reduction's", got.get("red"), want)
    out = lib.run_json(base + ["--reduction", "mean", "--abs"]).obj or {}
    sc.eq("abs_red[MEAN] is smrules tensor --reduction mean --abs's", got.get("abs_mean"),
          out.get("reduction", {}).get("value"))
    st = out.get("stats", {})
    counts, stats = got.get("counts", []), got.get("stats", [])
    sc.eq("the statistics are smrules tensor's",
          (stats[0], stats[1], stats[2], stats[3], stats[5], counts[2], counts[5]),
          (st.get("min"), st.get("max"), st.get("sum"), st.get("mean"), st.get("l2"),
           st.get("nan"), st.get("zeros")))


def check_profiler(c, tmp):
    r, out = run_pair(tmp, "profiler", PROFILER, "sdk_guard_prof-1.0.so", "sdk_guard_prof.so")
    sc = c.scope("profiler guard", r)
    if not sc.process():
        return
    sc.exit_code(r, [1])
    old, new = both(sc, r)
    if new is None:
        return
    sc.ok(old == new, "the 1.0 build's result is the current build's", first_difference(old, new))
    for f in ("report.json", "result.json", "guard/side.json"):
        same_files(sc, out, f)
    rep = new["report"]
    det = rep["Details"]
    windows = det.get("invoked", 0)
    sc.at_least(2, windows, "windows")
    evens = (windows + 1) // 2
    sc.eq("the report's counters as the rule set them",
          (rep["RuleTriggered"], rep["Violations"], rep["Datapoints"]),
          (evens, 10 * windows, 100 * windows))
    sc.eq("RuleParameters as the rule set it", rep["RuleParameters"], "guard:profiler")
    w = det.get("window", {})
    sc.eq("the last window's index", w.get("bounds", [None])[0], windows - 1)
    sc.ok(w.get("system_events", 0) > 0 and w.get("framework_events", 0) > 0,
          "system and framework events in the last window", json.dumps(w)[:300])
    arg = w.get("first_event_with_args", {})
    sc.ok(arg.get("arg_type", 0) > 0 and arg.get("missing_type") == 0,
          "fw_arg finds a key the event has, and not one it lacks", json.dumps(arg)[:300])
    sc.ok(det.get("nodes") == ["algo-1"] and det.get("cpus"), "profiler_names",
          json.dumps([det.get("nodes"), det.get("cpus")]))


# ---------------------------------------------------------------- headers

def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def constants(text):
    """#define SMRULES_X <value> -> value text, normalised."""
    out = {}
    for m in re.finditer(r"^#define (SMRULES_\w+)[ \t]+(.+)$", strip_comments(text), re.M):
        out[m.group(1)] = " ".join(m.group(2).split())
    enums = re.search(r"enum \{([^}]*)\}", strip_comments(text))
    for i, name in enumerate(n.strip() for n in (enums.group(1) if enums else "").split(",")):
        if name:
            out[name] = str(i)
    return out


def struct_members(text):
    """typedef struct NAME { ... } -> [member names, in order]."""
    out = {}
    for m in re.finditer(r"typedef struct (\w+) \{(.*?)\n\} \1;", strip_comments(text), re.S):
        names = []
        for decl in m.group(2).split(";"):
            decl = re.sub(r"__attribute__\(\(.*?\)\)\s*$", "", " ".join(decl.split()))
            if not decl:
                continue
            fn = re.search(r"\(\*(\w+)\)", decl)
            if fn:
                names.append(fn.group(1))
                continue
            for part in decl.split(","):
                word = re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", part.strip())
                if word:
                    names.append(word[0])
        out[m.group(1)] = names
    return out


def check_headers(c):
    with open(HEADER_1_0) as f:
        old = f.read()
    with open(HEADER) as f:
        new = f.read()
    oc, nc = constants(old), constants(new)
    c.at_least(60, oc, "constants of the 1.0 header")
    for name, value in sorted(oc.items()):
        c.ok(nc.get(name) == value, "%s keeps its 1.0 value" % name,
             "1.0: %s, now: %s" % (value, nc.get(name)))
    os_, ns = struct_members(old), struct_members(new)
    c.at_least(12, os_, "structs of the 1.0 header")
    c.at_least(52, os_.get("smrules_api", []), "members of the 1.0 smrules_api")
    for name, members in sorted(os_.items()):
        now = ns.get(name, [])
        moved = [(i, a, b) for i, (a, b) in enumerate(zip(members, now)) if a != b]
        c.ok(now[:len(members)] == members, "%s: the 1.0 members are a prefix of today's" % name,
             "first change at member %d: 1.0 %s, now %s" % moved[0] if moved else
             "%d members in 1.0, %d now" % (len(members), len(now)))


def main():
    c = lib.Checker("sdk_guard")
    check_headers(c)
    missing = [so for so in ("sdk_guard.so", "sdk_guard-1.0.so", "sdk_guard_prof.so",
                             "sdk_guard_prof-1.0.so")
               if not os.path.isfile(os.path.join(PLUGINS, so))]
    if c.ok(not missing, "the guard plugins are built (make unit)", " ".join(missing)):
        with tempfile.TemporaryDirectory() as tmp:
            check_tensor(c, tmp)
            check_profiler(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
