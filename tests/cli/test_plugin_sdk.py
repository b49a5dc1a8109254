#!/usr/bin/env python3
"""The plugin SDK as a third party uses it, end to end:

- `make install` into a temporary prefix installs the public headers
  (smrules.h, rulekit.h), the rule kit library (libsmrules-rulekit.a) and
  smrules.pc, whose `--cflags --libs` are all a plugin needs; with DESTDIR
  the same tree is staged under it, smrules.pc naming the final PREFIX;
- examples/plugin/gradient_mean_abs.c (which uses the kit) builds with
  `cc -shared -fPIC -o X.so SRC $(pkg-config --cflags --libs smrules)`
  alone, loads, and gives the same results as the Lua version of the rule;
- a plugin built against an older, smaller registration struct
  (tests/cli/plugins/old_registration.c) loads and runs, its missing
  trailing members absent (poison placed after them would crash the host
  otherwise); a registration too small to be one, larger than this
  smrules knows, or built for the pre-release plugin API (version 1), is
  refused with a clear message;
- the parameter-table macros: the old plugin's `every` is declared with
  SMRULES_INT_PARAM(..., SMRULES_ABOVE(0)), so 0 is rejected;
- SMRULES_API_HAS sees this host's live_info.
"""

import json
import os
import subprocess
import tempfile

import lib

EXAMPLE = os.path.join(lib.ROOT, "examples", "plugin", "gradient_mean_abs.c")
OLD = os.path.join(lib.ROOT, "tests", "cli", "plugins", "old_registration.c")
TRIAL = lib.rel(os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr"))


INSTALLED = ("include/smrules/smrules.h", "include/smrules/rulekit.h",
             "include/smrules/version.h",
             "lib/libsmrules-rulekit.a", "lib/pkgconfig/smrules.pc", "bin/smrules",
             "lib/smrules/plugins/exploding_tensor.so")


def make_install(c, what, *args):
    build = os.path.basename(os.path.dirname(lib.SMRULES))
    r = subprocess.run(["make", "-s", "install", "BUILD=" + build] + list(args)
                       + (["SAN=1"] if build == "build-san" else []),
                       cwd=lib.ROOT, capture_output=True, text=True, timeout=900)
    return c.ok(r.returncode == 0, what, r.stderr[-800:])


def install(c, tmp):
    """make install into tmp/prefix; returns the prefix or None."""
    prefix = os.path.join(tmp, "prefix")
    if not make_install(c, "make install PREFIX=", "PREFIX=" + prefix):
        return None
    for f in INSTALLED:
        c.ok(os.path.isfile(os.path.join(prefix, f)), "installed " + f)
    return prefix


def check_destdir(c, tmp):
    """make install DESTDIR=stage PREFIX=/opt/smr: everything under stage,
    smrules.pc naming /opt/smr; pkg-config's sysroot then finds the staged
    SDK and the example builds from it."""
    stage, prefix = os.path.join(tmp, "stage"), "/opt/smr-test-prefix"
    if not make_install(c, "make install DESTDIR= PREFIX=", "DESTDIR=" + stage,
                        "PREFIX=" + prefix):
        return
    for f in INSTALLED:
        c.ok(os.path.isfile(stage + prefix + "/" + f), "staged " + f)
    c.ok(not os.path.exists(prefix), "nothing written to PREFIX itself")
    pc = stage + prefix + "/lib/pkgconfig/smrules.pc"
    with open(pc) as f:
        c.ok("prefix=%s\n" % prefix in f.read(), "smrules.pc names the final PREFIX")
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc), PKG_CONFIG_SYSROOT_DIR=stage)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "smrules"], env=env,
                           capture_output=True, text=True).stdout.split()
    build(c, "examples/plugin (staged)", EXAMPLE, os.path.join(tmp, "staged.so"), flags)


def pkg_flags(c, prefix):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    r = subprocess.run(["pkg-config", "--cflags", "--libs", "smrules"], env=env,
                       capture_output=True, text=True)
    flags = r.stdout.split()
    c.ok(r.returncode == 0, "pkg-config --cflags --libs smrules", r.stderr)
    c.ok("-I" + os.path.join(prefix, "include") in flags, "--cflags names the installed headers",
         " ".join(flags))
    c.ok("-L" + os.path.join(prefix, "lib") in flags and "-lsmrules-rulekit" in flags,
         "--libs names the installed rule kit", " ".join(flags))
    c.ok(not any(lib.ROOT in f for f in flags), "nothing points into the source tree",
         " ".join(flags))
    mod = subprocess.run(["pkg-config", "--modversion", "smrules"], env=env,
                         capture_output=True, text=True).stdout.strip()
    rc, out, _ = lib.run(["--version"])
    c.ok(out == "smrules %s\n" % mod, "smrules.pc's Version is the binary's",
         "%r vs %r" % (mod, out))
    return flags


