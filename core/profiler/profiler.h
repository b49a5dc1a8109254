/* profiler.h - reading a SageMaker profiler-output directory (see
 * docs/formats.md#profiler-output): system metrics (JSON lines under
 * system/incremental/) and framework trace files (Chrome trace arrays under
 * framework/pevents/, TF profiler trace.json.gz), with the reference reader's
 * file selection for a time range, event filtering, event order and
 * trace-parser state.
 *
 * Memory stays bounded however long the job: a query parses only the files
 * its range selects (range +- the 3-minute buffer), parsed files are kept
 * in an LRU cache with a byte budget, and only the events of one query are
 * materialised at a time.
 *
 * Readers can share the files (smr_profiler_share): the listings, the
 * parsed-file cache, the names seen and the job's state are then kept once
 * for all of them, so each file is read (downloaded, from S3) and parsed
 * once however many rules ask for it, and the cache budget holds for them
 * all.  Each reader keeps its own trace-parser state: the parsers keep
 * state across queries (pid -> phase, base time, open "B" events) exactly
 * like the reference, so two readers given the same queries answer the
 * same, and what one rule asks never changes what another one reads.
 * Readers sharing files may be used from different threads (a lock
 * serialises their calls); one reader belongs to one thread at a time. */
#ifndef SMR_PROFILER_H
#define SMR_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "smrules/smrules.h"
#include "source/source.h"

typedef struct smr_profiler smr_profiler;

typedef struct smr_profiler_opts {
  /* Live: the job has finished only when an end marker (or the rule stop
   * signal) exists, and growing files are re-read.  Offline (default) the
   * job counts as finished (Decision F11). */
  bool live;
  /* Widening of every query range on each side; <= 0: the environment's
   * TIME_BUFFER_MICROSECONDS, else 180 000 000 (3 minutes). */
  int64_t time_buffer_us;
  /* Budget of the parsed-file cache in bytes; 0: 12 MiB.  Files used by a
   * query in progress are never evicted, so a query may exceed it. */
  size_t cache_bytes;
  /* Print warnings (corrupt lines, unreadable files) to stderr, once per
   * file.  Default on through smr_profiler_open's NULL opts. */
  bool quiet;
  /* Once the job has finished, report latest_us as where the data ends
   * (the last system reading, or the end of the newest trace file), so
   * the final, partial window is evaluated too.  Off: SageMaker's rule,
   * latest_us is the newest file's name and the last minute of data is
   * never evaluated (docs/profiler.md, "The final window"). */
  bool final_window;
} smr_profiler_opts;

/* Open `location`, the folder holding system/ and framework/: a local
 * directory or "s3://bucket/prefix" (read through the source interface,
 * source.h).  Fails with SMR_ERR_IO when a local location is not a
 * readable directory, or with the source's error when the first listing
 * fails. */
int smr_profiler_open(const char *location, const smr_profiler_opts *opts,
                      smr_profiler **out, smr_error *err);
/* The same over an open source, which the reader takes over (it is closed
 * with the reader, or at once when opening fails).  A source other than
 * the local one counts as remote: live, it is listed at most once a
 * second. */
int smr_profiler_open_source(smr_source *src, const smr_profiler_opts *opts,
                             smr_profiler **out, smr_error *err);
/* Another reader over the same files (see above), with its own parser
 * state.  The files stay open until their last reader is closed. */
smr_profiler *smr_profiler_share(smr_profiler *p);
void smr_profiler_close(smr_profiler *p);
/* The source's root (an absolute path or "s3://bucket/prefix"); file
 * paths in warnings and the name regexes are root + "/" + relative path. */
const char *smr_profiler_root(const smr_profiler *p);

/* Whether the local directory `dir` looks like a profiler-output folder
 * (has system/ or framework/). */
bool smr_profiler_dir_looks_like(const char *dir);

/* List system/ and framework/ again (new files are added; files never
 * disappear from the list, as in the reference; known files take the
 * listed size and mtime, which live queries compare with the parsed
 * version's).  A failure keeps what is known, with a warning. */
void smr_profiler_refresh(smr_profiler *p);

/* First/latest timestamps, file counts, job state
 * (docs/formats.md#timestamps-and-windows, Decision F13: minimum over the
 * sources that have files). */
void smr_profiler_info(smr_profiler *p, smrules_profiler_info *out);
bool smr_profiler_job_finished(smr_profiler *p);

