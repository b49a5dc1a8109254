#!/usr/bin/env python3
"""End-to-end: StopTraining's checkpoint step asks the trainer to save,
waits for the file, then stops it (docs/actions.md#checkpoint-before-stop).

Each case is `run --rules r.yaml -- python3 hang_trainer.py ...` with
ExplodingTensor (it fires on the exploding trial as soon as its steps
appear) and [StopTraining]; hang_trainer writes the steps and then blocks
in fake_allreduce until it is stopped.

  signal   checkpoint_signal USR2: the trainer's handler writes
           ckpt/step-N.json; the outcome names that file, the file holds a
           step the trainer finished, the trainer's log shows the
           checkpoint before SIGTERM, exit 1.
  file     checkpoint_request_file ckpt.request: the trainer's polling
           thread sees the request and saves; the same checks.
  never    a trainer that ignores USR2: after checkpoint_timeout_seconds
           (2) the stop happens anyway, and the outcome says no checkpoint
           came in time; no file was written.
  ignores  a trainer that saves but ignores SIGTERM: the checkpoint is
           confirmed, and SIGKILL follows after grace_seconds (1).
  untaught a trainer without a SIGUSR2 handler is ended by the signal: the
           outcome says it exited with no checkpoint, and nothing is left to
           stop.
  config   checkpoint_file without a way to ask, or a way to ask without
           checkpoint_file: exit 2 with the reason, nothing run.
  dryrun   --dry-run says what would be asked, waited for and sent; the
           trainer gets neither signal.

No check depends on how fast the machine is: every case waits for smrules
to exit (the trainer hangs until stopped); the 2 s timeout of `never` is
reached whatever the speed, since nothing ever confirms.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXPLODING = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")


write = lib.write_text


def log_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def launch(tmp, name, stop_settings, mode, extra=(), trainer_extra=()):
    """Runs the case in tmp/name (the trainer's working directory)."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    rules = write(os.path.join(d, "rules.yaml"),
                  "rules:\n  - rule: ExplodingTensor\n    actions: [StopTraining]\n"
                  "actions:\n  StopTraining:\n" +
                  "".join("    %s: %s\n" % kv for kv in stop_settings))
    p = lib.launch(["--trial", os.path.join(d, "trial"), "--rules", rules, "--json",
                    "--output", os.path.join(d, "out")] + list(extra),
                   os.path.join(HERE, "hang_trainer.py"),
                   ["--source", EXPLODING, "--out", os.path.join(d, "trial"),
                    "--checkpoint", mode, "--log", os.path.join(d, "log")] +
                   list(trainer_extra), cwd=d)
    rc, obj, text = p.finish_json()
    stop = [a for a in (obj or {}).get("actions") or [] if a.get("action") == "StopTraining"]
    return d, rc, stop[0] if stop else {}, text


def check_saved(sc, d, rc, stop, text):
    sc.eq("exit 1 (issues found, training stopped)", rc, 1)
    sc.eq("StopTraining ok", stop.get("outcome"), "ok")
    detail = stop.get("detail") or ""
    events = log_lines(os.path.join(d, "log"))
    ck = [e[1] for e in events if e[0] == "checkpoint"]
    sc.eq("the trainer saved one checkpoint", len(ck), 1)
    if not ck:
        sc.ok(False, "a checkpoint", text[-800:])
        return
    sc.ok(detail.startswith("checkpoint %s written " % ck[0]),
          "the outcome names the checkpoint written", detail)
    sc.ok("; then sent SIGTERM" in detail, "then the stop", detail)
    kinds = [e[0] + (" " + e[1] if e[0] == "signal" else "") for e in events]
    sc.ok("checkpoint" in kinds and "signal SIGTERM" in kinds and
          kinds.index("checkpoint") < kinds.index("signal SIGTERM"),
          "the checkpoint came before SIGTERM", str(kinds[-4:]))
    with open(os.path.join(d, ck[0])) as f:
        saved = json.load(f)
    done = [int(e[1]) for e in events if e[0] == "index"]
    sc.ok(saved.get("step") in done, "the checkpoint holds a finished step",
          "%s vs %s" % (saved.get("step"), done[-3:]))


