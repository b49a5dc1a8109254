"""Helpers for the tests of the Python package (python/).

The package is built by `make python` into build/python for Debian's
/usr/bin/python3 (which has numpy and torch); these tests run with the
python3 first on PATH and start /usr/bin/python3 for anything that imports
the package.  $SMRULES_PYTHON overrides the interpreter, $SMRULES_PYTHONPATH
the package folder.  The sanitizer pass (SMRULES=build-san/smrules) reads
with the sanitizer binary what the normal build's package writes."""

import json
import os
import subprocess

import lib

PYTHON = os.environ.get("SMRULES_PYTHON", "/usr/bin/python3")
PYTHONPATH = os.environ.get("SMRULES_PYTHONPATH", os.path.join(lib.ROOT, "build", "python"))


def env(extra=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = PYTHONPATH
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e.pop("PYTHONHOME", None)
    # torch's CPU kernels: one thread each, so that two ranks or a run
    # beside the rule engine do not fight over the machine's cores.
    e.setdefault("OMP_NUM_THREADS", "1")
    if extra:
        e.update(extra)
    return e


def run_py(code_or_file, args=(), timeout=None, extra_env=None, cwd=None):
    """Run /usr/bin/python3 on a script file (a path ending in .py) or on
    code given with -c; returns (rc, stdout, stderr)."""
    cmd = [PYTHON]
    cmd += [code_or_file] if code_or_file.endswith(".py") else ["-c", code_or_file]
    cmd += list(args)
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout or lib.TIMEOUT * 3,
                           env=env(extra_env), cwd=cwd or lib.ROOT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        return lib.TIMEOUT_RC, (e.stdout or b"").decode(), (e.stderr or b"").decode() + \
            "\n[test harness] timed out\n"
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def has_module(name):
    rc, _, _ = run_py("import %s" % name)
    return rc == 0


def package_problem():
    """None when the package imports, else why not (one line)."""
    rc, out, err = run_py("import smrules._core")
    if rc == 0:
        return None
    return "cannot import smrules._core from %s with %s (make python): %s" % (
        PYTHONPATH, PYTHON, err.strip().splitlines()[-1] if err.strip() else rc)


def inspect(trial):
    r = lib.run_json(["inspect", "--trial", trial, "--json"] + lib.STATE_ARGS)
    return r


def tensor(trial, name, step, worker=None, mode=None, values=True):
    args = ["tensor", "--trial", trial, "--name", name, "--step", str(step), "--json"]
    args += lib.STATE_ARGS
    if worker:
        args += ["--worker", worker]
    if mode:
        args += ["--mode", mode]
    if values:
        args += ["--values"]
    return lib.run_json(args)


def load_jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def torch_checker(name):
    """The Checker of a test that needs the package and torch; it finishes
    at once, failing with the reason, when either is missing."""
    c = lib.Checker(name)
    why = package_problem()
    if not c.ok(why is None, "package imports", why or ""):
        c.finish()
    if not c.ok(has_module("torch"), "torch is installed for %s" % PYTHON,
                "python3-torch is missing: sh .ci/deps.sh"):
        c.finish()
    return c
