#!/usr/bin/env python3
"""A hostile trial folder, state file, Lua rule or pid file (docs/security.md).

Each part plays one attack through the CLI on a private copy of a fixture
trial and checks that smrules neither writes outside, hangs, lies, repeats
nor signals the wrong process -- and that it says why:

- writes: links planted at rule-output/, rule-output/<rule>/,
  rule-output/<rule>/report.json.tmp and .smrules/ are not followed;
  (the state lives outside the trial: test_state_outside.py)
  nor are links at the folders and files ProfilerReport and
  CreateXgboostReport write (profiler-output/, profiler-reports/,
  profiler-report.html, <Rule>.json.tmp, xgboost_report.html and its
  .tmp): a folder there fails that rule alone, a file is replaced;
  rule names that are not one plain file name are refused with line/column;
- the state file: a link, another user's file, a trigger, a view or an
  extra table in it is refused with nothing changed; a read-only trial is
  said to keep its state in memory, once, with what that means; stored reports and stored Lua state are
  data, never code or raw output;
- FIFOs in the trial and as the rules file are refused without blocking;
  an event file that shrinks while it is read is an error, never SIGBUS;
- one index entry with an absurd length costs that tensor at that step;
- a Lua rule that exceeds a budget through work done in C (patterns,
  table.insert/remove/unpack, regexes matched against the tensor names --
  its own or those of the trial's collections), report data or the wall
  clock fails alone;
  the other rules and their actions go on;
- StopTraining refuses a thread id, a pid beyond pid_t and another
  user's process (unless allow_uid names that user), with the reason.
"""

import json
import re
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

TRIAL = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")
RULES = "rules:\n  - rule: VanishingGradient\n    name: vg\n"
SHORT = 20  # seconds: a blocking open would exceed this


def new_trial(tmp, label, source=TRIAL):
    d = os.path.join(tmp, label)
    os.makedirs(d)
    trial = os.path.join(d, "trial")
    shutil.copytree(source, trial)
    outside = os.path.join(d, "outside")
    os.makedirs(outside)
    return trial, outside


write = lib.write_text


def read(path):
    with open(path) as f:
        return f.read()


def run(args, timeout=lib.TIMEOUT):
    rc, out, err = lib.run(args, timeout)
    return lib.Result(args, rc, out, err)


def stateful(trial):
    """A command that keeps state (in the user's state folder, named by
    `run --json`'s "state"; inspect and tensor are read-only and keep none:
    docs/cli.md#where-state-and-output-live)."""
    return run_rules(trial, RULES, ["--output", os.path.join(os.path.dirname(trial), "out")])


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

    # --output into the trial, spelled otherwise than --trial: an absolute
    # path while --trial is relative, or through ".." -- still the trial's
    # folder, so a link there is not followed
    for label in ("abs_output", "dotdot_output"):
        trial, outside = new_trial(tmp, label)
        os.symlink(outside, os.path.join(trial, "rule-output"))
        os.makedirs(os.path.join(trial, "sub"))
        out = (os.path.abspath(os.path.join(trial, "rule-output")) if label == "abs_output"
               else os.path.join(trial, "sub", "..", "rule-output"))
        rules = write(os.path.join(os.path.dirname(trial), "rules.yaml"), RULES)
        rc, o, e = lib.run(["run", "--trial", os.path.relpath(trial), "--rules", rules,
                            "--json", "--output", out])
        r = lib.Result([], rc, o, e)
        sc = c.scope("--output %s into the trial, through a link" % label, r)
        sc.process(want_json=False)
        sc.eq("nothing created where the link points", sorted(os.listdir(outside)), [])
        sc.ok("symbolic link" in r.err, "a clear error names the link", lib.short(r.err))

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

    # .smrules is a link: the state goes nowhere near it
    trial, outside = new_trial(tmp, "state_dir_link")
    os.symlink(outside, os.path.join(trial, ".smrules"))
    r = stateful(trial)
    sc = c.scope(".smrules is a link", r)
    sc.process()
    sc.eq("no state file created where the link points", sorted(os.listdir(outside)), [])
    sc.ok(r.obj and not r.obj["state"].startswith(trial + os.sep),
          "the state is kept outside the trial", r.obj and r.obj["state"])


# ---------------------------------------------------------------------------
# Files of plugins: ProfilerReport's folders and reports, CreateXgboostReport's
# report, written by the host below the rule's folder

