#!/usr/bin/env python3
"""The Alertmanager action against the real server (Debian's
prometheus-alertmanager), started on a free loopback port with a minimal
configuration and a temporary storage folder, stopped afterwards:

- a launched run (`smrules run -- TRAINER`) whose rule fires POSTs the alert:
  it is read back through GET /api/v2/alerts while the trainer still runs,
  with the labels (alertname = the rule, job, trial, severity, the extra
  labels of the settings) and annotations (message, step) expected; the
  trainer ends only then (a file the test writes), and after the run the
  alert is resolved (no longer listed as active);
- the bearer token named by an environment variable is never printed;
- an absent Alertmanager (a closed port) ends as a `failed` action
  outcome after its retries, and the other action of the rule still runs.

Every wait is for an event (the API answers, the alert is listed, the
process exits); the limits are only hang guards.  Skipped when
prometheus-alertmanager is not installed (.ci/deps.sh installs it)."""
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402
import test_actions as ta  # noqa: E402  (its trainer and helpers)

WAIT = ta.WAIT
TOKEN = "am-bearer-S3CR3T-value"

AM_CONFIG = 'route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n'

# The stand-in trainer of test_actions, but it goes on "training" until the
# test writes <dir>/release (it has seen the alert) instead of for a time.
LOOP = "while time.monotonic() < deadline:"
RELEASE = ("while time.monotonic() < deadline and not "
           "os.path.exists(os.path.join(trial, '..', 'release')):")


def am_binary():
    for name in ("prometheus-alertmanager", "alertmanager"):
        p = shutil.which(name)
        if p:
            return p
    return None


def when(rfc3339):
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))


def http_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


