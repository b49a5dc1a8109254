#!/usr/bin/env python3
"""Custom rules end to end through the CLI:

- the mission's rule, "fire when the mean absolute value of any tensor of the
  gradients collection exceeds threshold", as a Lua script
  (rules/gradient_mean_abs.lua) and as an out-of-tree C plugin built here
  against the *installed* SDK (make install + pkg-config --cflags --libs:
  smrules.h, rulekit.h and libsmrules-rulekit.a), fires where
  the data says on the gradient trials, and both give identical results;
- the Lua sandbox: io, os, require, bytecode, a memory bomb and an endless
  loop each end as that rule's Error with a clear message while the other
  rules of the same run finish normally;
- configuration errors: one clear message with line:column, exit 2.
"""

import json
import math
import os
import shutil
import subprocess
import tempfile

import lib

TRIALS = ["exploding_mse_high_lr", "vanishing_gradient_sigmoid", "healthy_mlp_digits",
          "two_workers_ddp"]
THRESHOLDS = [1.0, 1e-3]


def install_sdk(c, tmp):
    """make install into tmp/prefix; build the example plugin with pkg-config."""
    prefix = os.path.join(tmp, "prefix")
    build = os.path.basename(os.path.dirname(lib.SMRULES))
    r = subprocess.run(["make", "-s", "install", "PREFIX=" + prefix, "BUILD=" + build]
                       + (["SAN=1"] if build == "build-san" else []),
                       cwd=lib.ROOT, capture_output=True, text=True, timeout=600)
    if not c.ok(r.returncode == 0, "make install", r.stderr[-800:]):
        return None
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "smrules"], env=env,
                           capture_output=True, text=True).stdout.split()
    c.ok(any(f.endswith(os.path.join(prefix, "include")) for f in flags),
         "pkg-config --cflags smrules points at the installed header", " ".join(flags))
    so = os.path.join(tmp, "gradient_mean_abs.so")
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                        "-o", so, os.path.join(lib.ROOT, "examples/plugin/gradient_mean_abs.c")]
                       + flags, capture_output=True, text=True, timeout=120)
    if not c.ok(r.returncode == 0, "out-of-tree plugin builds against the installed SDK",
                r.stderr[-800:]):
        return None
    return so


def expected_triggers(trial, threshold):
    """Steps where some gradients tensor has mean |x| > threshold, computed
    from `smrules tensor` answers (an independent path through the reader)."""
    r = lib.run_json(["inspect", "--trial", trial, "--json", "--fresh"])
    info = r.obj
    grads = info["collections"].get("gradients", [])
    steps = {t["name"]: t["steps"] for t in info["tensors"]}
    fired = set()
    for name in grads:
        for g in steps.get(name, []):
            v = lib.run_json(["tensor", "--trial", trial, "--name", name, "--step", str(g),
                              "--reduction", "mean", "--abs", "--json", "--fresh"]).obj
            m = v["reduction"]["value"] if v and "reduction" in v else None
            if m is not None and not math.isnan(m) and m > threshold:
                fired.add(g)
    return sorted(fired)


def run_rules(trial, yaml_text, tmp, extra=()):
    path = os.path.join(tmp, "rules.yaml")
    with open(path, "w") as f:
        f.write(yaml_text)
    return lib.run_json(["run", "--trial", trial, "--rules", path, "--json", "--fresh",
                         "--output", os.path.join(tmp, "out")] + list(extra))


def by_name(obj):
    return {r["name"]: r for r in (obj or {}).get("rules", [])}


