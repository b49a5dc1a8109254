#!/usr/bin/env python3
"""The state of a run lives outside the trial folder (docs/security.md#where-state-lives):
the training job writes the trial folder, so an action log there could say
that StopTraining already ran.

- where: `run --json` names the state file; it is in the user's state
  folder ($XDG_STATE_HOME/smrules/trials/<key>), nothing is made inside
  the trial, and an action still runs exactly once across two runs;
- the attack: a launched trainer that writes `<trial>/.smrules/state.db`
  with an action log saying StopTraining ran ("ok") for every trigger, before
  its first step, is stopped all the same, and smrules says that file is not
  trusted;
- benign control: the same rows written into the real state file do keep the
  stop from repeating (so the planted rows are well-formed: the defence is
  where the file is, not a mistake in the rows) -- the documented limit of a
  job that runs as smrules' own user and seeks the state folder out;
- a `.smrules` in the trial that is a link to elsewhere: nothing is read or
  created there.

Each check follows from smrules' exit, its JSON and the trainer's end; nothing
waits for a duration."""

import json
import os
import sqlite3
import subprocess
import sys
import tempfile

import lib

TRAINER = os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer")
RULES = """rules:
  - rule: LossNotDecreasing
    parameters: {num_steps: 10, diff_percent: 0.1, mode: TRAIN}
    actions: [StopTraining]
"""
# what the trainer runs before its first step: an action log saying that
# every trigger's StopTraining of LossNotDecreasing was done
# (with the catalog's own identity rows, as smrules writes them, so that an
# smrules that trusted the file would take it as this trial's state)
PLANT = r"""
import os, sqlite3, sys
db, schema, version = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(os.path.dirname(db), exist_ok=True)
root = os.path.realpath(os.path.dirname(os.path.dirname(db)))
con = sqlite3.connect(db)
con.executescript(open(schema).read())
con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (version,))
con.execute("INSERT OR IGNORE INTO meta VALUES ('root', ?)", (root,))
con.executemany("INSERT OR REPLACE INTO action_log(instance, action, trigger_ordinal,"
                " step, status, attempts, detail, started, finished)"
                " VALUES ('LossNotDecreasing', 'StopTraining', ?, 0, 'ok', 1, 'stopped', 0, 0)",
                [(i,) for i in range(1, 5001)])
con.commit()
con.close()
"""


write = lib.write_text


def run(tmp, name, trial, extra=(), command=None):
    rules = write(os.path.join(tmp, name + ".yaml"), RULES)
    args = [lib.SMRULES, "run", "--trial", trial, "--rules", rules, "--json",
            "--output", os.path.join(tmp, name + "-out")] + list(extra)
    if command:
        args += ["--timeout", "300", "--", "sh", "-c", command]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=lib.ROOT)
    r = lib.Result(args[1:], p.returncode, p.stdout, p.stderr)
    return r


def stop_outcome(r):
    acts = (r.obj or {}).get("actions") or []
    stop = [a for a in acts if a.get("action") == "StopTraining"]
    return stop[0] if stop else {}


def trainer_command(trial, plant_at, schema, steps):
    plant = "%s %s %s %s %s && " % (sys.executable,
                                    os.path.join(os.path.dirname(trial), "plant.py"),
                                    plant_at, schema[0], schema[1]) if plant_at else ""
    return ("%sexec %s %s --steps %d --interval-ms 10 --plateau-at 5 >/dev/null 2>&1 </dev/null"
            % (plant, TRAINER, trial, steps))


