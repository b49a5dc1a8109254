#!/usr/bin/env python3
"""End-to-end: statistics shared between the rules of a run
(core/trial/stats_cache.c, api->query, Lua t:stats()).

1. AllZero and ExplodingTensor together compute each value's statistics
   once: with SMRULES_STATS_CACHE=1 the run reports as many lookups as the
   two rules made and exactly half of them as hits, with one and with two
   threads (in lock step, the default for several rules), and the results
   are those of each rule run alone.
2. Two Lua rules asking t:stats(step) share the same entries, and its
   table equals v:stats() of the value it would read, t:counts(step) its
   counts and nothing more (the rule fails otherwise); a string tensor
   raises, a worker option reads the value itself.
3. With --schedule rules the results are the same (hits are then
   whatever the recent entries give: not checked).
4. The twelve rules of examples/many-rules.yaml share the records they
   read (core/source/shared_records.c): with SMRULES_STATS_CACHE=1 the run
   reports record reads served by another rule's read, and every rule's
   result and report file equal those of the rule run alone, with one
   and with two threads.
5. VanishingGradient, ExplodingTensor and AllZero alone, whose tensors of
   a step are read in parallel, give the same results and reports with
   --jobs 1, 2 and 4.
7. Entries filled from a value in hand: one Lua rule that reads each
   value and then asks for its counts and its mean |x| (each entry asked
   once in the run) finds them stored from the second step on, because a
   rule read the value (host/data.c fill_wanted), and they equal what the
   value gives.
6. UnchangedTensor, once a tensor changed, only asks whether older steps
   have a value (from the counts other rules computed, else by reading):
   on a trial whose first step saved only the shape of a weight, the step
   that would need it is not evaluated, alone and beside AllZero and
   ExplodingTensor, with --jobs 1 and 2; a changed weight is evaluated
   from its third step with a value on.
8. A rule that reads values only for their statistics goes after the
   rules that read values at the same step (run/schedule.h, stats_only):
   AllZero listed before DeadRelu over dead_relu_negative_bias (ten steps,
   two ReLU outputs) with --jobs 1 finds the counts of both ReLU outputs
   filled by DeadRelu's reads from the second step on (18 hits; AllZero
   went first at every step before, and found none); with --jobs 1 and 2
   both rules' results equal those of each rule alone.
9. A value read in TRAIN mode fills the GLOBAL statistics of its global
   step when that is the same record (one worker): WeightUpdateRatio reads
   weights by TRAIN step, AllZero asks for counts by global step; on
   healthy_mlp_digits with --jobs 1 AllZero finds counts filled (none
   before); on two_workers_ddp nothing is filled across modes; results
   equal those of each rule alone with --jobs 1 and 2.
10. A rule whose turn found every statistic it asked for in the cache
   (it read nothing) stays one that reads values only for statistics: on
   a trial of ReLU outputs alone (ten steps, two outputs), AllZero listed
   before DeadRelu with --jobs 1 finds all 18 counts of steps 1-9 filled
   by DeadRelu's reads (10 before: it went first again after each turn
   that read nothing, and read them itself every other step); results
   equal those of each rule alone with --jobs 1 and 2.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_shared_stats"
TRIALS = os.path.join(lib.FIXTURES, "trials")
COUNTS = re.compile(r"statistics cache: lookups=(\d+) hits=(\d+)")
RECORDS = re.compile(r"record cache: reads=(\d+) shared=(\d+)")
MANY = os.path.join(lib.ROOT, "examples", "many-rules.yaml")

LUA = """local keys = {"count", "finite", "nan", "pinf", "ninf", "inf", "zeros",
              "has_finite", "min", "max", "sum", "mean", "l1", "l2", "linf"}
function invoke_at_step(step)
  local n = 0
  for _, name in ipairs(trial:tensor_names()) do
    local t = trial:tensor(name)
    if t:has_value(step) then
      local v = t:value(step)
      if v.dtype ~= "str" and #v > 0 then
        local shared, own = t:stats(step), v:stats()
        for _, k in ipairs(keys) do
          local a, b = shared[k], own[k]
          if not (a == b or (a ~= a and b ~= b)) then
            error(string.format("%s at %d: %s differs: %s vs %s", name, step, k,
                                tostring(a), tostring(b)))
          end
        end
        local w = t:stats(step, {worker = v.worker})
        if w.count ~= own.count then error("worker option") end
        local counts = t:counts(step)
        for i = 1, 8 do
          if counts[keys[i]] ~= own[keys[i]] then
            error(string.format("%s at %d: counts.%s differs", name, step, keys[i]))
          end
        end
        if counts.sum ~= nil then error("t:counts() has sums") end
        n = n + 1
      end
    end
  end
  report.datapoints(n)
  return false
