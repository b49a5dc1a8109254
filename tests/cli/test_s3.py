#!/usr/bin/env python3
"""End-to-end: trials in S3 (`--trial s3://bucket/prefix`, docs/s3.md).

The test starts the moto S3 server on 127.0.0.1 (an ephemeral port) and a
small proxy in front of it, in this process, through which smrules talks
to S3.  The proxy counts what is served (requests, ranges, body bytes),
checks every request's SigV4 signature with its own implementation of the
algorithm, and can inject failures (503 SlowDown, 500, 429, dropped
connections) or force small listing pages.  The fixtures of tests/fixtures
are uploaded with boto3.  Then:

1. The same answers from S3 as from disk: `inspect --json` of every
   fixture case, `tensor --values --json` (and a reduction) of sampled
   tensors, `run --json` rule results for three rule sets.
2. Only the needed byte ranges are fetched: every GET of an event file is
   a ranged GET of exactly one record the index names, the bytes served
   equal the records' lengths, and no event file is fetched whole.
3. Retries: injected 503 SlowDown / 500 / 429 / dropped connections are
   retried (the run succeeds with the same answers); when the attempts run
   out the error names the S3 error and no secret.
4. A second run lists only what is new (ListObjectsV2 start-after) and
   fetches only the new index files; its results equal a fresh run's.
5. Listing pagination, keys with XML entities, credentials from the
   environment (with a session token) or a shared credentials file,
   anonymous requests, region, AWS_ENDPOINT_URL, job folders with
   debug-output/, the default local state and output locations, and that
   nothing outside the trial prefix is requested.
6. Profiler output in S3: profiler rules and ProfilerReport over
   s3://.../job (profiler-output/ under it), a profiler-output prefix,
   --profiler s3://..., and a TF profiler trace.json.gz give the same
   results and report files as over the folders on disk; --live lists at
   most once a second and sees the end marker in the listing.

Without the moto package the test prints one SKIP line and passes nothing.
"""

import hashlib
import hmac
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

NAME = "test_s3"
BUCKET = "smrules-test"
KEY_ID, SECRET, TOKEN = "AKIDSMRULESTEST", "s3cr3t/Key+ForTests", "tok3n/Session=="
PROFILE_KEY, PROFILE_SECRET = "AKIDPROFILE", "pr0file/Secret"
START_TIMEOUT = 30.0


def skip(why):
    print("SKIP %s: %s" % (NAME, why))
    print("%s: 0 passed, 0 failed" % NAME)
    sys.exit(0)


try:
    import boto3  # noqa: E402
    import moto  # noqa: F401,E402
except ImportError as e:  # pragma: no cover
    skip("moto/boto3 not importable (%s)" % e)


# --------------------------------------------------------------------------
# SigV4, checked independently of libcurl

def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")


def canonical_query(query):
    pairs = []
    for part in query.split("&") if query else []:
        k, _, v = part.partition("=")
        pairs.append((quote(unquote(k), safe="-_.~"), quote(unquote(v), safe="-_.~")))
    return "&".join("%s=%s" % kv for kv in sorted(pairs))


def check_signature(method, raw_path, headers, secrets):
    """None when the request is correctly signed, else why not; the
    region of the credential scope as second value."""
    auth = headers.get("Authorization")
    if not auth:
        return "unsigned", None
    m = AUTH_RE.match(auth)
    if not m:
        return "malformed Authorization header", None
    key_id, date, region, signed, sig = m.groups()
    if key_id not in secrets:
        return "unknown key id %s" % key_id, region
    names = signed.split(";")
    for need in ("host", "x-amz-date", "x-amz-content-sha256"):
        if need not in names:
            return "%s not signed" % need, region
    if headers.get("x-amz-security-token") and "x-amz-security-token" not in names:
        return "session token not signed", region
    if headers.get("Range") and "range" not in names:
        return "range not signed", region
    path, _, query = raw_path.partition("?")
    canon_headers = "".join("%s:%s\n" % (h, " ".join((headers.get(h) or "").split())) for h in names)
    payload = headers.get("x-amz-content-sha256") or hashlib.sha256(b"").hexdigest()
    creq = "\n".join([method, path, canonical_query(query), canon_headers, signed, payload])
    scope = "%s/%s/s3/aws4_request" % (date, region)
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""), scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = _hmac(("AWS4" + secrets[key_id]).encode(), date)
    for part in (region, "s3", "aws4_request"):
        k = _hmac(k, part)
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    return (None if hmac.compare_digest(want, sig) else "signature mismatch"), region


# --------------------------------------------------------------------------
# moto and the proxy

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_http(port, deadline):
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/")
            c.getresponse().read()
            c.close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


class Moto:
    def __init__(self, logdir):
        self.proc = None
        for _ in range(3):  # the port may be taken between probe and bind
            self.port = free_port()
            self.log = open(os.path.join(logdir, "moto.log"), "wb")
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + START_TIMEOUT
            if wait_http(self.port, deadline) and self.proc.poll() is None:
                return
            self.stop()
        raise RuntimeError("moto server did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def error_xml(code, message):
    return ('<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message>'
            '<RequestId>test</RequestId></Error>' % (code, message)).encode()


class Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream):
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.upstream = upstream
        self.lock = threading.Lock()
        self.secrets = {KEY_ID: SECRET, PROFILE_KEY: PROFILE_SECRET}
        self.reset()

    def reset(self):
        with self.lock:
            self.log = []
            self.injections = []  # [substring of the path, action]
            self.page_size = None

    def inject(self, match, action, times=1):
        with self.lock:
            self.injections += [[match, action]] * times

    def take_injection(self, path):
        with self.lock:
            for i, (match, action) in enumerate(self.injections):
                if match in path:
                    del self.injections[i]
                    return action
        return None

    def record(self, entry):
        with self.lock:
            self.log.append(entry)

    def entries(self):
        with self.lock:
            return list(self.log)


UPSTREAM = threading.local()


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def upstream(self, path, headers):
        """The request to moto, over this thread's kept-alive connection."""
        for attempt in (0, 1):
            c = getattr(UPSTREAM, "conn", None)
            if c is None:
                c = UPSTREAM.conn = http.client.HTTPConnection("127.0.0.1", self.server.upstream, timeout=30)
            try:
                c.request(self.command, path, headers=headers)
                r = c.getresponse()
                body = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    c.close()
                    UPSTREAM.conn = None
                return r, body
            except (OSError, http.client.HTTPException):
                c.close()
                UPSTREAM.conn = None
                if attempt:
                    raise

    def do_GET(self):
        self.relay()

    def do_HEAD(self):
        self.relay()

    def reply(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def relay(self):
        srv = self.server
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        why, region = check_signature(self.command, self.path, self.headers, srv.secrets)
        entry = {"method": self.command, "path": self.path, "range": self.headers.get("Range"),
                 "auth": why, "region": region,
                 "key_id": (AUTH_RE.match(self.headers.get("Authorization") or "") or [None, None])[1],
                 "token": self.headers.get("x-amz-security-token"), "status": None, "bytes": 0,
                 "injected": None, "keys": None}
        action = srv.take_injection(self.path)
        if action == "drop":
            entry["injected"] = "drop"
            srv.record(entry)
            self.close_connection = True
            return
        if action and action[0] == "moved":  # the bucket lives in another region
            entry.update(injected="PermanentRedirect", status=301)
            srv.record(entry)
            self.reply(301, [("Content-Type", "application/xml"), ("x-amz-bucket-region", action[1])],
                       error_xml("PermanentRedirect", "use the bucket's region"))
            return
        if action:
            status, code = action
            entry.update(injected=code, status=status)
            srv.record(entry)
            self.reply(status, [("Content-Type", "application/xml")], error_xml(code, "injected by the test"))
            return
        path = self.path
        if srv.page_size and "list-type=2" in path:
            path += "&max-keys=%d" % srv.page_size
        fwd = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "host")}
        r, body = self.upstream(path, fwd)
        headers = [(k, v) for k, v in r.getheaders()
                   if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server")]
        if self.command == "HEAD":
            headers.append(("Content-Length", r.getheader("Content-Length") or "0"))
        entry.update(status=r.status, bytes=len(body))
        if "list-type=2" in path:
            entry["keys"] = [unescape_xml(k) for k in re.findall(r"<Key>(.*?)</Key>", body.decode())]
        srv.record(entry)
        self.send_response(r.status)
        for k, v in headers:
            self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def unescape_xml(s):
    s = re.sub(r"&#x([0-9a-fA-F]+);", lambda m: chr(int(m.group(1), 16)), s)
    s = re.sub(r"&#([0-9]+);", lambda m: chr(int(m.group(1))), s)
    for a, b in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'"), ("&amp;", "&")):
        s = s.replace(a, b)
    return s


# --------------------------------------------------------------------------
# the environment smrules runs in

class Env:
    def __init__(self, tmp, proxy_port):
        self.tmp = tmp
        self.endpoint = "http://127.0.0.1:%d" % proxy_port
        self.home = os.path.join(tmp, "home")
        os.makedirs(self.home, exist_ok=True)
        self.cache = os.path.join(tmp, "cache")
        base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        base.update(HOME=self.home, XDG_CACHE_HOME=self.cache, AWS_ACCESS_KEY_ID=KEY_ID,
                    AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION="us-east-1", SMRULES_S3_STATS="1",
                    AWS_EC2_METADATA_DISABLED="true")  # never the real 169.254.169.254
        self.base = base

    def make(self, **changes):
        e = dict(self.base)
        for k, v in changes.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e


def run(args, env, timeout=lib.TIMEOUT):
    """smrules with `env`; a lib.Result (stdout parsed as JSON when it is)."""
    try:
        p = subprocess.run([lib.SMRULES] + list(args), stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout, cwd=lib.ROOT, env=env)
        rc, out, err = p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = lib.TIMEOUT_RC, (e.stdout or b"").decode("utf-8", "replace")
        err = (e.stderr or b"").decode("utf-8", "replace") + "\n[test harness] timed out after %gs\n" % timeout
    return lib.Result(args, rc, out, err)


def run_many(arg_env_list):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=min(lib.JOBS, 8)) as pool:
        return list(pool.map(lambda ae: run(*ae), arg_env_list))


