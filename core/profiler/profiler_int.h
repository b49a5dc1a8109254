/* profiler_int.h - internals shared by profiler.c (open/close, trial info,
 * queries), profiler_files.c (listing, selection), profiler_cache.c (the
 * parsed-file cache), profiler_json.c (a JSON scanner with Python json's
 * grammar) and profiler_trace.c (system lines, trace objects, the
 * reference TraceEventParser state machine).  Not for other modules. */
#ifndef SMR_PROFILER_INT_H
#define SMR_PROFILER_INT_H

#include <pthread.h>

#include "base/ptrmap.h"
#include "base/regex.h"
#include "profiler/profiler.h"
#include "source/source.h"

/* ------------------------------------------------------ JSON scanning
 * Python's json module: RFC 8259 plus NaN, Infinity, -Infinity; strict
 * strings (no raw control characters); UTF-8 checked; duplicate keys: the
 * last one wins (callers simply overwrite). */
typedef struct pj {
  const char *p, *end, *start;
  const char *err; /* what was expected, set on the first failure */
  const char *err_at;
} pj;

void pj_init(pj *j, const char *p, size_t len);
/* The three smallest scanner steps are inline: they run for every byte of
 * every metrics line, and a call across files for each costs ~15 % of a
 * profiler run. */
static inline void pj_ws(pj *j) {
  while (j->p < j->end &&
         (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}
bool pj_fail(pj *j, const char *what);
/* The next non-blank character, or 0 at the end. */
static inline char pj_peek(pj *j) {
  pj_ws(j);
  return j->p < j->end ? *j->p : 0;
}
/* consume c after blanks */
static inline bool pj_lit(pj *j, char c) {
  if (pj_peek(j) != c)
    return false;
  j->p++;
  return true;
}
/* A string: decoded into `out` (NUL-terminated, *n bytes) when out is
 * non-NULL; `out` must hold the raw length + 1. */
bool pj_string(pj *j, char *out, size_t *n);
/* Length bound of the next string's decoded text (its raw length). */
size_t pj_string_raw_len(const pj *j);
bool pj_number(pj *j, double *v, bool *is_int);
/* Skip any value, checking it; depth-limited. */
bool pj_skip(pj *j, int depth);

/* --------------------------------------------------------- interning */
typedef struct smr_intern {
  char **slots;
  size_t cap, n;
  size_t bytes;
} smr_intern;

const char *smr_intern_get(smr_intern *t, const char *s, size_t n);
void smr_intern_free(smr_intern *t);

/* ------------------------------------------------------- trace objects
 * One object of a trace file, kept in the cache between queries; the
 * parser state machine replays them in every query
 * (docs/formats.md#framework-traces). */
enum {
  TO_TS = 1 << 0,     /* ts present and a number */
  TO_TS_INT = 1 << 1, /* ... written as an integer */
  TO_DUR = 1 << 2,    /* dur present and a number */
  TO_DUR_INT = 1 << 3,
  TO_ARGS = 1 << 4, /* args present */
  TO_ARGS_NONEMPTY = 1 << 5,
  TO_PROCESS_NAME = 1 << 6, /* name == "process_name" (M) */
  TO_BASE = 1 << 7,         /* args.start_time_since_epoch_in_micros */
  TO_BASE_INT = 1 << 8,
  TO_ARGS_PID = 1 << 9,  /* args.pid is a number */
  TO_ARGS_TID = 1 << 10, /* args.thread_id is a number */
  TO_TID = 1 << 11,      /* tid is a number */
  TO_PID = 1 << 12,      /* pid present (hashable) */
  TO_NAME = 1 << 13,     /* name present */
  TO_PID_NUM = 1 << 14   /* pid is a number */
};

typedef struct trace_obj {
  char ph; /* 'M', 'X', 'B', 'E' (others are dropped when parsing) */
  uint16_t flags;
  const char *name;    /* interned; "" when absent */
  const char *pid_key; /* interned canonical text of pid */
  const char *pname;   /* M process_name: args.name interned, NULL: none */
  double ts, dur, base;
  int64_t pid, args_pid, args_tid, tid;
  size_t args_off; /* args JSON text in the file's arena; SIZE_MAX: none */
} trace_obj;

typedef struct trace_file {
  trace_obj *objs;
  size_t n, cap;
  smr_buf arena; /* args texts, NUL-terminated, at trace_obj.args_off */
} trace_file;

/* Parse a trace file text (a JSON array of objects; for TF files an
 * object with traceEvents).  Returns 0, or -1 with why[] when it is not
 * valid JSON. */
int trace_file_parse(const char *text, size_t len, bool tf_wrapper,
                     int64_t tf_base, smr_intern *names, trace_file *out,
                     char *why, size_t nwhy);
void trace_file_free(trace_file *f);
size_t trace_file_bytes(const trace_file *f);

/* The reference TraceEventParser's state for one file kind. */
typedef struct trace_state {
  bool started; /* base time initialised (the integer 0) */
  /* pid key -> phase name (interned), most recent process_name wins;
   * found through phase_of (pid key -> index), so many distinct pids cost
   * linear time */
  const char **phases;
  size_t nproc, capproc;
  smr_ptrmap phase_of;
  double base;
  bool base_int;
  /* open "B" objects per pid key, found through stack_of */
  struct b_stack *stacks;
  size_t nstacks, capstacks;
  smr_ptrmap stack_of;
} trace_state;

void trace_state_free(trace_state *s);

/* Replay the objects of one file through `s`; every event produced is
 * handed to fn. */
typedef struct replay_ctx {
  const char *node;      /* interned node id of the file */
  const char *file_type; /* SMRULES file_type text */
  smr_intern *names;
  void (*fn)(void *arg, const smrules_fw_event *e);
  void *arg;
} replay_ctx;
void trace_replay(trace_state *s, const trace_file *f, const replay_ctx *rc);

extern const char *const smr_fw_file_types[SMR_FW_KINDS];

/* ----------------------------------------------------------- the store */

/* One file of system/ or framework/. */
typedef struct pfile {
  char *path;      /* root + "/" + relative path, as the reference joins it */
  const char *rel; /* the relative path (inside `path`), for the source */
  int64_t ts;      /* µs: name start (system), end of last event (framework) */
  bool framework;
  int kind;         /* SMR_FW_* for framework files, -1: not parsed by anyone */
  const char *node; /* framework: node id of its events */
  int64_t tf_start; /* TF profiler: base time from the .metadata name */
  void *data;       /* parsed: sys_file or trace_file */
  size_t bytes;
  int pins;
  uint64_t used;
  int64_t list_size, list_mtime_ns; /* as the last listing gave them */
  int64_t size, mtime_ns;           /* as listed when it was parsed */
  bool warned;
} pfile;

/* A path the listings gave (relative to the root) and the file it became,
 * NULL when no parser reads it.  Sorted by path; never removed: files
 * never leave the file lists, as in the reference. */
typedef struct listed {
  char *rel;
  pfile *f;
} listed;

/* How the rule stop signal file stood at the last look
 * (docs/formats.md#timestamps-and-windows). */
enum { STOP_NONE, STOP_AT, STOP_PASSED };

typedef struct plist {
  pfile **v;
  size_t n, cap;
} plist;

typedef struct sys_file {
  smrules_sys_event *ev;
  int64_t *ns;
  size_t n;
} sys_file;

typedef struct name_set {
  const char **v; /* interned, in first-seen order */
  size_t n, cap;
  smr_ptrmap has; /* the names of v, so a line costs constant time */
} name_set;

typedef struct node_names {
  const char *node;
  name_set cpus, gpus;
} node_names;

/* The files of a profiler folder, shared by every reader opened on it with
 * smr_profiler_share (see profiler.h): listings, the parsed-file cache,
 * interned strings, the names seen, the job's state.  Every public call
 * holds its lock. */
typedef struct pstore pstore;

struct pstore {
  smr_source *src;
  const char *root; /* smr_source_root(src) */
  bool remote;      /* not the local disk: listings are rationed */
  smr_profiler_opts o;
  int64_t buffer;
  plist sys, fw;
  listed *known; /* every path listed so far, sorted */
  size_t nknown;
  int64_t listed_at; /* monotonic ns of the last listing */
  bool list_warned;  /* a failed re-listing was reported */
  bool end_marker;   /* training_job_end.ts in the last listing */
  int stop;          /* STOP_*: the rule stop signal file */
  long long stop_at; /* STOP_AT: the epoch second it holds */
  smr_intern names;  /* event strings */
  smr_regex *re_sys_name, *re_sys_path, *re_fw_name;
  size_t cached_bytes;
  uint64_t tick;
  node_names *nn;
  size_t nnn, capnn;
  smr_ptrmap node_of;            /* node (interned) -> index in nn */
  const char *dim_cpu, *dim_gpu; /* interned dimension names */
  const char *last[4];           /* the strings of the previous line */
  /* where the system readings end (final_window), for the listing of the
   * newest system files it was computed from */
  int64_t sys_end_us;
  size_t sys_end_n;
  int64_t sys_end_size, sys_end_mtime;
  pthread_mutex_t mu;
  int readers; /* smr_profiler handles on this store */
};

/* One reader: the shared files, and the reference TraceEventParser state
 * of this reader's own queries (it depends on which windows were asked
 * for, so two rules never share it). */
struct smr_profiler {
  pstore *s;
  trace_state states[SMR_FW_KINDS];
};

static inline void smr_pstore_lock(pstore *p) {
  pthread_mutex_lock(&p->mu);
}

static inline void smr_pstore_unlock(pstore *p) {
  pthread_mutex_unlock(&p->mu);
}

/* A warning about the input; none when quiet or when `f` has warned
 * already. */
void smr_pstore_warn(pstore *p, pfile *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* profiler.c: a file's parsed data dropped. */
void smr_pstore_drop_data(pstore *p, pfile *f);

/* profiler_files.c: listing (live: at most once a second for a remote
 * source), and the files [*a, *b) of a list a time range [s, e) needs. */
int smr_pstore_relist(pstore *p, smr_error *err);
void smr_pstore_live_refresh(pstore *p);
void smr_pstore_select_system(const pstore *p, int64_t s, int64_t e, size_t *a,
                              size_t *b);
void smr_pstore_select_framework(const pstore *p, int64_t s, int64_t e,
                                 size_t *a, size_t *b);

/* profiler_cache.c: a file's parsed data, loaded if needed and pinned
 * (NULL: unreadable, warned); pins noted and released together, which
 * evicts past the cache's bytes; files [a, b) of a list fetched ahead. */
void *smr_pstore_acquire(pstore *p, pfile *f, bool framework);
void smr_pstore_pin_note(void ***pins, size_t *n, pfile *f);
void smr_pstore_unpin_all(pstore *p, void **pins, size_t n);
void smr_pstore_evict_all_lists(pstore *p);
void smr_pstore_prefetch(pstore *p, const plist *l, size_t a, size_t b);

#endif
