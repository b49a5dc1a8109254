/* version.h - the smrules release, written in this one place.  The binary
 * (`smrules --version`, the metrics' version label), smrules.pc (made from
 * smrules.pc.in by the Makefile) and the Python package take it from here;
 * the man page, the docs and the examples that quote it are checked
 * against it by tests/cli/test_version.py.  Included by smrules.h. */
#ifndef SMRULES_VERSION_H
#define SMRULES_VERSION_H

#define SMRULES_VERSION "0.1.0"

#endif
