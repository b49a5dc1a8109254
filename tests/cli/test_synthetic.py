#!/usr/bin/env python3
"""End-to-end: `smrules inspect` and `smrules tensor` against the synthetic
trials in tests/fixtures/synthetic (EXPECT.json `summary`, `trial_api`,
`tensors`, `reduction_api`, `computed_reductions`).  `expect` (rule
invocations) is tested elsewhere.

Offline inspect (docs/formats.md#differences-from-smdebug, Decision F11) treats training as ended: every
known step is complete, so `steps` == trial_api.steps_show_incomplete.
`inspect --live` follows smdebug: `steps` == trial_api.steps and
`last_complete_step` == trial_api.last_complete_step."""

import math
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

UNAVAILABLE = 4          # exit code for StepUnavailable / TensorUnavailable*
READ_ERRORS = (3, 4)     # format/IO error or unavailable


# --------------------------------------------------------------------------
# inspect

def expected_modes(summary):
    out = {}
    for mode, m in summary["mode_step_of_global_step"].items():
        pairs = sorted((int(g), ms) for g, ms in m.items())
        if pairs:
            out[mode] = {"steps": [g for g, _ in pairs], "mode_steps": [ms for _, ms in pairs]}
    return out


def check_inspect_common(sc, o, exp):
    s, ta = exp["summary"], exp["trial_api"]
    sc.field_eq(o, "training_ended", s["training_end_marker"])
    sc.field_eq(o, "steps_all", ta["steps_show_incomplete"])
    got_w = o.get("workers")
    # trial_api.workers follows the collections file names, summary.workers the
    # index/event file names; they differ where a worker named algo-1 writes
    # worker_0_collections.json.  The contract leaves this open: accept either.
    sc.ok(got_w in (ta["workers"], s["workers"]), "workers",
          "got %s, expected %s%s" % (lib.short(got_w), ta["workers"],
                                     "" if ta["workers"] == s["workers"] else " or %s" % s["workers"]))
    sc.field_eq(o, "num_workers", ta["num_workers"])


def check_tensor_list(sc, o, ta, live):
    tensors = o.get("tensors")
    if not sc.ok(isinstance(tensors, list), "tensors", "not a list"):
        return
    names = [t.get("name") for t in tensors if isinstance(t, dict)]
    sc.eq("tensors (names, sorted)", names, ta["tensor_names"])
    by_name = {t.get("name"): t for t in tensors if isinstance(t, dict)}
    for name, want in sorted(ta["tensors"].items()):
        t = by_name.get(name)
        if not sc.ok(t is not None, "tensor %s" % name, "not listed"):
            continue
        sc.eq("tensor %s steps" % name, t.get("steps"), want["steps"] if live else want["steps_show_incomplete"])
        sc.eq("tensor %s steps_all" % name, t.get("steps_all"), want["steps_show_incomplete"])
        sc.eq("tensor %s workers_by_step" % name, t.get("workers_by_step"), want["workers_by_step"])
    if live:
        return
    # tensor_names(step=g): tensors with any entry at g
    for g, want in sorted(ta["tensor_names_by_step"].items(), key=lambda kv: int(kv[0])):
        got = sorted(n for n, t in by_name.items() if int(g) in (t.get("steps_all") or []))
        sc.eq("tensor names at step %s" % g, got, want)


