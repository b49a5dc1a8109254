#!/usr/bin/env python3
"""--help and docs/cli.md cannot drift apart: for every
command, the options its --help lists are exactly the options in the
option tables of its section of docs/cli.md (inspect and tensor: with the
table of options they share), and docs/cli.md's exit-status table and
README.md's exit-status sentence name every code run --help names.

  help     an option line of --help starts with two spaces and the option
           (`  -j N, --jobs N`, `  --trial DIR`); -h/--help and the `--`
           of `run -- COMMAND` are left out
  docs     a table row of a command's section (`## \\`smrules CMD\\``, up to
           the next `## `) whose first cell names options in backquotes
"""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402

COMMANDS = ("run", "validate", "list", "describe", "inspect", "tensor", "monitor")
SHARED = {"inspect", "tensor"}  # plus "Options common to `inspect` and `tensor`"
HELP_OPTION = re.compile(r"^  (?:(-[a-zA-Z])(?: [A-Z]+)?, )?(--?[a-zA-Z0-9][a-z0-9-]*)", re.M)
DOC_OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][a-z0-9-]*)")
IGNORED = {"--", "-h", "--help"}


def help_options(cmd):
    rc, out, err = lib.run([cmd, "--help"])
    opts = set()
    for short, long_ in HELP_OPTION.findall(out):
        opts.update(o for o in (short, long_) if o)
    return rc, opts - IGNORED


def sections(doc):
    """{heading: text} of the level-2 sections."""
    parts = re.split(r"^## (.+)$", doc, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def table_options(text):
    opts = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        for code in re.findall(r"`([^`]+)`", first):
            opts.update(DOC_OPTION.findall(code))
    return opts - IGNORED


def main():
    c = lib.Checker("test_help_docs")
    with open(os.path.join(lib.ROOT, "docs", "cli.md")) as f:
        doc = f.read()
    secs = sections(doc)
    shared = table_options(secs.get("Options common to `inspect` and `tensor`", ""))
    c.ok(len(shared) >= 6, "docs: the shared options table", " ".join(sorted(shared)))
    for cmd in COMMANDS:
        sc = c.scope(cmd)
        rc, in_help = help_options(cmd)
        sc.eq("--help exits 0", rc, 0)
        sc.ok(in_help, "--help lists options")
        head = "`smrules %s`" % cmd
        if not sc.ok(head in secs, "docs/cli.md has a section %s" % head):
            continue
        in_doc = table_options(secs[head]) | (shared if cmd in SHARED else set())
        sc.eq("options in --help but not in docs/cli.md", sorted(in_help - in_doc), [])
        sc.eq("options in docs/cli.md but not in --help", sorted(in_doc - in_help), [])

    # exit statuses: run --help, the docs' table and the README agree
    out = lib.run(["run", "--help"])[1]
    codes = set(re.findall(r"(?<![\w+])(\d+|128\+N)(?=[ ;,])", out.split("exit status")[-1]))
    c.ok({"0", "1", "2", "3", "4", "5", "124", "127", "128+N"} <= codes,
         "run --help names the exit statuses", " ".join(sorted(codes)))
    table = secs.get("Exit status", "")
    in_table = set(re.findall(r"^\| (\d+|128\+N) \|", table, re.M))
    sc = c.scope("exit status")
    sc.eq("codes missing in docs/cli.md's table", sorted(codes - in_table), [])
    with open(os.path.join(lib.ROOT, "README.md")) as f:
        readme = f.read()
    m = re.search(r"Exit status: (.+?)\n\n", readme, re.S)
    said = set(re.findall(r"(?<![\w+])(\d+|128\+N)(?= )", m.group(1))) if m else set()
    sc.eq("codes missing in README.md", sorted(codes - said), [])
    c.finish()


if __name__ == "__main__":
    main()
