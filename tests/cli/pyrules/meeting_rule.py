# A rule whose import waits for another rule's import (test_python_rules'
# test_loads_at_once): it leaves <MEET_DIR>/<MEET_ME> and waits for
# <MEET_DIR>/<MEET_OTHER>, at most SMRULES_TEST_TIMEOUT seconds (a hang
# guard), then writes whether it met the other rule and its pid.  Two
# such rules load only if smrules loads them at once.
import os
import time

from smdebug.rules.rule import Rule

_dir = os.environ["MEET_DIR"]
_stem = os.path.splitext(os.path.basename(__file__))[0]
_me, _other = ("a", "b") if _stem.endswith("_a") else ("b", "a")
open(os.path.join(_dir, _me), "w").close()
_guard = time.monotonic() + float(os.environ.get("SMRULES_TEST_TIMEOUT", "60"))
while not os.path.exists(os.path.join(_dir, _other)) and time.monotonic() < _guard:
    time.sleep(0.01)
with open(os.path.join(_dir, _me + ".met"), "w") as f:
    f.write("%s %d" % ("yes" if os.path.exists(os.path.join(_dir, _other)) else "no", os.getpid()))


class Meeting(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)

    def invoke_at_step(self, step):
        return False