def s3_stats(err):
    """The sums of smrules' `s3 stats` lines (one per S3 source opened)."""
    out = {}
    for line in re.findall(r"s3 stats: (.*)", err):
        for k, v in re.findall(r"(\w+)=(\d+)", line):
            out[k] = out.get(k, 0) + int(v)
    return out


# --------------------------------------------------------------------------
# fixtures in the bucket

def upload_tree(s3, local, prefix, skip=None, acl=None):
    n = 0
    for dirpath, _, files in os.walk(local):
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            rel = os.path.relpath(p, local).replace(os.sep, "/")
            if f == "EXPECT.json" or (skip and skip(rel)):
                continue
            s3.upload_file(p, BUCKET, "%s/%s" % (prefix, rel) if prefix else rel,
                           ExtraArgs={"ACL": acl} if acl else None)
            n += 1
    return n


def fixture_cases():
    out = []
    for folder in ("trials", "synthetic", "corrupt"):
        for name, path in lib.cases(folder):
            out.append(("%s/%s" % (folder, name), path))
    return out


def s3_url(prefix):
    return "s3://%s/%s" % (BUCKET, prefix)


def strip_paths(obj):
    """inspect/run JSON without the fields that name where the trial is."""
    if isinstance(obj, dict):
        return {k: strip_paths(v) for k, v in obj.items() if k not in ("trial", "state")}
    if isinstance(obj, list):
        return [strip_paths(v) for v in obj]
    return obj


# --------------------------------------------------------------------------
# 1. same answers as from disk

def check_inspect(c, env, cases):
    jobs = []
    for prefix, path in cases:
        jobs.append((lib.inspect_args(path), env.base))
        jobs.append((lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], env.base))
    res = run_many(jobs)
    local = {}
    for i, (prefix, path) in enumerate(cases):
        a, b = res[2 * i], res[2 * i + 1]
        sc = c.scope("%s: inspect from S3" % prefix, b)
        if sc.process(b) and sc.eq("exit code (same as from disk)", b.rc, a.rc):
            sc.ok(strip_paths(b.obj) == strip_paths(a.obj), "same JSON as from disk",
                  lib.first_difference(strip_paths(b.obj), strip_paths(a.obj)))
        local[prefix] = a.obj
    return local


def sample_reads(obj, per_case=6):
    """(name, step) pairs: first and last step of up to per_case tensors."""
    out = []
    for t in (obj or {}).get("tensors", [])[:per_case]:
        steps = t.get("steps_all") or []
        for s in sorted(set(steps[:1] + steps[-1:])):
            out.append((t["name"], s))
    return out


def check_tensors(c, env, cases, local):
    jobs, labels = [], []
    for prefix, path in cases:
        reads = sample_reads(local.get(prefix), 4 if prefix.startswith("trials/") else 2)
        for k, (name, step) in enumerate(reads):
            extra = ["--values"] if k % 3 else ["--reduction", "l2"]
            for trial, more in ((path, []), (s3_url(prefix), ["--s3-endpoint", env.endpoint])):
                jobs.append((["tensor", "--trial", trial, "--name", name, "--step", str(step), "--json",
                              "--fresh"] + extra + more, env.base))
            labels.append("%s: tensor %s step %d %s" % (prefix, name, step, extra[0]))
    res = run_many(jobs)
    for i, label in enumerate(labels):
        a, b = res[2 * i], res[2 * i + 1]
        sc = c.scope(label + " from S3", b)
        if sc.process(b) and sc.eq("exit code (same as from disk)", b.rc, a.rc):
            sc.ok(b.obj == a.obj, "same JSON as from disk", lib.first_difference(b.obj, a.obj))


RULE_SETS = {
    "default": None,
    "many": open(os.path.join(lib.ROOT, "examples", "many-rules.yaml")).read(),
    "lua": """rules:
  - lua: %s/rules/loss_plateau.lua
  - lua: %s/rules/gradient_mean_abs.lua
  - lua: %s/rules/loss_nan.lua
""" % (lib.ROOT, lib.ROOT, lib.ROOT),
}


def rule_files(tmp):
    out = {}
    for name, text in RULE_SETS.items():
        if text is None:
            out[name] = []
            continue
        p = os.path.join(tmp, "rules-%s.yaml" % name)
        with open(p, "w") as f:
            f.write(text)
        out[name] = ["--rules", p]
    return out


def run_args(trial, rules, out_dir, extra=()):
    return ["run", "--trial", trial, "--json", "--output", out_dir] + rules + list(extra)


def check_runs(c, env, tmp, cases):
    """The "many" set on the real trials, the default set on every case,
    the Lua set on three."""
    rules = rule_files(tmp)
    jobs, labels = [], []
    for k, (prefix, path) in enumerate(cases):
        for set_name, rargs in sorted(rules.items()):
            if (set_name == "many" and not prefix.startswith("trials/")) or (set_name == "lua" and k % 4):
                continue
            o = os.path.join(tmp, "out", prefix, set_name)
            jobs.append((run_args(path, rargs, o + "-disk", ["--fresh"]), env.base))
            jobs.append((run_args(s3_url(prefix), rargs, o + "-s3",
                                  ["--fresh", "--s3-endpoint", env.endpoint]), env.base))
            labels.append("%s: run (%s rules)" % (prefix, set_name))
    res = run_many(jobs)
    for i, label in enumerate(labels):
        a, b = res[2 * i], res[2 * i + 1]
        sc = c.scope(label + " from S3", b)
        if sc.process(b) and sc.eq("exit code (same as from disk)", b.rc, a.rc):
            ga, gb = strip_paths(a.obj), strip_paths(b.obj)
            sc.ok(gb == ga, "same rule results as from disk", lib.first_difference(gb, ga))
    return rules


# --------------------------------------------------------------------------
# 2. only the needed byte ranges

def index_records(path):
    """{event file: {start: length}} from the index files of a local trial."""
    recs = {}
    for dirpath, _, files in os.walk(os.path.join(path, "index")):
        for f in files:
            with open(os.path.join(dirpath, f)) as fh:
                ix = json.load(fh)
            ev = ix.get("meta", {}).get("event_file_name")
            for t in ix.get("tensor_payload", []):
                recs.setdefault(ev, {})[t["start_idx"]] = t["length"]
    return recs


def event_requests(entries, prefix):
    base = "/%s/%s/" % (BUCKET, quote(prefix, safe="/-_.~"))
    return [(e, unquote(e["path"][len(base):])) for e in entries
            if e["path"].startswith(base) and e["path"][len(base):].startswith("events/")]


