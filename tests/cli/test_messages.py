#!/usr/bin/env python3
"""End-to-end: messages and JSON of validate, describe, list and run.

  unknown    an unknown rule's error is whole (ends with ')') and names the
             nearest rule by edit distance ("did you mean ...?"), for
             validate and run, as text and as {"error": ...} with --json;
             a name near nothing gets no suggestion; a misspelt parameter
             gets one too
  json       validate --json, describe --json, list --json print one JSON
             document each (and errors as {"error": ...})
  domains    e-mail addresses on one-label domains (smrules@localhost)
             pass validate; malformed host names do not
  luaparams  a Lua rule's "-- @param" declarations: validate and run check
             rules.yaml against them (type, bounds, one_of, required,
             unknown names with a suggestion) with its line and column;
             defaults reach the script; RuleParameters lists them; a bad
             declaration names the script's line; an undeclared script's
             RuleParameters lists the scalars given
  luaerror   a Lua runtime error names the step and the script line; the
             table shows its first line only (no traceback in the layout),
             --json keeps the whole message
"""

import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

TRIAL = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_unknown(c, tmp):
    cases = [("StalledTrainingRulx", "StalledTrainingRule"),
             ("LossNotDecresing", "LossNotDecreasing"),
             ("ExplodngTensor", "ExplodingTensor"),
             ("Qwertyuiop", None)]
    for given, near in cases:
        rules = write(tmp, "u-%s.yaml" % given, "rules:\n  - rule: %s\n" % given)
        for cmd in (["validate", rules], ["run", "--trial", TRIAL, "--rules", rules, "--fresh"]):
            for js in (False, True):
                args = cmd + (["--json"] if js else [])
                r = lib.run_json(args)
                sc = c.scope("unknown rule %s: %s%s" % (given, cmd[0], " --json" if js else ""), r)
                sc.eq("exit 2", r.rc, 2)
                line = r.err.strip().splitlines()[-1] if r.err.strip() else ""
                sc.ok(line.endswith(")"), "the message is whole", line)
                sc.ok("line 2, column 5" in line, "position", line)
                if near:
                    sc.ok("did you mean '%s'?" % near in line, "suggestion", line)
                else:
                    sc.ok("did you mean" not in line, "no suggestion", line)
                if js:
                    msg = r.error_obj().get("message", "")
                    sc.ok("unknown rule '%s'" % given in msg, "JSON error", lib.short(r.out))
    rules = write(tmp, "p.yaml", "rules:\n  - rule: LossNotDecreasing\n    parameters: {num_step: 3}\n")
    r = lib.run_json(["validate", rules])
    sc = c.scope("unknown parameter", r)
    sc.eq("exit 2", r.rc, 2)
    sc.ok("unknown parameter 'num_step' for LossNotDecreasing: did you mean 'num_steps'?" in r.err,
          "suggestion", r.err.strip())
    r = lib.run_json(["describe", "ExplodingTensr"])
    sc = c.scope("describe: unknown rule", r)
    sc.eq("exit 2", r.rc, 2)
    sc.ok("did you mean 'ExplodingTensor'?" in r.err, "suggestion", r.err.strip())


