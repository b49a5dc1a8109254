#!/usr/bin/env python3
"""The Prometheus metrics of a run (docs/metrics.md): `run --metrics-listen`
serves GET /metrics while the run lasts, `--metrics-file` writes the same
text when it ends.

  launch    `run -- standin_trainer` (a trainer whose tensors explode,
            then hangs): scrapes until the latest step is the trial's
            last; the values agree with the run's --json (rule status,
            triggers, steps evaluated); build_info carries --version;
            the job label is --job-name; POST gets 405, another path 404,
            huge headers 431, a client that never finishes its request is
            cut, while scrapes go on succeeding; once the trainer is
            killed the run ends, the file says it exited 143 and has the
            same series as a scrape, in the exposition format
  watch     `run --watch` on a folder not there yet, with every connection
            slot held by idle clients and more refused (503): the trainer
            writes the whole trial, the watch evaluates it all and ends;
            the file counts the refusals; a --job-name with a quote, a
            backslash and a newline comes back escaped and intact
  prometheus  the real Prometheus (Debian's package), started on a
            loopback port with a config scraping a live `run -- CMD`: a
            PromQL query through its HTTP API returns the rule's 9 triggers
            and the seconds-since-last-step series (SKIP when prometheus is
            not installed: .ci/deps.sh installs it)
  kubernetes  the manifests of examples/kubernetes/: the rules their
            ConfigMaps hold validate (the sidecar's are rules.yaml's, which
            names the trainer's container command in StopTraining's
            cmdline), and every option their args give `run` is one
            `run --help` lists
  address   a bad --metrics-listen, a port in use: exit 2 and a message,
            nothing launched

Every wait is for an event (a line printed, a scrape's value, a closed
connection), bounded only by a hang guard.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = [sys.executable, os.path.join(HERE, "standin_trainer.py")]
EXPLODING = os.path.join(lib.FIXTURES, "trials", "exploding_mse_high_lr")
LAST_STEP = 23  # the fixture's last global step
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels)): value} and the problems met, checked
    against the text format: # HELP and # TYPE before a family's samples,
    one TYPE per family, every sample in a declared family."""
    samples, problems, typed = {}, [], {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) != 4 or parts[3] not in ("counter", "gauge", "untyped"):
                problems.append("line %d: bad TYPE" % n)
            elif parts[2] in typed:
                problems.append("line %d: second TYPE for %s" % (n, parts[2]))
            typed[parts[2]] = parts[3]
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append("line %d: not a sample: %r" % (n, line))
            continue
        labels = frozenset((k, unescape(v)) for k, v in LABEL.findall(m.group(3) or ""))
        if m.group(1) not in typed:
            problems.append("line %d: %s has no TYPE before it" % (n, m.group(1)))
        try:
            samples[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            problems.append("line %d: value %r" % (n, m.group(4)))
    return samples, problems


def unescape(v):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def value(samples, name, **labels):
    for (n, ls), v in samples.items():
        if n == name and all((k, str(x)) in ls for k, x in labels.items()):
            return v
    return None


def http(port, request, limit=lib.TIMEOUT):
    """Send raw bytes, read until the server closes: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=limit) as s:
        s.sendall(request)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.1 (\d+)", head)
    return (int(m.group(1)) if m else None), body.decode("utf-8", "replace")


def scrape(port):
    status, body = http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return status, body


def port_of(run):
    line = run.wait_line(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")
    return int(re.search(r":(\d+)/metrics", line).group(1)) if line else None


def wait_scrape(port, pred):
    """Scrape until pred(samples) holds (the event); None at the guard."""
    end = time.monotonic() + lib.TIMEOUT
    while time.monotonic() < end:
        status, body = scrape(port)
        if status == 200:
            samples, _ = parse(body)
            if pred(samples):
                return samples
        time.sleep(0.05)
    return None


def rules_file(tmp):
    path = os.path.join(tmp, "rules.yaml")
    with open(path, "w") as f:
        f.write("rules:\n  - rule: ExplodingTensor\n")
    return path


def version():
    out = subprocess.run([lib.SMRULES, "--version"], capture_output=True, text=True).stdout
    return out.split()[-1]


def check_against_json(c, what, samples, doc, job):
    for r in doc["rules"]:
        c.ok(value(samples, "smrules_rule_triggers_total", job=job, rule=r["name"],
                   type="builtin") == len(r["triggered_steps"]),
             "%s: triggers of %s as --json says" % (what, r["name"]))
        c.ok(value(samples, "smrules_rule_steps_evaluated_total", rule=r["name"])
             == r["evaluated_steps"], "%s: steps evaluated as --json says" % what)
        for st in ("InProgress", "NoIssuesFound", "IssuesFound", "Error"):
            c.ok(value(samples, "smrules_rule_status", rule=r["name"], status=st)
                 == (1 if st == r["status"] else 0),
                 "%s: status %s of %s is 0/1 as --json says" % (what, st, r["name"]))


def case_launch(c, tmp):
    out, mfile, pidf = (os.path.join(tmp, n) for n in ("trial", "m.prom", "pid"))
    run = lib.Running(["run", "--json", "--fresh", "--rules", rules_file(tmp), "--trial", out,
                       "--metrics-listen", "127.0.0.1:0", "--metrics-file", mfile,
                       "--job-name", "train-42", "--"] + STANDIN +
                      ["--source", EXPLODING, "--out", out, "--step-delay", "0",
                       "--hang-after", str(LAST_STEP), "--pid-file", pidf])
    try:
        port = port_of(run)
        if not c.ok(port, "launch: the listener says where it is", "".join(run.err_lines)):
            return
        s = wait_scrape(port, lambda s: value(s, "smrules_latest_step", mode="GLOBAL") == LAST_STEP
                        and value(s, "smrules_rule_triggers_total", rule="ExplodingTensor") == 9)
        if not c.ok(s, "launch: a scrape shows the last step and the 9 triggers"):
            return
        c.ok(value(s, "smrules_build_info", job="train-42", version=version()) == 1,
             "launch: build_info carries the version and the job label")
        c.ok(value(s, "smrules_training_running") == 1, "launch: the trainer is running")
        c.ok(value(s, "smrules_training_exit_code") is None, "launch: no exit code yet")
        c.ok(value(s, "smrules_steps_seen", mode="GLOBAL") == 13, "launch: 13 global steps seen")
        c.ok(value(s, "smrules_seconds_since_last_step") is not None
             and value(s, "smrules_seconds_since_last_step") >= 0,
             "launch: seconds since the last step")
        c.ok(all(("job", "train-42") in ls for (_, ls) in s), "launch: every series has the job")
        # bad requests are refused, scrapes go on
        st, _ = http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        c.ok(st == 405, "launch: POST gets 405", str(st))
        st, _ = http(port, b"GET /secrets HTTP/1.1\r\n\r\n")
        c.ok(st == 404, "launch: another path gets 404", str(st))
        st, _ = http(port, b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
        c.ok(st in (431, None), "launch: 20 KB of headers get 431 (or a cut)", str(st))
        st, _ = http(port, b"garbage\r\n\r\n")
        c.ok(st == 400, "launch: not HTTP gets 400", str(st))
        slow = socket.create_connection(("127.0.0.1", port), timeout=lib.TIMEOUT)
        slow.sendall(b"GET /metr")  # and never the rest
        st, body = scrape(port)
        c.ok(st == 200 and "smrules_rule_status" in body,
             "launch: a scrape succeeds while a slow client is connected", str(st))
        try:
            cut = slow.recv(1) == b""  # the listener closes it at its time limit
        except (ConnectionResetError, socket.timeout):
            cut = False
        c.ok(cut, "launch: the slow client is cut")
        slow.close()
        st, body = scrape(port)
        s2, problems = parse(body)
        c.ok(st == 200 and not problems, "launch: scrapes succeed after the abuse",
             "%s %s" % (st, problems[:3]))
        for reason in ("method", "path", "too_large", "timeout", "bad_request"):
            c.ok((value(s2, "smrules_metrics_refused_total", reason=reason) or 0) >= 1,
                 "launch: the refusal '%s' is counted" % reason)
        # the trainer is killed: the run ends, the file is written
        with open(pidf) as f:
            os.kill(int(f.read()), signal.SIGTERM)
        rc, stdout, stderr = run.finish()
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    c.ok(rc == 1, "launch: issues found: exit 1", "rc=%s %s" % (rc, stderr[-300:]))
    c.ok(not any(m in stderr for m in lib.SANITIZER_MARKERS), "launch: no sanitizer report",
         stderr[-500:])
    try:
        doc = json.loads(stdout)
    except ValueError:
        c.ok(False, "launch: --json", stdout[-300:])
        return
    with open(mfile) as f:
        text = f.read()
    fs, problems = parse(text)
    c.ok(not problems, "launch: the file is in the exposition format", "; ".join(problems[:3]))
    check_against_json(c, "launch file", fs, doc, "train-42")
    check_against_json(c, "launch scrape", s2, doc, "train-42")
    c.ok(value(fs, "smrules_training_running") == 0, "launch: file: the trainer is not running")
    c.ok(value(fs, "smrules_training_exit_code") == 143, "launch: file: it exited 143 (SIGTERM)",
         str(value(fs, "smrules_training_exit_code")))
    live = {k for k in s2 if k[0] not in ("smrules_training_exit_code",)}
    c.ok(live <= set(fs), "launch: the file has every series a scrape had",
         str(sorted(n for n, _ in live - set(fs))[:5]))
    c.ok(not [n for n in os.listdir(tmp) if n.startswith("m.prom.")],
         "launch: no temporary file left beside the metrics file")


ODD_JOB = 'odd "job" \\ x\ny'  # a job label the text format must escape


def case_watch(c, tmp):
    out, mfile = os.path.join(tmp, "trial"), os.path.join(tmp, "w.prom")
    run = lib.Running(["run", "--watch", "--json", "--fresh", "--rules", rules_file(tmp),
                       "--job-name", ODD_JOB,
                       "--trial", out, "--metrics-listen", "127.0.0.1:0",
                       "--metrics-file", mfile])
    held, trainer = [], None
    try:
        port = port_of(run)
        if not c.ok(port, "watch: the listener says where it is", "".join(run.err_lines)):
            return
        # every slot held, then more: those are refused with 503
        for _ in range(16):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=lib.TIMEOUT))
        st, _ = scrape(port)
        c.ok(st == 503, "watch: a connection over the limit gets 503", str(st))
        trainer = subprocess.Popen(STANDIN + ["--source", EXPLODING, "--out", out,
                                              "--step-delay", "0"],
                                   stdout=subprocess.DEVNULL, cwd=lib.ROOT)
        rc, stdout, stderr = run.finish()
    finally:
        for s in held:
            s.close()
        if run.proc.poll() is None:
            run.proc.kill()
        if trainer:
            trainer.wait(timeout=lib.TIMEOUT)
    c.ok(rc == 1, "watch: evaluation ends with the listener full: exit 1",
         "rc=%s %s" % (rc, stderr[-300:]))
    c.ok(not any(m in stderr for m in lib.SANITIZER_MARKERS), "watch: no sanitizer report",
         stderr[-500:])
    try:
        doc = json.loads(stdout)
    except ValueError:
        c.ok(False, "watch: --json", stdout[-300:])
        return
    with open(mfile) as f:
        fs, problems = parse(f.read())
    c.ok(not problems, "watch: the file is in the exposition format", "; ".join(problems[:3]))
    check_against_json(c, "watch file", fs, doc, ODD_JOB)  # escaped, and read back
    c.ok(value(fs, "smrules_latest_step", mode="GLOBAL") == LAST_STEP, "watch: latest step 23")
    c.ok((value(fs, "smrules_metrics_refused_total", reason="busy") or 0) >= 1,
         "watch: the busy refusal is counted")
    c.ok(value(fs, "smrules_training_running") is None,
         "watch: no training process series without one")


WORKERS3 = os.path.join(lib.FIXTURES, "synthetic", "trial_workers3_partial_no_end")


def files_bytes(root, sub=None):
    total = 0
    for d, _, names in os.walk(os.path.join(root, sub) if sub else root):
        total += sum(os.path.getsize(os.path.join(d, n)) for n in names)
    return total


def one_shot_metrics(tmp, trial, name, rules_yaml):
    rules, mfile = os.path.join(tmp, name + ".yaml"), os.path.join(tmp, name + ".prom")
    with open(rules, "w") as f:
        f.write(rules_yaml)
    p = subprocess.run([lib.SMRULES, "run", "--fresh", "--state", os.path.join(tmp, name + ".db"),
                        "--rules", rules, "--trial", trial, "--metrics-file", mfile],
                       capture_output=True, text=True, timeout=lib.TIMEOUT)
    with open(mfile) as f:
        samples, problems = parse(f.read())
    return p, samples, problems


def case_workers(c, tmp):
    """Each worker's latest step, and the bytes read, on a three-worker trial
    where worker_1 stopped writing after step 2."""
    trial = os.path.join(tmp, "trial")  # a copy: the run writes rule-output/
    shutil.copytree(WORKERS3, trial)
    expect = {}
    for n in os.listdir(os.path.join(WORKERS3, "index", "000000000")):
        step, worker = n[:-len(".json")].split("_", 1)
        expect[worker] = max(expect.get(worker, -1), int(step))
    c.ok(expect == {"worker_0": 6, "worker_1": 2, "worker_2": 6}, "workers: the fixture's shape",
         str(expect))
    p, s, problems = one_shot_metrics(tmp, trial, "reads", "rules:\n  - rule: ExplodingTensor\n")
    c.ok(not problems, "workers: the file is in the exposition format", "; ".join(problems[:3]))
    c.ok(not any(m in p.stderr for m in lib.SANITIZER_MARKERS), "workers: no sanitizer report",
         p.stderr[-500:])
    for worker, step in sorted(expect.items()):
        c.ok(value(s, "smrules_worker_latest_step", worker=worker) == step,
             "workers: %s's latest step is %d" % (worker, step),
             str(value(s, "smrules_worker_latest_step", worker=worker)))
    trial_bytes = files_bytes(WORKERS3)
    meta = files_bytes(WORKERS3, "index") + files_bytes(WORKERS3, "collections")
    read = value(s, "smrules_read_bytes_total")
    c.ok(read is not None and meta <= read <= 2 * trial_bytes,
         "workers: bytes read cover the index and collections files, and no more than "
         "twice the trial", "read %s, index+collections %d, trial %d"
         % (read, meta, trial_bytes))
    # control: a rule that selects nothing reads no tensor value
    _, s2, _ = one_shot_metrics(tmp, trial, "none", "rules:\n  - rule: ExplodingTensor\n"
                                "    parameters:\n      tensor_regex: nothing_matches\n")
    read2 = value(s2, "smrules_read_bytes_total")
    c.ok(read2 is not None and meta <= read2 < read,
         "workers: a rule that reads no value reads fewer bytes", "%s vs %s" % (read2, read))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def promql(port, query):
    """The result vector of an instant query, [] when none or not up."""
    import urllib.parse
    import urllib.request
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": query}))
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
    except (OSError, ValueError):
        return []
    return doc.get("data", {}).get("result", []) if doc.get("status") == "success" else []


def wait_promql(port, query, pred, limit):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        res = promql(port, query)
        if res and pred(res):
            return res
        time.sleep(0.2)
    return None


def case_prometheus(c, tmp):
    prom = shutil.which("prometheus")
    if not prom:
        print("SKIP prometheus: not installed (Debian: prometheus; .ci/deps.sh test)")
        return
    out, pidf = os.path.join(tmp, "trial"), os.path.join(tmp, "pid")
    run = lib.Running(["run", "--fresh", "--rules", rules_file(tmp), "--trial", out,
                       "--metrics-listen", "127.0.0.1:0", "--job-name", "prom-job", "--"] +
                      STANDIN + ["--source", EXPLODING, "--out", out, "--step-delay", "0",
                                 "--hang-after", str(LAST_STEP), "--pid-file", pidf])
    server = None
    try:
        port = port_of(run)
        if not c.ok(port, "prometheus: the listener says where it is"):
            return
        pport = free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: smrules\n    honor_labels: true\n"
                    "    static_configs:\n      - targets: ['127.0.0.1:%d']\n" % port)
        server = lib.Running(["--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                              "--web.listen-address=127.0.0.1:%d" % pport], program=prom)
        # Prometheus starts, scrapes, stores: its API answering is the event
        guard = 4 * lib.TIMEOUT
        q = 'smrules_rule_triggers_total{job="prom-job",rule="ExplodingTensor"}'
        res = wait_promql(pport, q, lambda r: r[0]["value"][1] == "9", guard)
        c.ok(res, "prometheus: PromQL returns the rule's 9 triggers", str(promql(pport, q))[:300])
        if res:
            print("  %s => %s" % (q, json.dumps(res)))
        q2 = 'smrules_seconds_since_last_step{job="prom-job"}'
        res2 = wait_promql(pport, q2, lambda r: float(r[0]["value"][1]) >= 0, guard)
        c.ok(res2, "prometheus: PromQL returns the seconds since the last step",
             str(promql(pport, q2))[:300])
        if res2:
            print("  %s => %s" % (q2, json.dumps(res2)))
        # docs/metrics.md's straggler query, with a threshold every worker passes
        q3 = ("max by (job) (smrules_worker_latest_step) - on(job) group_right "
              "smrules_worker_latest_step > -1")
        res3 = wait_promql(pport, q3, lambda r: r[0]["metric"].get("worker") == "worker_0", guard)
        c.ok(res3 and float(res3[0]["value"][1]) == 0,
             "prometheus: the documented straggler query runs: worker_0 trails by 0 steps",
             str(promql(pport, q3))[:300])
        q4 = 'smrules_read_bytes_total{job="prom-job"}'
        res4 = wait_promql(pport, q4, lambda r: float(r[0]["value"][1]) > 0, guard)
        c.ok(res4, "prometheus: PromQL returns the bytes read", str(promql(pport, q4))[:300])
    finally:
        if server and server.proc.poll() is None:
            server.proc.send_signal(signal.SIGTERM)
            server.finish()
        if os.path.exists(pidf):
            with open(pidf) as f:
                try:
                    os.kill(int(f.read()), signal.SIGTERM)
                except (ValueError, ProcessLookupError):
                    pass
        rc, _, err = run.finish()
    c.ok(rc == 1, "prometheus: the run ends (issues found: 1)", "rc=%s %s" % (rc, err[-200:]))


K8S = os.path.join(lib.ROOT, "examples", "kubernetes")


def configmap_rules(path):
    """The `rules.yaml: |` block of a manifest, dedented."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "rules.yaml: |") + 1
    indent = len(lines[start]) - len(lines[start].lstrip())
    block = []
    for line in lines[start:]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        block.append(line[indent:])
    return "\n".join(block).strip() + "\n"


def strip_comments(text):
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip() + "\n"


def case_kubernetes(c, tmp):
    pod, job = os.path.join(K8S, "training-pod.yaml"), os.path.join(K8S, "posthoc-job.yaml")
    with open(os.path.join(K8S, "rules.yaml")) as f:
        rules = f.read()
    sidecar = configmap_rules(pod)
    c.ok(sidecar == strip_comments(rules), "kubernetes: the pod's ConfigMap holds rules.yaml",
         sidecar)
    with open(pod) as f:
        pod_text = f.read()
    cmd = re.search(r"command: \[(.*)\]", pod_text).group(1)
    c.ok("cmdline: [%s]" % cmd in rules, "kubernetes: StopTraining's cmdline is the trainer's command")
    for name, text in (("sidecar", sidecar), ("post-hoc", configmap_rules(job))):
        path = os.path.join(tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = lib.run(["validate", path])
        c.ok(rc == 0, "kubernetes: the %s rules validate" % name, out + err)
    _, helptext, _ = lib.run(["run", "--help"])
    known = set(re.findall(r"^  (?:-[a-zA-Z](?: [A-Z]+)?, )?(--[a-z0-9-]+)", helptext, re.M))
    for path in (pod, job):
        with open(path) as f:
            used = set(re.findall(r"^\s*- (--[a-z0-9-]+)", f.read(), re.M))
        c.ok(used and used <= known, "kubernetes: %s gives run only options it has"
             % os.path.basename(path), str(sorted(used - known)))


def case_address(c, tmp):
    rc, _, err = lib.run(["run", "--rules", rules_file(tmp), "--trial", EXPLODING, "--fresh",
                          "--metrics-listen", "nonsense"])
    c.ok(rc == 2 and "--metrics-listen" in err, "address: no port: exit 2",
         "%s %s" % (rc, err[-200:]))
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    marker = os.path.join(tmp, "started")
    rc, _, err = lib.run(["run", "--rules", rules_file(tmp), "--trial", os.path.join(tmp, "t2"),
                          "--metrics-listen", "127.0.0.1:%d" % port, "--", "touch", marker])
    busy.close()
    c.ok(rc == 2 and "cannot listen" in err, "address: a port in use: exit 2",
         "%s %s" % (rc, err[-200:]))
    c.ok(not os.path.exists(marker), "address: nothing launched")


def main():
    c = lib.Checker("test_metrics")
    for name, fn in (("launch", case_launch), ("watch", case_watch),
                     ("prometheus", case_prometheus), ("kubernetes", case_kubernetes),
                     ("address", case_address), ("workers", case_workers)):
        if lib.CASE_FILTER and lib.CASE_FILTER not in name:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            fn(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
