#!/usr/bin/env python3
"""End-to-end: TensorBoard log directories as trials (docs/tensorboard.md).

Every folder is written here by tbwriter.py, byte for byte as the real
writers serialize their records: PyTorch/tensorboardX `simple_value`,
PyTorch new-style `float_val` and `double_val`, TensorFlow 2 / Keras
`tensor_content`; histograms, images and text mixed in; and damaged files
(a corrupt CRC, a truncated file, a 0-byte file, a file that is not
TFRecord, a non-scalar tensor under the scalars plugin), each of which
must be a per-file problem naming the file and the offset while the rest
reads.  Expected values are computed here from what was written."""

import os
import shutil
import struct
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import tbwriter as tw  # noqa: E402

C = lib.Checker("test_tensorboard")
TMP = tempfile.mkdtemp(prefix="smrules-tb-")


def folder(name):
    path = os.path.join(TMP, name)
    os.makedirs(path, exist_ok=True)
    return path


def inspect(trial, *extra):
    r = lib.run_json(["inspect", "--trial", trial, "--json", "--fresh"] + list(extra))
    return r


def value(trial, name, step, mode="TRAIN", *extra):
    """(dtype, value) of a tensor at a mode step, or (None, result)."""
    r = lib.run_json(["tensor", "--trial", trial, "--name", name, "--step", str(step),
                      "--mode", mode, "--values", "--json", "--fresh"] + list(extra))
    if r.rc != 0 or r.obj is None:
        return None, r
    return r.obj["dtype"], r.obj["values"][0]


def problems(obj):
    return obj.get("errors", []) if obj else []


def mode_steps(obj, mode):
    return obj["modes"].get(mode, {}).get("mode_steps", []) if obj else []


# ---- 1. every encoding reads exactly --------------------------------------
def test_encodings():
    d = folder("encodings")
    w = tw.Writer(os.path.join(d, tw.event_file_name(0)))
    exact = {}  # (tag, step) -> (dtype, value)
    for step in range(0, 40, 10):
        x = 1.0 / (step + 3)  # not a float32: rounding shows
        w.scalar("simple", step, x, "simple_value")
        w.scalar("floatval", step, x + 1, "float_val")
        w.scalar("doubleval", step, x + 2, "double_val")
        w.scalar("content", step, x + 3, "tensor_content")
        w.values(step, [tw.v_tensor_content("content64", x + 4, double=True)])
        exact[("simple", step)] = ("float32", tw.f32(x))
        exact[("floatval", step)] = ("float32", tw.f32(x + 1))
        exact[("doubleval", step)] = ("float64", x + 2)
        exact[("content", step)] = ("float32", tw.f32(x + 3))
        exact[("content64", step)] = ("float64", x + 4)
    w.close()
    r = inspect(d)
    sc = C.scope("encodings", r)
    sc.process(r)
    sc.eq("tensor names", sorted(t["name"] for t in r.obj["tensors"]),
          ["content", "content64", "doubleval", "floatval", "simple"])
    sc.eq("TRAIN steps", mode_steps(r.obj, "TRAIN"), [0, 10, 20, 30])
    sc.eq("no problems", problems(r.obj), [])
    for (tag, step), (dt, x) in sorted(exact.items()):
        got_dt, got = value(d, tag, step)
        sc.eq("%s@%d dtype" % (tag, step), got_dt, dt)
        sc.ok(got == x, "%s@%d value" % (tag, step), "got %r, expected %r" % (got, x))
    sc.eq("collections", sorted(r.obj["collections"]), ["losses", "scalars"])


# ---- 2. last value at a step; files in name order merged by step ----------
def test_merge():
    d = folder("merge")
    a = tw.Writer(os.path.join(d, tw.event_file_name(1)))
    b = tw.Writer(os.path.join(d, tw.event_file_name(2)))
    for s in range(5):
        a.scalar("loss", s, 10.0 + s)
    a.scalar("loss", 2, 99.0)          # logged twice at step 2: the last wins
    for s in range(3, 8):
        b.scalar("loss", s, 20.0 + s)  # a resumed run: steps 3, 4 again
    a.close()
    b.close()
    r = inspect(d)
    sc = C.scope("merge", r)
    sc.process(r)
    sc.eq("steps", mode_steps(r.obj, "TRAIN"), list(range(8)))
    want = {0: 10.0, 1: 11.0, 2: 99.0, 3: 23.0, 4: 24.0, 5: 25.0, 6: 26.0, 7: 27.0}
    for s, x in want.items():
        sc.eq("loss@%d" % s, value(d, "loss", s)[1], x)


