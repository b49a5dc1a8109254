#!/usr/bin/env python3
"""An S3 endpoint that works against its reader (docs/security.md#bounded-cost,
docs/s3.md#failures-and-retries).

A small S3 stand-in in this process serves a fixture trial from disk
(ListObjectsV2 with pages and continuation tokens, GET with a byte range,
HEAD), or misbehaves on the listing:

- benign control: the stand-in serving the trial honestly, in pages of 2
  keys, gives `inspect --json` the same tensors and steps as the folder on
  disk (so the stand-in speaks S3 as smrules reads it);
- continuation tokens that never end, one key a page: smrules stops at its
  page cap with an error naming the listing and the cap, having asked for
  exactly that many pages -- not at the memory limit;
- the same with full pages of 1000 keys: stopped at the key cap;
- a listing answer that drips a byte every half second (above libcurl's
  low-speed floor) and never completes: the request ends at the total timeout
  (SMRULES_S3_TIMEOUT, 2 s here) with an error saying so, is not tried
  again, and the stand-in sees the connection closed.

Nothing waits for a duration: the drip goes on until the client closes the
connection (the event the test waits for; the only way smrules can end the
request is its own timeout), and the caps are counted."""

import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

BUCKET = "hostile"
TRIAL = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
PAGE_SIZE = 2