def check_inspect_offline(sc, o, exp, case):
    s, ta = exp["summary"], exp["trial_api"]
    check_inspect_common(sc, o, exp)
    sc.field_eq(o, "steps", ta["steps_show_incomplete"])
    known = ta["steps_show_incomplete"]
    sc.field_eq(o, "last_complete_step", max(known) if known else -1)
    sc.field_eq(o, "step_modes", ta["mode_and_mode_step_of_global_step"])
    want_modes = expected_modes(s)
    got_modes = o.get("modes")
    if sc.ok(isinstance(got_modes, dict), "modes", "not an object"):
        sc.eq("modes (names)", sorted(got_modes), sorted(want_modes))
        for mode, want in sorted(want_modes.items()):
            sc.eq("modes.%s.steps" % mode, lib.dig(got_modes, mode + ".steps"), want["steps"])
            sc.eq("modes.%s.mode_steps" % mode, lib.dig(got_modes, mode + ".mode_steps"), want["mode_steps"])
    got_c = o.get("collections")
    want_c = ta["tensor_names_by_collection"]
    if sc.ok(isinstance(got_c, dict), "collections", "not an object"):
        sc.eq("collections (names)", sorted(got_c), sorted(want_c))
        for name, members in sorted(want_c.items()):
            sc.eq("collections[%s] members" % name, got_c.get(name), members)
    sc.field_eq(o, "collections_error", None)
    if case != "invoker_missing_event_file":  # a missing event file may be reported
        sc.field_eq(o, "errors", [])
    check_tensor_list(sc, o, ta, live=False)


def check_inspect_live(sc, o, exp):
    ta = exp["trial_api"]
    check_inspect_common(sc, o, exp)
    sc.field_eq(o, "steps", ta["steps"])
    sc.field_eq(o, "last_complete_step", ta["last_complete_step"])
    check_tensor_list(sc, o, ta, live=True)


def check_other_trial(sc, o, exp):
    """other_trials are identical copies of the main trial."""
    ta = exp["trial_api"]
    sc.field_eq(o, "steps", ta["steps_show_incomplete"])
    names = [t.get("name") for t in o.get("tensors") or [] if isinstance(t, dict)]
    sc.eq("tensors (names, sorted)", names, ta["tensor_names"])


# --------------------------------------------------------------------------
# tensor values

class Job:
    def __init__(self, args, label, check, want_json=True):
        self.args, self.label, self.check, self.want_json = args, label, check, want_json


def values_expectation(t):
    e = {k: t[k] for k in ("name", "step", "mode", "mode_step", "worker", "shape") if k in t}
    e["dtype"] = lib.cli_dtype(t["dtype"])
    e["stored_dtype"] = lib.cli_stored_dtype(t["stored_dtype"])
    if t.get("sha256"):
        e["sha256"] = t["sha256"]
    if "values" in t:
        e["values"] = t["values"]
        derived = lib.stats_from_values(t["dtype"], t["values"])
        if derived:
            e["stats"] = derived
    if "stats" in t:
        e["stats"] = dict(t["stats"])
    return e


def expect_ok(e):
    def check(sc, r):
        if sc.exit_code(r, [0]) and isinstance(r.obj, dict):
            lib.check_tensor(sc, r.obj, e)
    return check


def expect_unavailable(statuses=("TensorUnavailableForStep",), shape=None):
    def check(sc, r):
        sc.exit_code(r, [UNAVAILABLE])
        err = r.error_obj()
        sc.ok(err.get("status") in statuses, "error.status",
              "got %s, expected %s" % (lib.short(err.get("status")), " or ".join(statuses)))
        if shape is not None:
            # The contract does not say where a shape-only tensor's shape goes;
            # when the output carries one it must be right.
            got = r.obj.get("shape", err.get("shape")) if isinstance(r.obj, dict) else None
            if got is not None:
                sc.eq("shape", got, shape)
    return check


def expect_read_error():
    def check(sc, r):
        sc.exit_code(r, READ_ERRORS)
        sc.ok(bool(r.error_obj().get("status")), "error.status", "no {\"error\": {...}} on stdout")
    return check


def expect_reduction(name, abs_, value, saved, rel_tol=1e-6):
    def check(sc, r):
        if not (sc.exit_code(r, [0]) and isinstance(r.obj, dict)):
            return
        sc.field_eq(r.obj, "reduction.name", name)
        sc.field_eq(r.obj, "reduction.abs", abs_)
        sc.field_eq(r.obj, "reduction.saved", saved)
        got = lib.field(r.obj, "reduction.value")
        sc.ok(got is not lib.MISSING and lib.close(got, value, rel_tol), "reduction.value",
              "got %s, expected %s" % (lib.short(None if got is lib.MISSING else got), lib.short(value)))
    return check