# ---- 3. modes: tag conventions and Keras' run sub-folders -----------------
def test_modes():
    d = folder("modes")
    w = tw.Writer(os.path.join(d, tw.event_file_name(0)))
    for s in (5, 10):
        for tag in ("train/loss", "train_loss", "Loss/train", "lr"):
            w.scalar(tag, s, 1.0)
    for tag in ("eval/loss", "val_loss", "Loss/test", "validation/acc", "test_acc"):
        w.scalar(tag, 10, 2.0)
    w.close()
    for sub, mode_word in (("train", 1.0), ("validation", 2.0)):
        k = tw.Writer(os.path.join(folder("modes/keras/" + sub), tw.event_file_name(0)))
        for epoch in range(3):
            k.scalar("epoch_loss", epoch, mode_word + epoch, "tensor_content")
        k.close()
    r = inspect(d)
    sc = C.scope("modes", r)
    sc.process(r)
    steps = {t["name"]: t for t in r.obj["tensors"]}
    smodes = r.obj["step_modes"]
    for name, mode in (("train/loss", "TRAIN"), ("train_loss", "TRAIN"), ("Loss/train", "TRAIN"),
                       ("lr", "TRAIN"), ("eval/loss", "EVAL"), ("val_loss", "EVAL"),
                       ("Loss/test", "EVAL"), ("validation/acc", "EVAL"), ("test_acc", "EVAL"),
                       ("keras/epoch_loss", None)):
        sc.ok(name in steps, "tensor %s" % name, "names: %s" % sorted(steps))
        if name in steps and mode:
            got = sorted({smodes[str(g)][0] for g in steps[name]["steps"]})
            sc.eq("%s mode" % name, got, [mode])
    # Keras: one tensor, TRAIN and EVAL at each epoch, TRAIN first
    ks = steps.get("keras/epoch_loss", {}).get("steps", [])
    got = [tuple(smodes[str(g)]) for g in ks]
    sc.eq("keras epoch_loss steps", got,
          [("TRAIN", 0), ("EVAL", 0), ("TRAIN", 1), ("EVAL", 1), ("TRAIN", 2), ("EVAL", 2)])
    sc.eq("keras EVAL epoch 1", value(d, "keras/epoch_loss", 1, "EVAL")[1], 3.0)
    sc.eq("keras TRAIN epoch 2", value(d, "keras/epoch_loss", 2, "TRAIN")[1], 3.0)
    losses = r.obj["collections"]["losses"]
    sc.eq("losses collection", sorted(losses),
          sorted(["train/loss", "train_loss", "Loss/train", "eval/loss", "val_loss", "Loss/test",
                  "keras/epoch_loss"]))
    sc.eq("scalars collection", len(r.obj["collections"]["scalars"]), len(steps))


# ---- 4. other plugins mixed in are skipped, never fatal -------------------
def test_other_plugins():
    d = folder("plugins")
    w = tw.Writer(os.path.join(d, tw.event_file_name(0)))
    w.values(0, [tw.v_text("args", "lr=0.1")])
    for s in range(1, 4):
        w.values(s, [tw.v_histogram("weights/fc1", [0.5, -1.0, 2.0]), tw.v_simple("loss", s / 2),
                     tw.v_image("inputs")])
    w.close()
    r = inspect(d)
    sc = C.scope("plugins", r)
    sc.process(r)
    sc.eq("only the scalar", [t["name"] for t in r.obj["tensors"]], ["loss"])
    sc.eq("no problems", problems(r.obj), [])
    sc.eq("loss@3", value(d, "loss", 3)[1], 1.5)


