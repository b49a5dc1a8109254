#!/usr/bin/env python3
"""The man page smrules(1): `make install` installs it under
share/man/man1, `man -l` renders it without warnings, and it documents
every option `smrules run --help` lists and the exit statuses."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def main():
    c = lib.Checker("test_manpage")
    src = os.path.join(lib.ROOT, "man", "smrules.1")
    with tempfile.TemporaryDirectory(prefix="smrules-man-") as tmp:
        build = os.path.basename(os.path.dirname(lib.SMRULES)) or "build"
        p = subprocess.run(["make", "-s", "install", "DESTDIR=" + tmp, "PREFIX=/usr/local",
                            "BUILD=" + build] + (["SAN=1"] if build == "build-san" else []),
                           cwd=lib.ROOT, capture_output=True, text=True, timeout=600)
        sc = c.scope("make install")
        sc.eq("exit 0", p.returncode, 0)
        page = os.path.join(tmp, "usr/local/share/man/man1/smrules.1")
        sc.ok(os.path.isfile(page), "installs share/man/man1/smrules.1", p.stderr[-300:])
        if not os.path.isfile(page):
            page = src
        if shutil.which("man") is None:
            c.ok(False, "man is installed (man-db)")
            c.finish()
        env = dict(os.environ, MANWIDTH="100", MAN_KEEP_FORMATTING="0", LC_ALL="C.UTF-8")
        r = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True,
                           env=env, timeout=60)
        sc = c.scope("man -l")
        sc.eq("exit 0", r.returncode, 0)
        sc.eq("no warnings", r.stderr.strip(), "")
        text = re.sub(r".\x08", "", r.stdout)
        for head in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS FOR RUN", "EXIT STATUS",
                     "ENVIRONMENT", "FILES", "SEE ALSO"):
            sc.ok(re.search(r"^%s$" % head, text, re.M), "section %s" % head)
        sc.ok("smrules run --trial DIR" in text and "-- COMMAND" in text, "launcher synopsis")
        helptext = lib.run(["run", "--help"])[1]
        for opt in sorted(set(re.findall(r"^\s+(--[a-z0-9-]+)", helptext, re.M))):
            if opt == "--":
                continue
            sc.ok(opt in text, "documents %s" % opt)
        for code in ("128+N", "127"):
            sc.ok(code in text, "exit status %s" % code)
    c.finish()


if __name__ == "__main__":
    main()
