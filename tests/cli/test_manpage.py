#!/usr/bin/env python3
"""The man page smrules(1): `make install` installs it under
share/man/man1 together with the documentation its SEE ALSO names (under
share/doc/smrules of the prefix, which the installed page names), `man -l`
renders it without warnings, and it covers every command: a synopsis line
each, every option each command's --help lists, and the exit statuses."""

COMMANDS = ("run", "validate", "list", "describe", "inspect", "tensor", "monitor", "help")
HELP_OPTION = r"^  (?:-[a-zA-Z](?: [A-Z]+)?, )?(--?[a-zA-Z0-9][a-z0-9-]*)"

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
        p = subprocess.run(["make", "-s", "install", "DESTDIR=" + tmp, "PREFIX=/opt/smr",
                            "BUILD=" + build] + (["SAN=1"] if build == "build-san" else []),
                           cwd=lib.ROOT, capture_output=True, text=True, timeout=600)
        sc = c.scope("make install")
        sc.eq("exit 0", p.returncode, 0)
        page = os.path.join(tmp, "opt/smr/share/man/man1/smrules.1")
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
        for cmd in COMMANDS:
            sc.ok(re.search(r"^\s+smrules %s\b" % cmd, text, re.M), "synopsis of %s" % cmd)
            if cmd == "help":
                continue
            helptext = lib.run([cmd, "--help"])[1]
            opts = sorted(set(re.findall(HELP_OPTION, helptext, re.M)) - {"--"})
            sc.ok(len(opts) >= 1, "%s --help lists options" % cmd)
            for opt in opts:
                sc.ok(re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(opt), text),
                      "documents %s %s" % (cmd, opt))
        for code in ("128+N", "127", "124", "5", "4", "3", "2", "1", "0"):
            sc.ok(re.search(r"^\s+%s$" % re.escape(code), text, re.M) or
                  re.search(r"\b%s\b" % re.escape(code), text.split("EXIT STATUS")[-1]),
                  "exit status %s" % code)
        # SEE ALSO names installed documents, at the installed place
        see = text.split("SEE ALSO")[-1]
        sc = c.scope("make install: docs")
        sc.ok("/opt/smr/share/doc/smrules/" in see, "the page names the installed folder",
              see[:300])
        joined = re.sub(r"[\u2010-]\n\s*", "", see)  # words man hyphenated at a line end
        named = re.findall(r"([a-z][a-z-]*\.md)", joined.replace("\n", " "))
        sc.ok(len(named) >= 5, "SEE ALSO names documents", " ".join(named))
        docdir = os.path.join(tmp, "opt/smr/share/doc/smrules")
        for doc in named:
            sc.ok(os.path.isfile(os.path.join(docdir, doc)), "installs %s" % doc)
        sc.ok(os.path.isfile(os.path.join(docdir, "rules", "ExplodingTensor.md")),
              "installs the rule pages")
    c.finish()


if __name__ == "__main__":
    main()
