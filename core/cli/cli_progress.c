/* cli_progress.c - the redrawn progress line of offline runs. */
#include "cli/cli_progress.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"

#define REDRAW_MS 250

struct smr_cli_progress {
  smr_runner *r;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  double start;
};

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void draw(smr_cli_progress *p) {
  int64_t done, total;
  smr_runner_progress(p->r, &done, &total);
  if (total == 0) /* not counted yet, or nothing to walk */
    return;
  double el = mono() - p->start;
  double rate = el > 0 ? (double)done / el : 0;
  fprintf(stderr, "\r\033[Kevaluating: %lld/%lld steps", (long long)done,
          (long long)total);
  if (total > 0)
    fprintf(stderr, " (%.0f%%)", 100.0 * (double)done / (double)total);
  if (rate > 0) {
    fprintf(stderr, ", %.0f steps/s", rate);
    if (done < total)
      fprintf(stderr, ", ETA %.0f s", (double)(total - done) / rate);
  }
  fflush(stderr);
}

static void *loop(void *arg) {
  smr_cli_progress *p = arg;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    draw(p);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += REDRAW_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&p->cv, &p->mu, &until);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

smr_cli_progress *smr_cli_progress_start(smr_runner *r) {
  if (!isatty(STDERR_FILENO))
    return NULL;
  smr_cli_progress *p = smr_xcalloc(1, sizeof *p);
  p->r = r;
  p->start = mono();
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if (pthread_create(&p->thread, NULL, loop, p) != 0) {
    free(p);
    return NULL;
  }
  return p;
}

void smr_cli_progress_stop(smr_cli_progress *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  pthread_join(p->thread, NULL);
  draw(p);
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p);
}
