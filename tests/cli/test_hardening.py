#!/usr/bin/env python3
"""A hostile trial folder, state file, Lua rule or pid file (docs/security.md).

Each part plays one attack through the CLI on a private copy of a fixture
trial and checks that smrules neither writes outside, hangs, lies, repeats
nor signals the wrong process -- and that it says why:

- writes: links planted at rule-output/, rule-output/<rule>/,
  rule-output/<rule>/report.json.tmp and .smrules/ are not followed;
  rule names that are not one plain file name are refused with line/column;
"""

import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

TRIAL = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")
RULES = "rules:\n  - rule: VanishingGradient\n    name: vg\n"
SHORT = 20  # seconds: a blocking open would exceed this


def new_trial(tmp, label):
    d = os.path.join(tmp, label)
    os.makedirs(d)
    trial = os.path.join(d, "trial")
    shutil.copytree(TRIAL, trial)
    outside = os.path.join(d, "outside")
    os.makedirs(outside)
    return trial, outside


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def read(path):
    with open(path) as f:
        return f.read()


def run(args, timeout=lib.TIMEOUT):
    rc, out, err = lib.run(args, timeout)
    return lib.Result(args, rc, out, err)


def run_rules(trial, rules_text, extra=(), timeout=lib.TIMEOUT):
    path = write(os.path.join(os.path.dirname(trial), "rules.yaml"), rules_text)
    return run(["run", "--trial", trial, "--rules", path, "--json"] + list(extra), timeout)


# ---------------------------------------------------------------------------
# Writes stay inside their folder

def check_writes(c, tmp):
    # a link at the temporary name of the report
    trial, outside = new_trial(tmp, "tmp_link")
    victim = write(os.path.join(outside, "victim.txt"), "precious\n")
    os.makedirs(os.path.join(trial, "rule-output", "vg"))
    os.symlink(victim, os.path.join(trial, "rule-output", "vg", "report.json.tmp"))
    r = run_rules(trial, RULES)
    sc = c.scope("link at report.json.tmp", r)
    sc.process()
    sc.eq("the file the link names is unchanged", read(victim), "precious\n")
    rep = os.path.join(trial, "rule-output", "vg", "report.json")
    sc.ok(os.path.isfile(rep) and not os.path.islink(rep), "report.json written in place")

    # the rule's folder is a link out of the trial
    trial, outside = new_trial(tmp, "dir_link")
    os.makedirs(os.path.join(trial, "rule-output"))
    os.symlink(outside, os.path.join(trial, "rule-output", "vg"))
    r = run_rules(trial, RULES)
    sc = c.scope("rule-output/<rule> is a link", r)
    sc.process(want_json=False)
    sc.eq("nothing created where the link points", sorted(os.listdir(outside)), [])
    sc.ok("'vg' is a symbolic link" in r.err, "a clear error names the link",
          lib.short(r.err))
    sc.eq("the results are still printed", r.obj and r.obj["rules"][0]["status"],
          "NoIssuesFound")

    # rule-output itself is a link
    trial, outside = new_trial(tmp, "root_link")
    os.symlink(outside, os.path.join(trial, "rule-output"))
    r = run_rules(trial, RULES)
    sc = c.scope("rule-output is a link", r)
    sc.process(want_json=False)
    sc.eq("nothing created where the link points", sorted(os.listdir(outside)), [])
    sc.ok("'rule-output' is a symbolic link" in r.err, "a clear error names it",
          lib.short(r.err))

    # names that are not one plain file name
    for label, name in (("dotdot", ".."), ("dot", "."), ("slash", "../../outside/x"),
                        ("control", "a\\x01b"), ("dotdot_lua", None)):
        trial, outside = new_trial(tmp, "name_" + label)
        if name is None:  # the name taken from a script called "...lua"
            name = ".."
            lua = write(os.path.join(os.path.dirname(trial), "...lua"), "function invoke_at_step(step) return false end\n")
            r = run_rules(trial, "rules:\n  - lua: %s\n" % lua)
            where = "line 2, column 10"
        else:
            r = run_rules(trial, "rules:\n  - rule: VanishingGradient\n    name: \"%s\"\n" % name)
            where = "line 3, column 11"
        sc = c.scope("rule name %r" % name, r)
        sc.process(want_json=False)
        sc.exit_code(r, [2])
        sc.ok(where in r.err and "name" in r.err, "the error gives line and column",
              lib.short(r.err))
        sc.ok(not os.path.exists(os.path.join(trial, "report.json")) and
              not os.path.exists(os.path.join(trial, "rule-output")),
              "nothing written")

    # .smrules is a link: the state goes nowhere else
    trial, outside = new_trial(tmp, "state_dir_link")
    os.symlink(outside, os.path.join(trial, ".smrules"))
    r = run(["inspect", "--trial", trial, "--json"])
    sc = c.scope(".smrules is a link", r)
    sc.process(want_json=False)
    sc.eq("no state file created where the link points", sorted(os.listdir(outside)), [])
    sc.ok(r.rc != 0 and "symbolic link" in r.err, "a clear error names the link",
          lib.short(r.err))


def main():
    c = lib.Checker("test_hardening")
    tmp = tempfile.mkdtemp(prefix="smrules-hardening-")
    try:
        check_writes(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