PROFILER_CASE = os.path.join(lib.FIXTURES, "profiler", "slow_initialization")
XGB_TRIAL = os.path.join(lib.FIXTURES, "trials", "xgboost_balanced_features")
PROFILER_RULES = "rules:\n  - rule: ProfilerReport\n  - rule: CPUBottleneck\n"
XGB_RULES = "rules:\n  - rule: CreateXgboostReport\n  - rule: VanishingGradient\n    name: vg\n"


def plant(trial, rel, target):
    """A link at rule-output/<rel> pointing at `target`."""
    link = os.path.join(trial, "rule-output", rel)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(target, link)
    return link


def statuses(r):
    return {x["name"]: x for x in (r.obj or {}).get("rules", [])}


def check_plugin_dir_links(c, tmp):
    # a folder on the way to ProfilerReport's files is a link out of the
    # trial: refused, ProfilerReport fails naming it, the other rule goes on
    for rel, comp in (("ProfilerReport/profiler-output", "profiler-output"),
                      ("ProfilerReport/profiler-output/profiler-reports", "profiler-reports")):
        trial, outside = new_trial(tmp, "plugin_" + comp, PROFILER_CASE)
        plant(trial, rel, outside)
        if comp == "profiler-output":  # an HTML report of someone else's there
            decoy = write(os.path.join(outside, "profiler-report.html"), "<html>decoy</html>\n")
        r = run_rules(trial, PROFILER_RULES, extra=["--fresh"])
        sc = c.scope("ProfilerReport: %s is a link" % comp, r)
        sc.process()
        if comp == "profiler-output":
            sc.eq("the file there unchanged", read(decoy), "<html>decoy</html>\n")
            os.unlink(decoy)
            sc.ok("HTML report written" not in r.err, "no line saying a report was written",
                  r.err.strip()[-300:])
        sc.eq("nothing created where the link points", sorted(os.listdir(outside)), [])
        got = statuses(r)
        rep = got.get("ProfilerReport", {})
        sc.eq("that rule fails", rep.get("status"), "Error")
        sc.ok("'%s' is a symbolic link" % comp in (rep.get("message") or ""),
              "a clear error names the link", lib.short(rep.get("message")))
        sc.ok(got.get("CPUBottleneck", {}).get("status") in ("NoIssuesFound", "IssuesFound"),
              "the other rule goes on", lib.short(got.get("CPUBottleneck")))


def check_plugin_file_links(c, tmp):
    # a link planted at a report file (or its temporary name) is replaced by
    # the report, the file it names untouched
    cases = (("ProfilerReport", PROFILER_CASE, PROFILER_RULES,
              "ProfilerReport/profiler-output/profiler-report.html"),
             ("ProfilerReport", PROFILER_CASE, PROFILER_RULES,
              "ProfilerReport/profiler-output/profiler-reports/CPUBottleneck.json.tmp"),
             ("CreateXgboostReport", XGB_TRIAL, XGB_RULES,
              "CreateXgboostReport/xgboost_report.html"),
             ("CreateXgboostReport", XGB_TRIAL, XGB_RULES,
              "CreateXgboostReport/xgboost_report.html.tmp"))
    for rule, source, rules, rel in cases:
        name = os.path.basename(rel)
        trial, outside = new_trial(tmp, "plugin_file_" + name, source)
        victim = write(os.path.join(outside, "victim"), "precious\n")
        plant(trial, rel, victim)
        r = run_rules(trial, rules, extra=["--fresh"])
        sc = c.scope("%s: a link at %s" % (rule, name), r)
        sc.process()
        sc.eq("the file the link names is unchanged", read(victim), "precious\n")
        sc.eq("nothing else created outside", sorted(os.listdir(outside)), ["victim"])
        report = os.path.join(trial, "rule-output", rel[:-4] if rel.endswith(".tmp") else rel)
        sc.ok(os.path.isfile(report) and not os.path.islink(report),
              "the report written in place", report)
        got = statuses(r)
        sc.ok(got.get(rule, {}).get("status") in ("NoIssuesFound", "IssuesFound"),
              "the rule ends normally", lib.short(got.get(rule)))


# ---------------------------------------------------------------------------
# The state file is untrusted

FIRE_LUA = "function invoke_at_step(step) return true end\n"
STATEFUL_LUA = """local n = 0
function invoke_at_step(step) n = n + 1 return false end
function save_state() return {n = n, s = "x"} end
function load_state(st) n = st.n end
"""