end
"""

STRINGS = """function invoke_at_step(step)
  for _, name in ipairs(trial:tensor_names()) do
    local t = trial:tensor(name)
    if t:has_value(step) and t:value(step).dtype == "str" then
      local ok, err = pcall(function() return t:stats(step) end)
      log(ok and "no error" or ("raised: " .. tostring(err)))
      return true
    end
  end
  return false
end
"""


write = lib.write_text


def run_env(args, env_extra):
    env = dict(os.environ, **env_extra)
    p = subprocess.run([lib.SMRULES] + args, capture_output=True, env=env,
                       timeout=lib.TIMEOUT, cwd=lib.ROOT, stdin=subprocess.DEVNULL)
    return lib.Result(args, p.returncode, p.stdout.decode(), p.stderr.decode())


def rule_results(r):
    return {x["name"]: x for x in (r.obj or {}).get("rules", [])}


def same_as_alone(sc, rule, got, alone):
    """The rule's result together equals its result alone, and both exist
    (two missing results are equal, and prove nothing)."""
    sc.ok(rule in alone and rule in got, "%s has a result, alone and together" % rule,
          "alone: %s, together: %s" % (rule in alone, rule in got))
    sc.ok(got.get(rule) == alone.get(rule), "%s result = alone" % rule,
          lib.first_difference(got.get(rule), alone.get(rule)))


def results_alone(path, rules, tmp):
    """{name: result} of each rule in `rules` run alone on the trial `path`."""
    alone = {}
    for rule in rules:
        y = write(os.path.join(tmp, rule + ".yaml"), "rules:\n  - rule: %s\n" % rule)
        alone.update(rule_results(lib.run_json(
            ["run", "--trial", path, "--rules", y, "--fresh", "--json",
             "--output", os.path.join(tmp, "out-" + rule)])))
    return alone


def run_counted(path, rules_yaml, jobs, out):
    """`run --jobs JOBS` on `path`, printing the statistics cache's counts."""
    return run_env(["run", "--trial", path, "--rules", rules_yaml, "--fresh", "--json",
                    "--jobs", jobs, "--output", out], {"SMRULES_STATS_CACHE": "1"})


def check_two_rules(c, tmp):
    both = write(os.path.join(tmp, "both.yaml"),
                 "rules:\n  - rule: AllZero\n  - rule: ExplodingTensor\n")
    for trial in ("healthy_mlp_digits", "exploding_mse_high_lr", "two_workers_ddp"):
        path = os.path.join(TRIALS, trial)
        alone = results_alone(path, ("AllZero", "ExplodingTensor"), tmp)
        for jobs in ("1", "2"):
            r = run_counted(path, both, jobs, os.path.join(tmp, "out"))
            sc = c.scope("%s --jobs %s" % (trial, jobs), r)
            sc.ok(r.rc in (0, 1), "exit 0 or 1", str(r.rc))
            m = COUNTS.search(r.err)
            if not sc.ok(m, "cache counts printed", r.err.strip()[-300:]):
                continue
            lookups, hits = int(m.group(1)), int(m.group(2))
            sc.ok(lookups > 0 and hits * 2 == lookups,
                  "each value's statistics computed once",
                  "lookups=%d hits=%d" % (lookups, hits))
            got = rule_results(r)
            for rule in ("AllZero", "ExplodingTensor"):
                same_as_alone(sc, rule, got, alone)
        r = lib.run_json(["run", "--trial", path, "--rules", both, "--fresh", "--json",
                          "--schedule", "rules", "--output", os.path.join(tmp, "out")])
        sc = c.scope("%s --schedule rules" % trial, r)
        got = rule_results(r)
        for rule in ("AllZero", "ExplodingTensor"):
            same_as_alone(sc, rule, got, alone)
        sc.at_least(1, sum(x.get("evaluated_steps") or 0 for x in alone.values()),
                    "steps evaluated by the rules alone")


def report_files(out):
    """{rule folder/file: bytes} under a run's --output."""
    files = {}
    for dirpath, _, names in os.walk(out):
        for n in names:
            p = os.path.join(dirpath, n)
            if n != "result.json":
                with open(p, "rb") as f:
                    files[os.path.relpath(p, out)] = f.read()
    return files