# ---- 5. damaged files: a problem each, the rest reads ---------------------
def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def test_damage():
    d = folder("damage")
    good = tw.Writer(os.path.join(d, tw.event_file_name(0)))
    for s in range(4):
        good.scalar("loss", s, float(s))
    good.values(4, [tw.v_tensor_shaped("vec", [2, 3], range(6)), tw.v_simple("loss", 4.0)])
    good.close()
    # corrupt payload CRC in record 2 (step 1) of the second file
    crc_path = os.path.join(d, tw.event_file_name(1))
    w = tw.Writer(crc_path)
    offsets = []
    for s in range(3):
        offsets.append(os.path.getsize(crc_path))
        w.scalar("acc", s, 0.5 + s)
    w.close()
    rec_len = offsets[2] - offsets[1]
    flip(crc_path, offsets[1] + rec_len - 1)  # last byte of the footer
    # truncated: the last record cut in half
    trunc_path = os.path.join(d, tw.event_file_name(2))
    w = tw.Writer(trunc_path)
    w.scalar("lr", 0, 0.1)
    cut_at = os.path.getsize(trunc_path)
    w.scalar("lr", 1, 0.2)
    w.close()
    with open(trunc_path, "r+b") as f:
        f.truncate(cut_at + 10)
    open(os.path.join(d, tw.event_file_name(3)), "wb").close()  # 0 bytes
    with open(os.path.join(d, tw.event_file_name(4)), "wb") as f:
        f.write(b"name,step,value\nloss,1,0.5\n" * 4)   # not TFRecord
    r = inspect(d)
    sc = C.scope("damage", r)
    sc.process(r)
    probs = problems(r.obj)
    by_file = {}
    for p in probs:
        by_file.setdefault(p["file"], []).append(p)

    def has(fname, offset, words):
        ps = by_file.get(fname, [])
        ok = any(p["offset"] == offset and all(w in p["message"] for w in words) for p in ps)
        sc.ok(ok, "problem %s @%d %s" % (fname, offset, words), "problems: %s" % lib.short(probs, 600))

    has(tw.event_file_name(0), os.path.getsize(os.path.join(d, tw.event_file_name(0))) -
        len(tw.record(tw.event(4, [tw.v_tensor_shaped("vec", [2, 3], range(6)), tw.v_simple("loss", 4.0)]))),
        ["vec", "shape ()", "skipped"])
    has(tw.event_file_name(1), offsets[1] + rec_len - 4, ["checksum"])
    has(tw.event_file_name(2), cut_at, ["truncated"])
    has(tw.event_file_name(3), 0, ["empty file"])
    has(tw.event_file_name(4), 0, ["not a TFRecord"])
    sc.eq("problem count", len(probs), 5)
    sc.eq("loss@4 (beside the bad tensor)", value(d, "loss", 4)[1], 4.0)
    sc.eq("acc@0", value(d, "acc", 0)[1], 0.5)
    sc.eq("acc@2 (after the bad record)", value(d, "acc", 2)[1], 2.5)
    dt, res = value(d, "acc", 1)
    sc.ok(dt is None and res.rc != 0, "acc@1 not read", "got %r" % (res,))
    sc.eq("lr@0", value(d, "lr", 0)[1], tw.f32(0.1))
    # live: a cut-short last record is waited for, not reported
    rl = inspect(d, "--live")
    sc.ok(not any("truncated" in p["message"] or "empty" in p["message"] for p in problems(rl.obj)),
          "live: no truncated/empty problem", lib.short(problems(rl.obj), 400))


def test_bad_tags():
    """A tag that is empty or holds a NUL byte: a problem each, the scalar
    beside them in the same event reads."""
    d = folder("badtags")
    w = tw.Writer(os.path.join(d, tw.event_file_name(0)))
    w.values(1, [tw.v_simple("a\x00b", 1.0), tw.v_simple("", 2.0), tw.v_simple("ok", 3.0)])
    w.close()
    r = inspect(d)
    sc = C.scope("bad tags", r)
    sc.process(r)
    sc.eq("tensors", [t["name"] for t in r.obj["tensors"]], ["ok"])
    sc.eq("problems", [("empty or holds a NUL" in p["message"], p["offset"])
                       for p in problems(r.obj)], [(True, 40), (True, 40)])


