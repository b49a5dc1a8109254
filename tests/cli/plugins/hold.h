/* hold.h - the test rules' wait for a file (gate.c, slow_clock.c): a line
 * on stderr says what is held (the test waits for it), then the rule
 * returns only once the file `release` exists, checked every millisecond,
 * so that the hold ends on an event the test makes, never after a
 * duration.  Without `release` (NULL) it holds until the process is
 * killed.  A header of static functions, since each plugin is built from
 * its one .c file. */
#ifndef TEST_PLUGIN_HOLD_H
#define TEST_PLUGIN_HOLD_H

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static inline void hold_until(const char *said, const char *release) {
  fprintf(stderr, "%s\n", said);
  fflush(stderr);
  const struct timespec ms = {0, 1000000};
  while (!release || access(release, F_OK) != 0)
    nanosleep(&ms, NULL);
}

#endif
