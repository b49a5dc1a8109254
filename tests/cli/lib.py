"""Small helpers for the smrules end-to-end tests.

The binary under test is $SMRULES (default build/smrules, relative to the
repository root).  Every invocation is checked for crashes (death by signal),
timeouts and sanitizer reports on stderr; a Checker counts the checks and
prints `<name>: N passed, N failed` at the end.

Fixture value encoding (tests/fixtures/*/README.md): non-finite floats are the
strings "nan"/"inf"/"-inf", integers outside +-2^53 are decimal strings,
complex values are [re, im], bools are true/false, strings are UTF-8.
"""

import json
import math
import os
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SMRULES = os.environ.get("SMRULES", "build/smrules")
if not os.path.isabs(SMRULES):
    SMRULES = os.path.join(ROOT, SMRULES)
TIMEOUT = float(os.environ.get("SMRULES_TEST_TIMEOUT", "60"))
JOBS = int(os.environ.get("SMRULES_TEST_JOBS", "0")) or min(16, (os.cpu_count() or 2) * 2)
CASE_FILTER = os.environ.get("SMRULES_TEST_CASES", "")  # substring filter on case names
# Every read uses a private in-memory catalog: nothing is written into the
# fixture trials and parallel invocations do not share a catalog file.  The
# persistent catalog (--state) is tested on its own in test_synthetic.py.
STATE_ARGS = os.environ.get("SMRULES_TEST_STATE_ARGS", "--fresh").split()

# smrules keeps a trial's state outside the trial, in the user's state
# folder ($XDG_STATE_HOME/smrules/trials/<key>, docs/cli.md#where-state-and-output-live):
# the tests give it a private one, removed at exit, so that they leave
# nothing in the home folder of whoever runs them.  A test that needs the
# state file asks smrules where it is (`run --json`'s "state").
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
STATE_HOME = tempfile.mkdtemp(prefix="smrules-test-state-")
os.environ["XDG_STATE_HOME"] = STATE_HOME
atexit.register(shutil.rmtree, STATE_HOME, True)

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                     "runtime error:", "MemorySanitizer", "ThreadSanitizer")
TIMEOUT_RC = 124
NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
INT_EXACT = 2 ** 53


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cases(folder):
    """Sorted case directories of tests/fixtures/<folder> (filtered by $SMRULES_TEST_CASES)."""
    base = os.path.join(FIXTURES, folder)
    out = []
    for name in sorted(os.listdir(base)):
        path = os.path.join(base, name)
        if os.path.isfile(os.path.join(path, "EXPECT.json")) and CASE_FILTER in name:
            out.append((name, path))
    return out


# The fixture cases each folder holds (tests/fixtures/<folder>/*/EXPECT.json):
# a test driven by them must have found at least these (Checker.cases).
FIXTURE_CASES = {"synthetic": 26, "trials": 10, "profiler": 11, "corrupt": 15}


def rel(path):
    return os.path.relpath(path, ROOT)


# --------------------------------------------------------------------------
# Running the binary

