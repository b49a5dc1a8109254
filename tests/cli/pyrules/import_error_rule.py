# Fails when imported: smrules reports the rule's Error with the traceback.
from smdebug.rules.rule import Rule
import module_that_does_not_exist  # noqa: F401


class NeverLoads(Rule):
    def invoke_at_step(self, step):
        return False
