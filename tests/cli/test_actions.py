#!/usr/bin/env python3
"""End-to-end tests of rule actions (`smrules run` with `actions:`).

A stand-in trainer (a Python script written here) writes a trial step by step
-- TFRecord event files, index files, a collections file -- with a loss that
stops decreasing, writes a pid file and stays alive; LossNotDecreasing then
fires at step 4 and the actions run:

- StopTraining stops the trainer (SIGTERM), refuses a pid file that is older
  than the process it names and a pid whose recorded start time differs
  (recycled pid), and --dry-run signals nothing;
- Email reaches a loopback SMTP server (aiosmtpd) with rule, step and
  violations, authenticated from a private credentials file;
- SMS reaches a loopback server that checks the SigV4 signature with
  botocore's signer, and the moto server (which checks it too) when moto is
  importable;
- a webhook server receives the event JSON; an exec hook gets argv, SMRULES_*
  variables and the JSON on stdin;
- tensor names full of shell metacharacters and header-breaking newlines
  execute nothing and corrupt no message;
- a killed smrules restarted on the same state does not repeat an action;
- repeat: first / every / every_nth.

Every server listens on 127.0.0.1 with an ephemeral port and is stopped by
the test; every wait is bounded.  A part whose server cannot be started here
is reported as SKIP (never counted as passed)."""

import email
import email.policy
import http.server
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

WAIT = 20.0  # seconds: upper bound of every wait for a process or a file
TRIGGER_STEP = 4
LOSSES = [1.0, 0.8, 0.6, 0.6, 0.6, 0.6]  # num_steps 2: fires at step 4
SECRETS = []  # strings no smrules output may contain

# ---------------------------------------------------------------------------
# The stand-in trainer

TRAINER = r'''
import json, os, struct, sys, time

def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t
TABLE = _table()

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def masked(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def ld(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload

def event(step, name, value):
    shape = ld(2, varint(1 << 3) + varint(1))               # dim {size: 1}
    tensor = varint(1 << 3) + varint(2) + ld(2, shape) + ld(4, struct.pack("<d", value))
    meta = ld(1, ld(1, b"mode_step") + ld(2, str(step).encode())) + \
        ld(1, ld(1, b"mode") + ld(2, b"1"))                   # TRAIN
    value_msg = ld(1, name.encode()) + ld(8, tensor) + ld(9, meta)
    return bytes([1 << 3 | 1]) + struct.pack("<d", time.time()) + \
        varint(2 << 3) + varint(step) + ld(5, ld(1, value_msg))

def record(payload):
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", masked(crc32c(head))) + payload + \
        struct.pack("<I", masked(crc32c(payload)))

def atomic_write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.rename(path + ".tmp", path)

def main():
    trial, pid_file, name, sleep_s = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
    losses = [float(x) for x in sys.argv[5:]]
    colls = {"collections": {"losses": {"name": "losses", "include_regex": [], "tensor_names": [name],
                                        "reduction_config": None, "save_config": None,
                                        "save_histogram": False}},
             "_meta": {"num_workers": 1}}
    atomic_write(os.path.join(trial, "collections/000000000/worker_0_collections.json"),
                 json.dumps(colls).encode())
    for step, loss in enumerate(losses):
        rel = "events/%012d/%012d_worker_0.tfevents" % (step, step)
        rec = record(event(step, name, loss))
        atomic_write(os.path.join(trial, rel), rec)
        index = {"meta": {"mode": "TRAIN", "mode_step": step, "event_file_name": rel},
                 "tensor_payload": [{"tensorname": name, "start_idx": 0, "length": len(rec)}],
                 "shape_payload": []}
        atomic_write(os.path.join(trial, "index/%09d/%012d_worker_0.json" % (step // 1000, step)),
                     json.dumps(index).encode())
    if pid_file != "-":
        atomic_write(pid_file, ("%d\n" % os.getpid()).encode())
    atomic_write(os.path.join(trial, "..", "ready"), b"1")
    deadline = time.monotonic() + sleep_s          # "training" goes on
    while time.monotonic() < deadline:
        time.sleep(0.05)

main()
'''


