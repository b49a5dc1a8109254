/* workers.h - helper threads for the data-parallel loops inside one call:
 * a rule asks for the same statistic of eight tensors at once, and the
 * eight records are read and reduced on both cores.  The calling thread
 * always takes part, so a loop finishes even when every helper is busy
 * with another rule's loop; helpers only add speed. */
#ifndef SMR_WORKERS_H
#define SMR_WORKERS_H

#include <stddef.h>

/* Sets how many helper threads loops may use from now on (0: none, every
 * loop runs on its caller).  The threads start with the first loop that
 * can use them.  Call with no loop running (the runner does, per run). */
void smr_workers_set(int helpers);

/* Runs fn(arg, i) for every i in [0, n), each exactly once, on the
 * calling thread and idle helpers; returns when all have returned.  fn
 * must be safe to run from several threads at once on different i. */
void smr_parallel_for(size_t n, void (*fn)(void *arg, size_t i), void *arg);

#endif