def check_ranges(c, env, proxy, prefix, path, what, args):
    """Every event-file request was a ranged GET of exactly one record the
    index names, and was served exactly those bytes (a fixed number of
    checks, whatever the number of requests)."""
    recs = index_records(path)
    sc = c.scope("%s: byte ranges (%s)" % (prefix, what))
    evs = event_requests(proxy.entries(), prefix)
    sc.ok(len(evs) > 0, "event files were read", "no event-file request seen")
    whole, not_record, short_served = [], [], []
    served = wanted = 0
    for e, rel in evs:
        m = re.match(r"bytes=(\d+)-(\d+)$", e["range"] or "")
        if not m or e["method"] != "GET":
            whole.append("%s %s" % (e["method"], rel))
            continue
        a, b = int(m.group(1)), int(m.group(2))
        if recs.get(rel, {}).get(a) != b - a + 1:
            not_record.append("%s %d-%d" % (rel, a, b))
        if e["bytes"] != b - a + 1:
            short_served.append("%s %d-%d: %d bytes" % (rel, a, b, e["bytes"]))
        served += e["bytes"]
        wanted += b - a + 1
    sc.ok(not whole, "every event-file request is a ranged GET (no whole event file)", lib.short(whole[:5]))
    sc.ok(not not_record, "every range is exactly one record the index names", lib.short(not_record[:5]))
    sc.ok(not short_served, "each range served exactly its bytes", lib.short(short_served[:5]))
    sc.eq("bytes of event-file GETs == sum of the requested records' lengths", served, wanted)
    return evs


def fetched_records(proxy, prefix):
    """[(event file, range)] of the event-file GETs since the last reset."""
    return [(rel, e["range"]) for e, rel in event_requests(proxy.entries(), prefix) if e["method"] == "GET"]


def check_fetched_once(c, env, proxy, prefix, path, rules, tmp):
    """The run just made (many rules, lock step and read-ahead: the default
    for S3) fetched each record once; it fetched exactly the records that
    the same run fetches without read-ahead (SMRULES_S3_PREFETCH=0), so the
    read-ahead asks for nothing the rules do not read; and evaluating rule
    after rule (--schedule rules, no read-ahead) reads the same records,
    some of them more than once."""
    lock = fetched_records(proxy, prefix)
    sc = c.scope("%s: run (many rules, lock step)" % prefix)
    dups = sorted({x for x in lock if lock.count(x) > 1})
    sc.ok(lock and not dups, "each record fetched once", lib.short(dups[:5]))
    base = dict(env.base, SMRULES_S3_PREFETCH="0")
    out = {}
    for label, extra in (("no read-ahead", []), ("rule after rule", ["--schedule", "rules", "--jobs", "2"])):
        proxy.reset()
        r = run(run_args(s3_url(prefix), rules["many"], os.path.join(tmp, "out-ranges-2"),
                         ["--fresh", "--s3-endpoint", env.endpoint] + extra), base)
        sub = c.scope("%s: run (many rules, %s)" % (prefix, label), r)
        if sub.process(r) and sub.exit_code(r, [0, 1]):
            out[label] = fetched_records(proxy, prefix)
    if "no read-ahead" in out:
        sc.ok(set(lock) == set(out["no read-ahead"]),
              "read-ahead fetches exactly the records the rules read",
              lib.short(sorted(set(lock) ^ set(out["no read-ahead"]))[:5]))
    if "rule after rule" in out:
        sc.ok(set(out["rule after rule"]) == set(lock), "rule after rule reads the same records",
              lib.short(sorted(set(lock) ^ set(out["rule after rule"]))[:5]))


def check_byte_ranges(c, env, proxy, tmp, rules):
    prefix = "trials/healthy_mlp_digits"
    path = os.path.join(lib.FIXTURES, prefix)
    # one tensor: exactly one GET of exactly its record
    name = sorted(os.listdir(os.path.join(path, "index/000000000")))[3]
    with open(os.path.join(path, "index/000000000", name)) as f:
        idx = json.load(f)
    t = idx["tensor_payload"][0]
    step = int(name.split("_")[0])
    proxy.reset()
    r = run(["tensor", "--trial", s3_url(prefix), "--s3-endpoint", env.endpoint, "--name", t["tensorname"],
             "--step", str(step), "--json", "--fresh"], env.base)
    sc = c.scope("%s: one tensor read" % prefix, r)
    if sc.process(r) and sc.exit_code(r, [0]):
        evs = check_ranges(c, env, proxy, prefix, path, "one tensor", r.args)
        sc.eq("event-file requests", len(evs), 1)
        if evs:
            e, rel = evs[0]
            sc.eq("the event file of the index", rel, idx["meta"]["event_file_name"])
            sc.eq("the range", e["range"], "bytes=%d-%d" % (t["start_idx"], t["start_idx"] + t["length"] - 1))
            sc.eq("bytes served", e["bytes"], t["length"])
    # a run of many rules: every event read is one indexed record
    proxy.reset()
    r = run(run_args(s3_url(prefix), rules["many"], os.path.join(tmp, "out-ranges"),
                     ["--fresh", "--s3-endpoint", env.endpoint]), env.base)
    sc = c.scope("%s: run (many rules)" % prefix, r)
    if sc.process(r) and sc.exit_code(r, [0, 1]):
        check_ranges(c, env, proxy, prefix, path, "run", r.args)
        st = s3_stats(r.err)
        served = sum(e["bytes"] for e in proxy.entries())
        sc.eq("bytes received (smrules' count) == bytes served (proxy's count)", st.get("bytes"), served)
        idx_gets = [e for e in proxy.entries() if "/index/" in e["path"] and e["method"] == "GET"]
        sc.eq("each index file fetched once", len(idx_gets), len({e["path"] for e in idx_gets}))
        check_fetched_once(c, env, proxy, prefix, path, rules, tmp)
    # an index entry past the end of its event file: refused, nothing fetched
    prefix = "corrupt/index_past_eof"
    path = os.path.join(lib.FIXTURES, prefix)
    a = run(lib.inspect_args(path), env.base)
    proxy.reset()
    jobs = []
    for t in (a.obj or {}).get("tensors", [])[:3]:
        for s in t.get("steps_all", [])[:2]:
            jobs.append((t["name"], s))
    for name, step in jobs:
        args = ["tensor", "--name", name, "--step", str(step), "--json", "--fresh"]
        x = run(args[:1] + ["--trial", path] + args[1:], env.base)
        y = run(args[:1] + ["--trial", s3_url(prefix), "--s3-endpoint", env.endpoint] + args[1:], env.base)
        sc = c.scope("%s: tensor %s step %s" % (prefix, name, step), y)
        if sc.process(y):
            sc.eq("exit code", y.rc, x.rc)
            sc.ok(y.obj == x.obj, "same answer as from disk", lib.first_difference(y.obj, x.obj))
    for e, rel in event_requests(proxy.entries(), prefix):
        c.ok(e["method"] == "HEAD" or e["range"] is not None, "%s: no whole event file" % prefix,
             "%s %s range=%s bytes=%d" % (e["method"], rel, e["range"], e["bytes"]))


# --------------------------------------------------------------------------
# 3. retries