def check_parity(c, tmp, so):
    lua = os.path.join(lib.ROOT, "rules", "gradient_mean_abs.lua")
    for name in TRIALS:
        trial = lib.rel(os.path.join(lib.FIXTURES, "trials", name))
        for th in THRESHOLDS:
            yaml_text = ("rules:\n"
                         "  - lua: %s\n    name: lua\n    parameters: {threshold: %r}\n"
                         "  - plugin: %s\n    name: c\n    parameters: {threshold: %r}\n"
                         % (lua, th, so, th))
            r = run_rules(trial, yaml_text, tmp)
            sc = c.scope("%s threshold %g" % (name, th), r)
            if not sc.process():
                continue
            got = by_name(r.obj)
            want = expected_triggers(trial, th)
            for rule in ("lua", "c"):
                sc.eq("%s status" % rule, got[rule]["status"],
                      "IssuesFound" if want else "NoIssuesFound")
                sc.eq("%s triggered_steps" % rule, got[rule]["triggered_steps"], want)
            same = {k: got["lua"][k] == got["c"][k]
                    for k in ("triggered_steps", "evaluated_steps", "skipped_steps")}
            sc.ok(all(same.values()), "Lua and C plugin agree", json.dumps(same))
            lv = got["lua"]["report"]["Details"].get("last_trigger")
            cv = got["c"]["report"]["Details"].get("last_trigger")
            sc.eq("same violations at the last trigger", lv, cv)


SANDBOX = {
    "io": "function invoke_at_step(s) io.open('/etc/passwd') return false end",
    "os": "function invoke_at_step(s) os.execute('touch /tmp/smrules-pwned') return false end",
    "require": "function invoke_at_step(s) require('os') return false end",
    "bytecode": ("function invoke_at_step(s) local f = load('\\27Lua\\84\\0', 'x', 'b')\n"
                 "  if f then f() end error(select(2, load('\\27Lua\\84\\0'))) end"),
    "memory": "function invoke_at_step(s) local t = {} for i = 1, 64 do t[i] = string.rep('x', 1 << 24) end return false end",
    "loop": "function invoke_at_step(s) while true do end end",
    "pcall_loop": "function invoke_at_step(s) while true do pcall(function() while true do end end) end end",
}
WORDS = {"io": "io", "os": "os", "require": "require", "bytecode": "bytecode",
         "memory": "memory", "loop": "instruction", "pcall_loop": "instruction"}


def check_sandbox(c, tmp):
    trial = lib.rel(os.path.join(lib.FIXTURES, "trials", "stalled_lr_zero"))
    lines = ["lua:", "  instruction_limit: 2000000", "  memory_limit_mb: 32", "rules:"]
    for key, code in SANDBOX.items():
        with open(os.path.join(tmp, key + ".lua"), "w") as f:
            f.write(code + "\n")
        lines += ["  - lua: %s.lua" % key, "    name: %s" % key]
    lines += ["  - rule: ExplodingTensor", "  - lua: %s" % os.path.join(
        lib.ROOT, "rules", "gradient_mean_abs.lua"), "    name: healthy_lua"]
    if os.path.exists("/tmp/smrules-pwned"):
        os.remove("/tmp/smrules-pwned")
    r = run_rules(trial, "\n".join(lines) + "\n", tmp)
    sc = c.scope("sandbox", r)
    if not sc.process():
        return
    got = by_name(r.obj)
    for key in SANDBOX:
        rule = got.get(key, {})
        msg = (rule.get("message") or "")
        sc.eq("%s: status" % key, rule.get("status"), "Error")
        sc.ok(WORDS[key] in msg.lower(), "%s: message says why" % key, repr(msg[:300]))
    sc.ok(not os.path.exists("/tmp/smrules-pwned"), "os.execute ran nothing")
    sc.eq("other rules finish: ExplodingTensor", got.get("ExplodingTensor", {}).get("status"),
          "NoIssuesFound")
    sc.eq("other rules finish: a healthy Lua rule", got.get("healthy_lua", {}).get("status"),
          "NoIssuesFound")


CONFIG_ERRORS = [
    ("bad YAML", "rules:\n  - rule: AllZero\n   parameters: {}\n", "line 3"),
    ("unknown key", "rules:\n  - rule: AllZero\n    paramters: {threshold: 5}\n", "line 3, column 5"),
    ("wrong type", "rules:\n  - rule: AllZero\n    parameters:\n      threshold: fifty\n",
     "line 4, column 18"),
    ("out of range", "rules:\n  - rule: AllZero\n    parameters:\n      threshold: 150\n",
     "line 4, column 18"),
    ("unknown parameter", "rules:\n  - rule: AllZero\n    parameters:\n      treshold: 5\n",
     "line 4, column 7"),
    ("unknown rule", "rules:\n  - rule: NoSuchRule\n", "line 2, column 5"),
]


