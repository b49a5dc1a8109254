#!/usr/bin/env python3
"""A Lua rule's mistakes read as clearly in `run` as in `validate`
(docs/lua-api.md): a syntax error names the script once with its line and
no traceback of C frames; a misspelt method of the trial or of a tensor
gets the nearest method's name instead of "attempt to call a nil value";
reading a parameter a script that declares its parameters does not
declare names the declared ones.  A script that reads a declared but
unset parameter (nil) and a declared one with a default is the benign
control."""

import os
import subprocess
import tempfile

import lib

TRAINER = os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer")
CASES = [
    ("a syntax error", "function invoke_at_step(step)\n  local x = = 1\nend\n",
     ["line 2: unexpected symbol near '='"], ["stack traceback", "\\x0a"]),
    ("a misspelt trial method",
     "function invoke_at_step(step)\n  local n = trial:tensor_name()\n  return false\nend\n",
     ["the trial has no method 'tensor_name': did you mean 'tensor_names'?"], []),
    ("a misspelt tensor method",
     "function invoke_at_step(step)\n"
     "  local t = trial:tensor(trial:tensor_names()[1])\n"
     "  return t:valu(step) ~= nil\nend\n",
     ["a tensor has no method 'valu': did you mean 'value'?"], []),
    ("an undeclared parameter",
     "-- @param window int default=5 -- the window\n"
     "function invoke_at_step(step)\n  return params.windw > 3\nend\n",
     ["params.windw is not a parameter of this script: did you mean 'window'?",
      "(it declares: window)"], []),
]
CONTROL = ("-- @param window int default=5 -- the window\n"
           "-- @param extra string -- optional\n"
           "function invoke_at_step(step)\n"
           "  if params.extra then return false end\n"
           "  return params.window > 3\nend\n")


def run_script(tmp, trial, name, text):
    script = os.path.join(tmp, name + ".lua")
    with open(script, "w") as f:
        f.write(text)
    rules = os.path.join(tmp, name + ".yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - lua: %s\n    name: r\n" % script)
    return lib.run_json(["run", "--trial", trial, "--rules", rules, "--json", "--fresh",
                         "--output", os.path.join(tmp, name + "-out")])


def main():
    c = lib.Checker("test_lua_messages")
    with tempfile.TemporaryDirectory(prefix="smrules-luamsg-") as tmp:
        trial = os.path.join(tmp, "trial")
        subprocess.run([TRAINER, trial, "--steps", "3", "--interval-ms", "0"], check=True,
                       stdout=subprocess.DEVNULL, timeout=lib.TIMEOUT)
        for i, (label, text, wants, unwanted) in enumerate(CASES):
            sc = c.scope(label)
            r = run_script(tmp, trial, "case%d" % i, text)
            said = r.err + " ".join(str((x.get("message") or "")) for x in
                                    (r.obj or {}).get("rules", []))
            sc.ok(r.rc in (2, 5), "the rule fails (exit 2 or 5)", "rc %s" % r.rc)
            for w in wants:
                sc.ok(w in said, "says " + w, said[-400:])
            for u in unwanted:
                sc.ok(u not in said, "does not say " + u, said[-400:])
            if label == "a syntax error":
                sc.eq("names the script once", said.count("case%d.lua" % i), 1)
        r = run_script(tmp, trial, "control", CONTROL)
        sc = c.scope("benign control")
        sc.eq("exit 1", r.rc, 1)
        sc.eq("IssuesFound", ((r.obj or {}).get("rules") or [{}])[0].get("status"), "IssuesFound")
    c.finish()


if __name__ == "__main__":
    main()
