#!/usr/bin/env python3
"""End-to-end: a trial on disk is listed again from where the stored
catalog ends, as one in S3 is (docs/formats.md#reading-index-files): a run
with a stored catalog lists only the step folders that can hold new index
files, and still finds

1. steps written since the last run (results equal a fresh run's);
2. a lagging worker's late files for steps the other workers had written
   (the listing starts at the first step it had not written);
3. a new step folder (index/000000001/ after 1,000 steps);
4. a trial rewritten in place with fewer steps: the stored catalog is not
   trusted, the answers equal a fresh inspect's;
5. in a live watch, an index file that could not be read at one refresh
   (a writer that does not rename into place) is listed again at the next
   ones, although a later step was read meanwhile (the test rule
   tests/cli/plugins/gate.c holding that later step tells the test when);
6. the same across processes: a `run --live` that ended while an index
   file was being written, then a second one once it is whole: the second
   reads it (a process lists a trial on disk whole once, then only what can
   be new).

How long a listing takes is measured by bench/run.sh section 2 (re-open);
this test checks that what it finds is right.
"""

import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

MANY = os.path.join(lib.ROOT, "examples", "many-rules.yaml")
GATE = os.path.join(os.path.dirname(lib.SMRULES), "tests", "plugins", "gate.so")


def strip(obj):
    """inspect/run JSON without the fields that name the trial or state."""
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items() if k not in ("trial", "state")}
    if isinstance(obj, list):
        return [strip(v) for v in obj]
    return obj


def copy_trial(src, dst, skip):
    """src to dst without the index files `skip` names (base names)."""
    def ignore(folder, names):
        return [n for n in names if n in skip or n == "EXPECT.json"]
    shutil.copytree(src, dst, ignore=ignore)


def index_folder(trial):
    return os.path.join(trial, "index", "000000000")


def run_rules(trial, out, state, extra=()):
    args = ["run", "--trial", trial, "--json", "--output", out, "--rules", MANY]
    return lib.run_json(args + (["--state", state] if state else ["--fresh"]) + list(extra))


def same_as_fresh(sc, got, trial, out, extra=()):
    fresh = run_rules(trial, out, None, extra)
    if sc.process(fresh) and sc.exit_code(fresh, [0, 1]):
        sc.ok(strip(got.obj) == strip(fresh.obj), "results equal a fresh run over all steps",
              lib.first_difference(strip(got.obj), strip(fresh.obj)))


def check_growing(c, tmp):
    src = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")
    names = sorted(os.listdir(index_folder(src)))
    later = names[8:]
    trial = os.path.join(tmp, "grow")
    copy_trial(src, trial, set(later))
    state = os.path.join(tmp, "grow.db")
    r1 = run_rules(trial, os.path.join(tmp, "o1"), state)
    sc = c.scope("growing: first run (8 of %d steps)" % len(names), r1)
    if sc.process(r1) and sc.exit_code(r1, [0, 1]):
        i1 = lib.run_json(lib.inspect_args(trial, state=state))
        sc.eq("steps seen", len((i1.obj or {}).get("steps", [])), 8)
    for f in later:
        shutil.copy(os.path.join(index_folder(src), f), index_folder(trial))
    r2 = run_rules(trial, os.path.join(tmp, "o2"), state)
    sc = c.scope("growing: second run (the other steps added)", r2)
    if sc.process(r2) and sc.exit_code(r2, [0, 1]):
        same_as_fresh(sc, r2, trial, os.path.join(tmp, "o2f"))


def check_lagging_worker(c, tmp):
    src = os.path.join(lib.FIXTURES, "trials", "two_workers_ddp")
    names = sorted(os.listdir(index_folder(src)))
    late = [n for n in names if n.endswith("worker_1.json")][2:]  # worker_1 wrote 2 steps
    c.at_least(2, late, "late index files of worker_1")
    trial = os.path.join(tmp, "lag")
    copy_trial(src, trial, set(late))
    state = os.path.join(tmp, "lag.db")
    r1 = run_rules(trial, os.path.join(tmp, "l1"), state, ["--live"])
    sc = c.scope("lagging worker: first run (worker_1 behind)", r1)
    sc.process(r1) and sc.exit_code(r1, [0, 1])
    for f in late:
        shutil.copy(os.path.join(index_folder(src), f), index_folder(trial))
    r2 = run_rules(trial, os.path.join(tmp, "l2"), state, ["--live"])
    sc = c.scope("lagging worker: second run (worker_1 caught up)", r2)
    if sc.process(r2) and sc.exit_code(r2, [0, 1]):
        same_as_fresh(sc, r2, trial, os.path.join(tmp, "l2f"), ["--live"])
        i2 = lib.run_json(lib.inspect_args(trial, live=True, state=state))
        fresh = lib.run_json(lib.inspect_args(trial, live=True, state=os.path.join(tmp, "lag-fresh.db")))
        sc.ok(strip(i2.obj) == strip(fresh.obj), "inspect: worker_1's late steps are known",
              lib.first_difference(strip(i2.obj), strip(fresh.obj)))