# ---- 6. a growing file with a torn last record ----------------------------
def test_growing():
    d = folder("growing")
    path = os.path.join(d, tw.event_file_name(0))
    w = tw.Writer(path)
    w.scalar("train/loss", 1, 1.0)
    rec = tw.record(tw.event(2, [tw.v_simple("train/loss", 0.5)]))
    with open(path, "ab") as f:
        f.write(rec[:7])   # the header is not even whole
    r = inspect(d, "--live")
    sc = C.scope("growing", r)
    sc.process(r)
    sc.eq("steps with a torn record", mode_steps(r.obj, "TRAIN"), [1])
    sc.eq("no problem while live", problems(r.obj), [])
    with open(path, "ab") as f:
        f.write(rec[7:20])  # header whole, payload not
    r = inspect(d, "--live")
    sc.eq("steps, header whole", mode_steps(r.obj, "TRAIN"), [1])
    sc.eq("no problem, header whole", problems(r.obj), [])
    with open(path, "ab") as f:
        f.write(rec[20:])
    r = inspect(d, "--live")
    sc.eq("steps once whole", mode_steps(r.obj, "TRAIN"), [1, 2])
    sc.eq("value once whole", value(d, "train/loss", 2)[1], 0.5)
    w.close()


# ---- 7. detection and --format --------------------------------------------
def test_format():
    d = os.path.join(TMP, "encodings")
    r = inspect(d, "--format", "smdebug")
    sc = C.scope("format", r)
    sc.process(r)
    sc.eq("--format smdebug: no tensors", r.obj["tensors"], [])
    r = inspect(d, "--format", "tensorboard")
    sc.eq("--format tensorboard", len(r.obj["tensors"]), 5)
    r = lib.run_json(["inspect", "--trial", d, "--format", "csv", "--fresh"])
    sc.eq("--format csv: usage", r.rc, 2)
    # an smdebug trial with a stray event file stays an smdebug trial
    fx = os.path.join(lib.FIXTURES, "trials")
    cases = [c for c in sorted(os.listdir(fx)) if os.path.isdir(os.path.join(fx, c, "index"))]
    if cases:
        src = os.path.join(fx, cases[0])
        r = inspect(src)
        sc.ok(r.obj and r.obj.get("steps"), "smdebug fixture still reads", cases[0])


# ---- 8. inspect and tensor read with run's `tensorboard:` settings --------
SETTINGS_YAML = """rules:
  - rule: LossNotDecreasing
tensorboard:
  eval: [holdout]
  strip_mode: true
  losses: 'acc'
"""


def test_settings():
    d = folder("settings")
    w = tw.Writer(os.path.join(d, tw.event_file_name(0)))
    for s in range(3):
        w.scalar("train/loss", s, 1.0 + s)
        w.scalar("holdout/loss", s, 10.0 + s)
        w.scalar("metric/acc", s, 0.5)
    w.close()
    rules = os.path.join(TMP, "settings_rules.yaml")
    with open(rules, "w") as f:
        f.write(SETTINGS_YAML)
    sc = C.scope("settings")
    # the defaults: holdout is no mode word, every tag keeps its name
    r = inspect(d)
    sc.process(r)
    names = sorted(t["name"] for t in r.obj["tensors"]) if r.obj else []
    sc.eq("defaults: names", names, ["holdout/loss", "metric/acc", "train/loss"])
    sc.eq("defaults: losses", sorted(r.obj["collections"]["losses"]) if r.obj else None,
          ["holdout/loss", "train/loss"])
    sc.eq("defaults: no EVAL steps", mode_steps(r.obj, "EVAL"), [])
    # --rules: the file's tensorboard: section, as `run --rules` reads it
    r = inspect(d, "--rules", rules)
    sc.process(r)
    names = sorted(t["name"] for t in r.obj["tensors"]) if r.obj else []
    sc.eq("--rules: names", names, ["loss", "metric/acc"])
    sc.eq("--rules: losses", sorted(r.obj["collections"]["losses"]) if r.obj else None,
          ["metric/acc"])
    sc.eq("--rules: EVAL steps", mode_steps(r.obj, "EVAL"), [0, 1, 2])
    for step, mode, want in ((2, "EVAL", 12.0), (1, "TRAIN", 2.0)):
        dt, got = value(d, "loss", step, mode, "--rules", rules)
        sc.eq("--rules: tensor %s" % mode, (dt, got) if dt else (None, got.err[-300:]),
              ("float32", want))
    # a bad tensorboard: section is refused as run refuses it: file, line
    bad = os.path.join(TMP, "settings_bad.yaml")
    with open(bad, "w") as f:
        f.write(SETTINGS_YAML.replace("'acc'", "'(acc'"))
    for cmd in (["inspect", "--trial", d],
                ["tensor", "--trial", d, "--name", "loss", "--step", "0"]):
        rc, _, err = lib.run(cmd + ["--rules", bad])
        sc.eq("%s bad regex: usage" % cmd[0], rc, 2)
        sc.ok("settings_bad.yaml" in err and "line" in err, "%s bad regex: where" % cmd[0],
              err[-300:])
        rc, _, err = lib.run(cmd + ["--rules", os.path.join(TMP, "missing.yaml")])
        sc.eq("%s missing rules: usage" % cmd[0], rc, 2)
        sc.ok("missing.yaml" in err, "%s missing rules: named" % cmd[0], err[-300:])
    r = lib.run_json(["inspect", "--trial", d, "--json", "--rules", bad])
    sc.ok(r.obj is not None and "error" in r.obj, "--json bad rules: JSON error", r.out[-300:])