def test_json(c, tmp):
    r = lib.run_json(["list", "--json"])
    sc = c.scope("list --json", r)
    if sc.process():
        names = [x.get("name") for x in r.obj or []]
        sc.ok("ExplodingTensor" in names and "ProfilerReport" in names, "rules listed", lib.short(names))
        kinds = {x["name"]: x.get("kind") for x in r.obj or []}
        sc.eq("kind of ExplodingTensor", kinds.get("ExplodingTensor"), "tensor")
        sc.eq("kind of CPUBottleneck", kinds.get("CPUBottleneck"), "profiler")
        text = lib.run_json(["list"])
        sc.eq("same rules as the table", len(text.out.strip().splitlines()), len(names))
    r = lib.run_json(["describe", "--json", "LossNotDecreasing"])
    sc = c.scope("describe --json", r)
    if sc.process():
        o = r.obj or {}
        sc.eq("name", o.get("name"), "LossNotDecreasing")
        params = {p["name"]: p for p in o.get("parameters") or []}
        sc.ok("num_steps" in params and "mode" in params, "parameters", lib.short(list(params)))
        ns = params.get("num_steps") or {}
        sc.eq("num_steps default", ns.get("default"), "10")
        sc.eq("num_steps type", ns.get("type"), "int")
    r = lib.run_json(["describe", "Nope", "--json"])
    sc = c.scope("describe --json: unknown rule", r)
    if sc.process():
        sc.eq("exit 2", r.rc, 2)
        sc.ok("unknown rule 'Nope'" in r.error_obj().get("message", ""), "error object",
              lib.short(r.out))
    rules = os.path.join(lib.ROOT, "examples", "rules.yaml")
    r = lib.run_json(["validate", "--json", rules])
    sc = c.scope("validate --json", r)
    if sc.process():
        sc.eq("exit 0", r.rc, 0)
        sc.eq("ok", (r.obj or {}).get("ok"), True)
        sc.eq("rule names", [x.get("name") for x in (r.obj or {}).get("rules") or []],
              ["ExplodingTensor", "VanishingGradient", "GradientTooLarge"])
        sc.eq("kinds", [x.get("kind") for x in (r.obj or {}).get("rules") or []],
              ["builtin", "builtin", "lua"])
    bad = write(tmp, "bad.yaml", "rules:\n  - rule: ExplodingTensor\n    parameters: {only_nan: maybe}\n")
    r = lib.run_json(["validate", bad, "--json"])
    sc = c.scope("validate --json: bad parameter", r)
    if sc.process():
        sc.eq("exit 2", r.rc, 2)
        sc.eq("error file", r.error_obj().get("file"), bad)
        sc.ok("line 3" in r.error_obj().get("message", ""), "position", lib.short(r.out))


def test_domains(c, tmp):
    good = ["smrules@localhost", "ops@mail-relay.internal", "ml-team@example.com"]
    bad = ["a@.b", "a@b..c", "a@-b.c", "a@b_c.d", "a@"]
    for addr in good + bad:
        rules = write(tmp, "mail.yaml",
                      "rules:\n  - rule: ExplodingTensor\n    actions:\n      - Email: %s\n"
                      "actions:\n  Email: {smtp_url: 'smtp://127.0.0.1:2525', from: %s}\n"
                      % (json.dumps(addr), json.dumps(addr)))
        r = lib.run_json(["validate", rules])
        sc = c.scope("e-mail address %s" % addr, r)
        if addr in good:
            sc.eq("accepted (exit 0)", r.rc, 0)
        else:
            sc.eq("refused (exit 2)", r.rc, 2)
            sc.ok("is not an e-mail address" in r.err, "message", r.err.strip())


def test_luaerror(c, tmp):
    script = write(tmp, "boom.lua", "function invoke_at_step(step)\n  if step > 5 then\n"
                   "    local x = nil\n    return x.y\n  end\n  return false\nend\n")
    rules = write(tmp, "boom.yaml", "rules:\n  - lua: boom.lua\n  - rule: ExplodingTensor\n")
    trial = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
    r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh",
                      "--output", os.path.join(tmp, "o1")])
    sc = c.scope("Lua runtime error: table", r)
    if sc.process(want_json=False):
        sc.eq("exit 5", r.rc, 5)
        want = "    step 6: %s:4: attempt to index a nil value (local 'x')" % script
        lines = r.out.splitlines()
        sc.ok(want in lines, "names the step and script line", lib.short(r.out, 600))
        i = lines.index(want) if want in lines else -1
        sc.ok(i > 0 and lines[i + 1].startswith("ExplodingTensor "),
              "the next rule's row follows at once (no traceback)", lib.short(r.out, 600))
    r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh", "--json",
                      "--output", os.path.join(tmp, "o2")])
    sc = c.scope("Lua runtime error: --json", r)
    if sc.process():
        msg = ((r.obj or {}).get("rules") or [{}])[0].get("message") or ""
        sc.ok(msg.startswith("step 6: %s:4: " % script), "message", repr(msg[:200]))
        sc.ok("stack traceback" in msg, "the traceback is kept", repr(msg[:300]))


