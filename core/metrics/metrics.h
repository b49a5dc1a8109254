/* metrics.h - a run's state for Prometheus (docs/metrics.md): the text
 * exposition format served on GET /metrics by a listener thread
 * (--metrics-listen HOST:PORT) and written atomically to a file at the end
 * (--metrics-file PATH, for node_exporter's textfile collector).
 *
 * The evaluating thread publishes a snapshot (smr_metrics_publish, between
 * passes); the listener only copies the last snapshot's text under a short
 * lock, so a scrape never waits for evaluation and evaluation never waits
 * for a client. */
#ifndef SMR_METRICS_H
#define SMR_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "action/action.h"
#include "base/common.h"
#include "run/runner.h"
#include "trial/trial.h"

typedef struct smr_metrics_opts {
  const char *listen; /* HOST:PORT ("" host: loopback); NULL: no listener */
  const char *file;   /* written at smr_metrics_write_file; NULL: none */
  const char *job;    /* the `job` label */
  bool announce;      /* print "metrics: http://ADDR/metrics" on stderr */
} smr_metrics_opts;

/* The listener's limits (docs/metrics.md "Limits"). */
enum {
  SMR_METRICS_MAX_REQUEST = 8192, /* request line and headers, bytes */
  SMR_METRICS_MAX_CLIENTS = 16,   /* connections served at once */
  SMR_METRICS_CLIENT_MS = 5000,   /* a connection's whole life */
  SMR_METRICS_MAX_SERIES = 1000,  /* label sets per metric family */
  SMR_METRICS_MAX_WORKERS = 256   /* workers with a series of their own */
};

typedef struct smr_metrics smr_metrics;

/* Bind the listener (when o->listen) and start its thread.  A bad address
 * or a port in use is SMR_ERR_USAGE naming the address. */
int smr_metrics_start(const smr_metrics_opts *o, smr_metrics **out,
                      smr_error *err);
/* Render a snapshot of the rules, the trial's steps and the actions (any
 * may be NULL) and make it the one scrapes see.  From the evaluating
 * thread, between passes. */
void smr_metrics_publish(smr_metrics *m, smr_runner *r, smr_trial *t,
                         smr_actions *acts);
/* The training process: running, or exited with `code` (128+N: killed by
 * signal N); none at all unless called. */
void smr_metrics_training(smr_metrics *m, bool running, int code);
/* The text a scrape gets now (allocated). */
char *smr_metrics_text(smr_metrics *m);
/* Write the text to o->file atomically (a temporary file beside it,
 * renamed over it); SMR_OK when there is no file to write. */
int smr_metrics_write_file(smr_metrics *m, smr_error *err);
/* Stop the listener (open connections are closed) and free. */
void smr_metrics_free(smr_metrics *m);

#endif