def test_signal(c, tmp):
    d, rc, stop, text = launch(tmp, "signal", [("checkpoint_signal", "USR2"),
                                               ("checkpoint_file", "'ckpt/step-*.json'"),
                                               ("checkpoint_timeout_seconds", 600)], "signal")
    check_saved(c.scope("signal: USR2 asks, ckpt/step-N.json confirms"), d, rc, stop, text)


def test_file(c, tmp):
    d, rc, stop, text = launch(tmp, "file", [("checkpoint_request_file", "ckpt.request"),
                                             ("checkpoint_file", "'ckpt/step-*.json'"),
                                             ("checkpoint_timeout_seconds", 600)], "file")
    sc = c.scope("file: ckpt.request asks, ckpt/step-N.json confirms")
    check_saved(sc, d, rc, stop, text)
    events = log_lines(os.path.join(d, "log"))
    sc.ok(["request", "ckpt.request"] in [e[:2] for e in events],
          "the trainer read the request file", str(events[-4:]))


def test_never(c, tmp):
    d, rc, stop, text = launch(tmp, "never", [("checkpoint_signal", "USR2"),
                                              ("checkpoint_file", "'ckpt/*.json'"),
                                              ("checkpoint_timeout_seconds", 2)], "never")
    sc = c.scope("never: no checkpoint comes, the stop happens after the timeout")
    sc.eq("exit 1 (training stopped)", rc, 1)
    sc.eq("StopTraining ok", stop.get("outcome"), "ok")
    detail = stop.get("detail") or ""
    sc.ok(detail.startswith("no checkpoint matching ckpt/*.json within 2 s of SIGUSR2; "
                            "then sent SIGTERM"), "the outcome says none came in time", detail)
    sc.ok(not os.path.exists(os.path.join(d, "ckpt")), "nothing was saved", text[-300:])
    events = log_lines(os.path.join(d, "log"))
    sc.ok(["signal", "SIGTERM"] in [e[:2] for e in events], "the trainer got SIGTERM",
          str(events[-3:]))


def test_ignores(c, tmp):
    d, rc, stop, text = launch(tmp, "ignores", [("checkpoint_signal", "USR2"),
                                                ("checkpoint_file", "'ckpt/step-*.json'"),
                                                ("checkpoint_timeout_seconds", 600),
                                                ("grace_seconds", 1)], "signal",
                               trainer_extra=["--on-sigterm", "ignore"])
    sc = c.scope("ignores: saved, SIGTERM ignored, SIGKILL after the grace period")
    sc.eq("exit 1", rc, 1)
    detail = stop.get("detail") or ""
    sc.ok(detail.startswith("checkpoint ckpt/step-") and
          "still running after 1 s, sent SIGKILL" in detail, "both in the outcome", detail)
    events = log_lines(os.path.join(d, "log"))
    sc.ok(["signal", "SIGTERM"] in [e[:2] for e in events], "the trainer saw SIGTERM",
          str(events[-3:]))


def test_untaught(c, tmp):
    d, rc, stop, text = launch(tmp, "untaught", [("checkpoint_signal", "USR2"),
                                                 ("checkpoint_file", "'ckpt/*.json'"),
                                                 ("checkpoint_timeout_seconds", 600)], "none")
    sc = c.scope("untaught: SIGUSR2 ends a trainer without a handler")
    sc.eq("exit 1", rc, 1)
    detail = stop.get("detail") or ""
    sc.ok(detail.startswith("the trainer exited ") and
          detail.endswith("after SIGUSR2, with no new file matching ckpt/*.json; nothing "
                          "left to stop"),
          "the outcome says it exited without a checkpoint", detail + text[-300:])
    sc.ok(not os.path.exists(os.path.join(d, "ckpt")), "nothing was saved", "")


def test_config(c, tmp):
    cases = [
        ("checkpoint_file: 'ckpt/*.pt'", "checkpoint_file needs checkpoint_signal or "
         "checkpoint_request_file"),
        ("checkpoint_signal: USR2", "give checkpoint_file too"),
        ("checkpoint_request_file: req\n    checkpoint_timeout_seconds: 0",
         "checkpoint_timeout_seconds"),
        ("checkpoint_signal: BOGUS\n    checkpoint_file: x", "expected a signal name"),
    ]
    for i, (settings, want) in enumerate(cases):
        rules = write(os.path.join(tmp, "config%d.yaml" % i),
                      "rules:\n  - rule: ExplodingTensor\n    actions: [StopTraining]\n"
                      "actions:\n  StopTraining:\n    pid: 12345\n    %s\n" % settings)
        r = lib.run_json(["run", "--trial", EXPLODING, "--rules", rules, "--json", "--output",
                          os.path.join(tmp, "out-config%d" % i)])
        sc = c.scope("config: %s" % settings.replace("\n   ", ";"), r)
        sc.eq("exit 2", r.rc, 2)
        sc.ok(want in r.err, "says why: %s" % want, r.err[-300:])