def expect_worker(worker, sha):
    def check(sc, r):
        if sc.exit_code(r, [0]) and isinstance(r.obj, dict):
            sc.field_eq(r.obj, "worker", worker)
            if sha:
                sc.field_eq(r.obj, "sha256", sha)
    return check


def entry_jobs(case, trial, t, raw_keys, single):
    key = (t["name"], t["step"], t["worker"])
    base = "%s: tensor %s step %d worker %s" % (case, t["name"], t["step"], t["worker"])
    worker = None if single else t["worker"]
    if t.get("kind") == "shape":
        if key in raw_keys:   # the raw value is saved too: value and shape read
            e = {"name": t["name"], "step": t["step"], "shape": t["shape"]}
            return [Job(lib.tensor_args(trial, t["name"], t["step"], worker), base + " (shape + raw)",
                        expect_ok(e))]
        return [Job(lib.tensor_args(trial, t["name"], t["step"], worker), base + " (shape only: value)",
                    expect_unavailable(shape=t["shape"]))]
    if "reduction" in t:
        red = ("abs_" if t["abs"] else "") + t["reduction"]
        return [Job(lib.tensor_args(trial, t["name"], t["step"], worker, reduction=t["reduction"],
                                    abs_=t["abs"]),
                    base + " reduction %s" % red,
                    expect_reduction(t["reduction"], t["abs"], t["values"][0], True))]
    if t.get("expected") == "error":
        return [Job(lib.tensor_args(trial, t["name"], t["step"], worker, values=True),
                    base + " (%s)" % t.get("why", "error"), expect_read_error())]
    e = values_expectation(t)
    values = "values" in t
    jobs = [Job(lib.tensor_args(trial, t["name"], t["step"], worker, values=values), base, expect_ok(e))]
    if "value_by_mode_step" in t:
        jobs.append(Job(lib.tensor_args(trial, t["name"], t["mode_step"], t["worker"], mode=t["mode"],
                                        values=values),
                        base + " (--mode %s --step %d)" % (t["mode"], t["mode_step"]), expect_ok(e)))
    return jobs


def reduction_api_jobs(case, trial, exp, raw_keys):
    """Reductions-only steps: the value is unavailable (exit 4), an unsaved
    reduction is unavailable too."""
    jobs = []
    for ent in exp.get("reduction_api", []) + exp.get("shape_api", []):
        key = (ent["name"], ent["step"], ent["worker"])
        if key in raw_keys:
            continue
        base = "%s: tensor %s step %d worker %s" % (case, ent["name"], ent["step"], ent["worker"])
        if ent.get("reduction_values_keys"):
            jobs.append(Job(lib.tensor_args(trial, ent["name"], ent["step"], ent["worker"]),
                            base + " (reductions only: value)", expect_unavailable()))
        for red, res in sorted(ent.get("unsaved_reductions", {}).items()):
            if isinstance(res, dict) and "error" in res:
                jobs.append(Job(lib.tensor_args(trial, ent["name"], ent["step"], ent["worker"], reduction=red),
                                base + " (unsaved reduction %s)" % red, expect_unavailable()))
    return jobs


def vector_norm(values, order, abs_):
    xs = [abs(float(lib.decode_number(v))) for v in values]
    return math.fsum(xs) if order == "l1" else math.sqrt(math.fsum(x * x for x in xs))