def run(args, timeout=TIMEOUT, program=None):
    """Run smrules (or `program`) with args; returns (rc, stdout, stderr).
    A timeout gives rc 124 and a note at the end of stderr."""
    try:
        p = subprocess.run([program or SMRULES] + list(args), stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        err = (e.stderr or b"").decode("utf-8", "replace")
        return TIMEOUT_RC, (e.stdout or b"").decode("utf-8", "replace"), \
            err + "\n[test harness] timed out after %gs\n" % timeout
    except OSError as e:
        return 127, "", "[test harness] cannot run %s: %s\n" % (SMRULES, e)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def write_text(path, text):
    """Write `text` to the file `path` (replaced); returns path."""
    with open(path, "w") as f:
        f.write(text)
    return path


def _reject_constant(tok):
    raise ValueError("non-standard JSON token %s" % tok)


class Result:
    """One smrules invocation: rc, out, err, obj (parsed stdout or None), json_error."""

    def __init__(self, args, rc, out, err):
        self.args, self.rc, self.out, self.err = list(args), rc, out, err
        self.obj, self.json_error = None, None
        if out.strip():
            try:
                self.obj = json.loads(out, parse_constant=_reject_constant)
            except ValueError as e:
                self.json_error = str(e)
        else:
            self.json_error = "empty stdout"

    @property
    def cmd(self):
        return "smrules " + " ".join(_quote(a) for a in self.args)

    def sanitizer_report(self):
        return any(m in self.err for m in SANITIZER_MARKERS)

    def error_obj(self):
        """The {"error": {...}} object printed with --json on failure, or {}."""
        if isinstance(self.obj, dict) and isinstance(self.obj.get("error"), dict):
            return self.obj["error"]
        return {}


def _quote(a):
    a = str(a)
    if a and all(c.isalnum() or c in "-_./:=@" for c in a):
        return a
    return "'" + a.replace("'", "'\\''") + "'"


def run_json(args, timeout=TIMEOUT):
    """Run smrules; returns a Result with stdout parsed as JSON (obj)."""
    rc, out, err = run(args, timeout)
    return Result(args, rc, out, err)


def run_rchar(args):
    """Runs smrules with args (output discarded); returns (exit status,
    bytes the process read from files: rchar of /proc/PID/io, read after
    it exited and before it is reaped), for tests that a rule reads a
    record once, whatever the machine's speed."""
    p = subprocess.Popen([SMRULES] + args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd=ROOT)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    with open("/proc/%d/io" % p.pid) as f:
        io = dict(line.split(": ") for line in f.read().splitlines() if line)
    return p.wait(timeout=TIMEOUT), int(io["rchar"])


def run_all(arg_lists):
    """Run many invocations in parallel; Results in the same order."""
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        return list(pool.map(run_json, arg_lists))


def tree_snapshot(folder):
    """{relative path: (size, mtime_ns)} of everything under folder."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            snap[os.path.relpath(p, folder)] = (st.st_size if n in filenames else -1, st.st_mtime_ns)
    return snap


def check_untouched(checker, folder, before):
    """The test run must not create, change or delete anything in the fixtures."""
    after = tree_snapshot(folder)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    checker.ok(not changed, "fixtures under %s unchanged" % rel(folder),
               "created/changed/removed: %s" % short(changed[:10]))


# --------------------------------------------------------------------------
# Comparing values

def decode_number(v):
    """Fixture/CLI number -> Python number (None stays None)."""
    if isinstance(v, str):
        if v in NONFINITE:
            return NONFINITE[v]
        try:
            return int(v)
        except ValueError:
            return v
    return v


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def close(got, exp, rel_tol=1e-6, abs_tol=1e-12):
    """Float comparison: relative 1e-6, absolute 1e-12 near zero; NaN equals
    NaN, infinities must match exactly; None only equals None."""
    got, exp = decode_number(got), decode_number(exp)
    if exp is None or got is None:
        return exp is None and got is None
    if not is_number(got) or not is_number(exp):
        return False
    if math.isnan(exp) or math.isnan(got):
        return math.isnan(exp) and math.isnan(got)
    if math.isinf(exp) or math.isinf(got):
        return exp == got
    return abs(got - exp) <= max(rel_tol * max(abs(got), abs(exp)), abs_tol)


def value_equal(got, exp):
    """Exact equality under the fixture encoding (also checks the encoding:
    non-finite values and big integers must be the same strings, -0.0 keeps
    its sign, bools are bools)."""
    if isinstance(exp, list):
        return isinstance(got, list) and len(got) == len(exp) and \
            all(value_equal(g, e) for g, e in zip(got, exp))
    if isinstance(exp, bool):
        return isinstance(got, bool) and got == exp
    if isinstance(exp, str):
        return isinstance(got, str) and got == exp
    if exp is None:
        return got is None
    if not is_number(got):
        return False
    if isinstance(exp, int) and abs(exp) > INT_EXACT:
        return False  # the fixture would have used a string
    if isinstance(got, int) and abs(got) > INT_EXACT:
        return False  # must be encoded as a string
    if got != exp:
        return False
    if exp == 0 and isinstance(exp, float) and isinstance(got, float):
        return math.copysign(1.0, got) == math.copysign(1.0, exp)
    return True


def first_value_diff(got, exp):
    """Index and pair of the first differing element (for messages)."""
    if not isinstance(got, list) or not isinstance(exp, list):
        return "got %s" % short(got)
    if len(got) != len(exp):
        return "length %d, expected %d" % (len(got), len(exp))
    for i, (g, e) in enumerate(zip(got, exp)):
        if not value_equal(g, e):
            return "element %d: got %s, expected %s" % (i, short(g), short(e))
    return "?"


def short(v, limit=200):
    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= limit else s[:limit] + "...(%d chars)" % len(s)


def dig(obj, path, default=None):
    """obj['a']['b'] for path 'a.b'; default when any part is missing."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


MISSING = object()


def field(obj, path):
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return MISSING
        cur = cur[part]
    return cur


# --------------------------------------------------------------------------
# Counting checks

class Checker:
    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        if not os.access(SMRULES, os.X_OK):   # one failure, not thousands
            self.ok(False, "binary", "%s does not exist or is not executable" % SMRULES)
            self.finish()

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL %s%s" % (what, (": " + detail) if detail else ""), flush=True)
        return bool(cond)

    def at_least(self, n, counted, what):
        """The guard of a fixture-driven or conditional check: fails unless
        `counted` (a number, or anything with a len) is at least n, so that
        a loop over no cases, or checks skipped behind an `if`, cannot pass
        empty.  `what` names what was counted."""
        got = counted if isinstance(counted, (int, float)) else len(counted)
        return self.ok(got >= n, "checked at least %d %s" % (n, what), "only %s" % got)

    def cases(self, folder):
        """lib.cases(folder), guarded: fails unless every known case of the
        folder was found (one, when $SMRULES_TEST_CASES filters them)."""
        found = cases(folder)
        want = 1 if CASE_FILTER else FIXTURE_CASES.get(folder, 1)
        self.at_least(want, found, "cases in tests/fixtures/%s" % folder)
        return found

    def scope(self, prefix, result=None):
        return Scope(self, prefix, result)

    def finish(self):
        print("%s: %d passed, %d failed" % (self.name, self.passed, self.failed), flush=True)
        sys.exit(1 if self.failed else 0)


class Scope:
    """Checks about one subject (case / tensor / step); every message starts
    with the prefix, and the command line is shown after the first failure."""

    def __init__(self, checker, prefix, result=None):
        self.c, self.prefix, self.result = checker, prefix, result
        self.shown_cmd = False

    def ok(self, cond, what, detail=""):
        good = self.c.ok(cond, "%s: %s" % (self.prefix, what), detail)
        if not good and self.result is not None and not self.shown_cmd:
            self.shown_cmd = True
            r = self.result
            print("     cmd: %s\n     rc=%s stderr: %s" % (r.cmd, r.rc, short(r.err.strip(), 400)),
                  flush=True)
        return good

    def at_least(self, n, counted, what):
        """Checker.at_least, with the scope's prefix."""
        got = counted if isinstance(counted, (int, float)) else len(counted)
        return self.ok(got >= n, "checked at least %d %s" % (n, what), "only %s" % got)

    def eq(self, what, got, exp):
        return self.ok(got == exp and type(got) is type(exp) or (is_number(got) and is_number(exp)
                       and got == exp), what, "got %s, expected %s" % (short(got), short(exp)))

    def close(self, what, got, exp, rel_tol=1e-6, abs_tol=1e-12):
        return self.ok(close(got, exp, rel_tol, abs_tol), what,
                       "got %s, expected %s (rel 1e-6)" % (short(got), short(exp)))

    def values(self, what, got, exp):
        return self.ok(value_equal(got, exp), what, first_value_diff(got, exp))

    def field_eq(self, obj, path, exp):
        got = field(obj, path)
        if got is MISSING:
            return self.ok(False, path, "missing in output, expected %s" % short(exp))
        return self.eq(path, got, exp)

    def field_close(self, obj, path, exp):
        got = field(obj, path)
        if got is MISSING:
            return self.ok(False, path, "missing in output, expected %s" % short(exp))
        return self.close(path, got, exp)

    def process(self, r=None, want_json=True):
        """No crash, no timeout, no sanitizer report (one check); stdout is JSON."""
        r = r or self.result
        problems = []
        if r.rc is not None and r.rc < 0:
            problems.append("killed by signal %d" % -r.rc)
        if r.rc == TIMEOUT_RC and "timed out" in r.err:
            problems.append("timed out")
        if r.rc == 127 and "cannot run" in r.err:
            problems.append("cannot run the binary")
        if r.sanitizer_report():
            problems.append("sanitizer report on stderr")
        good = self.ok(not problems, "process", "; ".join(problems))
        if want_json:
            good &= self.ok(r.json_error is None, "stdout is one JSON object",
                            "%s / stdout: %s" % (r.json_error, short(r.out.strip(), 200)))
        return good

    def exit_code(self, r, allowed):
        allowed = tuple(allowed)
        return self.ok(r.rc in allowed, "exit code",
                       "got %s, expected %s" % (r.rc, " or ".join(map(str, allowed))))


# --------------------------------------------------------------------------
# smrules command lines and the checks shared by the test scripts

def inspect_args(trial, live=False, state=None):
    a = ["inspect", "--trial", trial, "--json"] + (["--live"] if live else [])
    return a + (["--state", state] if state else STATE_ARGS)


def tensor_args(trial, name, step, worker=None, mode=None, values=False,
                reduction=None, abs_=False):
    a = ["tensor", "--trial", trial, "--name", name, "--step", str(step)]
    if mode is not None:
        a += ["--mode", mode]
    if worker is not None:
        a += ["--worker", worker]
    if values:
        a.append("--values")
    if reduction is not None:
        a += ["--reduction", reduction]
        if abs_:
            a.append("--abs")
    return a + ["--json"] + STATE_ARGS


FLOAT_DTYPES = ("float16", "float32", "float64", "bfloat16")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def cli_dtype(fixture_dtype):
    """The fixtures call string tensors "string"; the CLI contract says "str"."""
    return "str" if fixture_dtype == "string" else fixture_dtype


def cli_stored_dtype(fixture_stored):
    """Strings leave TensorProto.dtype unset: DT_INVALID (the synthetic
    fixtures spell it "DT_STRING (dtype field unset, string_val)")."""
    if fixture_stored.startswith("DT_STRING"):
        return "DT_INVALID"
    return fixture_stored


def element_count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def stats_from_values(dtype, values):
    """Stats a correct reader must report for a value list, where they are
    unambiguous: float and small-int dtypes only; l2/sum/mean left out when
    float64 arithmetic would overflow."""
    if dtype not in FLOAT_DTYPES and dtype not in INT_DTYPES:
        return None
    xs = [decode_number(v) for v in values]
    if any(not is_number(x) for x in xs):
        return None  # integers beyond 2^53: float64 sums are not exact
    finite = [float(x) for x in xs if math.isfinite(x)]
    st = {"count": len(xs), "nan": sum(1 for x in xs if isinstance(x, float) and math.isnan(x)),
          "inf": sum(1 for x in xs if isinstance(x, float) and math.isinf(x)),
          "zeros": sum(1 for x in xs if x == 0)}
    if not finite:
        st.update(min=None, max=None, mean=None, sum=None, l2=None)
        return st
    st["min"], st["max"] = min(finite), max(finite)
    total = math.fsum(finite)
    squares = math.fsum(x * x for x in finite) if max(abs(x) for x in finite) < 1e150 else math.inf
    if math.isfinite(total) and max(abs(x) for x in finite) < 1e300:
        st["sum"], st["mean"] = total, total / len(finite)
    if math.isfinite(squares):
        st["l2"] = math.sqrt(squares)
    return st


def check_tensor(sc, obj, exp):
    """Compare a `smrules tensor --json` object with an expected entry:
    keys name, step, mode, mode_step, worker, dtype, stored_dtype, shape and
    optionally sha256, values, stats ({min,max,mean,sum,l2,nan,inf,zeros}
    subset; count at top level)."""
    for key in ("name", "step", "mode", "mode_step", "worker", "dtype", "stored_dtype", "shape"):
        if key in exp:
            sc.field_eq(obj, key, exp[key])
    if "shape" in exp:
        sc.field_eq(obj, "count", element_count(exp["shape"]))
    if exp.get("sha256"):
        sc.field_eq(obj, "sha256", exp["sha256"])
    if "values" in exp:
        got = field(obj, "values")
        if got is MISSING:
            sc.ok(False, "values", "missing in output (called with --values)")
        else:
            sc.values("values", got, exp["values"])
    for key, want in (exp.get("stats") or {}).items():
        if key == "count":
            sc.field_eq(obj, "count", want)
        elif key in ("nan", "inf", "zeros"):
            sc.field_eq(obj, "stats." + key, want)
        else:
            sc.field_close(obj, "stats." + key, want)


# --------------------------------------------------------------------------
# The persistent catalog

def without_state(o):
    return {k: v for k, v in o.items() if k != "state"} if isinstance(o, dict) else o


def first_difference(got, want, path=""):
    if isinstance(got, dict) and isinstance(want, dict):
        for k in sorted(set(got) | set(want)):
            if got.get(k, MISSING) != want.get(k, MISSING):
                return first_difference(got.get(k), want.get(k), path + "." + k)
    return "%s: got %s, expected %s" % (path or "value", short(got), short(want))


def check_state_db(c, case, trial, fresh_offline, fresh_live, concurrent, rounds):
    """`inspect --state FILE` answers exactly like `--fresh`: when
    `concurrent` processes (half offline, half --live) create the catalog at
    the same time, and when a later offline or --live run reuses it."""
    import tempfile
    want = {False: without_state(fresh_offline), True: without_state(fresh_live)}
    with tempfile.TemporaryDirectory(prefix="smrules-state-") as tmp:
        for rnd in range(rounds):
            db = os.path.join(tmp, "state%d.db" % rnd)
            runs = [("create #%d%s" % (i, " --live" if i % 2 else ""), i % 2 == 1) for i in range(concurrent)]
            results = run_all([inspect_args(trial, live, state=db) for _, live in runs])
            for label, live in (("reuse --live", True), ("reuse offline", False)):
                runs.append((label, live))
                results.append(run_json(inspect_args(trial, live, state=db)))
            for (label, live), r in zip(runs, results):
                sc = c.scope("%s: inspect --state (round %d, %s)" % (case, rnd, label), r)
                if sc.process() and sc.exit_code(r, [0]):
                    got = without_state(r.obj)
                    sc.ok(got == want[live], "same answer as --fresh", first_difference(got, want[live]))


# --------------------------------------------------------------------------
# A process followed line by line: tests wait for what it says, never for
# a duration to pass.

class Running:
    """smrules (or another program) started in the background; its stdout
    and stderr are collected line by line by two threads, and wait_line
    blocks until a line matching a regular expression has been printed.
    The limit of each wait is only a guard against a hang (the test fails
    then); nothing assumes how long the work takes."""

    def __init__(self, args, program=None, env=None, cwd=ROOT):
        import threading
        self.args = [program or SMRULES] + list(args)
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, cwd=cwd)
        self.out_lines, self.err_lines = [], []
        self._cond = threading.Condition()
        self._open = 2
        self._threads = [threading.Thread(target=self._pump, args=(s, l), daemon=True)
                         for s, l in ((self.proc.stdout, self.out_lines),
                                      (self.proc.stderr, self.err_lines))]
        for t in self._threads:
            t.start()

    def _pump(self, stream, lines):
        for raw in iter(stream.readline, b""):
            with self._cond:
                lines.append(raw.decode("utf-8", "replace"))
                self._cond.notify_all()
        with self._cond:
            self._open -= 1
            self._cond.notify_all()

    def wait_line(self, pattern, stream="stderr", limit=TIMEOUT):
        """The first line of `stream` matching `pattern` (re.search), or
        None when the program closed it (or `limit` seconds passed)."""
        import re
        import time
        rx = re.compile(pattern)
        lines = self.err_lines if stream == "stderr" else self.out_lines
        deadline = time.monotonic() + limit
        seen = 0
        with self._cond:
            while True:
                for line in lines[seen:]:
                    if rx.search(line):
                        return line
                seen = len(lines)
                left = deadline - time.monotonic()
                if self._open == 0 or left <= 0:
                    return None
                self._cond.wait(left)

    def wait_count(self, pattern, n, stream="stderr", limit=TIMEOUT):
        """True once `n` lines of `stream` have matched `pattern` (False
        when the program closed it first, or after `limit` seconds)."""
        import re
        import time
        rx = re.compile(pattern)
        lines = self.err_lines if stream == "stderr" else self.out_lines
        deadline = time.monotonic() + limit
        with self._cond:
            while True:
                if sum(1 for line in lines if rx.search(line)) >= n:
                    return True
                left = deadline - time.monotonic()
                if self._open == 0 or left <= 0:
                    return False
                self._cond.wait(left)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def finish(self, limit=TIMEOUT):
        """Wait for the exit; returns (rc, stdout, stderr).  A program still
        running after `limit` seconds is killed and gets rc 124."""
        try:
            rc = self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = TIMEOUT_RC
        for t in self._threads:
            t.join()
        return rc, "".join(self.out_lines), "".join(self.err_lines)

    def finish_json(self, limit=None):
        """finish() of a `run --json`: (rc, the summary object, None when
        stdout has none, stdout + stderr).  `limit` (default TIMEOUT, at
        least 120 s: a launched trainer starts Python and writes its steps
        first) is only a hang guard."""
        rc, out, err = self.finish(limit=limit or max(TIMEOUT, 120))
        try:
            obj = json.loads(out[out.index('{"'):])
        except ValueError:
            obj = None
        return rc, obj, out + err


