/* metrics_int.h - private to core/metrics/: the state the evaluating
 * thread publishes and the listener thread reads (metrics.c), and the
 * listener (metrics_http.c). */
#ifndef SMR_METRICS_INT_H
#define SMR_METRICS_INT_H

#include <pthread.h>

#include "metrics/metrics.h"

/* Why the listener refused or cut a connection (smrules_metrics_refused_total).
 */
enum {
  SMR_MREF_TOO_LARGE, /* request line and headers over the limit: 431 */
  SMR_MREF_TIMEOUT,   /* not done within the connection's time: cut */
  SMR_MREF_BUSY,      /* too many connections at once: 503 */
  SMR_MREF_METHOD,    /* not GET (or HEAD): 405 */
  SMR_MREF_PATH,      /* not /metrics: 404 */
  SMR_MREF_BAD,       /* not an HTTP request: 400 */
  SMR_MREF_N
};
extern const char *const smr_metrics_refusal_names[SMR_MREF_N];

struct smr_metrics {
  char *job, *file;
  pthread_mutex_t mu; /* everything below */
  char *snap;         /* the last published text (without the live lines) */
  double started;     /* wall clock when created */
  int64_t steps_seen; /* global steps seen at the last publish */
  double last_step;   /* wall clock when steps_seen last grew (0: never) */
  double first_step;  /* ... when steps were first seen, and how many */
  int64_t first_steps;
  double rate;
  bool have_training, running;
  int code;
  uint64_t scrapes, refused[SMR_MREF_N];
  /* the listener (metrics_http.c) */
  int lfd, wake[2];
  bool thread;
  pthread_t th;
};

/* Bind and start the listener thread on m->lfd. */
int smr_metrics_listen(smr_metrics *m, const char *addr, bool announce,
                       smr_error *err);
void smr_metrics_listen_stop(smr_metrics *m);
/* The whole HTTP answer (allocated) to a request whose line and headers
 * are in[0..len) (not NUL-terminated, untrusted): 200 with the text for
 * GET/HEAD /metrics, else 400, 404 or 405, each counted. */
char *smr_metrics_answer(smr_metrics *m, const char *in, size_t len);

#endif