def db_dump(path):
    """Schema and rows of a SQLite file (opened read-only, WAL included)."""
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        out = []
        for typ, name, sql in con.execute(
                "SELECT type, name, sql FROM sqlite_schema ORDER BY name"):
            out.append((typ, name, sql))
            if typ == "table":
                out.append(sorted(map(repr, con.execute('SELECT * FROM "%s"' % name))))
        return out
    finally:
        con.close()


def hook_rules(trial, count_file, fire=True):
    lua = write(os.path.join(os.path.dirname(trial), "fire.lua"),
                FIRE_LUA if fire else FIRE_LUA.replace("true", "false"))
    return ("actions:\n  hooks:\n    count:\n      type: exec\n"
            "      argv: [/bin/sh, -c, \"echo fired >> %s\"]\n"
            "rules:\n  - lua: %s\n    name: fire\n    end_step: 1\n"
            "    actions: [count]\n" % (count_file, lua))


def lines(path):
    return read(path).count("\n") if os.path.exists(path) else 0


def check_state_link(c, tmp):
    trial, outside = new_trial(tmp, "state_link")
    other = os.path.join(outside, "other.db")
    con = sqlite3.connect(other)
    con.executescript("CREATE TABLE precious(x); INSERT INTO precious VALUES (1), (2);"
                      "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
                      "INSERT INTO meta VALUES ('schema', '0');")
    con.commit()
    con.close()
    before = db_dump(other)
    db = state_of(c, trial)
    os.symlink(other, db)
    r = stateful(trial)
    sc = c.scope("state.db is a link to another database", r)
    sc.process(want_json=False)
    sc.eq("the other database is unchanged", db_dump(other), before)
    sc.ok(r.rc != 0 and "symbolic link" in r.err and "--state" in r.err,
          "a clear error with the way out", lib.short(r.err))


def check_state_schema(c, tmp):
    for label, sql in (
            ("trigger", "CREATE TRIGGER keep BEFORE INSERT ON action_log"
                        " BEGIN SELECT RAISE(IGNORE); END"),
            ("view", "CREATE VIEW v AS SELECT * FROM rule_state"),
            ("table", "CREATE TABLE extra(x)"),
            ("redefined", "DROP TABLE action_target; CREATE TABLE action_target(target)")):
        trial, outside = new_trial(tmp, "schema_" + label)
        count = os.path.join(outside, "count")
        # a first run that triggers nothing makes every table
        r = run_rules(trial, hook_rules(trial, count, fire=False))
        c.scope("state with an added %s: first run" % label, r).process()
        rules = hook_rules(trial, count)
        db = r.obj["state"]
        con = sqlite3.connect(db)
        con.executescript(sql)
        con.commit()
        con.close()
        before = db_dump(db)
        for run_no in (1, 2):
            r = run_rules(trial, rules)
            sc = c.scope("state with an added %s, run %d" % (label, run_no), r)
            sc.process(want_json=False)
            sc.ok(r.rc != 0 and "state file refused" in r.err and "--state" in r.err,
                  "refused with a clear error", lib.short(r.err))
            sc.eq("nothing in the state file changed", db_dump(db), before)
            # were it used, the rule would be evaluated again next time:
            # only the action log would keep the action from repeating
            if os.path.exists(db):
                con = sqlite3.connect(db)
                con.execute("DELETE FROM rule_state") if any(
                    x[1] == "rule_state" for x in before if isinstance(x, tuple)) else None
                con.commit()
                con.close()
                before = db_dump(db)
        sc.ok(lines(count) <= 1, "the action did not run on every run",
              "ran %d times" % lines(count))
    # an untouched state: exactly once across runs
    trial, outside = new_trial(tmp, "schema_clean")
    count = os.path.join(outside, "count")
    rules = hook_rules(trial, count)
    for _ in range(2):
        r = run_rules(trial, rules)
        c.scope("untouched state", r).process()
        con = sqlite3.connect(r.obj["state"])
        con.execute("DELETE FROM rule_state")
        con.commit()
        con.close()
    c.scope("untouched state", r).eq("the action ran once over two runs", lines(count), 1)


def state_of(c, trial):
    """The state file of `trial`, as `run --json` names it, removed (with
    its journal files) after a first run made it."""
    r = stateful(trial)
    c.scope("first run of " + os.path.basename(trial), r).process()
    db = r.obj["state"]
    for end in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(db + end):
            os.unlink(db + end)
    return db