class Stand(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root):
        super().__init__(("127.0.0.1", 0), Handler)
        self.root = root
        self.lock = threading.Lock()
        self.mode = "honest"
        self.lists = 0
        self.closed = threading.Event()

    def keys(self):
        out = []
        for d, _, files in os.walk(self.root):
            for f in files:
                p = os.path.join(d, f)
                out.append(("trial/" + os.path.relpath(p, self.root), os.path.getsize(p)))
        return sorted(out)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, ctype="application/xml", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        srv = self.server
        u = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        parts = u.path.lstrip("/").split("/", 1)
        if parts[0] != BUCKET:
            return self.send(404, b"<Error><Code>NoSuchBucket</Code></Error>")
        if len(parts) == 1 or not parts[1]:
            return self.listing(q)
        path = os.path.join(srv.root, os.path.relpath(unquote(parts[1]), "trial"))
        if not os.path.isfile(path):
            return self.send(404, b"<Error><Code>NoSuchKey</Code><Message>no</Message></Error>")
        with open(path, "rb") as f:
            data = f.read()
        rng = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
        if rng:
            a, b = int(rng.group(1)), min(int(rng.group(2)), len(data) - 1)
            return self.send(206, data[a:b + 1], "application/octet-stream",
                             [("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))])
        self.send(200, data, "application/octet-stream",
                  [("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")])

    def listing(self, q):
        srv = self.server
        with srv.lock:
            srv.lists += 1
            n = srv.lists
        if srv.mode == "drip":
            return self.drip()
        if srv.mode in ("endless", "endless_full"):
            per = 1 if srv.mode == "endless" else 1000
            keys = [("trial/index/x/%09d_%06d.json" % (n, i), 10) for i in range(per)]
            return self.page(keys, "tok%d" % n)
        prefix = q.get("prefix", "")
        after = q.get("start-after", "")
        keys = [k for k in srv.keys() if k[0].startswith(prefix) and k[0] > after]
        start = int(q.get("continuation-token", "0") or 0)
        chunk = keys[start:start + PAGE_SIZE]
        more = start + PAGE_SIZE < len(keys)
        self.page(chunk, str(start + PAGE_SIZE) if more else None)

    def page(self, keys, token):
        body = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult>",
                "<Name>%s</Name><IsTruncated>%s</IsTruncated>" % (BUCKET, "true" if token else "false")]
        for k, size in keys:
            body.append("<Contents><Key>%s</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                        "<Size>%d</Size></Contents>" % (escape(k), size))
        if token:
            body.append("<NextContinuationToken>%s</NextContinuationToken>" % token)
        body.append("</ListBucketResult>")
        self.send(200, "".join(body).encode())

    def drip(self):
        """Headers promising a 1 MB body, then a byte every half second
        until the client hangs up (which wakes the select at once)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        try:
            self.wfile.write(b"<")
            self.wfile.flush()
            while True:
                # the client's closing wakes this up: readable with EOF
                r, _, _ = select.select([self.connection], [], [], 0.5)
                if r and not self.connection.recv(1, 0):
                    break
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            pass
        self.server.closed.set()
        self.close_connection = True


def pick(o):
    """The steps and tensor names of an `inspect --json` answer."""
    o = o if isinstance(o, dict) else {}
    return o.get("steps"), sorted(t["name"] for t in o.get("tensors", []))


def smrules(args, extra_env, timeout=lib.TIMEOUT):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="AKIDHOSTILE", AWS_SECRET_ACCESS_KEY="secret", AWS_REGION="us-east-1",
               AWS_EC2_METADATA_DISABLED="true", **extra_env)
    try:
        p = subprocess.run([lib.SMRULES] + args, capture_output=True, text=True, timeout=timeout,
                           cwd=lib.ROOT, env=env, stdin=subprocess.DEVNULL)
        return lib.Result(args, p.returncode, p.stdout, p.stderr)
    except subprocess.TimeoutExpired as e:
        return lib.Result(args, lib.TIMEOUT_RC, "", str(e.stderr or "") + "\n[test harness] timed out")


def main():
    c = lib.Checker("test_s3_hostile")
    tmp = tempfile.mkdtemp(prefix="smrules-s3-hostile-")
    srv = Stand(TRIAL)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    endpoint = "http://127.0.0.1:%d" % srv.server_address[1]
    url = "s3://%s/trial" % BUCKET
    base = ["--s3-endpoint", endpoint, "--json"]
    env = {"XDG_CACHE_HOME": os.path.join(tmp, "cache"), "HOME": tmp}
    try:
        # benign control: the honest stand-in reads as the folder on disk
        local = smrules(["inspect", "--trial", TRIAL, "--json"], env)
        r = smrules(["inspect", "--trial", url, "--fresh"] + base, env)
        sc = c.scope("honest stand-in, pages of %d keys" % PAGE_SIZE, r)
        sc.process()
        sc.exit_code(r, [0])
        sc.ok(r.obj and pick(r.obj) == pick(local.obj) and pick(r.obj)[1],
              "the same steps and tensors as on disk", lib.short(r.err))
        sc.ok(srv.lists > 5, "over several pages", "%d listings" % srv.lists)

        # tokens that never end, one key a page
        for mode, cap, pages, what in (("endless", "2000", 2 + 100, "pages"),
                                       ("endless_full", "5000", None, "keys")):
            srv.mode, srv.lists = mode, 0
            r = smrules(["inspect", "--trial", url, "--fresh"] + base,
                        dict(env, SMRULES_S3_MAX_KEYS=cap))
            sc = c.scope("continuation tokens that never end (%s)" % mode, r)
            sc.process(want_json=False)
            sc.ok(r.rc not in (0, lib.TIMEOUT_RC), "fails", "rc %d" % r.rc)
            sc.ok("listing goes on past" in r.err and "SMRULES_S3_MAX_KEYS" in r.err and
                  "s3://%s/trial" % BUCKET in r.err, "a clear error names the listing and the cap",
                  lib.short(r.err))
            if pages:  # one key a page: stopped at the page cap, exactly
                sc.eq("pages asked for before stopping", srv.lists, pages)
            else:  # 1000 keys a page: stopped once past the key cap
                sc.ok(srv.lists <= 7, "stopped once past %s keys" % cap, "%d pages" % srv.lists)

        # a listing answer that drips and never completes
        srv.mode, srv.lists = "drip", 0
        r = smrules(["inspect", "--trial", url, "--fresh"] + base,
                    dict(env, SMRULES_S3_TIMEOUT="2"))
        sc = c.scope("a listing that drips a byte at a time", r)
        sc.process(want_json=False)
        sc.ok(r.rc not in (0, lib.TIMEOUT_RC), "fails, no hang", "rc %d" % r.rc)
        sc.ok("no complete answer within 2 s" in r.err and "SMRULES_S3_TIMEOUT" in r.err,
              "the error says the request took the time it may", lib.short(r.err))
        sc.eq("not tried again", srv.lists, 1)
        sc.ok(srv.closed.wait(lib.TIMEOUT), "the stand-in saw the connection closed")
    finally:
        srv.shutdown()
        srv.server_close()
        shutil.rmtree(tmp, ignore_errors=True)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