def test_dryrun(c, tmp):
    d = os.path.join(tmp, "dryrun")
    os.makedirs(d)
    trainer = lib.Running([os.path.join(HERE, "hang_trainer.py"),
                           "--source", EXPLODING, "--out", os.path.join(d, "trial"),
                           "--log", os.path.join(d, "log")], program=sys.executable, cwd=d)
    hung = trainer.wait_line("waiting in fake_allreduce", stream="stdout")
    rules = write(os.path.join(d, "rules.yaml"),
                  "rules:\n  - rule: ExplodingTensor\n    actions: [StopTraining]\n"
                  "actions:\n  StopTraining:\n    checkpoint_signal: USR2\n"
                  "    checkpoint_file: 'ckpt/*.json'\n")
    r = lib.run_json(["run", "--trial", os.path.join(d, "trial"), "--rules", rules,
                      "--dry-run", "--json", "--training-pid", str(trainer.proc.pid),
                      "--output", os.path.join(d, "out")])
    trainer.proc.kill()
    trainer.finish()
    sc = c.scope("dryrun: what would be done", r)
    sc.ok(hung, "the trainer hung", "")
    stop = [a for a in (r.obj or {}).get("actions") or [] if a.get("action") == "StopTraining"]
    stop = stop[0] if stop else {}
    sc.eq("dry run outcome", stop.get("outcome"), "dry-run")
    sc.ok((stop.get("detail") or "").startswith(
        "would ask for a checkpoint (SIGUSR2) and wait up to 60 s for ckpt/*.json, then "
        "would send SIGTERM"), "the detail says all three", stop.get("detail") or r.err[-500:])
    events = log_lines(os.path.join(d, "log"))
    sc.ok(not [e for e in events if e[0] in ("signal", "checkpoint")],
          "the trainer got no signal", str(events[-3:]))


DEBIAN_PY = "/usr/bin/python3"  # Debian's packages (torch) live there
EXAMPLES = os.path.join(lib.ROOT, "examples", "checkpoint")


def have_torch():
    return lib.run(["-c", "import torch"], program=DEBIAN_PY, timeout=max(lib.TIMEOUT, 120))[0] == 0


def test_torch(c, tmp):
    """examples/checkpoint/torch_trainer.py, the plain PyTorch snippet of
    docs/actions.md, trains until stopped; smrules (--training-pid, the
    exploding trial read once) asks it for a checkpoint: torch.load reads
    back the step named in the outcome, with the model and optimizer."""
    sc = c.scope("torch: the PyTorch example saves on SIGUSR2, then is stopped")
    if not have_torch():
        print("test_checkpoint: torch not importable by %s: torch case skipped" % DEBIAN_PY)
        return
    d = os.path.join(tmp, "torch")
    os.makedirs(d)
    trial = os.path.join(d, "trial")
    shutil.copytree(EXPLODING, trial)
    trainer = lib.Running([os.path.join(EXAMPLES, "torch_trainer.py")], program=DEBIAN_PY, cwd=d)
    started = trainer.wait_line("^training", stream="stdout", limit=max(lib.TIMEOUT, 120))
    rules = write(os.path.join(d, "rules.yaml"),
                  "rules:\n  - rule: ExplodingTensor\n    actions: [StopTraining]\n"
                  "actions:\n  StopTraining:\n    checkpoint_signal: USR2\n"
                  "    checkpoint_file: 'ckpt/step-*.pt'\n    checkpoint_timeout_seconds: 600\n")
    r = lib.run_json(["run", "--trial", trial, "--rules", rules, "--json",
                      "--training-pid", str(trainer.proc.pid), "--output", os.path.join(d, "out")],
                     timeout=max(lib.TIMEOUT, 120))
    trc, _, terr = trainer.finish(limit=max(lib.TIMEOUT, 120))
    sc.ok(started, "the trainer started", terr[-300:])
    stop = [a for a in (r.obj or {}).get("actions") or [] if a.get("action") == "StopTraining"]
    detail = stop[0].get("detail", "") if stop else ""
    sc.eq("exit 1", r.rc, 1)
    sc.eq("the trainer was ended by SIGTERM", trc, -15)
    names = os.listdir(os.path.join(d, "ckpt")) if os.path.isdir(os.path.join(d, "ckpt")) else []
    sc.eq("one checkpoint, no temporary file left", len(names), 1)
    if len(names) != 1:
        return
    sc.ok(detail.startswith("checkpoint ckpt/%s written " % names[0]), "the outcome names it", detail)
    rc, out, err = lib.run(["-c", "import torch, sys; c = torch.load(sys.argv[1]); "
                            "print(c['step'], sorted(c), len(c['model']))",
                            os.path.join(d, "ckpt", names[0])], program=DEBIAN_PY,
                           timeout=max(lib.TIMEOUT, 120))
    want = "%s ['model', 'optimizer', 'step'] 4" % names[0][len("step-"):-len(".pt")]
    sc.eq("torch.load reads the step, model and optimizer back", out.strip(), want)


