#!/usr/bin/env python3
"""End-to-end: smrules on the damaged trials in tests/fixtures/corrupt.

Per case: inspect still reports trial_api's steps and tensor names;
must_read values read exactly; must_error (tensor, step) pairs fail with exit
3 or 4 and an error naming the damaged file (and a byte offset for record
defects); error_or_value accepts either outcome; nothing crashes and no
sanitizer reports; the decoy of index_path_traversal (values 666...) never
shows up.  Every case must show its defect at least once (a read error
naming the damaged file, the collections error, or a value read exactly
from the damaged step), so that a fixture or a check that stopped looking
fails instead of passing empty."""

import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

READ_ERRORS = (3, 4)
OFFSET_RE = re.compile(r"offset (\d+)")
OPEN_RE = re.compile(r'open(?:at2?)?\((?:[^,]*, )?"((?:[^"\\]|\\.)*)"')


def decoy_values(obj):
    """Numbers starting with 666 anywhere in values/stats/reduction."""
    found = []

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k != "sha256":
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif lib.is_number(v) and str(abs(v)).startswith("666"):
            found.append(v)
    walk(obj)
    return found


def check_no_decoy(sc, case, r):
    if case == "index_path_traversal":
        found = decoy_values(r.obj)
        sc.ok(not found, "decoy", "values read from outside the trial directory: %s" % lib.short(found))