def wait_for(cond, timeout=WAIT, interval=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(interval)
    return cond()


class Trainer:
    """A trainer process that wrote its trial (<dir>/trial) and pid file
    (<dir>/train.pid) and now sleeps for `sleep` seconds."""

    def __init__(self, tmp, name, losses=LOSSES, tensor="loss", sleep=60.0, pid_file=True):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.trial = os.path.join(self.dir, "trial")
        self.pid_file = os.path.join(self.dir, "train.pid")
        script = os.path.join(tmp, "trainer.py")
        if not os.path.exists(script):
            with open(script, "w") as f:
                f.write(TRAINER)
        self.p = subprocess.Popen([sys.executable, script, self.trial,
                                   self.pid_file if pid_file else "-", json.dumps(tensor),
                                   str(sleep)] + [str(x) for x in losses],
                                  stdin=subprocess.DEVNULL)
        self.pid = self.p.pid
        self.ready = wait_for(lambda: os.path.exists(os.path.join(self.dir, "ready")))

    def alive(self):
        return self.p.poll() is None

    def not_signalled(self):
        """Alive with no signal waiting.  Called after smrules exited: a
        signal it sent is pending now, or was delivered and (SIGTERM's
        default action) ended the trainer, so no pause is needed."""
        if not self.alive():
            return False
        try:
            with open("/proc/%d/status" % self.pid) as f:
                masks = dict(line.split(":", 1) for line in f if line.startswith(("SigPnd", "ShdPnd")))
        except OSError:
            return False
        return all(int(v.strip(), 16) == 0 for v in masks.values())

    def exit_status(self, timeout=WAIT):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


# ---------------------------------------------------------------------------
# Running smrules

def smrules(args, cwd, env=None, timeout=lib.TIMEOUT):
    full_env = dict(os.environ)
    # never the credentials of the machine the tests run on (an EC2 CI host
    # would answer on 169.254.169.254)
    full_env["AWS_EC2_METADATA_DISABLED"] = "true"
    full_env.update(env or {})
    try:
        p = subprocess.run([lib.SMRULES] + args, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        rc, out = lib.TIMEOUT_RC, (e.stdout or b"").decode("utf-8", "replace")
        err = (e.stderr or b"").decode("utf-8", "replace") + "\n[test harness] timed out\n"
    return lib.Result(args, rc, out, err)


def run_rules(tmp, trial, yaml_text, extra=(), env=None, state="state.db", name="rules.yaml"):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(yaml_text)
    args = ["run", "--trial", trial, "--rules", path, "--json"]
    args += ["--state", os.path.join(tmp, state)] if state else ["--fresh"]
    return smrules(args + list(extra), cwd=tmp, env=env)


# a pid file is written by the job: the process it names must also pass a
# check (here the trainer's interpreter), and a root one needs allow_root
PID_FILE_STOP = "  StopTraining: {pid_file: train.pid, exe: %s%s}\n" % (
    json.dumps(os.path.realpath(sys.executable)), ", allow_root: true" if os.geteuid() == 0 else "")


def rule_yaml(actions, settings="", params="{num_steps: 2}"):
    return ("rules:\n  - rule: LossNotDecreasing\n    name: loss\n"
            "    parameters: %s\n    actions:\n%s%s" %
            (params, "".join("      - %s\n" % a for a in actions),
             ("actions:\n" + settings) if settings else ""))


def actions_of(r):
    a = r.obj.get("actions") if isinstance(r.obj, dict) else None
    return a if isinstance(a, list) else []


def one_action(sc, r, name):
    got = [a for a in actions_of(r) if a.get("action") == name]
    sc.ok(len(got) == 1, "one %s action in the summary" % name, lib.short(actions_of(r)))
    return got[0] if got else {}


def no_secrets(sc, r):
    leaked = [s for s in SECRETS if s in r.out or s in r.err]
    sc.ok(not leaked, "no secret printed", "leaked: %s" % leaked)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def db_rows(path, sql):
    try:
        con = sqlite3.connect(path, timeout=10)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return None


def started(sc, r, rc=1):
    """The run ended normally (1: the rule found issues; 4: and an action
    failed, which takes precedence)."""
    return sc.process(r) and sc.exit_code(r, [rc])


# ---------------------------------------------------------------------------
# StopTraining

def test_stop_training(c, tmp):
    t = Trainer(tmp, "stop")
    sc = c.scope("StopTraining by pid file")
    if not sc.ok(t.ready, "trainer wrote its trial"):
        return t.stop()
    r = run_rules(t.dir, t.trial, rule_yaml(["StopTraining"], PID_FILE_STOP))
    sc.result = r
    if started(sc, r):
        a = one_action(sc, r, "StopTraining")
        sc.eq("outcome", a.get("outcome"), "ok")
        sc.eq("step", a.get("step"), TRIGGER_STEP)
        sc.ok("sent SIGTERM to pid %d" % t.pid in a.get("detail", ""), "detail names the signal and pid",
              a.get("detail"))
    sc.eq("trainer ended by SIGTERM", t.exit_status(), -signal.SIGTERM)
    rows = db_rows(os.path.join(t.dir, "state.db"),
                   "SELECT instance, action, trigger_ordinal, step, status FROM action_log")
    sc.eq("action_log", rows, [("loss", "StopTraining", 1, TRIGGER_STEP, "ok")])
    r2 = run_rules(t.dir, t.trial, rule_yaml(["StopTraining"], PID_FILE_STOP))
    sc2 = c.scope("StopTraining, second run on the same state", r2)
    if started(sc2, r2):
        sc2.eq("no action repeated", actions_of(r2), [])
    t.stop()


def test_stop_stale_pid_file(c, tmp):
    t = Trainer(tmp, "stale")
    sc = c.scope("StopTraining, pid file older than the process (recycled pid)")
    if not sc.ok(t.ready, "trainer wrote its trial"):
        return t.stop()
    hour_ago = time.time() - 3600
    os.utime(t.pid_file, (hour_ago, hour_ago))
    r = run_rules(t.dir, t.trial, rule_yaml(["StopTraining"], PID_FILE_STOP))
    sc.result = r
    if started(sc, r):
        a = one_action(sc, r, "StopTraining")
        sc.eq("outcome", a.get("outcome"), "refused")
        sc.ok("the pid was reused; nothing signalled" in a.get("detail", ""), "detail says why",
              a.get("detail"))
    sc.ok(t.not_signalled(), "trainer not signalled")
    t.stop()


def test_stop_recorded_identity(c, tmp):
    """--training-pid: the start time recorded when smrules first saw the
    process must match when it fires (the record is altered to play a
    process that reused the pid)."""
    t = Trainer(tmp, "recorded")
    sc = c.scope("StopTraining --training-pid, identity differs from the record")
    if not sc.ok(t.ready, "trainer wrote its trial"):
        return t.stop()
    yaml_text = rule_yaml(["StopTraining"])
    pid_args = ["--training-pid", str(t.pid)]
    r1 = run_rules(t.dir, t.trial, yaml_text, pid_args + ["--end-step", str(TRIGGER_STEP)])
    sc.result = r1
    if started(sc, r1, rc=0):
        sc.eq("no trigger before step 4", actions_of(r1), [])
    db = os.path.join(t.dir, "state.db")
    rows = db_rows(db, "SELECT target, pid FROM action_target")
    sc.eq("first sight recorded", rows, [("pid:%d" % t.pid, t.pid)])
    con = sqlite3.connect(db, timeout=10)
    con.execute("UPDATE action_target SET start_ticks = start_ticks + 7")
    con.commit()
    con.close()
    r2 = run_rules(t.dir, t.trial, yaml_text, pid_args)
    sc.result = r2
    if started(sc, r2):
        a = one_action(sc, r2, "StopTraining")
        sc.eq("outcome", a.get("outcome"), "refused")
        sc.ok("not the one first seen" in a.get("detail", ""), "detail says why", a.get("detail"))
    sc.ok(t.not_signalled(), "trainer not signalled")
    t.stop()


def test_stop_dry_run(c, tmp):
    t = Trainer(tmp, "dry")
    sc = c.scope("StopTraining --dry-run")
    if not sc.ok(t.ready, "trainer wrote its trial"):
        return t.stop()
    yaml_text = rule_yaml(["StopTraining"], PID_FILE_STOP)
    r = run_rules(t.dir, t.trial, yaml_text, ["--dry-run"])
    sc.result = r
    if started(sc, r):
        a = one_action(sc, r, "StopTraining")
        sc.eq("outcome", a.get("outcome"), "dry-run")
        sc.ok("would send SIGTERM to pid %d" % t.pid in a.get("detail", ""), "detail", a.get("detail"))
        sc.eq("dry_run flag", a.get("dry_run"), True)
    sc.ok(t.not_signalled(), "trainer not signalled")
    sc.ok(not db_rows(os.path.join(t.dir, "state.db"), "SELECT * FROM action_log"),
          "nothing recorded in the action log")
    r2 = run_rules(t.dir, t.trial, yaml_text)
    sc2 = c.scope("StopTraining after a dry run: the real run still acts", r2)
    if started(sc2, r2):
        sc2.eq("outcome", one_action(sc2, r2, "StopTraining").get("outcome"), "ok")
    sc2.eq("trainer ended by SIGTERM", t.exit_status(), -signal.SIGTERM)
    t.stop()


# ---------------------------------------------------------------------------
# Email over SMTP (aiosmtpd)

def import_aiosmtpd():
    try:
        import aiosmtpd.controller  # noqa: F401
    except ImportError:
        deb = "/usr/lib/python3/dist-packages"  # Debian's python3-aiosmtpd
        if os.path.isdir(deb) and deb not in sys.path:
            sys.path.append(deb)
        try:
            import aiosmtpd.controller  # noqa: F401,F811
        except ImportError:
            return None
    import aiosmtpd.controller
    import aiosmtpd.smtp
    import logging
    import warnings
    # AUTH without TLS is fine on loopback; keep the test output quiet
    warnings.filterwarnings("ignore", module="aiosmtpd")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    logging.getLogger("mail.log").setLevel(logging.CRITICAL)
    return aiosmtpd


class MailBox:
    def __init__(self):
        self.messages = []
        self.logins = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


def start_smtp(aiosmtpd, box, user, password):
    from aiosmtpd.smtp import AuthResult

    def authenticator(server, session, envelope, mechanism, auth_data):
        box.logins.append(mechanism)
        ok = auth_data.login == user.encode() and auth_data.password == password.encode()
        return AuthResult(success=ok)

    ctl = aiosmtpd.controller.Controller(box, hostname="127.0.0.1", port=free_port(),
                                         authenticator=authenticator, auth_required=True,
                                         auth_require_tls=False, ready_timeout=WAIT)
    ctl.start()
    return ctl


def smtp_settings(port, creds):
    return ("  Email:\n    smtp_url: 'smtp://127.0.0.1:%d'\n    from: smrules@example.com\n"
            "    credentials_file: %s\n    retries: 0\n    timeout_seconds: 10\n" % (port, creds))


def parse_mail(content):
    return email.message_from_bytes(content, policy=email.policy.default)


def test_email(c, tmp, aiosmtpd):
    user, password = "smrules-user", "pw-Xq81-secret"
    SECRETS.append(password)
    box = MailBox()
    ctl = start_smtp(aiosmtpd, box, user, password)
    try:
        t = Trainer(tmp, "mail", sleep=0)
        creds = os.path.join(t.dir, "smtp.creds")
        with open(creds, "w") as f:
            f.write("# SMTP login\nusername = %s\npassword = %s\n" % (user, password))
        os.chmod(creds, 0o600)
        r = run_rules(t.dir, t.trial, rule_yaml(["Email: ml-team@example.com"],
                                                smtp_settings(ctl.port, "smtp.creds")))
        sc = c.scope("Email over SMTP", r)
        if started(sc, r):
            a = one_action(sc, r, "Email")
            sc.eq("outcome", a.get("outcome"), "ok")
            sc.eq("target", a.get("target"), "ml-team@example.com")
            no_secrets(sc, r)
        wait_for(lambda: box.messages, 5)
        sc.eq("messages received", len(box.messages), 1)
        sc.ok(box.logins, "the client authenticated", lib.short(box.logins))
        if box.messages:
            mail_from, rcpt, content = box.messages[0]
            m = parse_mail(content)
            body = m.get_content()
            sc.eq("envelope sender", mail_from, "smrules@example.com")
            sc.eq("envelope recipients", rcpt, ["ml-team@example.com"])
            sc.eq("Subject", str(m["Subject"]), "SMDebugRule:loss fired")
            sc.eq("To", str(m["To"]), "ml-team@example.com")
            for want in ("SMDebugRule:loss fired. rule loss (LossNotDecreasing) triggered at step 4",
                         "Rule:     loss (LossNotDecreasing)", "Step:     4",
                         "Violations at step 4:", "  - tensor=loss, step=4, reference_step=2",
                         "loss=0.6, reference_loss=0.6"):
                sc.ok(want in body, "body has %r" % want, lib.short(body, 600))

        # STARTTLS required but not offered by the server: a final failure
        r = run_rules(t.dir, t.trial, rule_yaml(["Email: ml-team@example.com"],
                                                smtp_settings(ctl.port, "smtp.creds") + "    tls: required\n"),
                      state="tls.db")
        sc = c.scope("Email with tls: required against a server without STARTTLS", r)
        if started(sc, r, rc=4):  # 4: an action failed
            a = one_action(sc, r, "Email")
            sc.eq("outcome", a.get("outcome"), "failed")
            sc.eq("attempts", a.get("attempts"), 1)
            no_secrets(sc, r)
        sc.eq("nothing sent", len(box.messages), 1)

        # a credentials file others can read is refused before anything runs
        os.chmod(creds, 0o644)
        r = run_rules(t.dir, t.trial, rule_yaml(["Email: ml-team@example.com"],
                                                smtp_settings(ctl.port, "smtp.creds")), state="s2.db")
        sc = c.scope("Email, credentials file readable by others", r)
        if sc.process(r, want_json=False) and sc.exit_code(r, [2]):
            sc.ok("make it private: chmod 600" in r.err and "line 11, column 23" in r.err,
                  "error with position", lib.short(r.err))
            no_secrets(sc, r)
        sc.eq("nothing sent", len(box.messages), 1)
        t.stop()
    finally:
        ctl.stop()


def test_sendmail(c, tmp):
    """Email through a sendmail-compatible program (a stand-in that keeps its
    argv and the message it reads)."""
    t = Trainer(tmp, "sendmail", sleep=0)
    fake = os.path.join(t.dir, "fake-sendmail")
    out = os.path.join(t.dir, "sent.json")
    with open(fake, "w") as f:
        f.write("#!%s\nimport json, sys\njson.dump({'argv': sys.argv[1:], 'msg': sys.stdin.read()}, "
                "open(%r, 'w'))\n" % (sys.executable, out))
    os.chmod(fake, 0o755)
    r = run_rules(t.dir, t.trial, rule_yaml(["Email: {to: [a@example.com, b.c@mail.example.org]}"],
                                            "  Email: {sendmail: %s, from: smrules@example.com}\n" % fake))
    sc = c.scope("Email through sendmail", r)
    if started(sc, r):
        a = one_action(sc, r, "Email")
        sc.eq("outcome", a.get("outcome"), "ok")
        sc.eq("target", a.get("target"), "a@example.com,b.c@mail.example.org")
    got = json.load(open(out)) if os.path.exists(out) else {"argv": None, "msg": ""}
    sc.eq("argv", got["argv"], ["-t", "-i"])
    m = email.message_from_string(got["msg"], policy=email.policy.default)
    sc.eq("To", str(m["To"]), "a@example.com, b.c@mail.example.org")
    sc.eq("From", str(m["From"]), "smrules@example.com")
    sc.eq("Subject", str(m["Subject"]), "SMDebugRule:loss fired")
    sc.ok("\r" not in got["msg"], "local line ends (LF)")
    sc.ok("Step:     4" in m.get_content(), "body has the step")
    t.stop()


# ---------------------------------------------------------------------------
# SMS / SNS

class SigV4Server:
    """A loopback SNS stand-in that checks every request's SigV4 signature
    with botocore's signer and answers like SNS."""

    def __init__(self, secrets):
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                auth = self.headers.get("Authorization", "")
                info = {"body": urllib.parse.parse_qs(body.decode()), "auth": auth,
                        "headers": {k.lower(): v for k, v in self.headers.items()}, "valid": False}
                try:
                    cred = auth.split("Credential=")[1].split(",")[0].split("/")
                    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
                    key_id, region, service = cred[0], cred[2], cred[3]
                    secret, token = secrets[key_id]
                    headers = {k: v for k, v in self.headers.items() if k.lower() in signed}
                    req = AWSRequest(method="POST", url="http://%s%s" % (self.headers["Host"], self.path),
                                     data=body, headers=headers)
                    req.context["timestamp"] = self.headers["X-Amz-Date"]
                    signer = SigV4Auth(Credentials(key_id, secret, token), service, region)
                    canonical = signer.canonical_request(req)
                    want = signer.signature(signer.string_to_sign(req, canonical), req)
                    info.update(region=region, service=service, signed=signed,
                                valid=auth.endswith("Signature=" + want))
                except (IndexError, KeyError) as e:
                    info["error"] = repr(e)
                outer.requests.append(info)
                if info["valid"]:
                    code, text = 200, ("<PublishResponse><PublishResult><MessageId>m-%d</MessageId>"
                                       "</PublishResult></PublishResponse>" % len(outer.requests))
                else:
                    code, text = 403, ("<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code>"
                                       "<Message>signature mismatch</Message></Error></ErrorResponse>")
                data = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(WAIT)


def sns_settings(port, extra=""):
    return ("  SNS: {region: eu-west-1, endpoint: 'http://127.0.0.1:%d/', retries: 0%s}\n" %
            (port, extra))


def test_sns_sigv4(c, tmp):
    try:
        import botocore.auth  # noqa: F401
    except ImportError:
        print("SKIP SNS (SigV4 check): botocore is not importable (Debian: python3-botocore)")
        return
    secret, token = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session/token+value=="
    SECRETS.extend([secret, token])
    srv = SigV4Server({"AKIDSMRULESTEST1": (secret, None), "AKIDSMRULESTEST2": (secret, token)})
    try:
        t = Trainer(tmp, "sns", sleep=0)
        env = {"AWS_ACCESS_KEY_ID": "AKIDSMRULESTEST1", "AWS_SECRET_ACCESS_KEY": secret}
        r = run_rules(t.dir, t.trial, rule_yaml(['SMS: "+15555550100"'], sns_settings(srv.port)), env=env)
        sc = c.scope("SMS through SNS Publish (SigV4 checked with botocore)", r)
        if started(sc, r):
            a = one_action(sc, r, "SMS")
            sc.eq("outcome", a.get("outcome"), "ok")
            sc.ok("(MessageId m-1)" in a.get("detail", ""), "detail has the MessageId", a.get("detail"))
            no_secrets(sc, r)
        sc.eq("requests", len(srv.requests), 1)
        if srv.requests:
            q = srv.requests[0]
            sc.ok(q["valid"], "signature valid", lib.short(q))
            sc.eq("credential scope", (q.get("region"), q.get("service")), ("eu-west-1", "sns"))
            body = q["body"]
            sc.eq("Action", body.get("Action"), ["Publish"])
            sc.eq("PhoneNumber", body.get("PhoneNumber"), ["+15555550100"])
            msg = (body.get("Message") or [""])[0]
            sc.ok(msg.startswith("SMDebugRule:loss fired. rule loss (LossNotDecreasing) triggered "
                                 "at step 4: tensor=loss"), "Message", msg)

        # temporary credentials from a profile: the session token is sent and signed
        prof = os.path.join(t.dir, "aws-credentials")
        with open(prof, "w") as f:
            f.write("[default]\naws_access_key_id = nope\naws_secret_access_key = nope\n"
                    "[ci]\naws_access_key_id = AKIDSMRULESTEST2\naws_secret_access_key = %s\n"
                    "aws_session_token = %s\n" % (secret, token))
        env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SHARED_CREDENTIALS_FILE": prof,
               "AWS_PROFILE": "ci"}
        r = run_rules(t.dir, t.trial, rule_yaml(['SMS: "+15555550100"'], sns_settings(srv.port)),
                      env=env, state="s2.db")
        sc = c.scope("SNS with a profile's temporary credentials", r)
        if started(sc, r):
            sc.eq("outcome", one_action(sc, r, "SMS").get("outcome"), "ok")
            no_secrets(sc, r)
        if sc.eq("requests", len(srv.requests), 2):
            q = srv.requests[1]
            sc.ok(q["valid"], "signature valid", lib.short(q))
            sc.eq("token header", q["headers"].get("x-amz-security-token"), token)
            sc.ok("x-amz-security-token" in q.get("signed", []), "token header signed", q.get("signed"))

        # a wrong secret: the server refuses, the action fails (no retry on 403)
        env = {"AWS_ACCESS_KEY_ID": "AKIDSMRULESTEST1", "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
        r = run_rules(t.dir, t.trial, rule_yaml(['SMS: "+15555550100"'], sns_settings(srv.port)),
                      env=env, state="s3.db")
        sc = c.scope("SNS with a wrong secret", r)
        if started(sc, r, rc=4):  # 4: an action failed
            a = one_action(sc, r, "SMS")
            sc.eq("outcome", a.get("outcome"), "failed")
            sc.ok("HTTP 403: SignatureDoesNotMatch" in a.get("detail", ""), "detail", a.get("detail"))
            sc.eq("attempts", a.get("attempts"), 1)
            sc.ok("not-the-secret" not in r.out + r.err, "secret not printed")
        sc.ok(len(srv.requests) == 3 and not srv.requests[2]["valid"], "server saw an invalid signature")
        t.stop()
    finally:
        srv.stop()


def test_sns_moto(c, tmp):
    os.environ.setdefault("INITIAL_NO_AUTH_ACTION_COUNT", "3")  # then moto checks signatures
    try:
        import logging
        import botocore.session
        from moto.server import ThreadedMotoServer
        from moto.sns.models import sns_backends
    except ImportError as e:
        print("SKIP SNS (moto server): moto is not importable here (%s); pip install moto" % e)
        return
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    try:
        url = "http://127.0.0.1:%d" % srv.get_host_and_port()[1]
        session = botocore.session.get_session()
        iam = session.create_client("iam", region_name="us-east-1", endpoint_url=url,
                                    aws_access_key_id="AKIAIOSFODNN7EXAMPLE",
                                    aws_secret_access_key="bootstrap")
        iam.create_user(UserName="smrules")
        key = iam.create_access_key(UserName="smrules")["AccessKey"]
        iam.put_user_policy(UserName="smrules", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        SECRETS.append(key["SecretAccessKey"])
        t = Trainer(tmp, "moto", sleep=0)
        settings = "  SNS: {region: us-east-1, endpoint: '%s', retries: 0}\n" % url
        env = {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
        r = run_rules(t.dir, t.trial, rule_yaml(['SMS: "+15555550123"'], settings), env=env)
        sc = c.scope("SMS through the moto server (moto checks the SigV4 signature)", r)
        if started(sc, r):
            a = one_action(sc, r, "SMS")
            sc.eq("outcome", a.get("outcome"), "ok")
            no_secrets(sc, r)
        sent = [m for regions in sns_backends.values() for b in regions.values()
                for m in b.sms_messages.values()]
        sc.eq("SMS recorded by moto", len(sent), 1)
        if sent:
            sc.eq("phone", sent[0][0], "+15555550123")
            sc.ok(sent[0][1].startswith("SMDebugRule:loss fired. rule loss (LossNotDecreasing) "
                                        "triggered at step 4"), "message", sent[0][1])
        env["AWS_SECRET_ACCESS_KEY"] = "wrong-secret"
        r = run_rules(t.dir, t.trial, rule_yaml(['SMS: "+15555550123"'], settings), env=env, state="s2.db")
        sc = c.scope("SMS to moto with a wrong secret", r)
        if started(sc, r, rc=4):  # 4: an action failed
            a = one_action(sc, r, "SMS")
            sc.eq("outcome", a.get("outcome"), "failed")
            sc.ok("SignatureDoesNotMatch" in a.get("detail", ""), "moto refused the signature",
                  a.get("detail"))
        t.stop()
    finally:
        srv.stop()


# ---------------------------------------------------------------------------
# Webhook and exec hooks

class WebhookServer:
    def __init__(self, status=200):
        self.posts = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.posts.append({"path": self.path, "body": body,
                                    "headers": {k.lower(): v for k, v in self.headers.items()}})
                self.send_response(outer.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.status = status
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(WAIT)


def test_webhook(c, tmp):
    token = "T0K3N-abcdef-secret"
    SECRETS.append(token)
    srv = WebhookServer()
    try:
        t = Trainer(tmp, "webhook", sleep=0)
        settings = ("  hooks:\n    chat:\n      type: webhook\n"
                    "      url: 'http://127.0.0.1:%d/hooks/%s?channel=ml'\n"
                    "      headers: {X-Team: ml}\n      timeout_seconds: 5\n" % (srv.port, token))
        r = run_rules(t.dir, t.trial, rule_yaml(["chat"], settings))
        sc = c.scope("webhook", r)
        if started(sc, r):
            a = one_action(sc, r, "chat")
            sc.eq("outcome", a.get("outcome"), "ok")
            sc.eq("target", a.get("target"), "webhook")
            no_secrets(sc, r)
        if sc.eq("POSTs received", len(srv.posts), 1):
            p = srv.posts[0]
            sc.eq("path", p["path"], "/hooks/%s?channel=ml" % token)
            sc.eq("Content-Type", p["headers"].get("content-type"), "application/json")
            sc.eq("configured header", p["headers"].get("x-team"), "ml")
            try:
                ev = json.loads(p["body"])
            except ValueError:
                ev = {}
            sc.eq("event", ev.get("event"), "rule_triggered")
            sc.eq("rule", ev.get("rule"), "loss")
            sc.eq("rule_type", ev.get("rule_type"), "LossNotDecreasing")
            sc.eq("step", ev.get("step"), TRIGGER_STEP)
            sc.eq("trigger", ev.get("trigger"), 1)
            sc.eq("action", ev.get("action"), "chat")
            sc.eq("job (the trial folder's name)", ev.get("job"), "trial")
            v = ev.get("violations") or [{}]
            sc.eq("violation tensor", v[0].get("tensor"), "loss")
            sc.eq("violation reference_step", v[0].get("reference_step"), 2)

        # an answer of 500 is retried with backoff, then reported failed
        srv.status = 500
        settings = ("  hooks:\n    chat: {type: webhook, url: 'http://127.0.0.1:%d/x', retries: 2, "
                    "retry_delay_seconds: 0.1}\n" % srv.port)
        r = run_rules(t.dir, t.trial, rule_yaml(["chat"], settings), state="s2.db")
        sc = c.scope("webhook answering 500", r)
        if started(sc, r, rc=4):  # 4: an action failed
            a = one_action(sc, r, "chat")
            sc.eq("outcome", a.get("outcome"), "failed")
            sc.eq("attempts", a.get("attempts"), 3)
            sc.ok("retrying in 0.1s" in r.err and "retrying in 0.2s" in r.err, "backoff doubles",
                  lib.short(r.err))
        sc.eq("POSTs received", len(srv.posts), 4)
        srv.status = 404
        r = run_rules(t.dir, t.trial, rule_yaml(["chat"], settings), state="s3.db")
        sc = c.scope("webhook answering 404 (not retried)", r)
        if started(sc, r, rc=4):  # 4: an action failed
            sc.eq("attempts", one_action(sc, r, "chat").get("attempts"), 1)
        t.stop()
    finally:
        srv.stop()


HOOK = r'''
import json, os, sys
out = sys.argv[1]
data = {"argv": sys.argv[2:], "stdin": sys.stdin.read(),
        "env": {k: v for k, v in os.environ.items() if k.startswith("SMRULES_")}}
with open(out, "a") as f:
    f.write(json.dumps(data) + "\n")
'''

EVIL = ('loss"; $(touch {d}/INJ1) `touch {d}/INJ2` | touch {d}/INJ3 & touch {d}/INJ4;\n'
        'Bcc: victim@example.com\r\n.\r\nX-Evil: 1')


def write_hook(tmp):
    path = os.path.join(tmp, "hook.py")
    with open(path, "w") as f:
        f.write(HOOK)
    return path


def injected(tmp):
    found = []
    for d in (tmp, lib.ROOT, "/tmp"):
        found += [os.path.join(d, n) for n in ("INJ1", "INJ2", "INJ3", "INJ4") if os.path.exists(os.path.join(d, n))]
    return found


def test_exec_hook_injection(c, tmp, aiosmtpd):
    d = os.path.join(tmp, "evil")
    tensor = EVIL.format(d=d)
    t = Trainer(tmp, "evil", tensor=tensor, sleep=0)
    hook = write_hook(tmp)
    out = os.path.join(t.dir, "hook-out.jsonl")
    settings = ("  hooks:\n    page:\n      type: exec\n"
                "      argv: [%s, %s, %s, '{rule}', '{step}', '{message}', '{args.team}', "
                "'--trial={trial}', '{{literal}}']\n" % (json.dumps(sys.executable), json.dumps(hook),
                                                       json.dumps(out)))
    box, ctl = None, None
    if aiosmtpd:
        box = MailBox()
        ctl = start_smtp(aiosmtpd, box, "u", "p")
        creds = os.path.join(t.dir, "c")
        with open(creds, "w") as f:
            f.write("username=u\npassword=p\n")
        os.chmod(creds, 0o600)
        settings += smtp_settings(ctl.port, "c")
    actions = ["page: {team: '$(touch %s/INJ4); `id`'}" % d] + (["Email: ml@example.com"] if aiosmtpd else [])
    try:
        r = run_rules(t.dir, t.trial, rule_yaml(actions, settings))
        sc = c.scope("exec hook with a hostile tensor name", r)
        if started(sc, r):
            sc.eq("outcome", one_action(sc, r, "page").get("outcome"), "ok")
        lines = open(out).read().splitlines() if os.path.exists(out) else []
        sc.eq("hook ran once", len(lines), 1)
        got = json.loads(lines[0]) if lines else {"argv": [], "env": {}, "stdin": "{}"}
        argv = got["argv"]
        sc.eq("argc", len(argv), 6)
        if len(argv) == 6:
            sc.eq("{rule}", argv[0], "loss")
            sc.eq("{step}", argv[1], "4")
            sc.ok(argv[2].startswith("rule loss (LossNotDecreasing) triggered at step 4: tensor=loss\"; "
                                     "$(touch %s/INJ1) `touch %s/INJ2`" % (d, d)), "{message} literal", argv[2])
            sc.ok("\n" not in argv[2] and "\r" not in argv[2], "{message} is one line", argv[2])
            sc.eq("{args.team}", argv[3], "$(touch %s/INJ4); `id`" % d)
            sc.eq("{trial}", argv[4], "--trial=" + os.path.realpath(t.trial))
            sc.eq("{{literal}}", argv[5], "{literal}")
        env = got["env"]
        for k, v in (("SMRULES_RULE", "loss"), ("SMRULES_RULE_TYPE", "LossNotDecreasing"),
                     ("SMRULES_STEP", "4"), ("SMRULES_TRIGGER", "1"), ("SMRULES_STATUS", "IssuesFound"),
                     ("SMRULES_ACTION", "page"), ("SMRULES_JOB", "trial"),
                     ("SMRULES_ARG_TEAM", "$(touch %s/INJ4); `id`" % d)):
            sc.eq(k, env.get(k), v)
        try:
            ev = json.loads(got["stdin"])
        except ValueError:
            ev = {}
        sc.eq("stdin JSON keeps the exact tensor name", ((ev.get("violations") or [{}])[0]).get("tensor"),
              tensor)
        sc.eq("stdin JSON args", ev.get("args"), {"team": "$(touch %s/INJ4); `id`" % d})
        sc.eq("no injected command ran", injected(d) + injected(tmp), [])
        if box is not None:
            wait_for(lambda: box.messages, 5)
            sc.eq("one e-mail", len(box.messages), 1)
            if box.messages:
                _, rcpt, content = box.messages[0]
                sc.eq("recipients unchanged", rcpt, ["ml@example.com"])
                m = parse_mail(content)
                sc.eq("headers", sorted(m.keys()), sorted(
                    ["From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type",
                     "Content-Transfer-Encoding", "Auto-Submitted", "X-Smrules-Step"]))
                body = m.get_content()
                sc.ok("  - tensor=loss\"; $(touch %s/INJ1) `touch %s/INJ2` | touch %s/INJ3 & touch %s/INJ4;"
                      " Bcc: victim@example.com  .  X-Evil: 1, step=4" % (d, d, d, d) in body,
                      "tensor name on one body line", lib.short(body, 800))
                sc.ok("\nBcc:" not in body and "\nX-Evil" not in body, "no header-like line in the body")
        else:
            print("SKIP e-mail part of the injection test: aiosmtpd is not importable")
    finally:
        if ctl:
            ctl.stop()
        t.stop()


def test_exec_timeout(c, tmp):
    t = Trainer(tmp, "slowhook", sleep=0)
    settings = ("  hooks:\n    slow: {type: exec, argv: [%s, -c, 'import time; time.sleep(30)'], "
                "timeout_seconds: 0.5, retries: 0}\n" % json.dumps(sys.executable))
    r = run_rules(t.dir, t.trial, rule_yaml(["slow"], settings))
    sc = c.scope("exec hook past its timeout", r)
    if started(sc, r, rc=4):  # 4: an action failed
        a = one_action(sc, r, "slow")
        sc.eq("outcome", a.get("outcome"), "failed")
        # (a hook not killed would end after 30 s, without this detail)
        sc.ok("timed out after 0.5 s and was killed" in a.get("detail", ""), "detail", a.get("detail"))
    t.stop()


# ---------------------------------------------------------------------------
# Restart and repeat

def test_restart(c, tmp):
    """smrules is killed while an action runs; the state is rolled back so
    the rule fires again on restart: the action log prevents repeats."""
    t = Trainer(tmp, "restart", sleep=0)
    hook = write_hook(tmp)
    count = os.path.join(t.dir, "first.jsonl")
    marker = os.path.join(t.dir, "slow.pid")
    slow = "import os, time; open(%r, 'w').write(str(os.getpid())); time.sleep(30)" % marker
    settings = ("  hooks:\n    first: {type: exec, argv: [%s, %s, %s]}\n"
                "    slow: {type: exec, argv: [%s, -c, %s], timeout_seconds: 60}\n" %
                (json.dumps(sys.executable), json.dumps(hook), json.dumps(count),
                 json.dumps(sys.executable), json.dumps(slow)))
    yaml_path = os.path.join(t.dir, "rules.yaml")
    with open(yaml_path, "w") as f:
        f.write(rule_yaml(["first", "slow"], settings))
    db = os.path.join(t.dir, "state.db")
    args = [lib.SMRULES, "run", "--trial", t.trial, "--rules", yaml_path, "--json", "--state", db]
    p = subprocess.Popen(args, cwd=t.dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    sc = c.scope("restart after a kill")
    sc.ok(wait_for(lambda: os.path.exists(marker) and open(marker).read().strip()),
          "slow hook started")
    p.kill()
    p.wait()
    try:
        os.killpg(int(open(marker).read()), signal.SIGKILL)  # the hook has its own group
    except (OSError, ValueError):
        pass
    rows = db_rows(db, "SELECT action, trigger_ordinal, status FROM action_log ORDER BY action")
    sc.eq("log after the kill", rows, [("hook:first", 1, "ok"), ("hook:slow", 1, "running")])
    # as if killed before the rule state was saved: the rule fires again
    con = sqlite3.connect(db, timeout=10)
    con.execute("DELETE FROM rule_state")
    con.commit()
    con.close()
    os.unlink(marker)
    r = smrules(args[1:], cwd=t.dir)
    sc.result = r
    if started(sc, r):
        acts = {a.get("action"): a for a in actions_of(r)}
        sc.eq("both actions due again", sorted(acts), ["first", "slow"])
        for name in ("first", "slow"):
            a = acts.get(name, {})
            sc.eq("%s outcome" % name, a.get("outcome"), "skipped")
            sc.ok("in an earlier run" in a.get("detail", ""), "%s detail" % name, a.get("detail"))
    lines = open(count).read().splitlines() if os.path.exists(count) else []
    sc.eq("first hook ran once in all", len(lines), 1)
    sc.ok(not os.path.exists(marker), "slow hook not started again")
    r = smrules(args[1:], cwd=t.dir)
    sc = c.scope("restart, third run (state intact)", r)
    if started(sc, r):
        sc.eq("nothing due", actions_of(r), [])
    t.stop()


def test_repeat(c, tmp):
    t = Trainer(tmp, "repeat", losses=[1.0] * 7, sleep=0)
    hook = write_hook(tmp)
    outs = {n: os.path.join(t.dir, n + ".jsonl") for n in ("h_first", "h_every", "h_nth")}
    py = json.dumps(sys.executable)
    settings = "  hooks:\n" + "".join(
        "    %s: {type: exec, argv: [%s, %s, %s, '{trigger}', '{step}']}\n" %
        (n, py, json.dumps(hook), json.dumps(outs[n])) for n in outs)
    actions = ["h_first", "h_every: {repeat: every}", "h_nth: {repeat: {mode: every_nth, n: 2}}"]
    r = run_rules(t.dir, t.trial, rule_yaml(actions, settings, params="{num_steps: 1}"))
    sc = c.scope("repeat first / every / every_nth", r)
    if started(sc, r):
        trig = r.obj["rules"][0].get("triggered_steps") if r.obj.get("rules") else None
        sc.eq("triggered steps", trig, [1, 2, 3, 4, 5, 6])
    want = {"h_first": [["1", "1"]], "h_every": [[str(i), str(i)] for i in range(1, 7)],
            "h_nth": [["1", "1"], ["3", "3"], ["5", "5"]]}
    for n, path in outs.items():
        lines = open(path).read().splitlines() if os.path.exists(path) else []
        got = [json.loads(x)["argv"] for x in lines]
        sc.eq("%s runs (trigger, step)" % n, sorted(got, key=lambda a: int(a[0])), want[n])
    t.stop()


# ---------------------------------------------------------------------------
# Configuration errors

def test_config_errors(c, tmp):
    cases = [
        (rule_yaml(["StopTraining"]), "run", "line 6, column 9: StopTraining needs a target"),
        (rule_yaml(["Email: bad.email.com"], "  Email: {sendmail: /usr/sbin/sendmail}\n"), "validate",
         "line 6, column 16: Email: 'bad.email.com' is not an e-mail address"),
        (rule_yaml(['SMS: "1234"']), "validate", "line 6, column 14: SMS: '1234' is not an E.164 phone number"),
        (rule_yaml(["pager"], "  hooks:\n    pager: {type: exec, argv: [p, '{nope}']}\n"), "validate",
         "line 9, column 35: unknown placeholder {nope}"),
        (rule_yaml(["StopTraining: bad_training_job_prefix"], "  StopTraining: {pid: 99}\n"), "validate",
         "line 6, column 23: training_job_prefix: expected letters, digits and '-'"),
        (rule_yaml(["StopTraining"], "  StopTraining: {pid: 99, shell: true}\n"), "validate",
         "line 8, column 27: unknown key 'shell' in StopTraining"),
        (rule_yaml(["Email: {too: a@b.cd}"], "  Email: {sendmail: /usr/sbin/sendmail}\n"), "validate",
         "line 6, column 22: Email: unknown key 'too': did you mean 'to'?"),
        (rule_yaml(["pager"], "  hooks:\n    pager: {type: exec, argv: [p], timeout_seconds: 3601}\n"), "validate",
         "timeout_seconds: expected an integer <= 3600, got 3601"),
    ]
    t = Trainer(tmp, "config", sleep=0)
    for i, (text, cmd, want) in enumerate(cases):
        path = os.path.join(t.dir, "bad%d.yaml" % i)
        with open(path, "w") as f:
            f.write(text)
        if cmd == "validate":
            r = smrules(["validate", path], cwd=t.dir)
        else:
            r = smrules(["run", "--trial", t.trial, "--rules", path, "--fresh"], cwd=t.dir)
        sc = c.scope("configuration error %d (%s)" % (i, cmd), r)
        if sc.process(r, want_json=False) and sc.exit_code(r, [2]):
            sc.ok(want in r.err and path in r.err, "message with file and position",
                  "want %r in %s" % (want, lib.short(r.err)))
    path = os.path.join(t.dir, "good.yaml")
    with open(path, "w") as f:
        f.write(rule_yaml(["StopTraining", "Email: a@b.cd"],
                          "  Email: {sendmail: [/usr/sbin/sendmail, -t]}\n"))
    r = smrules(["validate", path], cwd=t.dir)
    sc = c.scope("validate: StopTraining without target is a warning only", r)
    if sc.process(r, want_json=False) and sc.exit_code(r, [0]):
        sc.ok("give --training-pid" in r.err, "warning", lib.short(r.err))
    t.stop()


def main():
    c = lib.Checker("test_actions")
    aiosmtpd = import_aiosmtpd()
    with tempfile.TemporaryDirectory(prefix="smrules-actions-") as tmp:
        test_stop_training(c, tmp)
        test_stop_stale_pid_file(c, tmp)
        test_stop_recorded_identity(c, tmp)
        test_stop_dry_run(c, tmp)
        if aiosmtpd:
            test_email(c, tmp, aiosmtpd)
        else:
            print("SKIP Email over SMTP: aiosmtpd is not importable (Debian: python3-aiosmtpd)")
        test_sendmail(c, tmp)
        test_sns_sigv4(c, tmp)
        test_sns_moto(c, tmp)
        test_webhook(c, tmp)
        test_exec_hook_injection(c, tmp, aiosmtpd)
        test_exec_timeout(c, tmp)
        test_restart(c, tmp)
        test_repeat(c, tmp)
        test_config_errors(c, tmp)
    c.finish()


if __name__ == "__main__":
    main()