def check_retries(c, env, proxy, tmp, local):
    prefix = "trials/two_workers_ddp"
    want = strip_paths(local[prefix])
    scenarios = [
        ("3 x 503 SlowDown on the first requests", [("", (503, "SlowDown"), 3)]),
        ("500, 429, dropped connection", [("", (500, "InternalError"), 1), ("", (429, "TooManyRequests"), 1),
                                          ("", "drop", 1)]),
        ("503 on listings", [("list-type=2", (503, "SlowDown"), 2)]),
        ("503 on index files (parallel read-ahead)", [("/index/", (503, "SlowDown"), 4)]),
        ("dropped connections on index files", [("/index/", "drop", 3)]),
    ]
    for label, inj in scenarios:
        proxy.reset()
        for match, action, times in inj:
            proxy.inject(match, action, times)
        r = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], env.base)
        sc = c.scope("retry: %s" % label, r)
        if sc.process(r) and sc.exit_code(r, [0]):
            sc.ok(strip_paths(r.obj) == want, "same answer as without errors",
                  lib.first_difference(strip_paths(r.obj), want))
        injected = sum(1 for e in proxy.entries() if e["injected"])
        sc.eq("injected failures served", injected, sum(t for _, _, t in inj))
        sc.ok(s3_stats(r.err).get("retries", 0) >= 1, "smrules counted retries", r.err.strip()[-300:])
    # ranged GETs retried too
    proxy.reset()
    proxy.inject("/events/", (503, "SlowDown"), 2)
    proxy.inject("/events/", "drop", 1)
    args = ["tensor", "--name", "CrossEntropyLoss_output_0", "--step", "2", "--json", "--fresh", "--values"]
    x = run(args[:1] + ["--trial", os.path.join(lib.FIXTURES, prefix)] + args[1:], env.base)
    y = run(args[:1] + ["--trial", s3_url(prefix), "--s3-endpoint", env.endpoint] + args[1:], env.base)
    sc = c.scope("retry: ranged GETs", y)
    if sc.process(y) and sc.exit_code(y, [x.rc]):
        sc.ok(y.obj == x.obj, "same value as from disk", lib.first_difference(y.obj, x.obj))
    # attempts run out: a clear error, no secret printed (bounded time: the
    # attempts are counted; run()'s timeout is the hang guard)
    proxy.reset()
    proxy.inject("list-type=2", (503, "SlowDown"), 10)
    env2 = env.make(SMRULES_S3_MAX_ATTEMPTS="3", AWS_SESSION_TOKEN=TOKEN)
    r = run(["inspect", "--trial", s3_url(prefix), "--s3-endpoint", env.endpoint, "--fresh"], env2)
    sc = c.scope("retry: attempts exhausted", r)
    if sc.process(r, want_json=False):
        sc.eq("exit code", r.rc, 3)
        sc.ok("503" in r.err and "SlowDown" in r.err, "the error names the S3 error", r.err.strip())
        sc.eq("attempts (list requests)", sum(1 for e in proxy.entries() if "list-type=2" in e["path"]), 3)
        sc.ok(SECRET not in r.err + r.out and TOKEN not in r.err + r.out, "no secret in the output")
    # nothing listening: connection errors, retried, then an error
    dead = "http://127.0.0.1:%d" % free_port()
    r = run(["inspect", "--trial", s3_url(prefix), "--s3-endpoint", dead, "--fresh"], env2)
    sc = c.scope("retry: endpoint down", r)
    if sc.process(r, want_json=False):
        sc.eq("exit code", r.rc, 3)
        sc.ok("connect" in r.err.lower(), "the error says the connection failed", r.err.strip())
        sc.ok(SECRET not in r.err + r.out and TOKEN not in r.err + r.out, "no secret in the output")


# --------------------------------------------------------------------------
# 4. a second run lists only what is new

def index_keys_listed(entries):
    return [k for e in entries if e["keys"] is not None and "index%2F" in e["path"] for k in e["keys"]]


def check_incremental(c, env, proxy, s3, tmp, rules):
    src = os.path.join(lib.FIXTURES, "trials/healthy_mlp_digits")
    prefix = "grow/healthy_mlp_digits"
    index_files = sorted(os.listdir(os.path.join(src, "index/000000000")))
    first, later = index_files[:8], index_files[8:]
    upload_tree(s3, src, prefix, skip=lambda rel: rel.startswith("index/") and rel.split("/")[-1] in later)
    state = os.path.join(tmp, "grow-state.db")
    args = run_args(s3_url(prefix), rules["many"], os.path.join(tmp, "out-grow"),
                    ["--state", state, "--s3-endpoint", env.endpoint])
    proxy.reset()
    r1 = run(args, env.base)
    sc = c.scope("incremental: first run (8 of 16 steps)", r1)
    sc.process(r1) and sc.exit_code(r1, [0, 1])
    sc.eq("index files listed", len(index_keys_listed(proxy.entries())), len(first))
    for f in later:
        s3.upload_file(os.path.join(src, "index/000000000", f), BUCKET, "%s/index/000000000/%s" % (prefix, f))
    proxy.reset()
    r2 = run(args, env.base)
    sc = c.scope("incremental: second run (8 new steps)", r2)
    if sc.process(r2) and sc.exit_code(r2, [0, 1]):
        lists = [e for e in proxy.entries() if e["keys"] is not None and "index%2F" in e["path"]]
        sc.ok(lists and all("start-after=" in e["path"] for e in lists), "listing starts after a known key",
              " ".join(e["path"] for e in lists))
        listed = sorted(k.rsplit("/", 1)[-1] for k in index_keys_listed(proxy.entries()))
        sc.ok(set(later) <= set(listed), "the new index files are listed", lib.short(listed))
        sc.ok(len(listed) <= len(later) + 1, "only the new ones (and the newest known step) are listed",
              lib.short(listed))
        got = sorted(e["path"].rsplit("/", 1)[-1] for e in proxy.entries()
                     if "/index/" in e["path"] and e["method"] == "GET")
        sc.eq("index files fetched: only the new ones", got, later)
        fresh = run(run_args(src, rules["many"], os.path.join(tmp, "out-grow-fresh"), ["--fresh"]), env.base)
        sc.ok(strip_paths(r2.obj) == strip_paths(fresh.obj), "results equal a fresh run over all steps",
              lib.first_difference(strip_paths(r2.obj), strip_paths(fresh.obj)))
    # nothing new: no index file fetched at all
    proxy.reset()
    r3 = run(args, env.base)
    sc = c.scope("incremental: third run (nothing new)", r3)
    if sc.process(r3) and sc.exit_code(r3, [0, 1]):
        got = [e["path"] for e in proxy.entries() if "/index/" in e["path"] and e["method"] == "GET"]
        sc.eq("index files fetched", got, [])
        sc.ok(strip_paths(r3.obj) == strip_paths(r2.obj), "same results",
              lib.first_difference(strip_paths(r3.obj), strip_paths(r2.obj)))
    # a trial rewritten in place (fewer steps): noticed, read again
    for f in later:
        s3.delete_object(Bucket=BUCKET, Key="%s/index/000000000/%s" % (prefix, f))
    a = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], env.base)
    b = run(["inspect", "--trial", s3_url(prefix), "--s3-endpoint", env.endpoint, "--json", "--state", state],
            env.base)
    sc = c.scope("incremental: trial rewritten with fewer steps", b)
    if sc.process(b) and sc.exit_code(b, [0]):
        sc.ok(strip_paths(b.obj) == strip_paths(a.obj), "the stored catalog is not trusted",
              lib.first_difference(strip_paths(b.obj), strip_paths(a.obj)))