def opened_paths(args):
    """Run smrules under strace; (Result, [paths passed to open*])."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as log:
        # LeakSanitizer cannot run under ptrace: leaks are checked by the
        # other (untraced) runs of the same commands.
        rc, out, err = lib.run(["-f", "-qq", "-E", "ASAN_OPTIONS=detect_leaks=0",
                                "-e", "trace=open,openat,openat2", "-o", log.name,
                                lib.SMRULES] + list(args), program="strace")
        paths = OPEN_RE.findall(log.read())
    return lib.Result(args, rc, out, err), paths


def check_opens(c, case, trial, exp):
    """Nothing outside the trial directory is opened (when strace works)."""
    if case not in ("index_path_traversal", "index_absolute_path") or not shutil.which("strace") \
            or os.environ.get("SMRULES_TEST_NO_STRACE"):
        return
    outside = exp["defect"]["event_file_name"].replace("../", "")
    for t in exp["must_error"]:
        args = lib.tensor_args(trial, t["name"], t["step"], t["worker"], values=True)
        r, paths = opened_paths(args)
        sc = c.scope("%s: tensor %s step %d (under strace)" % (case, t["name"], t["step"]), r)
        if "strace:" in r.err and "ptrace" in r.err:
            return  # tracing not permitted here
        sc.process(want_json=False)
        bad = [p for p in paths if outside in p]
        sc.ok(not bad, "opened outside the trial directory", lib.short(bad))


def defect_files(defect, t):
    """Files an error for (tensor t) may name: the damaged file; for a
    damaged index entry also the event file it points at."""
    files = [defect["file"]]
    if defect["file"].startswith("index/"):
        files.append("events/%012d/%012d_%s.tfevents" % (t["step"], t["step"], t["worker"]))
        if defect.get("event_file_name"):
            files.append(defect["event_file_name"])
    return files


def names_defect_file(r, files):
    err = r.error_obj()
    texts = [r.err, str(err.get("file") or ""), str(err.get("message") or "")]
    return any(f in t for f in files for t in texts)


def reports_offset(r):
    off = r.error_obj().get("offset")
    return lib.is_number(off) or OFFSET_RE.search(r.err) is not None


SEEN = {}  # case -> outcomes of its defect that were checked


def saw(case, good):
    if good:
        SEEN[case] = SEEN.get(case, 0) + 1


def defect_step(defect):
    m = re.search(r"(\d{12})_", defect["file"])
    return int(m.group(1)) if m else None


def check_inspect(sc, case, exp, o):
    ta, defect = exp["trial_api"], exp["defect"]
    sc.field_eq(o, "steps", ta["steps"])
    names = [t.get("name") for t in o.get("tensors") or [] if isinstance(t, dict)]
    sc.eq("tensors (names, sorted)", names, ta["tensor_names"])
    if isinstance(ta.get("collections"), str):   # the collections file is broken
        ce = o.get("collections_error")
        saw(case, sc.ok(isinstance(ce, str) and defect["file"] in ce, "collections_error",
              "got %s, expected a message naming %s" % (lib.short(ce), defect["file"])))
    else:
        sc.field_eq(o, "collections_error", None)
    if defect["file"].startswith("index/"):
        errs = o.get("errors") if isinstance(o.get("errors"), list) else []
        if case == "malformed_index_json":   # read while listing: must be reported
            sc.ok(any(isinstance(e, dict) and defect["file"] in str(e.get("file")) for e in errs),
                  "errors", "no entry for %s: %s" % (defect["file"], lib.short(errs)))


def read_job(case, trial, t, label):
    args = lib.tensor_args(trial, t["name"], t["step"], t["worker"], values=True)
    return args, "%s: tensor %s step %d (%s)" % (case, t["name"], t["step"], label)


def expected_value(t):
    e = {k: t[k] for k in ("name", "step", "mode", "mode_step", "worker", "shape", "sha256", "values")}
    e["dtype"] = lib.cli_dtype(t["dtype"])
    e["stored_dtype"] = lib.cli_stored_dtype(t["stored_dtype"])
    return e


def check_error(sc, case, r, defect, t):
    sc.exit_code(r, READ_ERRORS)
    if r.rc not in READ_ERRORS:
        return
    sc.ok(bool(r.error_obj().get("status")), "error.status", "no {\"error\": {...}} on stdout")
    files = defect_files(defect, t)
    saw(case, sc.ok(names_defect_file(r, files), "error names the file",
          "none of %s in stderr %s / error %s" % (files, lib.short(r.err.strip()),
                                                 lib.short(r.error_obj()))))
    if "offset" in defect:
        sc.ok(reports_offset(r), "error gives a byte offset",
              "no offset in stderr %s / error %s (defect at %d)" % (lib.short(r.err.strip()),
                                                                   lib.short(r.error_obj()), defect["offset"]))


def case_jobs(case, trial, exp):
    jobs = []
    for t in exp["must_read"]:
        args, label = read_job(case, trial, t, "must read")
        jobs.append((args, label, "read", expected_value(t), t))
    for t in exp["must_error"]:
        args, label = read_job(case, trial, t, "must error: " + t["why"])
        jobs.append((args, label, "error", None, t))
    for t in exp.get("error_or_value") or []:
        args, label = read_job(case, trial, t, "error or value")
        jobs.append((args, label, "either", expected_value(t), t))
    return jobs


def main():
    c = lib.Checker("test_corrupt")
    folder = os.path.join(lib.FIXTURES, "corrupt")
    before = lib.tree_snapshot(folder)
    cases = []
    for name, path in c.cases("corrupt"):
        exp = lib.load_json(os.path.join(path, "EXPECT.json"))
        cases.append((name, lib.rel(os.path.join(path, exp["trial_dir"])), exp))

    inspected = lib.run_all([lib.inspect_args(trial) for _, trial, _ in cases])
    for (case, trial, exp), r in zip(cases, inspected):
        sc = c.scope("%s: inspect" % case, r)
        if sc.process() and sc.exit_code(r, [0]) and isinstance(r.obj, dict):
            check_inspect(sc, case, exp, r.obj)
            check_no_decoy(sc, case, r)

    jobs, owners = [], []
    for case, trial, exp in cases:
        for j in case_jobs(case, trial, exp):
            jobs.append(j)
            owners.append((case, exp))
    results = lib.run_all([j[0] for j in jobs])
    for (args, label, kind, e, t), (case, exp), r in zip(jobs, owners, results):
        sc = c.scope(label, r)
        if not sc.process():
            continue
        check_no_decoy(sc, case, r)
        if kind == "read" or (kind == "either" and r.rc == 0):
            if sc.exit_code(r, [0]) and isinstance(r.obj, dict):
                failed = c.failed
                lib.check_tensor(sc, r.obj, e)
                saw(case, t["step"] == defect_step(exp["defect"]) and c.failed == failed)
        else:
            check_error(sc, case, r, exp["defect"], t)
    c.at_least(15, cases, "corrupt cases (tests/fixtures/corrupt/*/EXPECT.json)")
    for case, trial, exp in cases:
        c.scope(case).at_least(1, SEEN.get(case, 0), "outcomes of its defect")
        check_opens(c, case, trial, exp)
    lib.check_untouched(c, folder, before)
    c.finish()


if __name__ == "__main__":
    main()