# ---- 9. a value's wall time: its (mode, step)'s first record read --------
WALLS_LUA = """\
local seen = {}
function invoke_at_step(step)
  for t, v in smrules.values_at(trial:tensor_names({collection = "scalars"}), step) do
    seen[#seen + 1] = string.format("%s:%s:%d:%.3f", t.name, v.mode, v.mode_step, v.wall_time)
  end
  report.violation{ walls = table.concat(seen, " ") }
  return true
end
"""


def test_wall_times():
    """Every value a rule reads carries the wall time of the first record
    read at its (mode, step), across tags and files: a second file of
    older steps (read out of order) and steps both files have."""
    d = folder("walls")
    a = tw.Writer(os.path.join(d, tw.event_file_name(1)), wall_time=900.0)
    want = {}  # (name, mode, mode step) -> wall time
    for s in range(5, 10):
        a.scalar("train/loss", s, 1.0, wall_time=1000.0 + s)
        a.scalar("train/acc", s, 0.5, wall_time=5000.0 + s)  # same pair: later
        want[("train/loss", "TRAIN", s)] = want[("train/acc", "TRAIN", s)] = 1000.0 + s
        if s % 2 == 0:
            a.scalar("eval/loss", s, 2.0, wall_time=2000.0 + s)
            want[("eval/loss", "EVAL", s)] = 2000.0 + s
    a.close()
    b = tw.Writer(os.path.join(d, tw.event_file_name(2)), wall_time=900.0)
    for s in (4, 0, 6, 2, 1, 5, 3):  # older steps, out of order, two known
        b.scalar("train/loss", s, 3.0, wall_time=3000.0 + s)
        want.setdefault(("train/loss", "TRAIN", s), 3000.0 + s)
    b.close()
    lua = os.path.join(TMP, "walls.lua")
    with open(lua, "w") as f:
        f.write(WALLS_LUA)
    y = os.path.join(TMP, "walls.yaml")
    with open(y, "w") as f:
        f.write("rules:\n  - lua: %s\n    name: walls\n" % lua)
    r = lib.run_json(["run", "--trial", d, "--rules", y, "--json", "--fresh",
                      "--output", os.path.join(TMP, "out-walls")])
    sc = C.scope("wall times", r)
    if not sc.process():
        return
    rule = {x.get("name"): x for x in r.obj.get("rules", [])}.get("walls", {})
    last = (rule.get("report", {}).get("Details", {}).get("last_trigger") or {})
    text = ((last.get("violations") or [{}])[0]).get("walls", "")
    got = {}
    for item in text.split():
        name, mode, ms, wall = item.rsplit(":", 3)
        got[(name, mode, int(ms))] = float(wall)
    sc.eq("every value once, with its pair's wall time", sorted(got.items()),
          sorted(want.items()))


def main():
    try:
        for t in (test_encodings, test_merge, test_modes, test_other_plugins, test_damage,
                  test_bad_tags, test_growing, test_format, test_settings, test_wall_times):
            t()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    C.finish()


if __name__ == "__main__":
    main()