def check_watch(c, env, proxy, s3, tmp):
    """run --watch follows a trial in S3 as it grows (polling), and ends
    when training_job_end.ts appears."""
    src = os.path.join(lib.FIXTURES, "trials/healthy_mlp_digits")
    prefix = "watch/healthy_mlp_digits"
    names = sorted(os.listdir(os.path.join(src, "index/000000000")))
    early, late = names[:6], names[6:]
    upload_tree(s3, src, prefix, skip=lambda rel: rel == "training_job_end.ts" or (
        rel.startswith("index/") and rel.split("/")[-1] in late))
    proxy.reset()
    args = ["run", "--trial", s3_url(prefix), "--s3-endpoint", env.endpoint, "--watch", "--timeout", "60",
            "--json", "--state", os.path.join(tmp, "watch.db"), "--output", os.path.join(tmp, "out-watch")]
    p = subprocess.Popen([lib.SMRULES] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=lib.ROOT, env=env.base)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
            "/training_job_end.ts" in e["path"] for e in proxy.entries()):
        time.sleep(0.2)
    # the watch has made its first pass (it asked for the end marker): the
    # rest of the trial appears now, to be found by its next listing
    for f in late:
        s3.upload_file(os.path.join(src, "index/000000000", f), BUCKET, "%s/index/000000000/%s" % (prefix, f))
    s3.upload_file(os.path.join(src, "training_job_end.ts"), BUCKET, prefix + "/training_job_end.ts")
    try:
        out, err = p.communicate(timeout=60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        rc = lib.TIMEOUT_RC
    r = lib.Result(args, rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
    sc = c.scope("watch: a trial in S3 growing, then ending", r)
    if sc.process(r) and sc.exit_code(r, [0, 1]):
        fresh = run(run_args(src, [], os.path.join(tmp, "out-watch-fresh"), ["--fresh"]), env.base)
        watched = dict(r.obj or {})
        watched.pop("training", None)  # how training ended: only a watch says
        sc.ok(strip_paths(watched) == strip_paths(fresh.obj), "results equal a run over the finished trial",
              lib.first_difference(strip_paths(r.obj), strip_paths(fresh.obj)))
        lists = [e["path"] for e in proxy.entries() if "list-type=2" in e["path"] and "index%2F" in e["path"]]
        sc.ok(len(lists) >= 2 and all("start-after=" in x for x in lists[1:]),
              "polled with listings after the known keys", lib.short(lists[:4]))


def check_lagging_worker(c, env, proxy, s3, tmp, rules):
    """Two workers, one behind: the next listing starts at the first step
    the slow worker has not written, so its late files are found."""
    src = os.path.join(lib.FIXTURES, "trials/two_workers_ddp")
    prefix = "lag/two_workers_ddp"
    names = sorted(os.listdir(os.path.join(src, "index/000000000")))
    late = [n for n in names if n.endswith("worker_1.json")][2:]  # worker_1 wrote 2 steps
    upload_tree(s3, src, prefix, skip=lambda rel: rel.startswith("index/") and rel.split("/")[-1] in late)
    state = os.path.join(tmp, "lag-state.db")
    args = run_args(s3_url(prefix), rules["many"], os.path.join(tmp, "out-lag"),
                    ["--state", state, "--s3-endpoint", env.endpoint, "--live"])
    r1 = run(args, env.base)
    sc = c.scope("lagging worker: first run (worker_1 behind)", r1)
    sc.process(r1) and sc.exit_code(r1, [0, 1])
    for f in late:
        s3.upload_file(os.path.join(src, "index/000000000", f), BUCKET, "%s/index/000000000/%s" % (prefix, f))
    proxy.reset()
    r2 = run(args, env.base)
    sc = c.scope("lagging worker: second run (worker_1 caught up)", r2)
    if sc.process(r2) and sc.exit_code(r2, [0, 1]):
        lists = [e for e in proxy.entries() if e["keys"] is not None and "index%2F" in e["path"]]
        first_late = "index/000000000/" + late[0].split("_")[0]
        sc.ok(lists and all(("start-after=" + quote("%s/%s" % (prefix, first_late), safe="")) in e["path"]
                            for e in lists),
              "listing starts at the first step worker_1 had not written", lib.short([e["path"] for e in lists]))
        got = sorted(e["path"].rsplit("/", 1)[-1] for e in proxy.entries()
                     if "/index/" in e["path"] and e["method"] == "GET")
        sc.eq("index files fetched: worker_1's late ones", got, sorted(late))
        fresh = run(run_args(src, rules["many"], os.path.join(tmp, "out-lag-fresh"), ["--fresh", "--live"]),
                    env.base)
        sc.ok(strip_paths(r2.obj) == strip_paths(fresh.obj), "results equal a fresh run",
              lib.first_difference(strip_paths(r2.obj), strip_paths(fresh.obj)))


def check_default_locations(c, env, proxy, rules):
    prefix = "trials/stalled_lr_zero"
    url = s3_url(prefix)
    r = run(["inspect", "--trial", url, "--s3-endpoint", env.endpoint, "--json"], env.base)
    sc = c.scope("default state location", r)
    if sc.process(r) and sc.exit_code(r, [0]):
        st = r.obj.get("state", "")
        sc.ok(st.startswith(os.path.join(env.cache, "smrules", "s3")) and st.endswith("/state.db"),
              "catalog under $XDG_CACHE_HOME/smrules/s3/", st)
        sc.ok(os.path.isfile(st), "the catalog file exists", st)
        proxy.reset()
        r2 = run(["inspect", "--trial", url + "/", "--s3-endpoint", env.endpoint, "--json"], env.base)
        sc.eq("same catalog for the URL with a trailing slash", (r2.obj or {}).get("state"), st)
        got = [e["path"] for e in proxy.entries() if "/index/" in e["path"] and e["method"] == "GET"]
        sc.eq("re-run: no index file fetched again", got, [])
        out = os.path.join(os.path.dirname(st), "rule-output")
        r3 = run(["run", "--trial", url, "--s3-endpoint", env.endpoint, "--json"], env.base)
        if sc.process(r3):
            sc.ok(os.path.isfile(os.path.join(out, "ExplodingTensor", "report.json")),
                  "rule-output next to the catalog", out)
            sc.ok(not os.path.exists(os.path.join(lib.ROOT, "s3:")), "nothing written to ./s3:/")


# --------------------------------------------------------------------------
# 5. listing, keys, credentials, endpoints

def check_pagination(c, env, proxy, local):
    prefix = "trials/healthy_mlp_digits"
    proxy.reset()
    proxy.page_size = 3
    r = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], env.base)
    sc = c.scope("pagination (3 keys a page)", r)
    if sc.process(r) and sc.exit_code(r, [0]):
        sc.ok(strip_paths(r.obj) == strip_paths(local[prefix]), "same answer",
              lib.first_difference(strip_paths(r.obj), strip_paths(local[prefix])))
        tokens = [e for e in proxy.entries() if "continuation-token=" in e["path"]]
        sc.ok(len(tokens) >= 5, "continuation tokens followed", "%d pages with a token" % len(tokens))
    proxy.page_size = None


def check_odd_keys(c, env, proxy, s3):
    src = os.path.join(lib.FIXTURES, "trials/class_imbalance_digits")
    prefix = "odd & <keys>/it's \"quoted\" + 100%/trial"
    upload_tree(s3, src, prefix)
    a = run(lib.inspect_args(src), env.base)
    proxy.reset()
    b = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], env.base)
    sc = c.scope("keys with XML entities and reserved characters", b)
    if sc.process(b) and sc.exit_code(b, [0]):
        sc.ok(strip_paths(b.obj) == strip_paths(a.obj), "same answer",
              lib.first_difference(strip_paths(b.obj), strip_paths(a.obj)))
        sc.eq("trial", b.obj.get("trial"), s3_url(prefix))
        sc.ok(all(e["auth"] is None for e in proxy.entries()), "every request correctly signed",
              lib.short([(e["path"], e["auth"]) for e in proxy.entries() if e["auth"]][:3]))
    args = ["tensor", "--name", "labels", "--step", "3", "--values", "--json", "--fresh"]
    x = run(args[:1] + ["--trial", src] + args[1:], env.base)
    y = run(args[:1] + ["--trial", s3_url(prefix), "--s3-endpoint", env.endpoint] + args[1:], env.base)
    sc = c.scope("keys with reserved characters: tensor", y)
    if sc.process(y) and sc.exit_code(y, [0]):
        sc.ok(y.obj == x.obj, "same value", lib.first_difference(y.obj, x.obj))


def check_confinement(c, env, proxy, s3):
    """Index files naming paths outside the trial: nothing outside the
    prefix is ever requested."""
    for case in ("index_path_traversal", "index_absolute_path"):
        prefix = "corrupt/%s" % case
        path = os.path.join(lib.FIXTURES, prefix)
        # a readable object where a traversal would land
        for target in ("corrupt/secret.tfevents", "secret.tfevents", "etc/passwd"):
            s3.put_object(Bucket=BUCKET, Key=target, Body=b"x" * 64)
        a = run(lib.inspect_args(path), env.base)
        proxy.reset()
        for t in (a.obj or {}).get("tensors", [])[:4]:
            for s in t.get("steps_all", [])[:2]:
                args = ["tensor", "--name", t["name"], "--step", str(s), "--json", "--fresh"]
                x = run(args[:1] + ["--trial", path] + args[1:], env.base)
                y = run(args[:1] + ["--trial", s3_url(prefix), "--s3-endpoint", env.endpoint] + args[1:], env.base)
                sc = c.scope("%s: tensor %s step %s" % (prefix, t["name"], s), y)
                if sc.process(y):
                    sc.eq("exit code", y.rc, x.rc)
                    sc.ok(y.obj == x.obj, "same answer as from disk", lib.first_difference(y.obj, x.obj))
        base = "/%s/%s/" % (BUCKET, prefix)
        outside = [e["path"] for e in proxy.entries()
                   if not e["path"].startswith(base) and "prefix=" + quote(prefix, safe="") not in e["path"]]
        c.ok(not outside, "%s: nothing outside the trial prefix requested" % prefix, lib.short(outside))


IMDS_SESSION, IMDS_TOKEN, CONTAINER_AUTH, CONTAINER_TOKEN = (
    "imds-session-t0ken", "imds/Role=Token", "container-auth-t0ken", "container/Task=Token")


