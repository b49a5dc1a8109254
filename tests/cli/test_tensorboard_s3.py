#!/usr/bin/env python3
"""End-to-end: a TensorBoard log directory in S3 (docs/tensorboard.md).

The moto server and the signing proxy of test_s3.py; a folder written by
tbwriter.py (an HF-style run with a corrupt record, and Keras' train/ and
validation/ sub-folders) is uploaded, then `inspect --json` and
`tensor --values --json` over s3:// must equal the same commands on the
folder on disk, and `run` must give the same rule results.

Without the moto package the test prints one SKIP line and passes nothing.
"""

import os
import shutil
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import tbwriter as tw  # noqa: E402

NAME = "test_tensorboard_s3"
try:
    import boto3  # noqa: E402
    import moto  # noqa: F401,E402
except ImportError as e:  # pragma: no cover
    print("SKIP %s: moto/boto3 not importable (%s)" % (NAME, e))
    print("%s: 0 passed, 0 failed" % NAME)
    sys.exit(0)
import test_s3 as s3t  # noqa: E402


def write_run(root):
    hf = os.path.join(root, "hf")
    os.makedirs(hf)
    w = tw.Writer(os.path.join(hf, tw.event_file_name(0)))
    w.values(0, [tw.v_text("args", "{}")])
    for i in range(1, 31):
        s = 10 * i
        w.scalar("train/loss", s, 2.0 / i if i < 20 else float("nan"))
        w.scalar("train/grad_norm", s, 1.0 + (i % 3), "double_val")
        if s % 100 == 0:
            w.scalar("eval/loss", s, 1.0 + i / 50.0, "tensor_content")
    w.close()
    # a second file with a damaged record in the middle
    p = os.path.join(hf, tw.event_file_name(1))
    w = tw.Writer(p)
    w.scalar("train/learning_rate", 10, 1e-4)
    at = os.path.getsize(p)
    w.scalar("train/learning_rate", 20, 2e-4)
    w.scalar("train/learning_rate", 30, 3e-4)
    w.close()
    with open(p, "r+b") as f:
        f.seek(at + 14)
        b = f.read(1)
        f.seek(at + 14)
        f.write(bytes([b[0] ^ 0x55]))
    keras = os.path.join(root, "keras")
    for sub, base in (("train", 1.0), ("validation", 1.5)):
        os.makedirs(os.path.join(keras, sub))
        w = tw.Writer(os.path.join(keras, sub, tw.event_file_name(0)))
        for epoch in range(5):
            w.scalar("epoch_loss", epoch, base / (epoch + 1), "tensor_content")
        w.close()
    return hf, keras


def main():
    c = lib.Checker(NAME)
    tmp = tempfile.mkdtemp(prefix="smrules-tbs3-")
    moto_srv = proxy = None
    try:
        moto_srv = s3t.Moto(tmp)
        proxy = s3t.Proxy(moto_srv.port)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        env = s3t.Env(tmp, proxy.server_address[1])
        s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:%d" % moto_srv.port,
                          region_name="us-east-1", aws_access_key_id="setup",
                          aws_secret_access_key="setup")
        s3.create_bucket(Bucket=s3t.BUCKET)
        hf, keras = write_run(os.path.join(tmp, "local"))
        s3t.upload_tree(s3, hf, "tb/hf")
        s3t.upload_tree(s3, keras, "tb/keras")
        ep = ["--s3-endpoint", env.endpoint]
        for name, local, url in (("hf", hf, s3t.s3_url("tb/hf")),
                                 ("keras", keras, s3t.s3_url("tb/keras"))):
            a = s3t.run(["inspect", "--trial", local, "--json", "--fresh"], env.base)
            b = s3t.run(["inspect", "--trial", url, "--json", "--fresh"] + ep, env.base)
            sc = c.scope("s3 inspect %s" % name, b)
            if not (sc.process(a) and sc.process(b)):
                continue
            sc.ok(a.obj["tensors"], "tensors read from disk")
            sc.eq("same as on disk", s3t.strip_paths(b.obj), s3t.strip_paths(a.obj))
            for t in a.obj["tensors"]:
                for g in t["steps"][:3] + t["steps"][-2:]:
                    args = ["tensor", "--name", t["name"], "--step", str(g), "--values",
                            "--json", "--fresh"]
                    x = s3t.run(args + ["--trial", local], env.base)
                    y = s3t.run(args + ["--trial", url] + ep, env.base)
                    sc.eq("%s@%d" % (t["name"], g), s3t.strip_paths(y.obj),
                          s3t.strip_paths(x.obj))
        r = s3t.run(["inspect", "--trial", s3t.s3_url("tb/hf"), "--json", "--fresh"] + ep,
                    env.base)
        errs = (r.obj or {}).get("errors", [])
        sc = c.scope("s3 damaged record", r)
        sc.ok(len(errs) == 1 and "checksum" in errs[0]["message"] and
              errs[0]["file"] == tw.event_file_name(1), "one problem naming the file",
              lib.short(errs))
        rules = os.path.join(tmp, "rules.yaml")
        with open(rules, "w") as f:
            f.write("rules:\n  - rule: NonFiniteMetric\n  - rule: LossNotDecreasing\n"
                    "  - rule: Overfit\n")
        x = s3t.run(["run", "--trial", keras, "--rules", rules, "--json", "--fresh",
                     "--output", os.path.join(tmp, "o1")], env.base)
        y = s3t.run(["run", "--trial", s3t.s3_url("tb/keras"), "--rules", rules, "--json",
                     "--fresh", "--output", os.path.join(tmp, "o2")] + ep, env.base)
        sc = c.scope("s3 run keras", y)
        if sc.process(x) and sc.process(y):
            key = [(q["name"], q["status"], q.get("triggered_steps")) for q in x.obj["rules"]]
            sc.eq("same rule results", [(q["name"], q["status"], q.get("triggered_steps"))
                                        for q in y.obj["rules"]], key)
            sc.ok(any(q["name"] == "Overfit" and q["status"] == "IssuesFound"
                      for q in y.obj["rules"]), "Overfit fires on Keras' folders",
                  lib.short(key))
    except Exception as e:
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