def check_config_errors(c, tmp):
    trial = lib.rel(os.path.join(lib.FIXTURES, "trials", "stalled_lr_zero"))
    for what, text, where in CONFIG_ERRORS:
        path = os.path.join(tmp, "bad.yaml")
        with open(path, "w") as f:
            f.write(text)
        for args in (["validate", path],
                     ["run", "--trial", trial, "--rules", path, "--fresh",
                      "--output", os.path.join(tmp, "out")]):
            r = lib.run(args)
            res = lib.Result(args, *r)
            sc = c.scope("config %s (%s)" % (what, args[0]), res)
            sc.process(want_json=False)
            sc.eq("exit status", res.rc, 2)
            errs = [ln for ln in res.err.splitlines() if ln.strip()]
            sc.eq("one error line", len(errs), 1)
            sc.ok(where in res.err, "names %s" % where, res.err.strip()[:300])


def check_validate_lua(c, tmp):
    """`validate` compiles every Lua script (without running it): a syntax
    error is a configuration error naming the rule's line and the script's
    file:line; a script that compiles passes."""
    bad = os.path.join(tmp, "unclosed.lua")
    with open(bad, "w") as f:
        f.write("function invoke_at_step(step)\n  if step > 3 then\n    return true\n  end\n"
                "  return false\n")
    good = os.path.join(lib.ROOT, "rules", "gradient_mean_abs.lua")
    for what, script, rc in (("syntax error", bad, 2), ("compiles", good, 0)):
        path = os.path.join(tmp, "validate-lua.yaml")
        with open(path, "w") as f:
            f.write("rules:\n  - rule: AllZero\n  - name: mine\n    lua: %s\n" % script)
        args = ["validate", path]
        res = lib.Result(args, *lib.run(args))
        sc = c.scope("validate, Lua script: %s" % what, res)
        sc.process(want_json=False)
        sc.eq("exit status", res.rc, rc)
        if rc:
            errs = [ln for ln in res.err.splitlines() if ln.strip()]
            sc.eq("one error line", len(errs), 1)
            sc.ok("line 3, column 5" in res.err, "names the rule's line", res.err.strip())
            sc.ok("unclosed.lua:6:" in res.err and "'end' expected" in res.err,
                  "names the script's line and what Lua expected", res.err.strip())
        else:
            sc.ok("OK (2 rules)" in res.out, "OK", res.out.strip())


STATEFUL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lua_stateful_rule.lua")


def visits(err):
    """[(step, visits so far)] from the -v log of lua_stateful_rule.lua."""
    out = []
    for ln in err.splitlines():
        parts = ln.split(": ", 3)
        if len(parts) == 4 and parts[3].startswith("visit\t"):
            _, step, n = parts[3].split("\t")
            out.append((int(step), int(n)))
    return out


