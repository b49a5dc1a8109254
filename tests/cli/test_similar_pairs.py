#!/usr/bin/env python3
"""SimilarAcrossRuns compares a tensor while another rule's read has this
trial's value in memory (the SDK's pair_value, core/host/value_pairs.c),
so this trial is not read a second time for it, and its results are
exactly those it gives alone.

Two trials of four steps, the reference a copy of the base but for:
  big/w      3.2 M float32 (12.8 MB records: above what the shared records
             keep, so a second read of it is a read of the file; with two
             threads, too large for a whole reference record to fit beside
             the running turns' reservations); the same in both trials
  r/same     the same in both
  r/diff     differs from step 2 on: fires
  r/shape    1,000 elements in the base, 999 in the reference: fires with
             same_shape false at every step
  r/missing  not in the reference at step 1: not compared there
  r/badA     the base's record at step 2 is corrupt: not compared, warned
  r/badB     the reference's record at step 3 is corrupt: not compared,
             warned
  m/diff     620,000 float32: the reference differs by 0.5 from step 2 on
             (in the second MiB), both hold a NaN at step 3 (in the third):
             fires with max_abs_diff 0.5
  m/badB     64,000 float32 with real checksums, the reference's at step 3
             failing: not compared, warned
  m/tagB     the reference's record at step 2 names another tensor: not
             compared, warned
Checked, with --jobs 1 and 2: SimilarAcrossRuns alone, and beside a Lua
rule that reads every value (a rule reading values, so SimilarAcrossRuns
goes after it at each step), gives the same report and result files, the
same exit status and the same warnings; with the Lua rule, the two rules
read of the base trial (smrules_read_bytes_total in --metrics-file, which
counts the trial's reads, not the reference's) less than the Lua rule
alone plus two of big/w's records (SimilarAcrossRuns' own reads of the
base at steps 1-3 made three more); SMRULES_STATS_CACHE=1 says results
were computed ahead.
"""

import array
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_similar_pairs"
STEPS = 4
BIG = array.array("f", [(i % 97) / 8.0 for i in range(1000)]) * 3200
MID = array.array("f", [(i % 89) / 4.0 for i in range(1000)]) * 620
MEDIUM = array.array("f", [(i % 31) / 2.0 for i in range(1000)]) * 64
SMALL = [float(i % 13) - 6.0 for i in range(1000)]

READER = """function invoke_at_step(step)
  local n = 0
  for _, name in ipairs(trial:tensor_names()) do
    local t = trial:tensor(name)
    if t:has_value(step) then
      local ok, v = pcall(function() return t:value(step) end)
      if ok then n = n + #v end
    end
  end
  report.datapoints(n)
  return false
end
"""


def small(values, step, name):
    import struct
    return lib.f32_record(name, struct.pack("<%df" % len(values), *values), len(values),
                          step, real_crc=True)


