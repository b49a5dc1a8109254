#!/usr/bin/env python3
"""The PyTorch hook writes what smdebug's hook writes, compared with a
trial the real smdebug 1.0.34 wrote (tests/fixtures/trials/
healthy_mlp_digits; its EXPECT.json says how: model, loss, optimizer,
batches, epochs, modes, save configs, collections).

smdebug itself cannot run here (it fails to import on Python 3.12+, pins
protobuf <= 3.20.3 and is not packaged for Debian), so its reader is not
run on the hook's trial.  Instead tests/cli/torch_digits_replay.py runs the
same training with smrules.torch.Hook on random data of the same shapes,
and everything smdebug's reader reads must come out as smdebug wrote it:
- the same files under the same names (events/, index/, collections/,
  training_job_end.ts);
- every index file byte for byte (mode, mode step, event file name, and
  per tensor its name, start_idx and length, in the same order);
- every event file record by record: the same framing (length, length
  CRC, smdebug's constant footer) and the same payload bytes once the two
  things that must differ are blanked, the wall time and the tensor's
  content (tag, dtype, shape and its dimension names, step, mode and mode
  step metadata are compared as bytes);
- the collections file equal as JSON (collection names, regexes, tensor
  names, reduction and save configs, save_histogram, _meta).
The differences that remain are listed in docs/python.md."""

import json
import os
import shutil
import struct
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import pylib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPLAY = os.path.join(HERE, "torch_digits_replay.py")
FIXTURE = os.path.join(lib.FIXTURES, "trials", "healthy_mlp_digits")


def files(root):
    out = []
    for d, _, names in os.walk(root):
        for n in names:
            out.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(f for f in out if f != "EXPECT.json")


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b, start, end):
    """(field number, wire type, value start, value end) of a message."""
    i = start
    while i < end:
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            _, j = varint(b, i)
            yield num, wt, i, j
        elif wt == 1:
            yield num, wt, i, i + 8
            j = i + 8
        elif wt == 2:
            n, s = varint(b, i)
            yield num, wt, s, s + n
            j = s + n
        elif wt == 5:
            yield num, wt, i, i + 4
            j = i + 4
        else:
            raise ValueError("wire type %d at %d" % (wt, i))
        i = j


def sub(b, span, num):
    return [f for f in fields(b, *span) if f[0] == num and f[1] == 2]


def blanked(payload):
    """The payload with Event.wall_time and TensorProto.tensor_content
    zeroed, and how many content fields were found."""
    b = bytearray(payload)
    found = 0
    for num, wt, s, e in fields(b, 0, len(b)):
        if num == 1 and wt == 1:  # Event.wall_time
            b[s:e] = bytes(e - s)
        if num == 5 and wt == 2:  # Event.summary
            for _, _, s2, e2 in sub(b, (s, e), 1):  # Summary.value
                for _, _, s3, e3 in sub(b, (s2, e2), 8):  # Value.tensor
                    for _, _, s4, e4 in sub(b, (s3, e3), 4):  # tensor_content
                        b[s4:e4] = bytes(e4 - s4)
                        found += 1
    return bytes(b), found


def records(data):
    i = 0
    while i < len(data):
        n = struct.unpack_from("<Q", data, i)[0]
        yield data[i:i + 12], data[i + 12:i + 12 + n], data[i + 12 + n:i + 16 + n]
        i += 16 + n


def main():
    c = pylib.torch_checker("test_torch_smdebug_layout")
    s = c.scope("layout")
    tmp = tempfile.mkdtemp(prefix="smr-layout-")
    try:
        out = os.path.join(tmp, "replay")
        rc, so, se = pylib.run_py(REPLAY, [out])
        if not s.ok(rc == 0, "replay runs", se[-2000:]):
            c.finish()
        want, got = files(FIXTURE), files(out)
        s.eq("the same files", got, want)
        n_ix = n_rec = n_content = 0
        for rel in want:
            if rel not in got:
                continue
            with open(os.path.join(FIXTURE, rel), "rb") as f:
                a = f.read()
            with open(os.path.join(out, rel), "rb") as f:
                b = f.read()
            if rel.startswith("index/"):
                n_ix += 1
                s.ok(a == b, "index %s byte for byte" % rel,
                     "smdebug: %s\nhook:    %s" % (a[:400], b[:400]))
            elif rel.startswith("events/"):
                ra, rb = list(records(a)), list(records(b))
                s.eq("%s: records" % rel, len(rb), len(ra))
                for k, ((ha, pa, fa), (hb, pb, fb)) in enumerate(zip(ra, rb)):
                    n_rec += 1
                    s.ok(ha == hb and fa == fb, "%s record %d framing" % (rel, k),
                         "%s %s / %s %s" % (ha.hex(), fa.hex(), hb.hex(), fb.hex()))
                    xa, na = blanked(pa)
                    xb, nb = blanked(pb)
                    n_content += nb
                    s.ok(na == 1 and nb == 1 and xa == xb, "%s record %d payload" % (rel, k),
                         "content fields %d/%d; smdebug %s\nhook    %s" %
                         (na, nb, xa[:160].hex(), xb[:160].hex()))
            elif rel.startswith("collections/"):
                s.eq("collections file as JSON", json.loads(b), json.loads(a))
            else:
                s.eq("%s: contents" % rel, b.hex(), a.hex())
        # not vacuous: the whole trial was compared, and values do differ
        s.ok(n_ix == 16 and n_rec > 100 and n_content == n_rec,
             "compared 16 index files and every record",
             "%d index files, %d records, %d contents" % (n_ix, n_rec, n_content))
        # and the smrules reader sees the steps smdebug's saw
        with open(os.path.join(FIXTURE, "EXPECT.json")) as f:
            summary = json.load(f)["summary"]
        r = lib.run_json(["inspect", "--trial", out, "--json", "--fresh"])
        s.process(r)
        s.eq("steps as smdebug's reader listed them", r.obj and r.obj.get("steps"),
             summary["global_steps"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
