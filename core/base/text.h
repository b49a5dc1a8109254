/* text.h - bytes from untrusted places (names in a trial, a Lua rule's
 * messages) made safe to show: valid UTF-8 recognised, and what a
 * terminal would take as a command escaped. */
#ifndef SMR_TEXT_H
#define SMR_TEXT_H

#include <stddef.h>

#include "base/utf8.h"

/* A copy of `s` fit for a terminal or a log line (malloc'ed): control
 * characters (C0 but tab, DEL, and C1 such as U+009B, the one-byte CSI),
 * newlines included, and bytes that are not valid UTF-8 are written as
 * \xNN; everything else is kept (a backslash too: messages quote
 * regular expressions).  So a name in a
 * trial cannot move the cursor, retitle the window, clear the screen or
 * forge a line of smrules' own output. */
char *smr_term_safe(const char *s);

#endif
