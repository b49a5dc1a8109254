#!/usr/bin/env python3
"""The build runs every generator once: `make -n -j2 all unit`
into an empty build folder lists protoc-c and tools/embed.sh exactly once
each.  A rule with two explicit targets and no grouping runs its recipe
once per target, twice at once under -j (protoc-c did, writing the same
files side by side).  Nothing is built: make only prints what it would do.
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

GENERATORS = ("protoc-c", "sh tools/embed.sh")


def main():
    c = lib.Checker("test_build_once")
    if not shutil.which("make"):
        print("SKIP: no make")
        c.finish()
    with tempfile.TemporaryDirectory(prefix="smrules-build-") as tmp:
        build = os.path.join(tmp, "build")
        p = subprocess.run(["make", "-n", "-j2", "BUILD=" + build, "all", "unit"], cwd=lib.ROOT,
                           capture_output=True, text=True, timeout=lib.TIMEOUT)
        c.ok(p.returncode == 0, "make -n succeeds", p.stderr[-400:])
        lines = p.stdout.splitlines()
        for g in GENERATORS:
            n = sum(1 for ln in lines if ln.lstrip().startswith(g))
            c.ok(n == 1, "%s runs once" % g, "%d times" % n)
        c.ok(not os.path.exists(build), "make -n wrote nothing")
    c.finish()


if __name__ == "__main__":
    main()