def test_callbacks(c, tmp):
    """examples/checkpoint/hf_callback.py and lightning_callback.py, driven
    the way Trainer and Lightning call them (on_step_end with args, state
    and control and the model; on_train_batch_end with the trainer and the
    module), under a SIGUSR2 sent to the process: each writes its file,
    which torch.load reads back with the model's weights.  transformers and
    lightning themselves are not installed here: stand-in modules give the
    two base classes (the callbacks only subclass them)."""
    sc = c.scope("callbacks: the Hugging Face and Lightning examples save on SIGUSR2")
    if not have_torch():
        print("test_checkpoint: torch not importable by %s: callbacks case skipped" % DEBIAN_PY)
        return
    d = os.path.join(tmp, "callbacks")
    os.makedirs(os.path.join(d, "stubs", "transformers"))
    os.makedirs(os.path.join(d, "stubs", "lightning", "pytorch"))
    write(os.path.join(d, "stubs", "transformers", "__init__.py"),
          "class TrainerCallback:\n    pass\n")
    write(os.path.join(d, "stubs", "lightning", "__init__.py"), "")
    write(os.path.join(d, "stubs", "lightning", "pytorch", "__init__.py"),
          "class Callback:\n    pass\n")
    drive = write(os.path.join(d, "drive.py"), """
import os, signal, sys, types
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import torch
import hf_callback, lightning_callback
model = torch.nn.Linear(3, 2)
hf = hf_callback.CheckpointOnSignal()
args = types.SimpleNamespace(output_dir="out")
hf.on_step_end(args, types.SimpleNamespace(global_step=7), types.SimpleNamespace(), model=model)
os.kill(os.getpid(), signal.SIGUSR2)
lt = lightning_callback.CheckpointOnSignal()
lt.on_train_batch_end(types.SimpleNamespace(global_step=9), model, None, None, 0)
os.kill(os.getpid(), signal.SIGUSR2)
for path in ("out/smrules-step-7.pt", "ckpt/step-9.pt"):
    w = torch.load(path)
    print(path, sorted(w), torch.equal(w["weight"], model.weight))
""")
    p = subprocess.run([DEBIAN_PY, drive, os.path.join(d, "stubs"), EXAMPLES], cwd=d,
                       capture_output=True, text=True, timeout=max(lib.TIMEOUT, 120))
    rc, out, err = p.returncode, p.stdout, p.stderr
    sc.eq("both files written and read back",
          out.split("\n")[:2], ["out/smrules-step-7.pt ['bias', 'weight'] True",
                                 "ckpt/step-9.pt ['bias', 'weight'] True"])
    sc.ok(rc == 0, "exit 0", err[-500:])


def main():
    c = lib.Checker("test_checkpoint")
    tmp = tempfile.mkdtemp(prefix="smrules-ckpt-")
    try:
        for fn in (test_signal, test_file, test_never, test_ignores, test_untaught, test_config, test_dryrun, test_torch,
                   test_callbacks):
            if lib.CASE_FILTER and lib.CASE_FILTER not in fn.__name__:
                continue
            fn(c, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
