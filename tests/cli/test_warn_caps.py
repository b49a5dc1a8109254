#!/usr/bin/env python3
"""Lines on stderr that input can multiply are capped (docs/security.md#bounded-cost):

- an index file naming 5,000 tensors that all point at one record (each read
  says the record holds another tensor): 20 warnings of that kind, then one
  line with the count of the rest -- not 5,000 lines; benign control: with 5
  such tensors all 5 warnings are shown;
- a Lua rule calling log.warning in a loop (2,000 lines a step): at most 100
  lines of that rule on stderr, then a count; one call with a 1 MB message
  writes one line of at most 1023 bytes of it; benign control: a rule logging
  3 lines shows the 3;
- damaged index files listed at the end of a run: 20 lines, then one line
  with how many more (`--json` lists every one); benign control: 3 damaged
  files, 3 lines;
- the other rules still run.

Sizes are counted in lines and bytes; nothing depends on time."""

import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

SRC = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
INDEX = os.path.join("index", "000000000", "000000000010_worker_0.json")


def trial_with_fakes(tmp, name, n):
    """A copy of the fixture whose step-10 index also names n tensors that
    all point at the record of the first one."""
    trial = os.path.join(tmp, name)
    shutil.copytree(SRC, trial)
    path = os.path.join(trial, INDEX)
    with open(path) as f:
        o = json.load(f)
    first = o["tensor_payload"][0]
    o["tensor_payload"] += [{"tensorname": "fake_%d" % i, "start_idx": first["start_idx"],
                             "length": first["length"]} for i in range(n)]
    with open(path, "w") as f:
        json.dump(o, f)
    return trial


write = lib.write_text


def run(tmp, trial, rules_text, name):
    rules = write(os.path.join(tmp, name + ".yaml"), rules_text)
    return lib.run_json(["run", "--trial", trial, "--rules", rules, "--json", "--fresh",
                         "--output", os.path.join(tmp, name + "-out")])


def warning_lines(err, what):
    return [ln for ln in err.splitlines() if ln.startswith("smrules: warning:") and what in ln]


def check_read_warnings(c, tmp):
    rules = "rules:\n  - rule: ExplodingTensor\n"
    for n, shown, label in ((5, 5, "benign control: 5 tensors in one record"),
                            (5000, 20, "5,000 tensors in one record")):
        trial = trial_with_fakes(tmp, "fakes%d" % n, n)
        r = run(tmp, trial, rules, "fakes%d" % n)
        sc = c.scope(label, r)
        sc.process()
        lines = warning_lines(r.err, "the index says 'fake_")
        sc.eq("warnings shown", len(lines), shown)
        more = [ln for ln in r.err.splitlines() if "more lines of the kind" in ln]
        if n == 5:
            sc.eq("no count line", more, [])
        else:
            sc.ok(len(more) == 1 and "%d more lines" % (n - shown) in more[0] and
                  "a tensor value that cannot be read" in more[0],
                  "one line counts the %d not shown" % (n - shown), lib.short(more))
            sc.ok(len(r.err) < 20000, "stderr stays small", "%d bytes" % len(r.err))
        sc.eq("the rule ran over the rest", (r.obj or {"rules": [{}]})["rules"][0].get("status"),
              "IssuesFound")


LOOP_LUA = """
function invoke_at_step(step)
  for i = 1, 2000 do log.warning("loop line " .. i .. " at step " .. step) end
  return false
end
"""
BIG_LUA = """
local done = false
function invoke_at_step(step)
  if not done then log.warning(string.rep("x", 1000000)); done = true end
  return false
end
"""
FEW_LUA = """
local n = 0
function invoke_at_step(step)
  if n < 3 then n = n + 1; log.warning("few line " .. n) end
  return false
end
"""


def check_lua_log(c, tmp):
    trial = os.path.join(tmp, "lua-trial")
    shutil.copytree(SRC, trial)
    for name, src, check in (("few", FEW_LUA, "benign control: 3 log lines"),
                             ("loop", LOOP_LUA, "log.warning in a loop"),
                             ("big", BIG_LUA, "one 1 MB log line")):
        lua = write(os.path.join(tmp, name + ".lua"), src)
        rules = ("rules:\n  - lua: %s\n    name: %s\n  - rule: ExplodingTensor\n" % (lua, name))
        r = run(tmp, trial, rules, "lua-" + name)
        sc = c.scope(check, r)
        sc.process()
        mine = [ln for ln in r.err.splitlines() if ln.startswith("smrules: %s: warning:" % name)]
        results = {x["name"]: x for x in (r.obj or {}).get("rules", [])}
        sc.eq("the other rule still ran", results.get("ExplodingTensor", {}).get("status"),
              "IssuesFound")
        if name == "few":
            sc.eq("all 3 lines shown", [ln.rsplit(": ", 1)[1] for ln in mine],
                  ["few line 1", "few line 2", "few line 3"])
        elif name == "loop":
            steps = results.get(name, {}).get("evaluated_steps") or 0
            sc.ok(steps > 1, "the rule ran over its steps", steps)
            sc.eq("100 lines of the rule shown", len(mine), 100)
            more = [ln for ln in r.err.splitlines() if "log lines of rule loop" in ln]
            sc.ok(len(more) == 1 and "%d more lines" % (2000 * steps - 100) in more[0],
                  "one line counts the rest", lib.short(more))
            sc.ok(len(r.err) < 50000, "stderr stays small", "%d bytes" % len(r.err))
        else:
            sc.eq("one line", len(mine), 1)
            sc.ok(mine and len(mine[0]) < 1100 and mine[0].endswith("x" * 100),
                  "at most 1023 bytes of the message", mine and len(mine[0]))


def check_damaged_files(c, tmp):
    for n, label in ((3, "benign control: 3 damaged index files"), (30, "30 damaged index files")):
        trial = os.path.join(tmp, "damaged%d" % n)
        shutil.copytree(SRC, trial)
        for i in range(n):
            write(os.path.join(trial, "index", "000000000", "%012d_worker_0.json" % (1000 + i)),
                  "{not json %d" % i)
        r = run(tmp, trial, "rules:\n  - rule: ExplodingTensor\n", "damaged%d" % n)
        sc = c.scope(label, r)
        sc.process()
        lines = [ln for ln in r.err.splitlines()
                 if ln.startswith("smrules: warning: index/000000000/0000000010")]
        sc.eq("lines naming a damaged file", len(lines), min(n, 20))
        more = [ln for ln in r.err.splitlines() if "more files of the trial could not be read" in ln]
        sc.eq("the count of the rest", more,
              ["smrules: warning: %d more files of the trial could not be read "
               "(run --json lists every one)" % (n - 20)] if n > 20 else [])
        sc.eq("--json lists every one", len((r.obj or {}).get("read_problems") or []), n)
        sc.eq("the rule ran", (r.obj or {"rules": [{}]})["rules"][0].get("status"), "IssuesFound")


def main():
    c = lib.Checker("test_warn_caps")
    with tempfile.TemporaryDirectory(prefix="smrules-warn-caps-") as tmp:
        check_read_warnings(c, tmp)
        check_lua_log(c, tmp)
        check_damaged_files(c, tmp)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