def tensors(step, reference):
    """(name, record) of one step of the base (reference False) or the
    reference trial."""
    out = [("big/w", lib.f32_record("big/w", BIG.tobytes(), len(BIG), step))]
    out.append(("r/same", small(SMALL, step, "r/same")))
    diff = [x + (1.0 if reference and step >= 2 else 0.0) for x in SMALL]
    out.append(("r/diff", small(diff, step, "r/diff")))
    out.append(("r/shape", small(SMALL[:999] if reference else SMALL, step, "r/shape")))
    if not (reference and step == 1):
        out.append(("r/missing", small(SMALL, step, "r/missing")))
    for name, bad in (("r/badA", not reference and step == 2),
                      ("r/badB", reference and step == 3)):
        rec = bytearray(small(SMALL, step, name))
        if bad:
            rec[-40] ^= 0x55  # a payload byte: the data checksum fails
        out.append((name, bytes(rec)))
    # read in pieces of the reference beside the value in hand: a
    # difference in the second of three pieces, and at step 3 a NaN in
    # both in the third (that piece compared element by element)
    mid = array.array("f", MID)
    if reference and step >= 2:
        mid[300000] += 0.5
    if step == 3:
        mid[600000] = float("nan")
    out.append(("m/diff", lib.f32_record("m/diff", mid.tobytes(), len(mid), step)))
    # the reference's records only a whole read checks: a real checksum
    # that fails (step 3), another tensor's name (step 2)
    rec = bytearray(lib.f32_record("m/badB", MEDIUM.tobytes(), len(MEDIUM), step,
                                   real_crc=True))
    if reference and step == 3:
        rec[len(rec) // 2] ^= 0x55
    out.append(("m/badB", bytes(rec)))
    rec = lib.f32_record("m/tagB", MEDIUM.tobytes(), len(MEDIUM), step)
    if reference and step == 2:
        rec = rec.replace(b"m/tagB", b"m/tagX")
    out.append(("m/tagB", rec))
    return out


def write_trial(folder, reference):
    """The trial; returns its files' bytes."""
    total = 0
    for step in range(STEPS):
        blob, index = lib.write_step(folder, step, list(tensors(step, reference)))
        total += len(blob) + len(index)
    lib.write_end_marker(folder)
    return total


def read_bytes(metrics_file):
    if not os.path.exists(metrics_file):
        return None
    with open(metrics_file) as f:
        m = re.search(r"^smrules_read_bytes_total\{[^}]*\} (\d+)$", f.read(), re.M)
    return int(m.group(1)) if m else None


def files_of(folder):
    out = {}
    for base, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(base, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = f.read()
    return out


WARNINGS = re.compile(r"^smrules: warning: .*$", re.M)
PAIRS = re.compile(r"value pairs: asked=(\d+) ahead=(\d+) taken=(\d+)"
                   r"(?: streamed=(\d+))?")


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-similar-pairs-")
    try:
        base, ref = os.path.join(tmp, "base"), os.path.join(tmp, "ref")
        write_trial(base, False)
        write_trial(ref, True)
        big_record = len(lib.f32_record("big/w", BIG.tobytes(), len(BIG), 0))
        lua = os.path.join(tmp, "reader.lua")
        lib.write_text(lua, READER)
        sar = "  - rule: SimilarAcrossRuns\n    parameters: {other_trials: %s}\n" % ref
        reader = "  - name: Reader\n    lua: %s\n" % lua
        configs = {"alone": "rules:\n" + sar, "beside": "rules:\n" + reader + sar,
                   "reader": "rules:\n" + reader}
        for k, text in configs.items():
            lib.write_text(os.path.join(tmp, k + ".yaml"), text)
        os.environ["SMRULES_STATS_CACHE"] = "1"  # the runs below inherit it
        got = {}
        for jobs in ("1", "2"):
            for k in configs:
                out = os.path.join(tmp, "out-%s-%s" % (k, jobs))
                metrics = os.path.join(tmp, "metrics-%s-%s" % (k, jobs))
                r = lib.run_json(["run", "--trial", base, "--rules",
                                  os.path.join(tmp, k + ".yaml"), "--fresh", "--jobs", jobs,
                                  "--output", out, "--metrics-file", metrics])
                got[k, jobs] = (r, files_of(os.path.join(out, "SimilarAcrossRuns")),
                                read_bytes(metrics))

            r, files, _ = got["alone", jobs]
            sc = c.scope("--jobs %s, SimilarAcrossRuns alone" % jobs, r)
            sc.eq("exit status", r.rc, 1)
            rep = json.loads(files.get("report.json", b"{}"))
            det = rep.get("Details", {})
            sc.eq("triggered steps", det.get("triggered_steps"), [0, 1, 2, 3])
            viol = {v["tensor"]: v.get("same_shape")
                    for v in det.get("last_trigger", {}).get("violations", [])}
            sc.eq("violations at step 3", viol,
                  {"r/diff": True, "r/shape": False, "m/diff": True})
            mdiff = [v.get("max_abs_diff")
                     for v in det.get("last_trigger", {}).get("violations", [])
                     if v["tensor"] == "m/diff"]
            sc.eq("m/diff's largest difference at step 3", mdiff, [0.5])
            warned = sorted(WARNINGS.findall(r.err))
            sc.ok(any("r/badA" in w or "000000000002" in w for w in warned)
                  and any("000000000003" in w for w in warned),
                  "warns of both corrupt records", warned)
            sc.ok(len(warned) >= 4 and any("m/tagB" in w or "m/tagX" in w for w in warned),
                  "warns of the reference's corrupt m/badB and m/tagB too", warned)

            r2, files2, _ = got["beside", jobs]
            sc = c.scope("--jobs %s, beside a rule reading every value" % jobs, r2)
            sc.eq("exit status", r2.rc, r.rc)
            sc.eq("SimilarAcrossRuns' files", sorted(files2), sorted(files))
            for n in files:
                sc.ok(files2.get(n) == files[n], "%s byte-identical to alone" % n)
            sc.eq("warnings", sorted(WARNINGS.findall(r2.err)), warned)
            m = PAIRS.search(r2.err)
            sc.ok(m is not None and int(m.group(2)) > 0 and m.group(2) == m.group(3),
                  "results computed ahead while the reader had the values, and taken",
                  m.group(0) if m else r2.err[-300:])
            # big/w's records are as large as the largest: with two
            # threads, a whole reference record never fitted the record
            # budget beside the running turns' reservations, and
            # SimilarAcrossRuns read both values itself
            sc.ok(m is not None and int(m.group(4) or 0) > 0,
                  "the reference's values read in pieces beside the value in hand",
                  m.group(0) if m else r2.err[-300:])

        # bytes read, --jobs 1 (with two threads, how many steps the
        # reader reads before SimilarAcrossRuns first asks, which it then
        # reads itself, is a matter of timing: there, the reference's
        # records were read in pieces, below)
        alone, beside = got["reader", "1"][2], got["beside", "1"][2]
        sc = c.scope("bytes read, --jobs 1", got["beside", "1"][0])
        sc.ok(alone is not None and beside is not None, "smrules_read_bytes_total")
        if alone is not None and beside is not None:
            # the base trial's first step is read for SimilarAcrossRuns
            # itself (it has asked for nothing before); the reads at steps
            # 1-3 made it four
            limit = alone + 2 * big_record
            sc.ok(beside < limit, "read %d bytes of the trial, less than the reader's "
                  "%d and two of big/w's records (%d)" % (beside, alone, limit))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
