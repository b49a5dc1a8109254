#!/usr/bin/env python3
"""Configuration mistakes a new user makes get a message that says what
was meant (docs/rules-yaml.md): a rule name in another case or in
snake_case, a misspelt top-level key, a parameter written at the rule's
level instead of under `parameters:`, and a tab in the indentation.  Each
message names the line and column.  A correct file is the benign
control."""

import os
import tempfile

import lib

CASES = [
    ("rule name in camelCase", "rules:\n  - rule: deadRelu\n",
     ["line 2", "did you mean 'DeadRelu'?"]),
    ("rule name in snake_case", "rules:\n  - rule: loss_not_decreasing\n",
     ["line 2", "did you mean 'LossNotDecreasing'?"]),
    ("a top-level key misspelt", "rule:\n  - rule: DeadRelu\n",
     ["line 1", "did you mean 'rules'?"]),
    ("a parameter at the rule's level",
     "rules:\n  - rule: LossNotDecreasing\n    num_steps: 3\n",
     ["line 3", "unknown key 'num_steps'", "go under 'parameters:'"]),
    ("a misspelt key in a rule", "rules:\n  - rule: LossNotDecreasing\n    paramters: {}\n",
     ["line 3", "did you mean 'parameters'?"]),
    ("a tab in the indentation", "rules:\n\t- rule: DeadRelu\n",
     ["line 2", "a tab: YAML indents with spaces only"]),
]


def main():
    c = lib.Checker("test_config_hints")
    with tempfile.TemporaryDirectory(prefix="smrules-hints-") as tmp:
        for i, (label, text, wants) in enumerate(CASES):
            path = os.path.join(tmp, "case%d.yaml" % i)
            with open(path, "w") as f:
                f.write(text)
            rc, out, err = lib.run(["validate", path])
            sc = c.scope(label)
            sc.eq("exit 2", rc, 2)
            for w in wants:
                sc.ok(w in err, "says " + w, err[-300:])
            sc.ok(err.count("\n") == 1, "in one line", err[-300:])
        path = os.path.join(tmp, "good.yaml")
        with open(path, "w") as f:
            f.write("rules:\n  - rule: DeadRelu\n  - rule: LossNotDecreasing\n"
                    "    parameters: {num_steps: 3}\n")
        rc, out, err = lib.run(["validate", path])
        c.scope("benign control").eq("a correct file validates", rc, 0)
    c.finish()


if __name__ == "__main__":
    main()