def computed_reduction_jobs(case, trial, exp):
    """hook_mixed: reductions computed on read from raw values.  smrules uses
    vector norms for every rank (docs/formats.md#differences-from-smdebug, Decision F9) and the population
    std/variance; smdebug's matrix norms (2-D) and errors (>2-D) are replaced
    by the vector norm of the written values."""
    if "computed_reductions" not in exp:
        return []
    step = exp["computed_reductions_step"]
    raw = {(t["name"], t["step"]): t for t in exp["tensors"]
           if "values" in t and "reduction" not in t and t.get("kind") != "shape"}
    jobs = []
    for name, reds in sorted(exp["computed_reductions"].items()):
        t = raw.get((name, step))
        if t is None:
            continue
        saved = {(x["reduction"], x["abs"]) for x in exp["tensors"]
                 if x["name"] == name and x["step"] == step and "reduction" in x}
        for key, res in sorted(reds.items()):
            abs_ = key.startswith("abs_")
            red = key[4:] if abs_ else key
            if (red, abs_) in saved:
                continue  # tested as a saved reduction
            if red in ("l1", "l2") and len(t["shape"]) != 1:
                want = vector_norm(t["values"], red, abs_)
            elif isinstance(res, dict) and "values" in res:
                want = res["values"][0]
            else:
                continue
            jobs.append(Job(lib.tensor_args(trial, name, step, t["worker"], reduction=red, abs_=abs_),
                            "%s: tensor %s step %d computed reduction %s" % (case, name, step, key),
                            expect_reduction(red, abs_, want, False, rel_tol=1e-6)))
    return jobs


def default_worker_jobs(case, trial, exp):
    ta = exp["trial_api"]
    sha = {(t["name"], t["step"], t["worker"]): t.get("sha256") for t in exp["tensors"]}
    jobs = []
    for key, worker in sorted(ta.get("value_without_worker_comes_from", {}).items()):
        if worker not in {t["worker"] for t in exp["tensors"]}:
            continue  # names a worker the trial API invents (collections file name)
        name, step = key.rsplit("@", 1)
        jobs.append(Job(lib.tensor_args(trial, name, int(step)),
                        "%s: tensor %s step %s without --worker" % (case, name, step),
                        expect_worker(worker, sha.get((name, int(step), worker)))))
    return jobs


def expect_exit(codes, statuses=None):
    def check(sc, r):
        sc.exit_code(r, codes)
        if statuses:
            st = r.error_obj().get("status")
            sc.ok(st in statuses, "error.status", "got %s, expected %s" % (lib.short(st), " or ".join(statuses)))
    return check


def negative_jobs(case, trial, exp):
    """Lookups the contract answers with exit 4 (unavailable) or 2 (usage)."""
    ta = exp["trial_api"]
    known = ta["steps_show_incomplete"]
    if not known or not ta["tensor_names"]:
        return []
    name, first = ta["tensor_names"][0], known[0]
    jobs = [Job(lib.tensor_args(trial, "no/such/tensor", first), "%s: unknown tensor" % case,
                expect_exit([UNAVAILABLE], ["TensorUnavailable"]))]
    gaps = [g for g in range(known[0], known[-1]) if g not in known]
    if gaps:   # a step that was skipped while a later one exists
        jobs.append(Job(lib.tensor_args(trial, name, gaps[0]), "%s: tensor %s unsaved step %d" % (case, name, gaps[0]),
                        expect_exit([UNAVAILABLE], ["StepUnavailable"])))
    jobs.append(Job(lib.tensor_args(trial, name, known[-1] + 1000), "%s: tensor %s step past the end" % (case, name),
                    expect_exit([UNAVAILABLE])))
    for mode, steps in sorted(ta["steps_by_mode"].items()):
        if steps:
            jobs.append(Job(lib.tensor_args(trial, name, max(steps) + 1000, mode=mode),
                            "%s: tensor %s --mode %s unknown mode step" % (case, name, mode),
                            expect_exit([UNAVAILABLE])))
            break
    return jobs