class Metadata(ThreadingHTTPServer):
    """A stand-in for the EC2 instance metadata service (IMDSv2: a session
    token from PUT /latest/api/token, then the role's credentials) and for a
    container credentials endpoint (GET /container-creds with an
    Authorization header).  Records every request."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), MetadataHandler)
        self.log = []
        self.url = "http://127.0.0.1:%d" % self.server_address[1]


class MetadataHandler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def answer(self, status, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def creds(self, token):
        return json.dumps({"Code": "Success", "AccessKeyId": KEY_ID, "SecretAccessKey": SECRET,
                           "Token": token, "Expiration": "2099-01-01T00:00:00Z"})

    def do_PUT(self):
        self.server.log.append(("PUT", self.path, self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")))
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self.answer(200, IMDS_SESSION)
        else:
            self.answer(400, "bad token request")

    def do_GET(self):
        self.server.log.append(("GET", self.path, self.headers.get("X-aws-ec2-metadata-token")
                                or self.headers.get("Authorization")))
        base = "/latest/meta-data/iam/security-credentials/"
        if self.path == "/container-creds":
            if self.headers.get("Authorization") == CONTAINER_AUTH:
                self.answer(200, self.creds(CONTAINER_TOKEN))
            else:
                self.answer(403, "no")
        elif self.headers.get("X-aws-ec2-metadata-token") != IMDS_SESSION:
            self.answer(401, "IMDSv2 token required")
        elif self.path == base:
            self.answer(200, "smrules-test-role\n")
        elif self.path == base + "smrules-test-role":
            self.answer(200, self.creds(IMDS_TOKEN))
        else:
            self.answer(404, "not found")


def metadata_cases(env, md):
    no_keys = dict(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None, AWS_SHARED_CREDENTIALS_FILE=None,
                   AWS_EC2_METADATA_DISABLED=None)
    return [
        ("instance metadata service (IMDSv2 role)", env.make(AWS_EC2_METADATA_SERVICE_ENDPOINT=md.url, **no_keys),
         KEY_ID, IMDS_TOKEN, "us-east-1"),
        ("container credentials endpoint", env.make(AWS_CONTAINER_CREDENTIALS_FULL_URI=md.url + "/container-creds",
                                                    AWS_CONTAINER_AUTHORIZATION_TOKEN=CONTAINER_AUTH,
                                                    AWS_EC2_METADATA_SERVICE_ENDPOINT=md.url, **no_keys),
         KEY_ID, CONTAINER_TOKEN, "us-east-1"),
    ]


def check_metadata_log(c, md):
    """IMDSv2: a PUT for the session token, then GETs carrying it."""
    log = md.log
    sc = c.scope("credentials: metadata requests")
    sc.ok(log and log[0][0] == "PUT" and log[0][1] == "/latest/api/token" and log[0][2],
          "IMDSv2: the session token is asked for first (PUT with a TTL)", lib.short(log[:3]))
    imds_gets = [x for x in log if x[0] == "GET" and x[1].startswith("/latest/")]
    sc.ok(imds_gets and all(x[2] == IMDS_SESSION for x in imds_gets),
          "every metadata GET carries the session token", lib.short(imds_gets))
    sc.ok(any(x[1] == "/container-creds" and x[2] == CONTAINER_AUTH for x in log),
          "the container endpoint got the Authorization token", lib.short(log))


def check_expired_role(c, env, proxy, md, prefix, want):
    """Role credentials that S3 calls expired (400 ExpiredToken) are asked
    for again from the metadata service and the request is repeated; keys
    from the environment are not (the error stands)."""
    imds = metadata_cases(env, md)[0][1]
    md.log.clear()
    proxy.reset()
    proxy.inject("list-type=2", (400, "ExpiredToken"))
    r = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], imds)
    sc = c.scope("credentials: role credentials expired (400 ExpiredToken)", r)
    if sc.process(r) and sc.exit_code(r, [0]):
        sc.ok(strip_paths(r.obj) == want, "same answer", lib.first_difference(strip_paths(r.obj), want))
        role_gets = [x for x in md.log if x[1].endswith("/smrules-test-role")]
        sc.eq("role credentials asked for twice (start, after the expiry)", len(role_gets), 2)
        sc.ok(any(x.get("injected") == "ExpiredToken" for x in proxy.entries()), "the expiry was seen")
    proxy.reset()
    proxy.inject("list-type=2", (400, "ExpiredToken"))
    r = run(["inspect", "--trial", s3_url(prefix), "--s3-endpoint", env.endpoint, "--fresh"], env.base)
    sc = c.scope("credentials: keys from the environment expired", r)
    if sc.process(r, want_json=False):
        sc.eq("exit code", r.rc, 3)
        sc.ok("ExpiredToken" in r.err, "names the S3 error", r.err.strip()[-300:])


def check_credentials(c, env, proxy, s3, tmp, local):
    prefix = "trials/class_imbalance_digits"
    want = strip_paths(local[prefix])
    creds = os.path.join(tmp, "credentials")
    with open(creds, "w") as f:
        f.write("[default]\naws_access_key_id = AKIDWRONG\naws_secret_access_key = wrong\n\n"
                "[testprof]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (PROFILE_KEY, PROFILE_SECRET))
    cases = [
        ("environment", env.base, KEY_ID, None, "us-east-1"),
        ("environment with session token", env.make(AWS_SESSION_TOKEN=TOKEN), KEY_ID, TOKEN, "us-east-1"),
        ("shared credentials file, AWS_PROFILE", env.make(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
                                                          AWS_SHARED_CREDENTIALS_FILE=creds,
                                                          AWS_PROFILE="testprof"), PROFILE_KEY, None, "us-east-1"),
        ("region from AWS_DEFAULT_REGION", env.make(AWS_REGION=None, AWS_DEFAULT_REGION="eu-west-3"),
         KEY_ID, None, "eu-west-3"),
    ]
    md = Metadata()
    threading.Thread(target=md.serve_forever, daemon=True).start()
    cases += metadata_cases(env, md)
    for label, e, key_id, token, region in cases:
        proxy.reset()
        r = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], e)
        sc = c.scope("credentials: %s" % label, r)
        if sc.process(r) and sc.exit_code(r, [0]):
            sc.ok(strip_paths(r.obj) == want, "same answer", lib.first_difference(strip_paths(r.obj), want))
            entries = proxy.entries()
            bad = [(x["path"], x["auth"]) for x in entries if x["auth"]]
            sc.ok(entries and not bad, "every request correctly signed", lib.short(bad[:3]))
            sc.ok(all(x["key_id"] == key_id for x in entries), "signed with %s" % key_id,
                  lib.short(sorted({x["key_id"] for x in entries})))
            sc.ok(all(x["token"] == token for x in entries), "session token header",
                  lib.short(sorted({str(x["token"]) for x in entries})))
            sc.ok(all(x["region"] == region for x in entries), "region %s in the scope" % region,
                  lib.short(sorted({str(x["region"]) for x in entries})))
            sc.ok(SECRET not in r.err and PROFILE_SECRET not in r.err, "no secret in the output")
    check_metadata_log(c, md)
    check_expired_role(c, env, proxy, md, prefix, want)
    md.shutdown()
    md.server_close()
    # a bucket in another region: S3's redirect names it, smrules follows
    proxy.reset()
    proxy.inject("", ("moved", "ap-south-2"))
    r = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], env.base)
    sc = c.scope("credentials: bucket in another region (301 with x-amz-bucket-region)", r)
    if sc.process(r) and sc.exit_code(r, [0]):
        sc.ok(strip_paths(r.obj) == want, "same answer", lib.first_difference(strip_paths(r.obj), want))
        regions = [x["region"] for x in proxy.entries()]
        sc.ok(regions[:1] == ["us-east-1"] and set(regions[1:]) == {"ap-south-2"},
              "signed for the bucket's region after the redirect", lib.short(regions))
        sc.ok(all(x["auth"] is None for x in proxy.entries()), "every request correctly signed")
    # no credentials anywhere: anonymous requests; a private trial is
    # refused with a clear error, a public one is read
    e = env.make(AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None, AWS_SHARED_CREDENTIALS_FILE=None)
    r = run(["inspect", "--trial", s3_url(prefix), "--s3-endpoint", env.endpoint, "--fresh"], e)
    sc = c.scope("credentials: none, private objects", r)
    if sc.process(r, want_json=False):
        sc.eq("exit code", r.rc, 3)
        sc.ok("403" in r.err and "no AWS credentials" in r.err, "says access was refused, unsigned",
              r.err.strip())
    public = "public/class_imbalance_digits"
    upload_tree(s3, os.path.join(lib.FIXTURES, prefix), public, acl="public-read")
    proxy.reset()
    r = run(lib.inspect_args(s3_url(public)) + ["--s3-endpoint", env.endpoint], e)
    sc = c.scope("credentials: none, public objects", r)
    if sc.process(r) and sc.exit_code(r, [0]):
        sc.ok(strip_paths(r.obj) == want, "same answer", lib.first_difference(strip_paths(r.obj), want))
        sc.ok(all(x["auth"] == "unsigned" for x in proxy.entries()), "requests unsigned")
    # the endpoint from AWS_ENDPOINT_URL
    r = run(lib.inspect_args(s3_url(prefix)), env.make(AWS_ENDPOINT_URL=env.endpoint))
    sc = c.scope("endpoint from AWS_ENDPOINT_URL", r)
    if sc.process(r) and sc.exit_code(r, [0]):
        sc.ok(strip_paths(r.obj) == want, "same answer", lib.first_difference(strip_paths(r.obj), want))
    # errors: missing bucket, bad URL
    r = run(["inspect", "--trial", "s3://no-such-bucket-here/x", "--s3-endpoint", env.endpoint, "--fresh"], env.base)
    sc = c.scope("missing bucket", r)
    if sc.process(r, want_json=False):
        sc.eq("exit code", r.rc, 3)
        sc.ok("NoSuchBucket" in r.err, "names the S3 error", r.err.strip())
    r = run(["inspect", "--trial", "s3://x", "--fresh"], env.base)
    sc = c.scope("bad s3 URL", r)
    if sc.process(r, want_json=False):
        sc.eq("exit code", r.rc, 3)
        sc.ok("s3://BUCKET" in r.err, "says what is expected", r.err.strip())


def check_job_folder(c, env, s3, tmp, rules):
    src = os.path.join(lib.FIXTURES, "trials/overfit_tiny_subset")
    upload_tree(s3, src, "jobs/job1/debug-output")
    a = run(run_args(src, rules["many"], os.path.join(tmp, "out-job-disk"), ["--fresh"]), env.base)
    b = run(run_args(s3_url("jobs/job1"), rules["many"], os.path.join(tmp, "out-job-s3"),
                     ["--fresh", "--s3-endpoint", env.endpoint]), env.base)
    sc = c.scope("job folder s3://.../job1 with debug-output/", b)
    if sc.process(b) and sc.exit_code(b, [a.rc]):
        sc.ok(strip_paths(b.obj) == strip_paths(a.obj), "same results",
              lib.first_difference(strip_paths(b.obj), strip_paths(a.obj)))


# --------------------------------------------------------------------------
# 6. profiler output in S3

PROFILER_RULES = """rules:
  - rule: CPUBottleneck
  - rule: LowGPUUtilization
  - rule: StepOutlier
  - rule: OverallFrameworkMetrics
  - rule: ProfilerReport