def stored_run(c, tmp, label, rules_text, update, params=()):
    """Runs once, rewrites the stored rule state with `update` (SQL), runs
    again: the Result of the second run."""
    trial, outside = new_trial(tmp, label)
    r = run_rules(trial, rules_text)
    c.scope(label + ", first run", r).process()
    db = r.obj["state"]
    con = sqlite3.connect(db)
    con.execute(update, params)
    con.commit()
    con.close()
    started = time.monotonic()
    r = run_rules(trial, rules_text, timeout=SHORT)
    r.seconds = time.monotonic() - started
    r.trial = trial
    return r


def as_nobody(args, state_home=None):
    """smrules run as user nobody (the tests run as root), or None when
    that cannot be done here; `state_home`: its $XDG_STATE_HOME (else the
    tests', which nobody may not write)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    env = ["env", "XDG_STATE_HOME=" + (state_home or lib.STATE_HOME)]
    return lib.Result(args, *lib.run(["--reuid=65534", "--regid=65534", "--clear-groups"] +
                                     env + [lib.SMRULES] + list(args), program="setpriv"))


def open_up(path):
    """Lets user nobody read path and the folders above it."""
    while path not in ("/", ""):
        os.chmod(path, os.stat(path).st_mode | 0o005)
        path = os.path.dirname(path)


def check_state_owner(c, tmp):
    trial, _ = new_trial(tmp, "state_owner")
    r = stateful(trial)
    db = r.obj["state"]
    os.chown(db, 65534, 65534)
    before = db_dump(db)
    r = stateful(trial)
    sc = c.scope("state file of another user", r)
    sc.process(want_json=False)
    sc.ok(r.rc != 0 and "belongs to uid 65534" in r.err, "refused, saying whose it is",
          lib.short(r.err))
    sc.eq("nothing in it changed", db_dump(db), before)
    os.chown(db, 0, 0)
    os.chmod(db, 0o666)
    r = stateful(trial)
    sc = c.scope("state file others may write", r)
    sc.process(want_json=False)
    sc.ok(r.rc != 0 and "written by other users" in r.err, "refused", lib.short(r.err))


def check_read_only(c, tmp):
    trial, _ = new_trial(tmp, "read_only")
    open_up(trial)
    for dirpath, dirs, files in os.walk(trial):
        for n in dirs + files:
            os.chmod(os.path.join(dirpath, n), 0o755 if n in dirs else 0o644)
    out = os.path.join(tmp, "ro-out")  # rule output goes elsewhere: nobody may write it
    os.makedirs(out)
    os.chmod(out, 0o777)
    open_up(out)
    rules = write(os.path.join(tmp, "ro-rules.yaml"), RULES)
    os.chmod(rules, 0o644)
    # the state is kept outside the trial: a trial its reader may not write
    # is read as any other
    home = os.path.join(tmp, "nobody-state")
    os.makedirs(home)
    os.chown(home, 65534, 65534)
    open_up(home)
    r = as_nobody(["run", "--trial", trial, "--json", "--rules", rules, "--output", out], home)
    if r is None:
        print("SKIP read-only trial: cannot run as another user here")
        return
    sc = c.scope("read-only trial", r)
    sc.process()
    sc.exit_code(r, [0])
    sc.ok("state in memory" not in r.err, "no warning: the state is kept", lib.short(r.err))
    sc.ok(r.obj and r.obj["state"].startswith(home + os.sep), "in nobody's state folder",
          r.obj and r.obj["state"])
    # a state folder that cannot be written: in memory, said once
    r = as_nobody(["run", "--trial", trial, "--json", "--rules", rules, "--output", out])
    sc = c.scope("state folder not writable", r)
    sc.process()
    sc.exit_code(r, [0])
    sc.eq("the warning is given once", r.err.count("using a state in memory"), 1)
    sc.ok("Permission denied" in r.err, "it names the real reason", lib.short(r.err))
    sc.ok("may be done again" in r.err and "--state PATH" in r.err,
          "it says what that means and the way out", lib.short(r.err))


def check_stored_text(c, tmp):
    forged = ('{"RuleTriggered":0},"status":"IssuesFound","injected":{"a":1', "forged keys")
    broken = ('{"a":[[[', "unbalanced brackets")
    for text, what in (forged, broken):
        r = stored_run(c, tmp, "stored report " + what, RULES,
                       "UPDATE rule_state SET report = ?", (text,))
        sc = c.scope("stored report with " + what, r)
        sc.process()
        rule = (r.obj or {"rules": [{}]})["rules"][0]
        sc.eq("status", rule.get("status"), "NoIssuesFound")
        sc.ok("injected" not in rule, "no injected key", lib.short(rule))
        res = os.path.join(r.trial, "rule-output", "vg", "result.json")
        try:
            res_obj = json.loads(read(res))
            good = res_obj["result"]["status"] == "NoIssuesFound" and \
                "injected" not in res_obj["result"]
        except (ValueError, KeyError, OSError) as e:
            good = False
            res_obj = str(e)
        sc.ok(good, "result.json is valid JSON with the true status", lib.short(res_obj))

    lua = write(os.path.join(tmp, "stateful.lua"), STATEFUL_LUA)
    rules = "rules:\n  - lua: %s\n    name: st\n" % lua
    slow = '{["n"]=("a"):rep(30):find(("a?"):rep(30)..("a"):rep(30)),}'
    r = stored_run(c, tmp, "stored Lua state runs code", rules,
                   "UPDATE rule_state SET impl_state = ?", (slow,))
    sc = c.scope("stored Lua state holding code", r)
    sc.process()
    sc.ok(r.rc != lib.TIMEOUT_RC, "finishes at once (the text is not run)",
          "%.1f s" % r.seconds)
    sc.eq("the rule still runs", dig_status(r), "NoIssuesFound")
    sc.ok("stored state not restored" in r.err, "says the stored state was not restored",
          lib.short(r.err))
    # a real stored state is restored: no warning
    trial, _ = new_trial(tmp, "stored_lua_ok")
    for _ in range(2):
        r = run_rules(trial, rules)
    sc = c.scope("stored Lua state written by smrules", r)
    sc.process()
    sc.ok("not restored" not in r.err, "restored without a warning", lib.short(r.err))


def dig_status(r):
    try:
        return r.obj["rules"][0]["status"]
    except (TypeError, KeyError, IndexError):
        return None


# ---------------------------------------------------------------------------
# Files that are not regular files, or change while read

EVENT0 = os.path.join("events", "000000000000", "000000000000_worker_0.tfevents")
INDEX0 = os.path.join("index", "000000000", "000000000000_worker_0.json")
TENSOR = ["--name", "DigitsMLP_layer1.fc.weight", "--step", "0"]


def fifo_at(path):
    if os.path.lexists(path):
        os.remove(path)
    os.mkfifo(path)


def check_fifos(c, tmp):
    for label, rel in (("event file", EVENT0), ("index file", INDEX0),
                       ("training_job_end.ts", "training_job_end.ts")):
        trial, _ = new_trial(tmp, "fifo_" + label.replace(" ", "_"))
        fifo_at(os.path.join(trial, rel))
        for cmd in (["inspect", "--trial", trial, "--json"],
                    ["tensor", "--trial", trial, "--json", "--values"] + TENSOR,
                    ["run", "--trial", trial, "--json",
                     "--rules", write(os.path.join(tmp, "r.yaml"), RULES)]):
            r = run(cmd, timeout=SHORT)
            sc = c.scope("FIFO as the %s: %s" % (label, cmd[0]), r)
            sc.process(want_json=False)
            sc.ok(r.rc != lib.TIMEOUT_RC, "does not block")
        if rel == EVENT0:
            sc.ok("not a regular file" in r.err or "not a regular file" in r.out,
                  "says it is not a regular file", lib.short(r.err + r.out))
    trial, _ = new_trial(tmp, "fifo_rules")
    rules = os.path.join(tmp, "fifo_rules.yaml")
    fifo_at(rules)
    for cmd in (["validate", rules],
                ["run", "--trial", trial, "--rules", rules, "--json"]):
        r = run(cmd, timeout=SHORT)
        sc = c.scope("FIFO as the rules file: %s" % cmd[0], r)
        sc.process(want_json=False)
        sc.ok(r.rc not in (0, lib.TIMEOUT_RC) and "not a regular file" in r.err,
              "refused at once: not a regular file", lib.short(r.err))


def check_shrinking(c, tmp):
    """The event file is truncated and written back, over and over, while
    it is read: each read either succeeds or fails with an error, never a
    signal."""
    trial, _ = new_trial(tmp, "shrinking")
    ev = os.path.join(trial, EVENT0)
    data = read_bytes(ev)
    stop = threading.Event()

    def churn():
        fd = os.open(ev, os.O_RDWR)
        try:
            while not stop.is_set():
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
        finally:
            os.close(fd)

    th = threading.Thread(target=churn)
    th.start()
    signals = []
    try:
        for _ in range(40):
            r = run(["tensor", "--trial", trial, "--json", "--values", "--fresh"] + TENSOR)
            if r.rc < 0 or r.rc == lib.TIMEOUT_RC:
                signals.append(r.rc)
    finally:
        stop.set()
        th.join()
    c.ok(not signals, "event file shrinking while read: 40 tensor reads, no signal",
         "exit codes %s" % signals)


def check_bad_index_entry(c, tmp):
    """One entry with an absurd length costs that tensor at that step only."""
    trial, _ = new_trial(tmp, "bad_entry")
    path = os.path.join(trial, INDEX0)
    ix = json.loads(read(path))
    names = [e["tensorname"] for e in ix["tensor_payload"]]
    victim, other = "DigitsMLP_layer1.fc.weight", "DigitsMLP_out.bias"
    for e in ix["tensor_payload"]:
        if e["tensorname"] == victim:
            e["length"] = 2 ** 62
    write(path, json.dumps(ix))
    r = run(["tensor", "--trial", trial, "--json", "--fresh", "--name", other, "--step", "0",
             "--values"])
    sc = c.scope("index with one absurd length: another tensor of that step", r)
    sc.process()
    sc.exit_code(r, [0])
    sc.ok(isinstance(r.obj, dict) and r.obj.get("values"), "its values are read",
          lib.short(r.obj))
    r = run(["tensor", "--trial", trial, "--json", "--fresh", "--name", victim, "--step", "0"])
    sc = c.scope("index with one absurd length: that tensor", r)
    sc.process()
    sc.ok(r.rc != 0 and "length" in r.out + r.err, "an error naming the bad length",
          lib.short(r.out + r.err))
    r = run(["inspect", "--trial", trial, "--json", "--fresh"])
    sc = c.scope("index with one absurd length: inspect", r)
    sc.process()
    steps = {t["name"]: t["steps"] for t in (r.obj or {}).get("tensors", [])}
    sc.ok(all(0 in steps.get(n, []) for n in names if n != victim),
          "every other tensor still has step 0", lib.short(steps))


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------------------
# StopTraining signals only a process it can prove

THREADED = """
import threading, time, sys
t = threading.Thread(target=time.sleep, args=(120,), daemon=True)
t.start()
time.sleep(0.2)
print(t.native_id, flush=True)
time.sleep(120)
"""


def stop_rules(trial, pid_file, extra=""):
    lua = write(os.path.join(os.path.dirname(trial), "fire.lua"), FIRE_LUA)
    return ("actions:\n  StopTraining:\n    pid_file: %s\n    grace_seconds: 2\n%s"
            "rules:\n  - lua: %s\n    name: fire\n    end_step: 1\n"
            "    actions: [StopTraining]\n" % (pid_file, extra, lua))


def stop_case(c, tmp, label, proc, pid_text, want, detail, extra="", file_age=0):
    trial, outside = new_trial(tmp, "stop_" + re.sub(r"\W+", "_", label))
    pid_file = write(os.path.join(outside, "train.pid"), pid_text + "\n")
    if file_age:  # the file was written before the process it names started
        os.utime(pid_file, (time.time() - file_age,) * 2)
    try:
        r = run_rules(trial, stop_rules(trial, pid_file, extra), extra=["--fresh"])
        sc = c.scope("StopTraining, " + label, r)
        sc.process()
        acts = (r.obj or {}).get("actions") or [{}]
        sc.eq("outcome", acts[0].get("outcome"), want)
        sc.ok(detail in (acts[0].get("detail") or ""), "says why",
              lib.short(acts[0].get("detail")))
        if want == "ok":  # wait for the exit (a hang guard), not a pause
            try:
                proc.wait(SHORT)
            except subprocess.TimeoutExpired:
                pass
            sc.ok(proc.poll() is not None, "the process is stopped", "still running")
        else:  # smrules has exited: a signal it sent would be pending by now
            sc.ok(untouched(proc), "the process is untouched",
                  "exited with %s" % proc.returncode if proc.poll() is not None
                  else "a signal is pending")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def spawn(argv):
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


def untouched(proc):
    """Alive, and no signal waiting for it (/proc/PID/status)."""
    if proc.poll() is not None:
        return False
    try:
        with open("/proc/%d/status" % proc.pid) as f:
            masks = [line.split(":", 1)[1] for line in f if line.startswith(("SigPnd", "ShdPnd"))]
    except OSError:
        return False
    return all(int(m.strip(), 16) == 0 for m in masks)


def became(proc, comm):
    """Wait until the process runs `comm` (it has exec'd; a hang guard)."""
    end = time.monotonic() + SHORT
    while time.monotonic() < end:
        try:
            with open("/proc/%d/comm" % proc.pid) as f:
                if f.read().strip() == comm:
                    return True
        except OSError:
            return False
        time.sleep(0.01)
    return False


# a pid file is written by the job: the process it names must pass a check
# given with pid_file, and, as root, a root process needs allow_root
ROOT = "    allow_root: true\n" if os.geteuid() == 0 else ""
SLEEP_CMDLINE = "    cmdline: [sleep, '60']\n"


def check_stop(c, tmp):
    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "own process, pid file with a cmdline check", p, str(p.pid), "ok",
              "sent SIGTERM", extra=ROOT + SLEEP_CMDLINE)

    # an unrelated process of ours the job named: the file alone proves nothing
    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "pid file without a check", p, str(p.pid), "refused",
              "give cmdline, comm or exe with pid_file", extra=ROOT)

    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "pid file, cmdline differs", p, str(p.pid), "refused",
              "is not the configured cmdline", extra=ROOT + "    cmdline: [sleep, '61']\n")

    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "pid file with a comm check", p, str(p.pid), "ok", "sent SIGTERM",
              extra=ROOT + "    comm: sleep\n")

    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "pid file, comm differs", p, str(p.pid), "refused",
              "whose comm 'sleep' is not 'python3'", extra=ROOT + "    comm: python3\n")

    sleep_exe = os.path.realpath(shutil.which("sleep"))
    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "pid file with an exe check", p, str(p.pid), "ok", "sent SIGTERM",
              extra=ROOT + "    exe: %s\n" % json.dumps(sleep_exe))

    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "pid file, exe differs", p, str(p.pid), "refused", "whose exe",
              extra=ROOT + "    exe: /usr/bin/no-such-trainer\n")

    # the process started after the file was last written: not the one it meant
    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "pid file older than its process", p, str(p.pid), "refused",
              "the pid was reused", extra=ROOT + SLEEP_CMDLINE, file_age=3600)

    if os.geteuid() == 0:
        p = spawn(["sleep", "60"])
        stop_case(c, tmp, "root process, allow_root off", p, str(p.pid), "refused",
                  "runs as root (uid 0)", extra=SLEEP_CMDLINE)
    else:
        print("SKIP StopTraining of a root process: not root here")

    p = spawn([sys.executable, "-c", THREADED])
    tid = p.stdout.readline().strip()
    stop_case(c, tmp, "thread id in the pid file", p, tid, "refused",
              "is a thread of process %d" % p.pid, extra=ROOT + SLEEP_CMDLINE)

    p = spawn(["sleep", "60"])
    stop_case(c, tmp, "pid beyond pid_t", p, str(2 ** 32 + p.pid), "refused",
              "does not hold a process id", extra=ROOT + SLEEP_CMDLINE)

    if os.geteuid() == 0 and shutil.which("setpriv"):
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60"]
        p = spawn(nobody)
        became(p, "sleep")  # setpriv has dropped to nobody and exec'd sleep
        stop_case(c, tmp, "another user's process", p, str(p.pid), "refused",
                  "belongs to uid 65534", extra=SLEEP_CMDLINE)
        p = spawn(nobody)
        became(p, "sleep")
        stop_case(c, tmp, "another user's process, allowed", p, str(p.pid), "ok",
                  "sent SIGTERM", extra="    allow_uid: 65534\n" + SLEEP_CMDLINE)
    else:
        print("SKIP StopTraining of another user's process: not root here")