def schema_of(db, out):
    """The CREATE statements of a state file smrules made, and its schema version."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall()
    version = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
    con.close()
    sql = ";\n".join(r[0].replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
                     .replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1) for r in rows)
    return write(out, sql + ";\n"), version


def main():
    c = lib.Checker("test_state_outside")
    with tempfile.TemporaryDirectory(prefix="smrules-state-outside-") as tmp:
        write(os.path.join(tmp, "plant.py"), PLANT)

        # where the state goes: a trial that has its folders but no step yet
        # (smrules has nothing to evaluate; the state file is made)
        ctrl = os.path.join(tmp, "control")
        os.makedirs(os.path.join(ctrl, "index"))
        os.makedirs(os.path.join(ctrl, "events"))
        r = run(tmp, "control-first", ctrl, command="true")
        sc = c.scope("where the state lives", r)
        sc.process()
        state = (r.obj or {}).get("state") or ""
        sc.ok(state.startswith(os.path.join(lib.STATE_HOME, "smrules", "trials") + os.sep)
              and state.endswith("/state.db") and os.path.isfile(state),
              "run --json names a state file in $XDG_STATE_HOME/smrules/trials/", state)
        sc.ok(not os.path.exists(os.path.join(ctrl, ".smrules")), "nothing made inside the trial",
              sorted(os.listdir(ctrl)))
        with open(os.path.join(os.path.dirname(state), "trial.txt")) as f:
            sc.ok(os.path.realpath(ctrl) in f.read(), "trial.txt beside it names the trial")
        schema = schema_of(state, os.path.join(tmp, "schema.sql"))
        sc.ok("action_log" in open(schema[0]).read(), "the action log is in that file")

        # benign control: the rows written where the state really is are
        # taken as done (a run of the same trial as the same user)
        subprocess.run([sys.executable, os.path.join(tmp, "plant.py"), state, schema[0], schema[1]],
                       check=True)
        r = run(tmp, "control", ctrl, command=trainer_command(ctrl, None, None, 300))
        sc = c.scope("control: the rows in the real state file", r)
        sc.process()
        stop = stop_outcome(r)
        sc.eq("StopTraining skipped as done in an earlier run", stop.get("outcome"), "skipped")
        sc.ok("earlier run" in json.dumps(stop), "it says why", lib.short(stop))
        sc.eq("the trainer ran to its end", ((r.obj or {}).get("training") or {}).get("exit_code"), 0)

        # the attack: the launched trainer plants the log in the trial folder
        trial = os.path.join(tmp, "attack")
        planted = os.path.join(trial, ".smrules", "state.db")
        r = run(tmp, "attack", trial, command=trainer_command(trial, planted, schema, 100000))
        sc = c.scope("a launched trainer pre-claims StopTraining in <trial>/.smrules", r)
        sc.process()
        sc.ok(os.path.isfile(planted), "the trainer did plant its log")
        stop = stop_outcome(r)
        sc.eq("StopTraining ran all the same", stop.get("outcome"), "ok")
        training = (r.obj or {}).get("training") or {}
        sc.eq("the trainer was stopped by the rule", training.get("stopped_by"), "LossNotDecreasing")
        sc.eq("... with SIGTERM (exit 143)", training.get("exit_code"), 143)
        sc.ok("not trusted" in r.err and planted in r.err and "5000 actions" in r.err,
              "smrules says the file in the trial is not trusted, and what it holds",
              lib.short(r.err))
        sc.ok(r.obj and r.obj.get("state") != planted and
              not (r.obj.get("state") or "").startswith(trial + os.sep),
              "the state used is outside the trial", r.obj and r.obj.get("state"))

        # .smrules is a link out of the trial: nothing read or made there
        trial = os.path.join(tmp, "linked")
        os.makedirs(os.path.join(trial, "index"))
        os.makedirs(os.path.join(trial, "events"))
        outside = os.path.join(tmp, "outside")
        os.makedirs(outside)
        os.symlink(outside, os.path.join(trial, ".smrules"))
        r = run(tmp, "linked", trial, command="true")
        sc = c.scope(".smrules is a link", r)
        sc.process()
        sc.eq("nothing created where the link points", sorted(os.listdir(outside)), [])
        sc.exit_code(r, [0])
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