def write_steps(trial, steps):
    """Index files naming no tensor for `steps` (an empty step is still a
    step: docs/formats.md), in smdebug's folders of 1,000 steps."""
    for s in steps:
        d = os.path.join(trial, "index", "%09d" % (s // 1000))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "%012d_worker_0.json" % s), "w") as f:
            f.write('{"meta": {"mode": "TRAIN", "mode_step": %d, "event_file_name": '
                    '"events/%012d/%012d_worker_0.tfevents"}, "tensor_payload": []}' % (s, s, s))


def inspect_steps(trial, state):
    r = lib.run_json(lib.inspect_args(trial, state=state))
    return r, [s.get("step") if isinstance(s, dict) else s for s in (r.obj or {}).get("steps", [])]


def check_new_folder(c, tmp):
    trial = os.path.join(tmp, "folders")
    os.makedirs(trial)
    write_steps(trial, range(990, 1000))
    state = os.path.join(tmp, "folders.db")
    r1, s1 = inspect_steps(trial, state)
    sc = c.scope("step folders: first inspect (steps 990-999)", r1)
    if sc.process(r1) and sc.exit_code(r1, [0]):
        sc.eq("steps", len(s1), 10)
    write_steps(trial, range(1000, 1005))
    same_as_fresh_inspect(c, "step folders: index/000000001/ appears", trial, state, 15)
    # the newest step's file removed, then the trial rewritten with fewer
    # steps from step 0 (a new run in the same folder): the stored catalog
    # is not trusted
    shutil.rmtree(os.path.join(trial, "index"))
    write_steps(trial, range(0, 3))
    same_as_fresh_inspect(c, "step folders: trial rewritten with 3 steps", trial, state, 3)


def same_as_fresh_inspect(c, label, trial, state, n_steps):
    """inspect with the stored catalog `state` sees n_steps steps and says
    what an inspect with a new catalog says."""
    r, steps = inspect_steps(trial, state)
    sc = c.scope(label, r)
    if sc.process(r) and sc.exit_code(r, [0]):
        fresh, _ = inspect_steps(trial, state + ".fresh-%d.db" % n_steps)
        sc.eq("steps", len(steps), n_steps)
        sc.ok(strip(r.obj) == strip(fresh.obj), "equal to an inspect with a new catalog",
              lib.first_difference(strip(r.obj), strip(fresh.obj)))


def index_rows(state, name):
    """The catalog's rows for the index file `name` in the state file
    (status 0: read), as the run left them."""
    db = sqlite3.connect(state)
    try:
        return db.execute("SELECT status FROM index_files WHERE path LIKE ?", ("%/" + name,)).fetchall()
    finally:
        db.close()


def check_left_out_file(c, tmp):
    src = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")
    names = sorted(os.listdir(index_folder(src)))
    partial, later = names[8], names[9]
    trial = os.path.join(tmp, "partial")
    copy_trial(src, trial, (set(names[8:]) - {later}) | {"training_job_end.ts"})
    with open(os.path.join(index_folder(src), partial), "rb") as f:
        whole = f.read()
    target = os.path.join(index_folder(trial), partial)
    with open(target, "wb") as f:
        f.write(whole[:len(whole) // 2])  # being written
    release = os.path.join(tmp, "release")
    rules = os.path.join(tmp, "gate.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - plugin: %s\n    name: gate\n    parameters:\n"
                "      hold_at: %d\n      release: %s\n" % (GATE, int(later[:12]), release))
    state = os.path.join(tmp, "partial.db")
    r = lib.Running(["run", "--trial", trial, "--watch", "--json", "--state", state,
                     "--output", os.path.join(tmp, "p-out"), "--rules", rules])
    held = r.wait_line(r"^gate: holding step %d$" % int(later[:12]))
    with open(target, "wb") as f:  # finished in place
        f.write(whole)
    with open(release, "w"):
        pass
    shutil.copy(os.path.join(src, "training_job_end.ts"), trial)
    rc, obj, text = r.finish_json()
    res = lib.Result(r.args[1:], rc, text, "")
    sc = c.scope("live: an index file read while being written", res)
    sc.ok(held, "the watch read the step after it first (the gate held it)", lib.short(text[-600:]))
    if sc.exit_code(res, [0, 1]):
        sc.eq("its index file, read once it was whole", index_rows(state, partial), [(0,)])


def check_left_out_by_earlier_run(c, tmp):
    src = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")
    names = sorted(os.listdir(index_folder(src)))
    partial = names[8]
    trial = os.path.join(tmp, "partial2")
    copy_trial(src, trial, {partial, "training_job_end.ts"})
    with open(os.path.join(index_folder(src), partial), "rb") as f:
        whole = f.read()
    target = os.path.join(index_folder(trial), partial)
    with open(target, "wb") as f:
        f.write(whole[:len(whole) // 2])
    state = os.path.join(tmp, "partial2.db")
    r1 = run_rules(trial, os.path.join(tmp, "q1"), state, ["--live"])
    sc = c.scope("two runs: the first while an index file is being written", r1)
    sc.process(r1) and sc.exit_code(r1, [0, 1])
    first = index_rows(state, partial)
    with open(target, "wb") as f:
        f.write(whole)
    r2 = run_rules(trial, os.path.join(tmp, "q2"), state, ["--live"])
    sc = c.scope("two runs: the second once it is whole", r2)
    if sc.process(r2) and sc.exit_code(r2, [0, 1]):
        sc.eq("the file, left out by the first run", first, [])
        sc.eq("its index file, read by the second", index_rows(state, partial), [(0,)])


def main():
    c = lib.Checker("test_local_incremental")
    tmp = tempfile.mkdtemp(prefix="smrules-local-inc-")
    try:
        check_growing(c, tmp)
        check_lagging_worker(c, tmp)
        check_new_folder(c, tmp)
        check_left_out_file(c, tmp)
        check_left_out_by_earlier_run(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
