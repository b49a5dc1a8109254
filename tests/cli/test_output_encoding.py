#!/usr/bin/env python3
"""Names from a trial are the training job's bytes: a worker name (from an
index file's name) or a tensor name (from an index file) may hold bytes
that are not UTF-8, and control characters.  Every JSON smrules writes
(`inspect --json`, `run --json`, each rule's report.json) stays strictly
valid UTF-8 JSON: invalid bytes become U+FFFD, controls are escaped
(docs/security.md).  A benign control: the same trial with plain names
gives the names unchanged."""

import json
import os
import subprocess
import tempfile

import lib

TRAINER = os.path.join(os.path.dirname(lib.SMRULES), "demo-trainer")
BAD = b"worker_\xff\xc0\xaf\xed\xa0\x80\x1b[2J"   # invalid, overlong, surrogate, ESC
GOOD_TEXT = "worker_\u00e9\u4e2d"                  # valid multi-byte UTF-8 kept as is
LOSS = b"CrossEntropyLoss_output_0"
# names every tensor in its report: the names reach report.json and run --json
NAMES_LUA = """
function invoke_at_step(step) return false end
function finish() report.details{ names = trial:tensor_names() } end
"""


def make_trial(tmp, name, worker):
    trial = os.path.join(tmp, name)
    subprocess.run([TRAINER, trial, "--steps", "3", "--interval-ms", "0"], check=True,
                   stdout=subprocess.DEVNULL, timeout=lib.TIMEOUT)
    # the index and collections files name the worker: rename them (the event
    # files stay where the index entries point)
    for root, _, files in [w for d in ("index", "collections")
                           for w in os.walk(os.path.join(trial, d))]:
        for f in files:
            new = f.encode().replace(b"worker_0", worker)
            path = os.path.join(root.encode(), new)
            os.rename(os.path.join(root, f).encode(), path)
            with open(path, "rb") as fh:
                data = fh.read()
            with open(path, "wb") as fh:  # the loss's name too
                fh.write(data.replace(LOSS, worker.replace(b"worker_", b"loss_")))
    return trial


def strict_json(raw):
    """The document, or None when it is not valid UTF-8 JSON."""
    try:
        return json.loads(raw.decode("utf-8", "strict"))
    except (UnicodeDecodeError, ValueError):
        return None


def run_raw(args):
    p = subprocess.run([lib.SMRULES] + args, capture_output=True, timeout=lib.TIMEOUT,
                       cwd=lib.ROOT)
    return p.returncode, p.stdout, p.stderr


def check(c, tmp, label, worker, expect_worker):
    expect_loss = expect_worker.replace("worker_", "loss_")
    sc = c.scope(label)
    trial = make_trial(tmp, label.replace(" ", "-"), worker)
    rc, out, err = run_raw(["inspect", "--trial", trial, "--json"])
    doc = strict_json(out)
    if sc.ok(doc is not None, "inspect --json is valid UTF-8 JSON", repr(out[:300])):
        sc.eq("the worker as written", doc.get("workers"), [expect_worker])
    rules = os.path.join(tmp, label.replace(" ", "-") + ".yaml")
    with open(rules, "w") as f:
        f.write("rules:\n  - rule: ExplodingTensor\n  - lua: %s\n    name: names\n"
                % os.path.join(tmp, "names.lua"))
    with open(os.path.join(tmp, "names.lua"), "w") as f:
        f.write(NAMES_LUA)
    outdir = os.path.join(tmp, label.replace(" ", "-") + "-out")
    rc, out, err = run_raw(["run", "--trial", trial, "--rules", rules, "--json", "--fresh",
                            "--output", outdir])
    doc = strict_json(out)
    sc.ok(doc is not None, "run --json is valid UTF-8 JSON", repr(out[:300] + err[-300:]))
    with open(os.path.join(outdir, "names", "report.json"), "rb") as f:
        report = strict_json(f.read())
    if sc.ok(report is not None, "report.json is valid UTF-8 JSON"):
        sc.ok(expect_loss in report["Details"]["names"], "the tensor name as written",
              lib.short(report["Details"]["names"]))


def check_terminal(c, tmp):
    """The table of `inspect`: names and problem lines with the bytes a
    terminal obeys escaped as \\xNN."""
    sc = c.scope("inspect's table on a terminal")
    trial = make_trial(tmp, "terminal", BAD)
    index = os.path.join(trial, "index", "000000000")
    damaged = sorted(os.listdir(index.encode()))[0]
    with open(os.path.join(index.encode(), damaged), "wb") as f:
        f.write(b"{ not json")
    rc, out, err = run_raw(["inspect", "--trial", trial])
    text = out + err
    sc.ok(rc in (0, 3, 4), "inspect ran", repr(err[-300:]))
    sc.ok(b"\x1b" not in text and b"\xff" not in text, "no raw ESC or invalid byte reaches it",
          repr(text[:400]))
    sc.ok(b"\\x1b[2J" in out, "the name is shown escaped", repr(out[:600]))
    sc.ok(b"problem:" in out and b"worker_\\xff" in out, "so is the damaged file's name",
          repr(out[-400:]))


def main():
    c = lib.Checker("test_output_encoding")
    with tempfile.TemporaryDirectory(prefix="smrules-enc-") as tmp:
        check(c, tmp, "bytes that are not UTF-8", BAD,
              "worker_\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\x1b[2J")
        check(c, tmp, "benign control", GOOD_TEXT.encode(), GOOD_TEXT)
        check_terminal(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