/* What the invoker does before window [start, end]
 * (docs/formats.md#timestamps-and-windows wait_for_data, without sleeping): 0
 * evaluate, SMR_NO_MORE_DATA the rule is done, SMR_STEP_NOT_YET (live only) the
 * data is not there yet. */
int smr_profiler_window_status(smr_profiler *p, int64_t start_us,
                               int64_t end_us);

/* ------------------------------------------------------------- queries */

/* The events of one query; they reference cached files, which stay
 * pinned until smr_profiler_release. */
typedef struct smr_sys_events {
  smrules_sys_event *v;
  size_t n, cap;
  void **pins;
  size_t npins;
} smr_sys_events;

typedef struct smr_fw_events {
  smrules_fw_event *v;
  size_t n, cap;
  void **pins;
  size_t npins;
} smr_fw_events;

/* System metrics with start <= Timestamp <= end (ns comparison as in the
 * reference), in file order (timestamp, path) then line order.  `out`
 * must be zeroed or released before. */
int smr_profiler_system_events(smr_profiler *p, int64_t start_us,
                               int64_t end_us, smr_sys_events *out,
                               smr_error *err);
/* Framework events overlapping [start, end], parser by parser
 * (pythontimeline, model_timeline, TF profiler, Horovod, SMDataParallel),
 * files in order, events in completion order. */
int smr_profiler_framework_events(smr_profiler *p, int64_t start_us,
                                  int64_t end_us, smr_fw_events *out,
                                  smr_error *err);
void smr_profiler_release_sys(smr_profiler *p, smr_sys_events *ev);
void smr_profiler_release_fw(smr_profiler *p, smr_fw_events *ev);

/* One key of a framework event's args.  Strings are written into
 * `scratch` (appended; pointers valid until scratch is freed or reset). */
int smr_profiler_fw_arg(const smrules_fw_event *e, const char *key,
                        smrules_arg *out, smr_strv *scratch);

/* Names seen in the system metrics parsed so far (SMRULES_NAMES_*), by
 * any reader sharing the files. */
void smr_profiler_names(smr_profiler *p, int what, const char *node,
                        smr_strv *out);

/* ---------------------------------------- parsers (for tests and fuzzing) */

/* One system-metrics line parsed: strings point into `scratch` storage
 * owned by the caller-provided buffer of the same length as the line. */
typedef struct smr_sys_line {
  const char *type, *name, *dimension, *node;
  bool has_name;
  double value, timestamp;
  bool timestamp_is_int;
  int64_t timestamp_ns; /* int(((Timestamp*1000)*1000)*1000), saturated */
} smr_sys_line;

/* Parse one line (without its newline).  Returns 0, or -1 with a message
 * in why[] (what was expected, byte offset in the line). `scratch` must
 * hold at least len + 8 bytes. */
int smr_profiler_parse_sys_line(const char *line, size_t len, char *scratch,
                                smr_sys_line *out, char *why, size_t nwhy);

/* Parse a whole trace file text and replay it through a fresh parser
 * state; calls `fn` for every event produced (any time range).  Returns
 * the number of events, or -1 when the text is not valid JSON (the file
 * is then ignored, as the reference does). */
typedef void (*smr_fw_event_fn)(void *arg, const smrules_fw_event *e);
int smr_profiler_parse_trace(const char *text, size_t len, const char *node_id,
                             int file_kind, smr_fw_event_fn fn, void *arg,
                             char *why, size_t nwhy);

/* A TF profiler trace.json.gz held in memory, inflated as gzread would
 * read the file: concatenated gzip members are joined, bytes after a
 * member that do not start another one are ignored, data without the
 * gzip magic is taken as it is, and a stream cut short gives what it
 * holds.  At most `max` decompressed bytes.  On success *out is malloc'ed
 * and NUL-terminated; errors name `file` and what was expected
 * (SMR_ERR_FORMAT for corrupt or too large data). */
int smr_profiler_gunzip(const char *data, size_t len, size_t max,
                        const char *file, char **out, size_t *out_len,
                        smr_error *err);

/* File kinds, in the order the reference returns their events. */
enum {
  SMR_FW_PYTHONTIMELINE = 0,
  SMR_FW_MODELTIMELINE,
  SMR_FW_TFPROFILER,
  SMR_FW_HOROVOD,
  SMR_FW_SMDATAPARALLEL,
  SMR_FW_KINDS
};

/* "<rank>-algo-<n>" -> "algo-<n>-<rank>" (re.match("(.*)-(algo.*)")). */
char *smr_profiler_node_rewrite(const char *node_id);

#endif