LUA_DECL = """-- @param threshold float default=1.0 min>0 -- above which to fire
-- @param collection string default=gradients
-- @param mode string default=TRAIN one_of=TRAIN|EVAL
-- @param sizes numbers default=1,2.5
function invoke_at_step(step)
  assert(math.type(params.threshold) == "float" or params.threshold == 2, "threshold")
  assert(params.collection == "gradients", "collection default")
  assert(params.mode == "TRAIN" or params.mode == "EVAL", "mode")
  assert(type(params.sizes) == "table" and params.sizes[2] == 2.5, "sizes default")
  return false
end
"""


def test_luaparams(c, tmp):
    write(tmp, "decl.lua", LUA_DECL)
    bad = [("{threshold: abc}", "line 3, column 29: parameter 'threshold' of lua:decl: expected a number"),
           ("{threshold: 0}", "threshold"),
           ("{mode: TEST}", "mode"),
           ("{mod: EVAL}", "unknown parameter 'mod' for lua:decl: did you mean 'mode'?")]
    for i, (given, want) in enumerate(bad):
        rules = write(tmp, "lp%d.yaml" % i, "rules:\n  - lua: decl.lua\n    parameters: %s\n" % given)
        for cmd in (["validate", rules], ["run", "--trial", TRIAL, "--rules", rules, "--fresh"]):
            r = lib.run_json(cmd)
            sc = c.scope("Lua @param %s: %s" % (given, cmd[0]), r)
            sc.eq("exit 2", r.rc, 2)
            sc.ok(want in r.err and "line 3" in r.err, "message", r.err.strip())
    rules = write(tmp, "lp-ok.yaml", "rules:\n  - lua: decl.lua\n    parameters: {threshold: 2, mode: EVAL}\n")
    r = lib.run_json(["validate", rules])
    c.scope("Lua @param valid", r).eq("validate exit 0", r.rc, 0)
    r = lib.run_json(["run", "--trial", TRIAL, "--rules", rules, "--fresh", "--json",
                      "--output", os.path.join(tmp, "lp-out")])
    sc = c.scope("Lua @param run", r)
    if sc.process():
        rule = ((r.obj or {}).get("rules") or [{}])[0]
        sc.eq("status (defaults reached the script)", rule.get("status"), "NoIssuesFound")
        sc.eq("RuleParameters", (rule.get("report") or {}).get("RuleParameters"),
              "threshold:2\ncollection:gradients\nmode:EVAL\nsizes:1,2.5")
    broken = write(tmp, "broken.lua", "-- fine\n-- @param x flaot\nfunction invoke_at_step(s) return false end\n")
    rules = write(tmp, "lp-broken.yaml", "rules:\n  - lua: broken.lua\n")
    r = lib.run_json(["validate", rules])
    sc = c.scope("Lua @param: bad declaration", r)
    sc.eq("exit 2", r.rc, 2)
    sc.ok("%s: line 2: @param x: unknown type 'flaot'" % broken in r.err, "names script and line",
          r.err.strip())
    write(tmp, "plain.lua", "function invoke_at_step(s) return false end\n")
    rules = write(tmp, "lp-plain.yaml", "rules:\n  - lua: plain.lua\n    parameters: {a: 1, b: x, c: [1, 2]}\n")
    r = lib.run_json(["run", "--trial", TRIAL, "--rules", rules, "--fresh", "--json",
                      "--output", os.path.join(tmp, "lp-out2")])
    sc = c.scope("Lua without declarations", r)
    if sc.process():
        rule = ((r.obj or {}).get("rules") or [{}])[0]
        sc.eq("RuleParameters", (rule.get("report") or {}).get("RuleParameters"), "a:1\nb:x")


def main():
    c = lib.Checker("test_messages")
    with tempfile.TemporaryDirectory(prefix="smrules-msg-") as tmp:
        test_unknown(c, tmp)
        test_json(c, tmp)
        test_domains(c, tmp)
        test_luaerror(c, tmp)
        test_luaparams(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
