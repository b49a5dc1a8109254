#!/usr/bin/env python3
"""The release version is written once, in core/include/smrules/version.h
(SMRULES_VERSION); everything else takes it from there or quotes it, and
this test fails the moment a quote drifts:

- `smrules --version` prints `smrules <SMRULES_VERSION>` (the binary
  compiles the macro in);
- the Makefile reads the same (`make print-version`), and smrules.pc.in
  carries @VERSION@ for it to fill, never a number of its own (the
  installed smrules.pc's Version is checked by test_plugin_sdk.py);
- the Python package: setup.py reads version.h, smrules.__version__ quotes
  it;
- every quote of a release in the man page, the docs, the README and the
  examples ("smrules 1.2.3", an image tag "smrules:1.2.3", the man page's
  .TH) is this one, and the ones known to exist are found.
"""

import os
import re
import subprocess

import lib

VERSION_H = os.path.join(lib.ROOT, "core", "include", "smrules", "version.h")
# A release quoted in prose or an image name: "smrules 0.1.0", "smrules:0.1.0".
QUOTE = re.compile(r"\bsmrules[ :]v?(\d+\.\d+\.\d+\S*?)(?=[\s\"'`)]|$)")
# Places that quote it today: each must still be found.
KNOWN = ("man/smrules.1", "docs/cli.md", "docs/kubernetes.md",
         "examples/kubernetes/posthoc-job.yaml", "examples/kubernetes/training-pod.yaml")


def release():
    with open(VERSION_H) as f:
        m = re.search(r'^#define SMRULES_VERSION "([^"]+)"$', f.read(), re.M)
    return m.group(1) if m else None


def quoting_files():
    """The man page, README, docs/ and examples/ (text files)."""
    out = [os.path.join(lib.ROOT, "README.md")]
    for top in ("man", "docs", "examples"):
        for d, _, files in os.walk(os.path.join(lib.ROOT, top)):
            out += [os.path.join(d, f) for f in files
                    if f.endswith((".md", ".1", ".yaml", ".yml", ".txt", ".c", ".py", ".lua"))]
    return sorted(out)


def check_quotes(c, version):
    found = {}
    for path in quoting_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                for m in QUOTE.finditer(line):
                    found.setdefault(lib.rel(path), []).append((n, m.group(1)))
    for path, quotes in sorted(found.items()):
        for n, v in quotes:
            c.ok(v == version, "%s:%d quotes smrules %s" % (path, n, version), "it says %s" % v)
    for path in KNOWN:
        c.ok(path in found, "%s quotes the release" % path, "no 'smrules X.Y.Z' found")
    c.at_least(len(KNOWN), sum(len(q) for q in found.values()), "quotes of the release")


def main():
    c = lib.Checker("version")
    version = release()
    if not c.ok(version is not None, "SMRULES_VERSION in core/include/smrules/version.h"):
        c.finish()
    rc, out, err = lib.run(["--version"])
    c.ok(rc == 0 and out == "smrules %s\n" % version, "smrules --version prints smrules %s"
         % version, repr(out + err))

    r = subprocess.run(["make", "-s", "--no-print-directory", "print-version"], cwd=lib.ROOT,
                       capture_output=True, text=True, timeout=120)
    c.ok(r.stdout.strip() == version, "the Makefile reads %s" % version, r.stdout + r.stderr)
    with open(os.path.join(lib.ROOT, "smrules.pc.in")) as f:
        pc = f.read()
    c.ok("\nVersion: @VERSION@\n" in pc, "smrules.pc.in's Version is filled in by the Makefile")

    with open(os.path.join(lib.ROOT, "python", "setup.py")) as f:
        setup = f.read()
    c.ok("version=release()" in setup and not re.search(r'version="\d', setup),
         "python/setup.py takes the version from version.h")
    with open(os.path.join(lib.ROOT, "python", "smrules", "__init__.py")) as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    c.ok(m and m.group(1) == version, "smrules.__version__ is %s" % version,
         m.group(1) if m else "no __version__")

    check_quotes(c, version)
    c.finish()


if __name__ == "__main__":
    main()