def run_stateful(tmp, script, extra):
    rules = os.path.join(tmp, "stateful.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - name: S\n    lua: %s\n" % script)
    trial = lib.rel(os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits"))
    args = ["run", "--trial", trial, "--rules", rules, "--json", "-v", "--output",
            os.path.join(tmp, "out-state")] + extra
    return lib.run_json(args)


def check_lua_state(c, tmp):
    """A Lua rule's save_state()/load_state(): a run stopped at --end-step
    and continued from its stored state goes on where it stopped (no step
    visited twice, its counter continues) with the results of one run, and
    the stored value comes back exactly (nan, infinities, integer vs float,
    minimum integer, any bytes in strings, nested tables, boolean and
    float keys).  Without save_state, or when the state cannot be stored
    or restored, the next run starts over with a warning, results intact."""
    one = run_stateful(tmp, STATEFUL, ["--fresh"])
    want = (one.obj or {"rules": [{}]})["rules"][0]
    sc = c.scope("lua state: one run", one)
    sc.process(one)
    sc.ok(want.get("triggered_steps"), "the rule triggers", lib.short(want))
    with open(STATEFUL) as f:
        text = f.read()
    variants = [
        ("save_state and load_state", text, "continues"),
        ("no save_state", text.replace("function save_state()", "function unused_save()"), "over"),
        ("save_state returns a function",
         text.replace("return {visits = visits,", "return {fn = print, visits = visits,"), "over"),
        ("load_state fails", text.replace("  visits = st.visits\n", "  error('cannot')\n"), "over"),
    ]
    for label, src, expect in variants:
        script = os.path.join(tmp, "stateful-%d.lua" % len(label))
        with open(script, "w") as f:
            f.write(src)
        state = os.path.join(tmp, "state-%d.db" % len(label))
        first = run_stateful(tmp, script, ["--state", state, "--end-step", "30"])
        second = run_stateful(tmp, script, ["--state", state])
        sc = c.scope("lua state: %s" % label, second)
        if not (sc.process(first) and sc.process(second)):
            continue
        got = second.obj["rules"][0]
        for k in ("status", "triggered_steps", "evaluated_steps"):
            sc.eq("%s as one run" % k, got.get(k), want.get(k))
        v1, v2 = visits(first.err), visits(second.err)
        sc.ok(v1 and max(s for s, _ in v1) < 30, "the first run stopped before step 30", lib.short(v1))
        if expect == "continues":
            sc.ok(v2 and v2[0][0] > max(s for s, _ in v1) and v2[0][1] == len(v1) + 1,
                  "the second run starts after the last evaluated step, counter continued",
                  lib.short(v2[:3]))
            sc.ok("tricky\ttrue" in second.err, "the stored value came back exactly",
                  second.err[-300:])
        else:
            sc.ok(v2 and v2[0] == (0, 1), "the second run starts over from step 0", lib.short(v2[:3]))
            if label != "no save_state":
                sc.ok("warning" in second.err + first.err, "a warning says why",
                      (first.err + second.err)[-300:])


UNREADABLE = {
    "value": "trial:tensor('weights'):value(s)",
    "stats": "trial:tensor('weights'):stats(s)",
    "counts": "trial:tensor('weights'):counts(s)",
    "reduction": "trial:tensor('weights'):reduction_value(s, 'max')",
}


def check_unreadable(c, tmp):
    """A value that cannot be read (weights at step 1: its record's data
    checksum is wrong) is, for a Lua rule as for a C plugin, as if not
    saved: the step is skipped, the other steps are evaluated, and the
    reason is printed once however many rules (reading the value, its
    statistics, its counts or a reduction) came across it."""
    trial = os.path.join(tmp, "unreadable")
    shutil.copytree(os.path.join(lib.FIXTURES, "corrupt", "data_crc_mismatch"), trial)
    yaml_text = "rules:\n"
    for name, call in UNREADABLE.items():
        script = os.path.join(tmp, "unreadable_%s.lua" % name)
        with open(script, "w") as f:
            f.write("function invoke_at_step(s)\n  %s\n  return false\nend\n" % call)
        yaml_text += "  - lua: %s\n    name: %s\n" % (script, name)
    r = run_rules(trial, yaml_text, tmp)
    sc = c.scope("lua: an unreadable value", r)
    if not sc.process():
        return
    got = by_name(r.obj)
    for name in UNREADABLE:
        rule = got.get(name, {})
        sc.eq("%s: status" % name, rule.get("status"), "NoIssuesFound")
        sc.eq("%s: skipped_steps" % name, rule.get("skipped_steps"), [1])
        sc.eq("%s: evaluated_steps" % name, rule.get("evaluated_steps"), 2)
    warnings = [l for l in r.err.splitlines() if "warning" in l and "000000000001_worker_0" in l]
    sc.eq("the reason is printed once", len(warnings), 1)
    sc.ok(warnings and "offset 205" in warnings[0], "it names the file and the offset",
          lib.short(r.err))


def main():
    c = lib.Checker("test_custom_rules")
    tmp = tempfile.mkdtemp(prefix="smrules-custom-")
    try:
        so = install_sdk(c, tmp)
        if so:
            check_parity(c, tmp, so)
        check_sandbox(c, tmp)
        check_config_errors(c, tmp)
        check_validate_lua(c, tmp)
        check_lua_state(c, tmp)
        check_unreadable(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