def usage_jobs():
    trial = lib.rel(os.path.join(lib.FIXTURES, "synthetic", "invoker_modes"))
    bad = [
        (["tensor", "--trial", trial, "--name", "w", "--json"], "tensor without --step"),
        (["tensor", "--trial", trial, "--step", "0", "--json"], "tensor without --name"),
        (["tensor", "--trial", trial, "--name", "w", "--step", "zero", "--json"], "tensor --step zero"),
        (["tensor", "--trial", trial, "--name", "w", "--step", "0", "--mode", "SIDEWAYS", "--json"],
         "tensor --mode SIDEWAYS"),
        (["inspect", "--json"], "inspect without --trial"),
        (["inspect", "--trial", trial, "--no-such-option", "--json"], "inspect --no-such-option"),
        (["no-such-command"], "unknown command"),
    ]
    jobs = [Job(a, "usage: %s" % label, expect_exit([2]), want_json=False) for a, label in bad]
    missing = lib.rel(os.path.join(lib.FIXTURES, "synthetic", "no_such_trial_dir"))
    jobs.append(Job(lib.inspect_args(missing), "inspect of a directory that does not exist", expect_exit([3])))
    return jobs


def case_jobs(case, trial, exp):
    raw_keys = {(t["name"], t["step"], t["worker"]) for t in exp["tensors"]
                if "reduction" not in t and t.get("kind") != "shape" and t.get("expected") != "error"}
    workers = {t["worker"] for t in exp["tensors"]}
    single = len(workers) == 1
    jobs = []
    for t in exp["tensors"]:
        jobs += entry_jobs(case, trial, t, raw_keys, single)
    jobs += reduction_api_jobs(case, trial, exp, raw_keys)
    jobs += computed_reduction_jobs(case, trial, exp)
    jobs += default_worker_jobs(case, trial, exp)
    jobs += negative_jobs(case, trial, exp)
    return jobs


STATE_CASES = ("invoker_modes", "trial_workers3_partial_no_end", "hook_reductions_only", "workers2_tf_device_names")


def main():
    c = lib.Checker("test_synthetic")
    folder = os.path.join(lib.FIXTURES, "synthetic")
    before = lib.tree_snapshot(folder)
    cases = []
    for name, path in c.cases("synthetic"):
        exp = lib.load_json(os.path.join(path, "EXPECT.json"))
        cases.append((name, path, lib.rel(os.path.join(path, exp["trial_dir"])), exp))

    inspect_jobs = []
    for case, path, trial, exp in cases:
        inspect_jobs.append(Job(lib.inspect_args(trial), "%s: inspect" % case,
                                lambda sc, r, e=exp, n=case: check_inspect_offline(sc, r.obj, e, n)))
        inspect_jobs.append(Job(lib.inspect_args(trial, live=True), "%s: inspect --live" % case,
                                lambda sc, r, e=exp: check_inspect_live(sc, r.obj, e)))
        for other in exp.get("other_trials", []):
            inspect_jobs.append(Job(lib.inspect_args(lib.rel(os.path.join(path, other))),
                                    "%s: inspect %s" % (case, other),
                                    lambda sc, r, e=exp: check_other_trial(sc, r.obj, e)))
    fresh = {}
    for job, r in zip(inspect_jobs, lib.run_all([j.args for j in inspect_jobs])):
        sc = c.scope(job.label, r)
        if sc.process() and sc.exit_code(r, [0]) and isinstance(r.obj, dict):
            job.check(sc, r)
            fresh[(job.label.split(":")[0], job.label.endswith("--live"))] = r.obj
    for case, path, trial, exp in cases:
        if case in STATE_CASES and (case, False) in fresh and (case, True) in fresh:
            lib.check_state_db(c, case, trial, fresh[(case, False)], fresh[(case, True)], concurrent=1, rounds=1)

    jobs = []
    for case, path, trial, exp in cases:
        jobs += case_jobs(case, trial, exp)
    if not lib.CASE_FILTER:
        jobs += usage_jobs()
    for job, r in zip(jobs, lib.run_all([j.args for j in jobs])):
        sc = c.scope(job.label, r)
        if sc.process(want_json=job.want_json):
            job.check(sc, r)
    lib.check_untouched(c, folder, before)
    c.finish()


if __name__ == "__main__":
    main()