# ---------------------------------------------------------------------------
# Lua budgets count what C does for the rule

# a pattern PCRE2 backtracks on without end over any name (no '!' or '#'
# in tensor names): each match runs into PCRE2's match limit
CATASTROPHIC = "^(.+.?)+[!#]"


def catastrophic_collection(trial):
    """The trial's own "gradients" collection selects with CATASTROPHIC."""
    path = os.path.join(trial, "collections", "000000000", "worker_0_collections.json")
    with open(path) as f:
        doc = json.load(f)
    doc["collections"]["gradients"]["include_regex"] = [CATASTROPHIC]
    write(path, json.dumps(doc))


LUA_ATTACKS = (
    ("optional pattern", 'local s = ("a"):rep(28) s:find(("a?"):rep(28)..("a"):rep(28))',
     "instruction limit"),
    ("balance pattern", '("("):rep(400000):find("%b()")', "instruction limit"),
    ("table.insert at the front",
     "local t = {} for i = 1, 200000 do t[i] = i end"
     " for i = 1, 100000 do table.insert(t, 1, i) end", "instruction limit"),
    ("table.remove at the front",
     "local t = {} for i = 1, 200000 do t[i] = i end"
     " for i = 1, 100000 do table.remove(t, 1) end", "instruction limit"),
    ("table.unpack of a long list",
     "local t = {} for i = 1, 100000 do t[i] = i end"
     " for i = 1, 100000 do local n = select('#', table.unpack(t, 1, 7000)) end",
     "instruction limit"),
    ("report data", 'local big = ("x"):rep(8 * 1024 * 1024)'  # charged 512 K
     ' for i = 1, 200 do report.details{["k" .. i] = big} end', "memory limit"),
    ("endless loop under a huge instruction limit", "while true do end", "time limit"),
    # with a worker the value is read each time, not shared: each read is
    # charged, so 20,000 calls (some 160,000 instructions of Lua) exceed
    # the limit
    ("statistics of a value read again and again",
     'local t = trial:tensor("DigitsMLP_layer1.fc.weight") local w = t:value(0).worker'
     ' for i = 1, 20000 do local s = t:stats(0, {worker = w}) end', "instruction limit"),
    ("counts of a value read again and again",
     'local t = trial:tensor("DigitsMLP_layer1.fc.weight") local w = t:value(0).worker'
     ' for i = 1, 20000 do local s = t:counts(0, {worker = w}) end', "instruction limit"),
    ("regex over the tensor names",
     'for i = 1, 100000 do local n = trial:tensor_names{regex = "%s"} end' % CATASTROPHIC,
     "instruction limit"),
    ("collection regex of the trial",
     'for i = 1, 100000 do local n = trial:tensor_names{collection = "gradients"} end',
     "instruction limit", catastrophic_collection),
)


