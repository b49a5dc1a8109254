/* profiler_int.h - internals shared by profiler.c (files, selection,
 * cache, queries), profiler_json.c (a JSON scanner with Python json's
 * grammar) and profiler_trace.c (system lines, trace objects, the
 * reference TraceEventParser state machine).  Not for other modules. */
#ifndef SMR_PROFILER_INT_H
#define SMR_PROFILER_INT_H

#include "base/ptrmap.h"
#include "profiler/profiler.h"

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

#endif