"""
PROFILER_CASES = ("cpu_bottleneck", "step_outliers")


def written_files(out):
    """{path: bytes} of what a run wrote under --output; result.json
    without the field naming the trial."""
    files = {}
    for dirpath, _, names in os.walk(out):
        for n in names:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, out)
            with open(p, "rb") as f:
                data = f.read()
            if n == "result.json":
                data = json.dumps(strip_paths(json.loads(data)), sort_keys=True).encode()
            files[rel] = data
    return files


def tf_profiler_case(tmp, src):
    """A copy of a profiler-output folder with a TF profiler trace: the
    .metadata file and trace.json.gz (two gzip members) of one profiled
    step, whose events fall inside the job's windows."""
    import gzip
    root = os.path.join(tmp, "tf_case", "profiler-output")
    shutil.copytree(src, root)
    first = min(int(n.split(".")[0]) for _, _, ns in os.walk(os.path.join(root, "system"))
                for n in ns if n[:10].isdigit())
    start, end = first * 1000000 + 120000000, first * 1000000 + 360000000
    step = os.path.join(root, "framework/tensorflow/detailed_profiling/2022051714/000000001")
    prof = os.path.join(step, "plugins/profile/2022_05_17_14_05_00")
    os.makedirs(prof)
    open(os.path.join(step, "algo-1_%d_%d.metadata" % (start, end)), "w").close()
    events = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "/host:CPU"}},
              {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "/device:GPU:0 Compute"}}]
    for i in range(200):
        events.append({"name": "MatMul" if i % 2 else "Conv2D", "ph": "X", "pid": 1 + i % 2, "tid": 7,
                       "ts": i * 1000000, "dur": 400000, "args": {"thread_id": 7}})
    text = json.dumps({"displayTimeUnit": "ns", "traceEvents": events}).encode()
    with open(os.path.join(prof, "algo-1.trace.json.gz"), "wb") as f:
        f.write(gzip.compress(text[:len(text) // 2], mtime=0) + gzip.compress(text[len(text) // 2:], mtime=0))
    return os.path.dirname(root)


def profiler_lists(entries, prefix):
    """ListObjectsV2 requests of <prefix>/profiler-output/{system,framework}/."""
    out = 0
    for sub in ("system", "framework"):
        want = "prefix=" + quote("%s/profiler-output/%s/" % (prefix, sub), safe="")
        out += sum(1 for e in entries if "list-type=2" in e["path"] and want in e["path"])
    return out


def check_profiler(c, env, proxy, s3, tmp):
    """Profiler rules over profiler output in S3 give what they give over
    the same folder on disk: --trial s3://.../job (profiler-output/ found
    under it), --trial naming the profiler-output prefix itself,
    --profiler s3://... (with and without --trial), a TF profiler
    trace.json.gz, and --live (re-listing at most once a second; the end
    marker seen from the listing)."""
    rules = os.path.join(tmp, "rules-profiler.yaml")
    with open(rules, "w") as f:
        f.write(PROFILER_RULES)
    empty = os.path.join(tmp, "empty-trial")
    os.makedirs(empty, exist_ok=True)
    jobs = {}
    for case in PROFILER_CASES:
        upload_tree(s3, os.path.join(lib.FIXTURES, "profiler", case), "profjobs/" + case)
    tf_local = tf_profiler_case(tmp, os.path.join(lib.FIXTURES, "profiler", "cpu_bottleneck", "profiler-output"))
    upload_tree(s3, tf_local, "profjobs/tf_gz")
    for case in PROFILER_CASES + ("tf_gz",):
        local = tf_local if case == "tf_gz" else os.path.join(lib.FIXTURES, "profiler", case)
        url = s3_url("profjobs/" + case)
        jobs["%s: --trial s3://.../job" % case] = (["--trial", local], ["--trial", url])
    local = os.path.join(lib.FIXTURES, "profiler", "cpu_bottleneck", "profiler-output")
    url = s3_url("profjobs/cpu_bottleneck/profiler-output")
    jobs["cpu_bottleneck: --trial s3://.../profiler-output"] = (["--trial", local], ["--trial", url])
    jobs["cpu_bottleneck: --profiler s3://... with a local --trial"] = (
        ["--trial", empty, "--profiler", local], ["--trial", empty, "--profiler", url])
    jobs["cpu_bottleneck: --profiler s3://... alone"] = (["--profiler", local], ["--profiler", url])
    arg_env, labels = [], sorted(jobs)
    for i, label in enumerate(labels):
        for k, args in enumerate(jobs[label]):
            out = os.path.join(tmp, "out-prof", "%d-%s" % (i, "s3" if k else "disk"))
            extra = ["--s3-endpoint", env.endpoint] if k else []
            arg_env.append((["run"] + args + ["--rules", rules, "--json", "--fresh", "--output", out] + extra,
                            env.base))
    res = run_many(arg_env)
    for i, label in enumerate(labels):
        a, b = res[2 * i], res[2 * i + 1]
        sc = c.scope("profiler output in S3, %s" % label, b)
        if not (sc.process(b) and sc.eq("exit code (same as from disk)", b.rc, a.rc)):
            continue
        got = {r.get("name"): r for r in (b.obj or {}).get("rules", [])}
        sc.ok(all(r.get("status") in ("IssuesFound", "NoIssuesFound") and r.get("evaluated_steps", 0) > 0
                  for r in got.values()) and len(got) == 5,
              "every rule evaluated its windows", lib.short({k: (r.get("status"), r.get("message"))
                                                             for k, r in got.items()}))
        sc.ok(strip_paths(b.obj) == strip_paths(a.obj), "same statuses, triggers, windows and reports as from disk",
              lib.first_difference(strip_paths(b.obj), strip_paths(a.obj)))
        fd = written_files(a.args[a.args.index("--output") + 1])
        fs = written_files(b.args[b.args.index("--output") + 1])
        sc.ok(fs == fd and len(fs) > 10, "same files written (report.json, ProfilerReport's reports)",
              lib.short(sorted(set(fs) ^ set(fd)) or [k for k in fs if fs[k] != fd.get(k)]))
        if label.startswith("tf_gz"):
            tf = (got.get("OverallFrameworkMetrics") or {}).get("report", {}).get("Details", {})
            sc.ok("/host:CPU" in (tf.get("ratio") or {}), "the TF profiler trace (gzip) was read",
                  lib.short(tf))
    check_profiler_read_once(c, env, proxy, rules)
    check_profiler_live(c, env, proxy, s3, tmp)


def check_profiler_read_once(c, env, proxy, rules):
    """The profiler rules of a run share one reader: each profiler file is
    fetched once, however many of the five rules (ProfilerReport with its
    eleven inside) read it."""
    for case in PROFILER_CASES:
        prefix = "profjobs/" + case
        proxy.reset()
        r = run(["run", "--trial", s3_url(prefix), "--rules", rules, "--json", "--fresh",
                 "--output", os.path.join(os.path.dirname(rules), "out-prof-once-" + case),
                 "--s3-endpoint", env.endpoint], env.base)
        sc = c.scope("profiler output in S3, %s: five rules" % case, r)
        if not (sc.process(r) and sc.exit_code(r, [0, 1])):
            continue
        gets = [e["path"] for e in proxy.entries()
                if e["method"] == "GET" and "/profiler-output/" in e["path"] and "list-type" not in e["path"]]
        dups = sorted({p for p in gets if gets.count(p) > 1})
        sc.ok(gets and not dups, "each profiler file fetched once for all rules",
              "%d GETs, fetched more than once: %s" % (len(gets), lib.short(dups[:5])))
        sc.ok("record cache holds" not in r.err, "no warning about the record cache (no step rule)",
              r.err.strip()[-300:])


def check_profiler_live(c, env, proxy, s3, tmp):
    """--live over a job still running (no end marker), then ended."""
    case = "cpu_bottleneck"
    prefix = "proflive/" + case
    local = os.path.join(tmp, "proflive", case)
    shutil.copytree(os.path.join(lib.FIXTURES, "profiler", case), local)
    marker = "profiler-output/system/training_job_end.ts"
    os.unlink(os.path.join(local, marker))
    upload_tree(s3, local, prefix)
    rules = os.path.join(tmp, "rules-profiler-live.yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: CPUBottleneck\n")
    for label in ("running", "ended"):
        if label == "ended":
            s3.put_object(Bucket=BUCKET, Key="%s/%s" % (prefix, marker), Body=b"")
            open(os.path.join(local, marker), "w").close()
        args = ["run", "--rules", rules, "--json", "--fresh", "--live"]
        a = run(args + ["--trial", local, "--output", os.path.join(tmp, "out-prof-live-disk-" + label)], env.base)
        proxy.reset()
        t0 = time.monotonic()
        b = run(args + ["--trial", s3_url(prefix), "--output", os.path.join(tmp, "out-prof-live-s3-" + label),
                        "--s3-endpoint", env.endpoint], env.base)
        elapsed = time.monotonic() - t0
        sc = c.scope("profiler output in S3, --live, job %s" % label, b)
        if not sc.process(b):
            continue
        res = ((b.obj or {}).get("rules") or [{}])[0]
        sc.eq("exit code (same as from disk)", b.rc, a.rc)
        fired = label == "ended" or bool(res.get("triggered_steps"))
        sc.eq("status", res.get("status"), "IssuesFound" if fired else "InProgress")
        sc.ok(strip_paths(b.obj) == strip_paths(a.obj), "same result as from disk",
              lib.first_difference(strip_paths(b.obj), strip_paths(a.obj)))
        windows = res.get("evaluated_steps") or 0
        lists = profiler_lists(proxy.entries(), prefix)
        sc.ok(windows >= 5 and lists <= 2 * (1 + int(elapsed)),
              "listed at most once a second (not once per window)",
              "%d listings of system/ and framework/ in %.1fs for %d windows" % (lists, elapsed, windows))
        heads = [e["path"] for e in proxy.entries() if e["method"] == "HEAD" and "profiler-output" in e["path"]]
        sc.eq("no HEAD requests for profiler files (the end marker comes from the listing)", heads, [])


# --------------------------------------------------------------------------

class Timer:
    def __init__(self):
        self.t = time.monotonic()

    def lap(self, what):
        now = time.monotonic()
        print("  %-40s %6.1fs" % (what, now - self.t), flush=True)
        self.t = now


def libcurl_loads(err):
    """The lines of LD_DEBUG=files output that load libcurl."""
    return [ln for ln in err.splitlines() if "file=libcurl" in ln]


def check_lazy_libcurl(c, env, cases):
    """libcurl is loaded when a trial is in S3, not at every start: a run
    over a local trial never maps it (LD_DEBUG=files lists what the dynamic
    loader loads); one over S3 loads it with dlopen.  A libcurl that cannot
    be loaded (SMRULES_LIBCURL) is a clear error for the S3 trial."""
    prefix, path = cases[0]
    dbg = dict(env.base, LD_DEBUG="files")
    local = run(lib.inspect_args(path), dbg)
    remote = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], dbg)
    sc = c.scope("libcurl loaded only when used", remote)
    if sc.process(local) and sc.process(remote):
        sc.ok(not libcurl_loads(local.err), "inspect of a local trial: libcurl not loaded",
              lib.short(libcurl_loads(local.err)))
        loads = libcurl_loads(remote.err)
        sc.ok(any("dynamically loaded" in ln for ln in loads) and
              not any("needed by" in ln for ln in loads),
              "inspect of an S3 trial: libcurl loaded with dlopen", lib.short(loads[:2]))
    gone = dict(env.base, SMRULES_LIBCURL="/nonexistent/libcurl.so.4")
    r = run(lib.inspect_args(s3_url(prefix)) + ["--s3-endpoint", env.endpoint], gone)
    sc = c.scope("no libcurl: the S3 trial is refused, saying why", r)
    if sc.process(r, want_json=False):
        sc.ok(r.rc not in (0, 1) and r.rc > 0, "non-zero exit, no crash", "rc %d" % r.rc)
        sc.ok("cannot load libcurl" in r.err and "/nonexistent/libcurl.so.4" in r.err,
              "the error names the library", r.err[-300:])


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-s3-")
    moto_srv = proxy = None
    try:
        moto_srv = Moto(tmp)
        proxy = Proxy(moto_srv.port)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        env = Env(tmp, proxy.server_address[1])
        s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % moto_srv.port, region_name="us-east-1",
                          aws_access_key_id="setup", aws_secret_access_key="setup")
        timer = Timer()
        s3.create_bucket(Bucket=BUCKET)
        cases = fixture_cases()
        for prefix, path in cases:
            upload_tree(s3, path, prefix)
        timer.lap("upload")
        local = check_inspect(c, env, cases)
        check_lazy_libcurl(c, env, cases)
        timer.lap("inspect")
        check_tensors(c, env, cases, local)
        timer.lap("tensor")
        trial_cases = [x for x in cases if x[0].startswith("trials/")]
        # the trial of an invoker case is its trial_dir (base/), not the case
        # folder, which holds no trial (exit 3)
        synthetic_runs = []
        for prefix, path in cases:
            if prefix.startswith("synthetic/invoker"):
                sub = lib.load_json(os.path.join(path, "EXPECT.json")).get("trial_dir") or "."
                synthetic_runs.append((prefix if sub == "." else prefix + "/" + sub,
                                       path if sub == "." else os.path.join(path, sub)))
        rules = check_runs(c, env, tmp, trial_cases + synthetic_runs)
        timer.lap("run")
        bad = [(e["path"], e["auth"]) for e in proxy.entries() if e["auth"]]
        c.ok(not bad, "every request so far correctly signed (SigV4 checked by the proxy)", lib.short(bad[:3]))
        check_byte_ranges(c, env, proxy, tmp, rules)
        timer.lap("byte ranges")
        check_retries(c, env, proxy, tmp, local)
        timer.lap("retries")
        check_incremental(c, env, proxy, s3, tmp, rules)
        check_lagging_worker(c, env, proxy, s3, tmp, rules)
        check_default_locations(c, env, proxy, rules)
        timer.lap("incremental listing, default locations")
        check_watch(c, env, proxy, s3, tmp)
        timer.lap("watch")
        check_pagination(c, env, proxy, local)
        check_odd_keys(c, env, proxy, s3)
        check_confinement(c, env, proxy, s3)
        check_credentials(c, env, proxy, s3, tmp, local)
        check_job_folder(c, env, s3, tmp, rules)
        timer.lap("listing, keys, credentials, endpoints")
        check_profiler(c, env, proxy, s3, tmp)
        timer.lap("profiler output")
    except Exception as e:  # a broken harness is one failure, not a crash
        import traceback
        traceback.print_exc()
        c.ok(False, "test harness", repr(e))
    finally:
        if proxy:
            proxy.shutdown()
            proxy.server_close()
        if moto_srv:
            moto_srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