def check_shared_records(c, tmp):
    rules = [line.split(":", 1)[1].strip() for line in open(MANY)
             if line.strip().startswith("- rule:")]
    for trial in ("healthy_mlp_digits", "vanishing_gradient_sigmoid"):
        path = os.path.join(TRIALS, trial)
        alone, alone_files = {}, {}
        for rule in rules:
            y = write(os.path.join(tmp, rule + ".yaml"), "rules:\n  - rule: %s\n" % rule)
            out = os.path.join(tmp, "alone-" + rule)
            r = lib.run_json(["run", "--trial", path, "--rules", y, "--fresh", "--json",
                              "--output", out])
            alone.update(rule_results(r))
            alone_files.update(report_files(out))
        for jobs in ("1", "2"):
            out = os.path.join(tmp, "many-%s" % jobs)
            r = run_env(["run", "--trial", path, "--rules", MANY, "--fresh", "--json",
                         "--jobs", jobs, "--output", out], {"SMRULES_STATS_CACHE": "1"})
            sc = c.scope("%s: twelve rules, --jobs %s" % (trial, jobs), r)
            sc.ok(r.rc in (0, 1), "exit 0 or 1", str(r.rc))
            m = RECORDS.search(r.err)
            sc.ok(m and int(m.group(2)) > 0, "records read once served other rules",
                  r.err.strip()[-300:])
            got = rule_results(r)
            sc.eq("rules", sorted(got), sorted(alone))
            for rule in rules:
                same_as_alone(sc, rule, got, alone)
            sc.at_least(12, rules, "rules of %s" % os.path.basename(MANY))
            sc.at_least(1, sum(x.get("evaluated_steps") or 0 for x in alone.values()),
                        "steps evaluated by the rules alone")
            files = report_files(out)
            sc.ok(files == alone_files and files, "report files = each rule's alone",
                  lib.short(sorted(k for k in set(files) | set(alone_files)
                                   if files.get(k) != alone_files.get(k))[:5]))
            shutil.rmtree(out, ignore_errors=True)


def check_parallel_reductions(c, tmp):
    """VanishingGradient, ExplodingTensor and AllZero read a step's tensors
    in parallel (api->query) on the threads no rule
    keeps busy: alone, with --jobs 1, 2 and 4, each gives the same results
    and report files."""
    for trial in ("vanishing_gradient_sigmoid", "exploding_mse_high_lr", "two_workers_ddp"):
        path = os.path.join(TRIALS, trial)
        for rule in ("VanishingGradient", "ExplodingTensor", "AllZero"):
            y = write(os.path.join(tmp, rule + "-p.yaml"), "rules:\n  - rule: %s\n" % rule)
            seen = {}
            for jobs in ("1", "2", "4"):
                out = os.path.join(tmp, "par-%s-%s" % (rule, jobs))
                r = lib.run_json(["run", "--trial", path, "--rules", y, "--fresh", "--json",
                                  "--jobs", jobs, "--output", out])
                seen[jobs] = (rule_results(r).get(rule), report_files(out))
                shutil.rmtree(out, ignore_errors=True)
            sc = c.scope("%s alone on %s" % (rule, trial))
            sc.ok(seen["1"][0] is not None, "the rule ran", "")
            for jobs in ("2", "4"):
                sc.ok(seen[jobs] == seen["1"], "--jobs %s = --jobs 1" % jobs,
                      lib.first_difference(seen[jobs][0], seen["1"][0]))


def check_lua(c, tmp):
    lua = write(os.path.join(tmp, "stats.lua"), LUA)
    y = write(os.path.join(tmp, "lua.yaml"),
              "rules:\n  - rule: ExplodingTensor\n  - name: SharedStats\n    lua: %s\n"
              "  - name: SharedStats2\n    lua: %s\n" % (lua, lua))
    for trial in ("healthy_mlp_digits", "two_workers_ddp", "xgboost_balanced_features"):
        r = run_env(["run", "--trial", os.path.join(TRIALS, trial), "--rules", y, "--fresh",
                     "--json", "--output", os.path.join(tmp, "out-lua")],
                    {"SMRULES_STATS_CACHE": "1"})
        sc = c.scope("Lua t:stats on %s" % trial, r)
        for rule in ("SharedStats", "SharedStats2"):
            lua_r = rule_results(r).get(rule, {})
            sc.eq("%s status" % rule, lua_r.get("status"), "NoIssuesFound")
        m = COUNTS.search(r.err)
        sc.ok(m and int(m.group(2)) > 0, "the Lua rules and ExplodingTensor share entries",
              r.err.strip()[-300:])
    s = write(os.path.join(tmp, "strings.lua"), STRINGS)
    y = write(os.path.join(tmp, "strings.yaml"), "rules:\n  - name: Strings\n    lua: %s\n" % s)
    r = lib.run_json(["run", "--trial", os.path.join(TRIALS, "xgboost_balanced_features"),
                      "--rules", y, "--fresh", "--json", "-v",
                      "--output", os.path.join(tmp, "out-str")])
    sc = c.scope("Lua t:stats of a string tensor", r)
    sc.ok("raised: " in r.err and "numeric" in r.err, "raises, naming what was expected",
          r.err.strip()[-300:])


