# Rules that fail, each in its own way; smrules reports each as that rule's
# Error with the traceback while the other rules of the run go on.
import os
import signal
import time

from smdebug.rules.rule import Rule


class FailsInInit(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)
        raise ValueError("bad configuration in __init__")

    def invoke_at_step(self, step):
        return False


class FailsAtStep(Rule):
    def __init__(self, base_trial, at="4"):
        super().__init__(base_trial)
        self.at = int(at)

    def invoke_at_step(self, step):
        if step >= self.at:
            return helper_that_divides(step)
        return False


def helper_that_divides(step):
    return step / 0


class CrashesInterpreter(Rule):
    def invoke_at_step(self, step):
        print("about to crash at step", step)
        os.kill(os.getpid(), signal.SIGSEGV)


class Hangs(Rule):
    def invoke_at_step(self, step):
        while True:  # never answers: smrules' hang guard stops it
            time.sleep(3600)


class Prints(Rule):
    def __init__(self, base_trial, word):
        super().__init__(base_trial)
        assert isinstance(word, str), "SageMaker passes parameters as strings"
        self.word = word

    def invoke_at_step(self, step):
        print(f"{self.word} at step {step}")
        return False
