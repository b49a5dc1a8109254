#!/usr/bin/env python3
"""The shape of the source tree, as docs/ARCHITECTURE.md states it: core/
has no source file at its top; every `#include "folder/..."` in core/
points to the same folder or one earlier in the documented order (no
wrong-way dependency, hence no cycle between folders); no file includes a
.c file; and the built-in plugins include no core header.  (That no test
reads outside the repository is test_docs_cited's.)"""

import os
import re

import lib

CORE = os.path.join(lib.ROOT, "core")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def documented_order():
    """The folder order: the line `a < b < ...` of docs/ARCHITECTURE.md."""
    with open(os.path.join(lib.ROOT, "docs", "ARCHITECTURE.md")) as f:
        for line in f:
            m = re.fullmatch(r"\s*`([a-z]+(?: < [a-z]+)+)`\s*", line)
            if m:
                return m.group(1).split(" < ")
    return []


def sources(top, exts=(".c", ".h")):
    for dirpath, _, files in os.walk(top):
        for name in files:
            if name.endswith(exts):
                yield os.path.join(dirpath, name)


def includes(path):
    with open(path, errors="replace") as f:
        return INCLUDE.findall(f.read())


def rel(path):
    return os.path.relpath(path, lib.ROOT)


def check_core(c, order):
    top = [n for n in os.listdir(CORE)
           if os.path.isfile(os.path.join(CORE, n)) and n.endswith((".c", ".h"))]
    c.ok(not top, "no source file at the top of core/", " ".join(top))
    folders = sorted(d for d in os.listdir(CORE)
                     if os.path.isdir(os.path.join(CORE, d)) and d != "include")
    c.ok(len(folders) >= 6, "core/ has at least six subsystem folders",
         " ".join(folders))
    missing = [d for d in folders if d not in order]
    c.ok(not missing, "every core/ folder is in the documented order",
         " ".join(missing))
    wrong = []
    for path in sources(CORE):
        own = os.path.relpath(path, CORE).split(os.sep)[0]
        if own not in order:
            continue
        for inc in includes(path):
            target = inc.split("/")[0]
            if "/" not in inc or target == own or target not in order:
                continue
            if order.index(target) > order.index(own):
                wrong.append("%s includes %s" % (rel(path), inc))
    c.ok(not wrong, "no include points up the folder order", "; ".join(wrong))


def check_no_c_includes(c):
    bad = []
    for top in ("core", "plugins", "tests", "bench", "examples"):
        for path in sources(os.path.join(lib.ROOT, top)):
            bad += ["%s includes %s" % (rel(path), i)
                    for i in includes(path) if i.endswith(".c")]
    c.ok(not bad, "no file includes a .c file", "; ".join(bad))


def check_plugins(c, order):
    bad = []
    for path in sources(os.path.join(lib.ROOT, "plugins")):
        bad += ["%s includes %s" % (rel(path), i) for i in includes(path)
                if i.split("/")[0] in order]
    c.ok(not bad, "plugins include no core header (the public SDK only)",
         "; ".join(bad))


def main():
    c = lib.Checker("test_layout")
    order = documented_order()
    c.ok(len(order) >= 6, "docs/ARCHITECTURE.md states the folder order",
         repr(order))
    check_core(c, order)
    check_no_c_includes(c)
    check_plugins(c, order)
    c.finish()


if __name__ == "__main__":
    main()