def build(c, what, src, out, flags, extra=()):
    """cc -shared -fPIC -o out src <pkg-config flags>, run outside the tree."""
    r = subprocess.run(["cc", "-shared", "-fPIC"] + list(extra) + ["-o", out, src] + flags,
                       cwd=os.path.dirname(out), capture_output=True, text=True, timeout=120)
    c.ok(r.returncode == 0, what + " builds from the installed SDK alone", r.stderr[-800:])
    return r.returncode == 0


def run_rules(tmp, name, yaml_text, extra=()):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(yaml_text)
    return lib.run_json(["run", "--trial", TRIAL, "--rules", path, "--json",
                         "--output", os.path.join(tmp, "out-" + name)] + list(extra))


def by_name(obj):
    return {r["name"]: r for r in (obj or {}).get("rules", [])}


def check_example(c, tmp, flags):
    so = os.path.join(tmp, "gradient_mean_abs.so")
    if not build(c, "examples/plugin", EXAMPLE, so, flags,
                 ["-std=c11", "-Wall", "-Wextra", "-Werror"]):
        return
    lua = os.path.join(lib.ROOT, "rules", "gradient_mean_abs.lua")
    r = run_rules(tmp, "example", "rules:\n"
                  "  - plugin: %s\n    name: c\n    parameters: {threshold: 100.0}\n"
                  "  - lua: %s\n    name: lua\n    parameters: {threshold: 100.0}\n" % (so, lua),
                  ["--fresh"])
    sc = c.scope("example plugin", r)
    if not sc.process():
        return
    sc.exit_code(r, [1])
    got = by_name(r.obj)
    if not sc.ok(set(got) == {"c", "lua"}, "both rules ran", json.dumps(sorted(got))):
        return
    cr, lr = got["c"], got["lua"]
    sc.eq("status", cr["status"], "IssuesFound")
    sc.eq("triggered_steps", cr["triggered_steps"], [6, 8])
    sc.eq("RuleTriggered", cr["report"]["RuleTriggered"], 2)
    sc.eq("Violations", cr["report"]["Violations"], 11)
    for k in ("triggered_steps", "evaluated_steps", "skipped_steps"):
        sc.eq("same %s as the Lua rule" % k, cr[k], lr[k])
    sc.eq("same violations as the Lua rule", cr["report"]["Details"].get("last_trigger"),
          lr["report"]["Details"].get("last_trigger"))


def saved_steps(trial):
    info = lib.run_json(["inspect", "--trial", trial, "--json", "--fresh"]).obj or {}
    return sorted({s for t in info.get("tensors", []) for s in t["steps"]})


def check_old_registration(c, tmp, flags):
    old = os.path.join(tmp, "old_registration.so")
    if not build(c, "a plugin with an older registration", OLD, old, flags,
                 ["-std=c11", "-Wall", "-Wextra", "-Werror"]):
        return
    state = os.path.join(tmp, "old-state.db")
    for rnd in (1, 2):  # the second run resumes from the stored state
        r = run_rules(tmp, "old", "rules:\n  - plugin: %s\n    name: old\n"
                      "    parameters: {every: 3}\n" % old, ["--state", state])
        sc = c.scope("older registration, run %d" % rnd, r)
        if not sc.process():
            continue
        sc.exit_code(r, [1])
        got = by_name(r.obj).get("old")
        if not sc.ok(got is not None, "rule ran", r.out[-300:]):
            continue
        steps = saved_steps(TRIAL)
        sc.eq("status", got["status"], "IssuesFound")
        sc.eq("triggered_steps", got["triggered_steps"], [s for s in steps if s % 3 == 0])
        sc.eq("SMRULES_API_HAS(host, live_info)",
              got["report"]["Details"].get("host_has_live_info"), True)

    bad = run_rules(tmp, "old-bad", "rules:\n  - plugin: %s\n    parameters: {every: 0}\n" % old,
                    ["--fresh"])
    sc = c.scope("SMRULES_ABOVE(0) from the macro table", bad)
    if sc.process(want_json=False):
        sc.exit_code(bad, [2])
        sc.ok("every" in bad.out + bad.err, "the error names the parameter",
              (bad.out + bad.err)[-300:])

    for define, words in (("REG_SIZE=8", ("registration is", "less than")),
                          ("REG_SIZE=-1", ("registration is", "newer smrules.h")),
                          ("REG_API=1", ("API version 1;", "speaks version 2"))):
        tag = define.replace("=", "_").replace("-", "m")
        so = os.path.join(tmp, "reg_%s.so" % tag)
        if not build(c, "registration %s" % define, OLD, so, flags,
                     ["-std=c11", "-D" + define]):
            continue
        r = run_rules(tmp, tag, "rules:\n  - plugin: %s\n" % so, ["--fresh"])
        sc = c.scope("registration %s" % define, r)
        if sc.process(want_json=False):
            sc.exit_code(r, [2])
            sc.ok(all(w in r.out + r.err for w in words),
                  "refused with a clear message", (r.out + r.err)[-300:])