FILLED = """local keys = {"count", "finite", "nan", "pinf", "ninf", "zeros"}
function invoke_at_step(step)
  local n = 0
  for _, name in ipairs(trial:tensor_names()) do
    local t = trial:tensor(name)
    if t:has_value(step) then
      local v = t:value(step)
      if v.dtype ~= "str" and #v > 0 then
        local own, counts = v:stats(), t:counts(step)
        for _, k in ipairs(keys) do
          if counts[k] ~= own[k] then
            error(string.format("%s at %d: counts.%s differs", name, step, k))
          end
        end
        local m, saved = t:reduction_value(step, "mean", {abs = true})
        local want = v:reduce("mean", {abs = true})
        if not saved and not (m == want or (m ~= m and want ~= want)) then
          error(string.format("%s at %d: mean |x| %s vs %s", name, step,
                              tostring(m), tostring(want)))
        end
        n = n + 1
      end
    end
  end
  report.datapoints(n)
  return false
end
"""


def check_filled_from_values(c, tmp):
    lua = write(os.path.join(tmp, "filled.lua"), FILLED)
    y = write(os.path.join(tmp, "filled.yaml"),
              "rules:\n  - name: Filled\n    lua: %s\n" % lua)
    for trial in ("healthy_mlp_digits", "two_workers_ddp"):
        r = run_env(["run", "--trial", os.path.join(TRIALS, trial), "--rules", y, "--fresh",
                     "--json", "--output", os.path.join(tmp, "out-filled")],
                    {"SMRULES_STATS_CACHE": "1"})
        sc = c.scope("entries filled from values on %s" % trial, r)
        sc.eq("status", rule_results(r).get("Filled", {}).get("status"), "NoIssuesFound")
        m = COUNTS.search(r.err)
        # each (tensor, step) is asked once: only a fill makes a hit
        sc.ok(m and int(m.group(2)) > 0, "entries asked once found stored",
              r.err.strip()[-300:])


def check_unchanged_counts(c, tmp):
    src = os.path.join(TRIALS, "healthy_mlp_digits")
    trial = os.path.join(tmp, "shape_first")
    shutil.copytree(src, trial)
    name = "DigitsMLP_layer1.fc.weight"
    idx_dir = os.path.join(trial, "index", "000000000")
    files = sorted(os.listdir(idx_dir))
    c.at_least(6, files, "index files of %s" % src)
    first = os.path.join(idx_dir, files[0])
    with open(first) as f:
        idx = json.load(f)
    kept = [e for e in idx["tensor_payload"] if e["tensorname"] != name]
    c.ok(len(kept) == len(idx["tensor_payload"]) - 1, "%s saved at step 0" % name)
    idx["tensor_payload"] = kept  # step 0 keeps only its shape
    idx["shape_payload"] = [{"tensorname": name, "originalname": name, "shape": [32, 64]}]
    write(first, json.dumps(idx))
    steps = len(files)
    alone = write(os.path.join(tmp, "unchanged.yaml"),
                  "rules:\n  - rule: UnchangedTensor\n"
                  "    parameters: {tensor_regex: '^%s$'}\n" % name.replace(".", "\\."))
    together = write(os.path.join(tmp, "unchanged3.yaml"),
                     "rules:\n  - rule: AllZero\n  - rule: ExplodingTensor\n"
                     "  - rule: UnchangedTensor\n"
                     "    parameters: {tensor_regex: '^%s$'}\n" % name.replace(".", "\\."))
    for label, rules in (("alone", alone), ("with AllZero, ExplodingTensor", together)):
        for jobs in ("1", "2"):
            r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--fresh", "--json",
                              "--jobs", jobs, "--output", os.path.join(tmp, "out-u")])
            sc = c.scope("UnchangedTensor %s --jobs %s" % (label, jobs), r)
            sc.ok(r.rc in (0, 1), "exit 0 or 1", str(r.rc))
            u = rule_results(r).get("UnchangedTensor") or {}
            # steps 0 and 1 have fewer than 3 saved steps; step 2 changed
            # from step 1 and step 0 has no value: not evaluated either
            sc.ok(u.get("evaluated_steps") == steps - 3,
                  "evaluated from the fourth saved step on",
                  "evaluated_steps %s of %d steps" % (u.get("evaluated_steps"), steps))
            sc.ok(u.get("status") != "IssuesFound", "the weight changed",
                  str(u.get("status")))