def launch(run_args, trainer, trainer_args=(), cwd=ROOT):
    """`smrules run RUN_ARGS -- python3 TRAINER TRAINER_ARGS...` started in
    the background in `cwd` (the trainer's working directory): a stand-in
    trainer that smrules launches and its actions stop (a Running; wait
    with finish_json)."""
    return Running(["run"] + list(run_args) + ["--", sys.executable, trainer] +
                   list(trainer_args), cwd=cwd)


# ---------------------------------------------------------- smdebug bytes
# For tests that write a trial byte by byte, as smdebug's hook does:
# TFRecord framing with masked CRC-32C and protobuf's wire encoding.

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def masked_crc32c(data):
    """TFRecord's masked CRC-32C of `data`."""
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def pb_varint(v):
    """A protobuf varint."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_bytes(field, data):
    """A length-delimited protobuf field."""
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


# What smdebug's writer puts where a record's data checksum goes (it does
# not checksum the data; docs/formats.md).
SMDEBUG_FOOTER = 0x062DC0B3


def f32_record(name, content, count, step, real_crc=False, mode_meta=True, wall_time=None):
    """One TFRecord of a float32 tensor `name` of `count` elements whose
    bytes are `content`, at `step` (Event > Summary > Value > TensorProto),
    with smdebug's mode and mode_step metadata unless mode_meta is False;
    the data checksum is real with real_crc, else smdebug's footer."""
    tensor = (pb_varint(1 << 3) + pb_varint(1)  # dtype DT_FLOAT
              + pb_bytes(2, pb_bytes(2, pb_varint(1 << 3) + pb_varint(count)))
              + pb_bytes(4, content))
    meta = b""
    if mode_meta:
        meta = pb_bytes(9, pb_bytes(1, pb_bytes(1, b"mode_step") + pb_bytes(2, str(step).encode()))
                        + pb_bytes(1, pb_bytes(1, b"mode") + pb_bytes(2, b"1")))
    value = pb_bytes(1, name.encode()) + pb_bytes(8, tensor) + meta
    wall = 1.0e9 + step if wall_time is None else wall_time
    event = (pb_varint(1 << 3 | 1) + struct.pack("<d", wall)
             + pb_varint(2 << 3) + pb_varint(step) + pb_bytes(5, pb_bytes(1, value)))
    head = struct.pack("<Q", len(event))
    footer = masked_crc32c(event) if real_crc else SMDEBUG_FOOTER
    return head + struct.pack("<I", masked_crc32c(head)) + event + struct.pack("<I", footer)


def write_step(folder, step, records, mode="TRAIN", mode_step=None):
    """Writes step `step` of worker_0 as smdebug lays it out (docs/formats.md):
    the event file holding `records`, a list of (tensor name, TFRecord bytes)
    in file order, and its index file.  Returns (event file bytes, index file
    bytes)."""
    event_rel = "events/%012d/%012d_worker_0.tfevents" % (step, step)
    blob, payload = b"", []
    for name, rec in records:
        payload.append({"tensorname": name, "start_idx": len(blob), "length": len(rec)})
        blob += rec
    index = json.dumps({"meta": {"mode": mode,
                                 "mode_step": step if mode_step is None else mode_step,
                                 "event_file_name": event_rel},
                        "tensor_payload": payload, "shape_payload": []}).encode()
    for rel, data in ((event_rel, blob), ("index/000000000/%012d_worker_0.json" % step, index)):
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return blob, index


def write_end_marker(folder):
    """The file smdebug writes when training ends (docs/formats.md)."""
    with open(os.path.join(folder, "training_job_end.ts"), "wb"):
        pass