class Alertmanager:
    def __init__(self, binary, tmp):
        self.dir = os.path.join(tmp, "am")
        os.makedirs(self.dir)
        conf = os.path.join(self.dir, "am.yml")
        with open(conf, "w") as f:
            f.write(AM_CONFIG)
        self.port = ta.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.p = subprocess.Popen([binary, "--config.file=" + conf,
                                   "--storage.path=" + os.path.join(self.dir, "data"),
                                   "--web.listen-address=127.0.0.1:%d" % self.port,
                                   "--cluster.listen-address="],
                                  stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        self.up = ta.wait_for(self._answers, timeout=WAIT)

    def _answers(self):
        if self.p.poll() is not None:
            return True  # exited: do not wait for it
        try:
            return http_json(self.url + "/api/v2/status", timeout=1).get("uptime") is not None
        except (OSError, ValueError):
            return False

    def alerts(self, name):
        try:
            got = http_json(self.url + "/api/v2/alerts")
        except (OSError, ValueError):
            return None
        return [a for a in got if a.get("labels", {}).get("alertname") == name]

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


def write_trainer(tmp):
    script = ta.TRAINER.replace(LOOP, RELEASE)
    path = os.path.join(tmp, "release_trainer.py")
    with open(path, "w") as f:
        f.write(script)
    return path, script != ta.TRAINER


def rules_text(url, extra=""):
    return ("rules:\n  - rule: LossNotDecreasing\n    name: loss\n"
            "    parameters: {num_steps: 2}\n    actions: [Alertmanager]\n"
            "actions:\n  Alertmanager:\n    url: '%s'\n    severity: critical\n"
            "    labels: {team: ml, cluster: lab}\n    bearer_token_env: AM_TOKEN\n"
            "    timeout_seconds: 5\n%s" % (url, extra))


def test_fires_and_resolves(c, tmp, am):
    sc = c.scope("Alertmanager: the alert fires, then is resolved")
    script, ok = write_trainer(tmp)
    if not sc.ok(ok, "the trainer waits for the release file", "TRAINER changed"):
        return
    d = os.path.join(tmp, "live")
    os.makedirs(d)
    trial = os.path.join(d, "trial")
    rules = os.path.join(d, "rules.yaml")
    with open(rules, "w") as f:
        f.write(rules_text(am.url + "/"))
    env = dict(os.environ, AM_TOKEN=TOKEN)
    run = lib.Running(["run", "--trial", trial, "--rules", rules, "--json", "--fresh", "--",
                       sys.executable, script, trial, "-", json.dumps("loss"), "600"] +
                      [str(x) for x in ta.LOSSES], env=env, cwd=d)
    firing = []
    try:
        seen = ta.wait_for(lambda: firing.extend(am.alerts("loss") or []) or firing,
                           timeout=WAIT)
        sc.ok(seen, "the alert is listed by Alertmanager while the trainer runs",
              "stderr: %s" % "".join(run.err_lines)[-2000:])
    finally:
        with open(os.path.join(d, "release"), "w") as f:
            f.write("1")
    r = run.finish()
    if firing:
        a = firing[0]
        print("alert as Alertmanager returned it:\n" + json.dumps(a, indent=1, sort_keys=True))
        labels, ann = a.get("labels", {}), a.get("annotations", {})
        sc.eq("alertname", labels.get("alertname"), "loss")
        sc.eq("job (the trial folder's name)", labels.get("job"), "trial")
        sc.eq("trial", labels.get("trial"), trial)
        sc.eq("severity", labels.get("severity"), "critical")
        sc.eq("rule_type", labels.get("rule_type"), "LossNotDecreasing")
        sc.eq("extra label team", labels.get("team"), "ml")
        sc.eq("extra label cluster", labels.get("cluster"), "lab")
        sc.eq("step annotation", ann.get("step"), str(ta.TRIGGER_STEP))
        sc.ok("loss" in ann.get("message", "") and "step %d" % ta.TRIGGER_STEP in ann.get("message", ""),
              "message annotation", ann.get("message"))
        sc.eq("state", a.get("status", {}).get("state"), "active")
        sc.ok(not a.get("endsAt", "").startswith("0001"), "endsAt set by Alertmanager", a.get("endsAt"))
    out = "".join(run.out_lines) + "".join(run.err_lines)
    sc.ok(TOKEN not in out, "the bearer token is never printed")
    try:
        obj = json.loads("".join(run.out_lines))
    except ValueError:
        obj = {}
    acts = [x for x in (obj.get("actions") or []) if x.get("action") == "Alertmanager"]
    sc.ok(acts and all(x.get("outcome") == "ok" for x in acts),
          "every Alertmanager action ok in the summary", lib.short(acts))
    sc.ok(r is not None, "smrules ended")
    # after the run: resolved, so no longer listed as active
    gone = ta.wait_for(lambda: am.alerts("loss") == [], timeout=WAIT)
    sc.ok(gone, "the alert is resolved after the run", lib.short(am.alerts("loss")))


def test_absent(c, tmp):
    sc = c.scope("Alertmanager: absent server")
    t = ta.Trainer(tmp, "absent", sleep=0)
    port = ta.free_port()  # nothing listens there
    marker = os.path.join(t.dir, "hook-ran")
    extra = ("    retries: 1\n    retry_delay_seconds: 0.1\n"
             "  hooks:\n    mark: {type: exec, argv: [touch, '%s']}\n" % marker)
    text = rules_text("http://127.0.0.1:%d" % port, extra).replace(
        "actions: [Alertmanager]", "actions: [Alertmanager, mark]")
    r = ta.run_rules(t.dir, t.trial, text, env={"AM_TOKEN": TOKEN})
    sc = c.scope("Alertmanager: absent server", r)
    if sc.process(r) and sc.exit_code(r, [4]):
        acts = [a for a in ta.actions_of(r) if a.get("action") == "Alertmanager"]
        sc.ok(acts and all(a.get("outcome") == "failed" for a in acts),
              "Alertmanager outcome failed", lib.short(acts))
        sc.ok(acts and all(a.get("attempts") == 2 for a in acts), "tried 1 + 1 retries",
              lib.short(acts))
        sc.ok(acts and "127.0.0.1:%d" % port in acts[0].get("detail", ""),
              "the detail names the server", lib.short(acts))
        marks = [a for a in ta.actions_of(r) if a.get("action") == "mark"]
        sc.ok(marks and marks[0].get("outcome") == "ok" and os.path.exists(marker),
              "the rule's other action ran", lib.short(marks))
        sc.ok(TOKEN not in r.out and TOKEN not in r.err, "the bearer token is never printed")


def test_recorded_requests(c, tmp):
    """What goes on the wire, seen by a recording server: the path under a
    prefix, the credentials from a private file or an environment variable,
    the firing alert (no endsAt) and the resolving one (same labels, endsAt)."""
    import base64
    tok = os.path.join(tmp, "rec-token")
    with open(os.open(tok, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(TOKEN + "\n")
    for auth, settings, want in [
            ("bearer file", "    bearer_token_file: '%s'\n" % tok, "Bearer " + TOKEN),
            ("basic env", "    username: smr\n    password_env: AM_PW\n",
             "Basic " + base64.b64encode(("smr:" + TOKEN).encode()).decode())]:
        srv = ta.WebhookServer()
        try:
            t = ta.Trainer(tmp, "rec-" + auth.replace(" ", "-"), sleep=0)
            text = rules_text("http://127.0.0.1:%d/am/" % srv.port).replace(
                "    bearer_token_env: AM_TOKEN\n", settings)
            r = ta.run_rules(t.dir, t.trial, text, env={"AM_PW": TOKEN})
            sc = c.scope("Alertmanager on the wire (%s)" % auth, r)
            if sc.process(r) and sc.exit_code(r, [1]):
                sc.ok(TOKEN not in r.out and TOKEN not in r.err, "the secret is never printed")
            bodies = []
            for p in srv.posts:
                try:
                    bodies.append(json.loads(p["body"]))
                except ValueError:
                    bodies.append(None)
            if sc.ok(len(srv.posts) >= 2, "a firing and a resolving POST", str(len(srv.posts))):
                sc.eq("path", [p["path"] for p in srv.posts], ["/am/api/v2/alerts"] * len(srv.posts))
                sc.eq("Authorization", srv.posts[0]["headers"].get("authorization"), want)
                sc.eq("Content-Type", srv.posts[0]["headers"].get("content-type"), "application/json")
                first, last = bodies[0][0], bodies[-1][0]
                sc.ok("endsAt" not in first, "the firing alert has no endsAt", lib.short(first))
                sc.ok("endsAt" in last and when(last["endsAt"]) >= when(last["startsAt"]),
                      "the resolving alert has endsAt after startsAt", lib.short(last))
                sc.eq("same labels when resolved", last["labels"], first["labels"])
                sc.eq("alertname", first["labels"].get("alertname"), "loss")
        finally:
            srv.stop()


def test_config_errors(c, tmp):
    tok = os.path.join(tmp, "tok")
    with open(os.open(tok, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(TOKEN + "\n")
    cases = [
        ("no url", "rules:\n  - rule: LossNotDecreasing\n    actions: [Alertmanager]\n",
         "Alertmanager needs actions.Alertmanager.url"),
        ("inline label clash", rules_text("http://x").replace("team: ml", "job: other"),
         "labels: 'job' is set by smrules"),
        ("a value", rules_text("http://x").replace("[Alertmanager]", "[{Alertmanager: critical}]"),
         "Alertmanager takes no value here"),
        ("bad scheme", rules_text("ftp://x"), "url: expected http://"),
        ("two tokens", rules_text("http://x", "    bearer_token_file: tok\n"),
         "give bearer_token_file or bearer_token_env, not both"),
    ]
    for name, text, want in cases:
        path = os.path.join(tmp, "bad.yaml")
        with open(path, "w") as f:
            f.write(text)
        r = ta.smrules(["validate", path], cwd=tmp)
        sc = c.scope("Alertmanager config: " + name, r)
        if sc.process(r, want_json=False):
            sc.ok(r.rc != 0 and want in r.err, "error says '%s'" % want, r.err[-500:])


def main():
    c = lib.Checker("test_alertmanager")
    with tempfile.TemporaryDirectory(prefix="smrules-am-") as tmp:
        test_config_errors(c, tmp)
        test_recorded_requests(c, tmp)
        test_absent(c, tmp)
        binary = am_binary()
        if not binary:
            print("SKIP Alertmanager server: prometheus-alertmanager is not installed")
        else:
            am = Alertmanager(binary, tmp)
            try:
                if c.scope("Alertmanager starts").ok(am.up and am.p.poll() is None,
                                                     "the API answers"):
                    test_fires_and_resolves(c, tmp, am)
            finally:
                am.stop()
    c.finish()


if __name__ == "__main__":
    main()