def check_lua_budgets(c, tmp):
    for label, body, want, *prepare in LUA_ATTACKS:
        trial, outside = new_trial(tmp, "lua_" + label.replace(" ", "_")[:20])
        for p in prepare:
            p(trial)
        count = os.path.join(outside, "count")
        bad = write(os.path.join(outside, "bad.lua"),
                    "function invoke_at_step(step)\n%s\nreturn false end\n" % body)
        fire = write(os.path.join(outside, "fire.lua"), FIRE_LUA)
        limit = 10 ** 12 if want == "time limit" else 1000000
        timed = "  time_limit_seconds: 2\n" if want == "time limit" else ""
        rules = ("lua:\n  instruction_limit: %d\n%s"
                 "actions:\n  hooks:\n    count:\n      type: exec\n"
                 "      argv: [/bin/sh, -c, \"echo fired >> %s\"]\n"
                 "rules:\n  - lua: %s\n    name: bad\n    end_step: 1\n"
                 "  - lua: %s\n    name: fire\n    end_step: 1\n    actions: [count]\n"
                 % (limit, timed, count, bad, fire))
        # before: minutes to hours (and 4 GB for the report data); the
        # run's timeout is the hang guard (process() fails on it)
        r = run_rules(trial, rules, extra=["--fresh"], timeout=SHORT * 3)
        sc = c.scope("Lua rule over budget: " + label, r)
        sc.process()
        got = {x["name"]: x for x in (r.obj or {}).get("rules", [])}
        bad_r, fire_r = got.get("bad", {}), got.get("fire", {})
        sc.eq("that rule fails", bad_r.get("status"), "Error")
        sc.ok(want in (bad_r.get("message") or ""), "with a clear error",
              lib.short(bad_r.get("message")))
        sc.eq("the other rule goes on", fire_r.get("status"), "IssuesFound")
        sc.eq("its action runs", lines(count), 1)


def main():
    c = lib.Checker("test_hardening")
    tmp = tempfile.mkdtemp(prefix="smrules-hardening-")
    try:
        check_writes(c, tmp)
        check_plugin_dir_links(c, tmp)
        check_plugin_file_links(c, tmp)
        check_state_link(c, tmp)
        check_state_schema(c, tmp)
        check_state_owner(c, tmp)
        check_read_only(c, tmp)
        check_stored_text(c, tmp)
        check_fifos(c, tmp)
        check_shrinking(c, tmp)
        check_bad_index_entry(c, tmp)
        check_stop(c, tmp)
        check_lua_budgets(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
