#!/usr/bin/env python3
"""End-to-end: `smrules inspect` and `smrules tensor` against the real smdebug
trials in tests/fixtures/trials (EXPECT.json `summary` and `tensors`).

Offline inspect must report what the summary lists; the trials all have
training_job_end.ts, so `inspect --live` must report the same steps.  Every
sampled tensor is read with `smrules tensor` and compared field by field
(stats over finite elements, rel 1e-6; sha256 exact)."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

MODE_LOOKUPS_PER_MODE = 2  # entries per (case, mode) also read with --mode
STATE_CASES = ("healthy_mlp_digits", "two_workers_ddp")  # shared --state catalog, concurrent creation


def expected_tensor(t):
    exp = {k: t[k] for k in ("name", "mode", "mode_step", "worker", "shape", "sha256")}
    exp["step"] = t["global_step"]
    exp["dtype"] = lib.cli_dtype(t["dtype"])
    exp["stored_dtype"] = lib.cli_stored_dtype(t["proto_dtype"])
    if "strings" in t:
        exp["values"] = t["strings"]
    else:
        exp["stats"] = {k: t[k] for k in ("min", "max", "mean", "sum", "l2")}
        exp["stats"].update(nan=t["nan_count"], inf=t["inf_count"], count=t["count"])
    return exp


def check_steps(sc, o, s):
    steps = s["global_steps"]
    sc.field_eq(o, "steps", steps)
    sc.field_eq(o, "steps_all", steps)
    sc.field_eq(o, "last_complete_step", max(steps) if steps else -1)
    sc.field_eq(o, "training_ended", s["training_job_end_ts"])


def check_modes(sc, o, s):
    want_modes = {}
    for st in s["steps"]:
        m = want_modes.setdefault(st["mode"], {"steps": [], "mode_steps": []})
        m["steps"].append(st["global_step"])
        m["mode_steps"].append(st["mode_step"])
    got = o.get("modes")
    if not sc.ok(isinstance(got, dict), "modes", "not an object: %s" % lib.short(got)):
        return
    sc.eq("modes (names)", sorted(got), sorted(s["modes"]))
    for mode, want in sorted(want_modes.items()):
        sc.eq("modes.%s.steps" % mode, lib.dig(got, mode + ".steps"), want["steps"])
        sc.eq("modes.%s.mode_steps" % mode, lib.dig(got, mode + ".mode_steps"), s["mode_steps"][mode])
    want_sm = {str(st["global_step"]): [st["mode"], st["mode_step"]] for st in s["steps"]}
    got_sm = o.get("step_modes")
    if sc.ok(isinstance(got_sm, dict), "step_modes", "not an object"):
        sc.eq("step_modes (steps)", sorted(got_sm, key=int), sorted(want_sm, key=int))
        for g, want in want_sm.items():
            sc.eq("step_modes[%s]" % g, got_sm.get(g), want)


def check_collections(sc, o, s):
    got = o.get("collections")
    if not sc.ok(isinstance(got, dict), "collections", "not an object"):
        return
    sc.eq("collections (names)", sorted(got), sorted(s["collections"]))
    for name, coll in sorted(s["collections"].items()):
        sc.eq("collections[%s] members" % name, got.get(name), coll["members"])
    sc.field_eq(o, "collections_error", None)
    sc.field_eq(o, "errors", [])


def check_tensor_list(sc, o, s):
    tensors = o.get("tensors")
    if not sc.ok(isinstance(tensors, list), "tensors", "not a list"):
        return {}
    names = [t.get("name") for t in tensors if isinstance(t, dict)]
    sc.eq("tensors (names, sorted)", names, sorted(s["tensors"]))
    sc.eq("tensor count", len(names), s["tensor_count"])
    sc.ok(not any(str(n).startswith("smdebug/reductions/") for n in names),
          "tensors", "a reduction tensor is listed by its stored name")
    by_name = {t.get("name"): t for t in tensors if isinstance(t, dict)}
    for name, steps in sorted(s["tensors"].items()):
        t = by_name.get(name)
        if not sc.ok(t is not None, "tensor %s" % name, "not listed"):
            continue
        sc.eq("tensor %s steps" % name, t.get("steps"), steps)
        sc.eq("tensor %s steps_all" % name, t.get("steps_all"), steps)
        wbs = t.get("workers_by_step")
        if not sc.ok(isinstance(wbs, dict), "tensor %s workers_by_step" % name, "not an object"):
            continue
        sc.eq("tensor %s workers_by_step (steps)" % name, sorted(wbs, key=int), [str(g) for g in steps])
        for g, ws in sorted(wbs.items()):
            sc.ok(isinstance(ws, list) and ws and ws == sorted(ws) and set(ws) <= set(s["workers"]),
                  "tensor %s workers_by_step[%s]" % (name, g),
                  "got %s, expected a sorted non-empty subset of %s" % (lib.short(ws), s["workers"]))
    return by_name


def check_inspect(c, case, exp, r, live):
    sc = c.scope("%s: inspect%s" % (case, " --live" if live else ""), r)
    if not sc.process() or not sc.exit_code(r, [0]) or not isinstance(r.obj, dict):
        return None
    s, o = exp["summary"], r.obj
    check_steps(sc, o, s)
    if live:
        return o
    sc.field_eq(o, "workers", s["workers"])
    sc.field_eq(o, "num_workers", len(s["workers"]))
    check_modes(sc, o, s)
    check_collections(sc, o, s)
    check_tensor_list(sc, o, s)
    return o


def tensor_jobs(case, trial, exp):
    """(args, expected, label) for every sampled tensor, plus --mode lookups
    and default-worker lookups."""
    workers = exp["summary"]["workers"]
    single = len(workers) == 1
    jobs, per_mode = [], {}
    for t in exp["tensors"]:
        e = expected_tensor(t)
        values = "values" in e
        label = "%s: tensor %s step %d worker %s" % (case, t["name"], t["global_step"], t["worker"])
        # Single worker: exercise the default-worker path; several: name it.
        jobs.append((lib.tensor_args(trial, t["name"], t["global_step"], None if single else t["worker"],
                                     values=values), e, label))
        if not single and t["worker"] == workers[0]:
            jobs.append((lib.tensor_args(trial, t["name"], t["global_step"], values=values), e,
                         label + " (no --worker: smallest worker)"))
        n = per_mode.get(t["mode"], 0)
        if n < MODE_LOOKUPS_PER_MODE:
            per_mode[t["mode"]] = n + 1
            jobs.append((lib.tensor_args(trial, t["name"], t["mode_step"], t["worker"], mode=t["mode"],
                                         values=values), e,
                         label + " (--mode %s --step %d)" % (t["mode"], t["mode_step"])))
    return jobs


def check_membership(c, case, inspected, exp):
    """Each sampled tensor is a member of the collections the fixture names,
    and its worker holds it at that step."""
    colls = inspected.get("collections") if inspected else None
    by_name = {t.get("name"): t for t in (inspected or {}).get("tensors") or [] if isinstance(t, dict)}
    if not isinstance(colls, dict):
        return
    seen = set()
    for t in exp["tensors"]:
        for cname in t["collections"]:
            if (t["name"], cname) in seen:
                continue
            seen.add((t["name"], cname))
            c.ok(t["name"] in (colls.get(cname) or []),
                 "%s: inspect collections[%s]" % (case, cname), "%s is not a member" % t["name"])
        wbs = (by_name.get(t["name"]) or {}).get("workers_by_step") or {}
        c.ok(t["worker"] in wbs.get(str(t["global_step"]), []),
             "%s: inspect tensor %s workers_by_step[%d]" % (case, t["name"], t["global_step"]),
             "%s missing (got %s)" % (t["worker"], lib.short(wbs.get(str(t["global_step"])))))


def main():
    c = lib.Checker("test_trials")
    folder = os.path.join(lib.FIXTURES, "trials")
    before = lib.tree_snapshot(folder)
    cases = [(name, lib.rel(path), lib.load_json(os.path.join(path, "EXPECT.json")))
             for name, path in c.cases("trials")]
    inspect_args = []
    for _, trial, _ in cases:
        inspect_args += [lib.inspect_args(trial), lib.inspect_args(trial, live=True)]
    inspected = lib.run_all(inspect_args)
    jobs = []
    for i, (case, trial, exp) in enumerate(cases):
        o = check_inspect(c, case, exp, inspected[2 * i], live=False)
        check_inspect(c, case, exp, inspected[2 * i + 1], live=True)
        check_membership(c, case, o, exp)
        jobs += tensor_jobs(case, trial, exp)
        if case in STATE_CASES and inspected[2 * i].rc == 0 and inspected[2 * i + 1].rc == 0:
            lib.check_state_db(c, case, trial, inspected[2 * i].obj, inspected[2 * i + 1].obj,
                               concurrent=8, rounds=4)
    results = lib.run_all([a for a, _, _ in jobs])
    for (args, e, label), r in zip(jobs, results):
        sc = c.scope(label, r)
        if sc.process() and sc.exit_code(r, [0]) and isinstance(r.obj, dict):
            lib.check_tensor(sc, r.obj, e)
    lib.check_untouched(c, folder, before)
    c.finish()


if __name__ == "__main__":
    main()