def allzero_after_deadrelu(c, tmp, path, name, label):
    """AllZero listed before DeadRelu on the trial in PATH, --jobs 1 and 2:
    with --jobs 1 AllZero finds all 18 counts filled by DeadRelu's reads,
    and both rules' results equal each rule's alone."""
    alone = results_alone(path, ("AllZero", "DeadRelu"), tmp)
    both = write(os.path.join(tmp, name + ".yaml"),
                 "rules:\n  - rule: AllZero\n  - rule: DeadRelu\n")
    for jobs in ("1", "2"):
        r = run_counted(path, both, jobs, os.path.join(tmp, "out-" + name))
        sc = c.scope("%s, --jobs %s" % (label, jobs), r)
        sc.ok(r.rc in (0, 1), "exit 0 or 1", str(r.rc))
        m = COUNTS.search(r.err)
        if jobs == "1" and sc.ok(m, "cache counts printed", r.err.strip()[-300:]):
            sc.eq("counts AllZero found filled by DeadRelu's reads", int(m.group(2)), 18)
        got = rule_results(r)
        for rule in ("AllZero", "DeadRelu"):
            same_as_alone(sc, rule, got, alone)


def check_stats_only_last(c, tmp):
    allzero_after_deadrelu(c, tmp, os.path.join(TRIALS, "dead_relu_negative_bias"),
                           "az-dr", "AllZero before DeadRelu")


def check_filled_across_modes(c, tmp):
    both = write(os.path.join(tmp, "az-wur.yaml"),
                 "rules:\n  - rule: AllZero\n  - rule: WeightUpdateRatio\n")
    for trial in ("healthy_mlp_digits", "two_workers_ddp"):
        path = os.path.join(TRIALS, trial)
        alone = results_alone(path, ("AllZero", "WeightUpdateRatio"), tmp)
        for jobs in ("1", "2"):
            r = run_counted(path, both, jobs, os.path.join(tmp, "out-az-wur"))
            sc = c.scope("AllZero and WeightUpdateRatio on %s, --jobs %s" % (trial, jobs), r)
            sc.ok(r.rc in (0, 1), "exit 0 or 1", str(r.rc))
            m = COUNTS.search(r.err)
            if jobs == "1" and sc.ok(m, "cache counts printed", r.err.strip()[-300:]):
                hits = int(m.group(2))
                if trial == "two_workers_ddp":
                    sc.eq("counts filled across modes with two workers", hits, 0)
                else:
                    sc.ok(hits > 0, "counts filled by WeightUpdateRatio's TRAIN reads",
                          "hits=%d" % hits)
            got = rule_results(r)
            for rule in ("AllZero", "WeightUpdateRatio"):
                same_as_alone(sc, rule, got, alone)


def write_relu_trial(folder, steps=10):
    """A trial of two float32 ReLU outputs of 4,096 elements a step, half
    of them zero, changing at every step."""
    import struct
    for step in range(steps):
        event_rel = "events/%012d/%012d_worker_0.tfevents" % (step, step)
        blob, payload = b"", []
        for k, name in enumerate(("l1.relu_output_0", "l2.relu_output_0")):
            v = [0.0 if i % 2 else 1.0 + ((i * 7 + step * 13 + k) % 97) / 8.0
                 for i in range(4096)]
            rec = lib.f32_record(name, struct.pack("<%df" % len(v), *v), len(v), step)
            payload.append({"tensorname": name, "start_idx": len(blob),
                            "length": len(rec)})
            blob += rec
        index = json.dumps({"meta": {"mode": "TRAIN", "mode_step": step,
                                     "event_file_name": event_rel},
                            "tensor_payload": payload, "shape_payload": []})
        for rel, data in ((event_rel, blob),
                          ("index/000000000/%012d_worker_0.json" % step,
                           index.encode())):
            path = os.path.join(folder, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    open(os.path.join(folder, "training_job_end.ts"), "wb").close()


def check_stats_only_kept(c, tmp):
    path = os.path.join(tmp, "relu-only")
    write_relu_trial(path)
    allzero_after_deadrelu(c, tmp, path, "az-dr-relu",
                           "AllZero before DeadRelu on ReLU outputs alone")


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-shared-stats-")
    try:
        check_two_rules(c, tmp)
        check_lua(c, tmp)
        check_parallel_reductions(c, tmp)
        check_shared_records(c, tmp)
        check_unchanged_counts(c, tmp)
        check_filled_from_values(c, tmp)
        check_stats_only_last(c, tmp)
        check_filled_across_modes(c, tmp)
        check_stats_only_kept(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