def check_search_path(c, tmp, flags):
    """Rules found by name: in each directory of the search path the file
    named after the rule is tried first (one plugin loaded, not all), but a
    file of that name registering another rule does not hide the rule, and
    a directory of SMRULES_PLUGIN_PATH still replaces a built-in rule."""
    d = os.path.join(tmp, "override")
    os.makedirs(d)
    with open(EXAMPLE) as f:
        src = f.read().replace('"GradientMeanAbs"', '"VanishingGradient"')
    custom_src = os.path.join(tmp, "custom_vg.c")
    with open(custom_src, "w") as f:
        f.write(src)
    # zz_custom.so registers VanishingGradient (the example's arithmetic);
    # vanishing_gradient.so, the conventional name, registers OldEveryNth
    if not (build(c, "a replacement VanishingGradient", custom_src,
                  os.path.join(d, "zz_custom.so"), flags, ["-std=c11"]) and
            build(c, "a plugin under another rule's file name", OLD,
                  os.path.join(d, "vanishing_gradient.so"), flags, ["-std=c11"])):
        return
    yaml_text = ("rules:\n  - rule: VanishingGradient\n    name: vg\n"
                 "    parameters: {threshold: 100.0}\n"
                 "  - rule: OldEveryNth\n    name: old\n    parameters: {every: 3}\n")
    os.environ["SMRULES_PLUGIN_PATH"] = d
    try:
        r = run_rules(tmp, "search", yaml_text, ["--fresh"])
        described = lib.run_json(["describe", "VanishingGradient"])
    finally:
        del os.environ["SMRULES_PLUGIN_PATH"]
    sc = c.scope("SMRULES_PLUGIN_PATH replaces VanishingGradient", r)
    if sc.process():
        got = by_name(r.obj)
        # the example fires where the mean |gradient| exceeds the threshold
        sc.eq("the replacement ran", got.get("vg", {}).get("triggered_steps"), [6, 8])
        steps = saved_steps(TRIAL)
        sc.eq("OldEveryNth found behind the conventional name",
              got.get("old", {}).get("triggered_steps"), [s for s in steps if s % 3 == 0])
    sc.ok("above threshold" in described.out, "describe shows the replacement",
          described.out[-300:])
    builtin = run_rules(tmp, "builtin", "rules:\n  - rule: VanishingGradient\n"
                        "    name: vg\n    parameters: {threshold: 100.0}\n", ["--fresh"])
    sc = c.scope("without SMRULES_PLUGIN_PATH: the built-in VanishingGradient", builtin)
    if sc.process():
        got = by_name(builtin.obj).get("vg", {})
        sc.ok(got.get("triggered_steps") not in (None, [6, 8]),
              "the built-in rule ran (every step's mean |gradient| is below 100)",
              json.dumps(got.get("triggered_steps")))


def main():
    c = lib.Checker("plugin_sdk")
    with tempfile.TemporaryDirectory() as tmp:
        prefix = install(c, tmp)
        if prefix:
            flags = pkg_flags(c, prefix)
            check_example(c, tmp, flags)
            check_old_registration(c, tmp, flags)
            check_search_path(c, tmp, flags)
        check_destdir(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
