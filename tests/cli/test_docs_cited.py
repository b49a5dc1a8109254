#!/usr/bin/env python3
"""The repository explains and tests itself.

1. Every document a source file, test, benchmark, example or document cites
   as `docs/<path>.md` (optionally `#<heading>`) exists, and the heading
   exists in it (GitHub's anchor for a heading: lower-cased, punctuation
   dropped, spaces as `-`).
2. Every relative Markdown link in README.md and docs/ (`[text](page.md#x)`)
   leads to an existing file, and to an existing heading when it names one.
3. No test and no document reads or cites anything outside the repository
   (a folder beside it, such as `../shared`), nor the issue tracker
   ("issue 7": the repository must explain itself).
4. Every path of the repository a source file, test, benchmark, example or
   document cites (`core/run/schedule.c`, `tests/cli/lib.py`,
   `plugins/kit/spike.c` …) exists: a file that moved is not left cited
   where it was.  Include-style paths (`trial/trial.h`) resolve against
   core/ and core/include/ as the compiler does.

Needs no binary: it reads the tree only.  Ends with the usual tally line.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CITING = ("core", "plugins", "lua", "rules", "tests", "bench", "examples", "docs")
SELF = os.path.relpath(os.path.abspath(__file__), ROOT)

# docs/<path>.md[#anchor], not part of a longer path (e.g. "../docs/x.md" still counts,
# "mydocs/x.md" does not)
CITATION = re.compile(r"(?<![\w-])docs/((?:[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]+))?")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
# a path outside the repository: "../shared", or built with
# os.path.join(…, "shared", "fixtures", …)
# a section of a specification that is not in the repository: "rules.md §2.1",
# "formats.md F§5", a bare "F§12" (every citation names a docs/ page instead)
FOREIGN = re.compile(r"(?<![\w/.-])(?:rules|formats)\.md (?:F?§|R\d|Decision)|(?<!\w)F§\d")
OUTSIDE = re.compile(r"\.\./shared|[\"']shared[\"']\s*,\s*[\"']fixtures[\"']")
TRACKER = re.compile(r"(?<![\w-])[Ii]ssue \d+\b")
# a path of the repository: a top folder, then a file with a source or
# document extension (not part of a longer path: "smrules/trials.py" is not
# "rules/trials.py")
REPO_PATH = re.compile(r"(?<![\w/.$-])((?:core|plugins|tests|docs|bench|lua|rules|schemas|"
                       r"examples|python|man|tools)/[\w./-]*[\w-]\."
                       r"(?:c|h|md|py|lua|json|yaml|sh|proto|1))\b")
# paths that name something inside a trial or profiler folder, not the
# repository (TensorBoard's profile plugin lays out plugins/profile/<run>/)
NOT_REPO = re.compile(r"^plugins/profile/")


class Tally:
    def __init__(self, name):
        self.name, self.passed, self.failed = name, 0, 0

    def ok(self, cond, what, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL %s%s" % (what, (": " + detail) if detail else ""), flush=True)
        return cond

    def finish(self):
        print("%s: %d passed, %d failed" % (self.name, self.passed, self.failed), flush=True)
        sys.exit(1 if self.failed else 0)


def text_files(folders):
    """(relative path, text) of every UTF-8 text file under the folders."""
    for top in folders:
        base = os.path.join(ROOT, top)
        if os.path.isfile(base):
            walk = [(ROOT, [], [top])]
        else:
            walk = os.walk(base)
        for d, dirs, files in walk:
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for f in sorted(files):
                path = os.path.join(d, f)
                if os.path.islink(path):
                    continue
                try:
                    with open(path, "rb") as fh:
                        data = fh.read(4 << 20)
                except OSError:
                    continue
                if b"\0" in data:
                    continue
                try:
                    yield os.path.relpath(path, ROOT), data.decode("utf-8")
                except UnicodeDecodeError:
                    continue


def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


_anchors = {}


def anchors(md_path):
    """The anchors of the headings of a Markdown file (outside code blocks)."""
    if md_path not in _anchors:
        seen, out, fence = {}, set(), False
        with open(md_path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    fence = not fence
                    continue
                m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
                if not m:
                    continue
                a = slug(m.group(1))
                n = seen.get(a, 0)
                seen[a] = n + 1
                out.add(a if n == 0 else "%s-%d" % (a, n))
        _anchors[md_path] = out
    return _anchors[md_path]


def check_target(t, where, path, anchor):
    if not t.ok(os.path.isfile(path), where, "%s does not exist" % os.path.relpath(path, ROOT)):
        return
    if anchor:
        t.ok(anchor in anchors(path), where,
             "%s has no heading with anchor #%s" % (os.path.relpath(path, ROOT), anchor))


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def main():
    t = Tally("test_docs_cited")
    cited = set()

    # 1. docs/<path>.md citations everywhere
    for rel, text in text_files(CITING + ("README.md",)):
        if rel == SELF:
            continue
        for m in CITATION.finditer(text):
            target = os.path.join(ROOT, "docs", m.group(1))
            cited.add(os.path.relpath(target, ROOT))
            check_target(t, "%s:%d cites docs/%s%s" % (rel, line_of(text, m.start()), m.group(1),
                                                      "#" + m.group(2) if m.group(2) else ""),
                         target, m.group(2))

    # 2. relative Markdown links in README.md and docs/
    for rel, text in text_files(("README.md", "docs")):
        if not rel.endswith(".md"):
            continue
        fence = False
        for lineno, line in enumerate(text.split("\n"), 1):
            if line.lstrip().startswith("```"):
                fence = not fence
            if fence:
                continue
            for m in MD_LINK.finditer(line):
                link = m.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", link):   # http:, mailto:, …
                    continue
                page, _, anchor = link.partition("#")
                if page and not page.endswith(".md"):
                    # a folder or another kind of file: it must exist
                    t.ok(os.path.exists(os.path.join(ROOT, os.path.dirname(rel), page)),
                         "%s:%d links %s" % (rel, lineno, link), "no such file or folder")
                    continue
                target = os.path.join(ROOT, os.path.dirname(rel), page) if page \
                    else os.path.join(ROOT, rel)
                check_target(t, "%s:%d links %s" % (rel, lineno, link), target, anchor)

    # 3. nothing reaches outside the repository
    for rel, text in text_files(("tests", "docs", "README.md")):
        if rel == SELF:
            continue
        m = OUTSIDE.search(text)
        t.ok(m is None, "%s:%d" % (rel, line_of(text, m.start()) if m else 0),
             "refers to %r outside the repository" % (m.group(0) if m else ""))

    # 4. no citation of a document that is not in the repository
    for rel, text in text_files(CITING):
        if rel == SELF or rel.endswith((".tfevents", ".json", ".gz")):
            continue
        m = FOREIGN.search(text)
        t.ok(m is None, "%s:%d cites only the repository's own documents" %
             (rel, line_of(text, m.start()) if m else 0),
             "cites %r, a document not in the repository" % (m.group(0) if m else ""))

    # 3b. nor the issue tracker
    for rel, text in text_files(CITING + ("README.md", "python")):
        if rel == SELF or rel.endswith((".tfevents", ".json", ".gz")):
            continue
        m = TRACKER.search(text)
        t.ok(m is None, "%s:%d cites only what the repository holds" %
             (rel, line_of(text, m.start()) if m else 0),
             "cites %r of the issue tracker" % (m.group(0) if m else ""))

    # 5. every repository path cited exists
    paths = 0
    for rel, text in text_files(CITING + ("README.md", "python", "Makefile")):
        if rel == SELF or rel.startswith("tests/fixtures/") or \
                rel.endswith((".tfevents", ".json", ".gz")):
            continue
        here = os.path.dirname(rel)
        for m in REPO_PATH.finditer(text):
            cited_path = m.group(1)
            if NOT_REPO.match(cited_path):
                continue
            paths += 1
            where = [cited_path, os.path.join("core", cited_path),
                     os.path.join("core", "include", cited_path), os.path.join(here, cited_path)]
            t.ok(any(os.path.exists(os.path.join(ROOT, w)) for w in where),
                 "%s:%d cites %s" % (rel, line_of(text, m.start()), cited_path),
                 "no such file in the repository (moved or renamed?)")
    t.ok(paths >= 100, "repository paths found", "only %d cited" % paths)

    # the check must have had something to check
    t.ok(len(cited) >= 5, "citations found", "only %d distinct documents cited" % len(cited))
    t.finish()


if __name__ == "__main__":
    main()
