/* profiler_trace.c - parsing system-metric lines and trace files, and the
 * reference TraceEventParser state machine (docs/formats.md#profiler-output).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/profiler_int.h"

const char *const smr_fw_file_types[SMR_FW_KINDS] = {
    "PythontimelineMetrics", "DetailedframeworkMetrics", "TFProfilerMetrics",
    "", "SMDataParallelMetrics"};

static void set_why(char *why, size_t nwhy, const pj *j, const char *what) {
  if (why && nwhy)
    snprintf(why, nwhy, "byte %td: expected %s", j->err_at - j->start,
             j->err ? j->err : what);
}

/* --------------------------------------------------- system metric lines */

/* A key of at most `cap` - 1 decoded bytes, else "" (not one of ours). */
static bool read_key(pj *j, char *key, size_t cap) {
  if (pj_peek(j) != '"')
    return pj_fail(j, "a key string");
  if (pj_string_raw_len(j) >= cap) {
    key[0] = '\0';
    return pj_string(j, NULL, NULL);
  }
  return pj_string(j, key, NULL);
}

static bool sys_str(pj *j, char *scratch, size_t *used, const char **out) {
  if (pj_peek(j) != '"')
    return pj_fail(j, "a string value");
  char *dst = scratch + *used;
  size_t n;
  if (!pj_string(j, dst, &n))
    return false;
  *out = dst;
  *used += n + 1;
  return true;
}

static int64_t ns_of_seconds(double t) {
  double ns = ((t * 1000) * 1000) * 1000; /* the reference's order */
  if (ns >= 9.2e18)
    return INT64_MAX;
  if (ns <= -9.2e18)
    return INT64_MIN;
  return (int64_t)ns; /* truncation toward zero, as Python's int() */
}

enum { F_TYPE = 1, F_DIM = 2, F_VALUE = 4, F_NODE = 8, F_TS = 16 };

static bool sys_field(pj *j, const char *key, char *scratch, size_t *used,
                      smr_sys_line *o, unsigned *have) {
  if (!strcmp(key, "Type"))
    return sys_str(j, scratch, used, &o->type) && (*have |= F_TYPE);
  if (!strcmp(key, "Dimension"))
    return sys_str(j, scratch, used, &o->dimension) && (*have |= F_DIM);
  if (!strcmp(key, "NodeId"))
    return sys_str(j, scratch, used, &o->node) && (*have |= F_NODE);
  if (!strcmp(key, "Name")) {
    if (pj_peek(j) == 'n') {
      o->has_name = false;
      o->name = "";
      return pj_skip(j, 0);
    }
    o->has_name = true;
    return sys_str(j, scratch, used, &o->name);
  }
  if (!strcmp(key, "Value")) {
    bool is_int;
    *have |= F_VALUE;
    return pj_number(j, &o->value, &is_int);
  }
  if (!strcmp(key, "Timestamp")) {
    *have |= F_TS;
    return pj_number(j, &o->timestamp, &o->timestamp_is_int);
  }
  return pj_skip(j, 0);
}

static const char *missing_field(unsigned have) {
  if (!(have & F_TYPE))
    return "a \"Type\" key";
  if (!(have & F_DIM))
    return "a \"Dimension\" key";
  if (!(have & F_VALUE))
    return "a \"Value\" key";
  if (!(have & F_NODE))
    return "a \"NodeId\" key";
  return "a \"Timestamp\" key";
}

int smr_profiler_parse_sys_line(const char *line, size_t len, char *scratch,
                                smr_sys_line *out, char *why, size_t nwhy) {
  memset(out, 0, sizeof *out);
  out->name = "";
  pj j;
  pj_init(&j, line, len);
  size_t used = 0;
  unsigned have = 0;
  bool ok = pj_lit(&j, '{') || pj_fail(&j, "a JSON object");
  if (ok && !pj_lit(&j, '}')) {
    for (;;) {
      char key[16];
      if (!(ok = read_key(&j, key, sizeof key)) ||
          !(ok = pj_lit(&j, ':') || pj_fail(&j, "':'")) ||
          !(ok = sys_field(&j, key, scratch, &used, out, &have)))
        break;
      if (pj_lit(&j, '}'))
        break;
      if (!(ok = pj_lit(&j, ',') || pj_fail(&j, "',' or '}'")))
        break;
    }
  }
  if (ok && pj_peek(&j) != 0)
    ok = pj_fail(&j, "the end of the line");
  if (!ok) {
    set_why(why, nwhy, &j, "a JSON object");
    return -1;
  }
  if ((have & 31) != 31) {
    if (why && nwhy)
      snprintf(why, nwhy, "expected %s", missing_field(have));
    return -1;
  }
  if (!isfinite(out->timestamp)) {
    if (why && nwhy)
      snprintf(why, nwhy, "expected a finite Timestamp");
    return -1;
  }
  out->timestamp_ns = ns_of_seconds(out->timestamp);
  return 0;
}

/* --------------------------------------------------------- trace files */

typedef struct tparse {
  pj j;
  smr_intern *names;
  trace_file *f;
  char *buf; /* decoding scratch */
  size_t bufcap;
} tparse;

static char *scratch_for(tparse *t, size_t n) {
  if (n + 1 > t->bufcap) {
    t->bufcap = n + 64;
    free(t->buf);
    t->buf = smr_xmalloc(t->bufcap);
  }
  return t->buf;
}

static bool str_interned(tparse *t, const char **out) {
  size_t raw = pj_string_raw_len(&t->j), n;
  char *b = scratch_for(t, raw);
  if (!pj_string(&t->j, b, &n))
    return false;
  *out = smr_intern_get(t->names, b, n);
  return true;
}

/* The JSON text of any value, interned (non-string names and phases). */
static bool value_text(tparse *t, const char **out) {
  pj_ws(&t->j);
  const char *s = t->j.p;
  if (!pj_skip(&t->j, 0))
    return false;
  *out = smr_intern_get(t->names, s, (size_t)(t->j.p - s));
  return true;
}

/* Python dict-key identity of a pid: equal numbers (and bools) are one
 * key, strings another. */
static bool pid_value(tparse *t, trace_obj *o) {
  char c = pj_peek(&t->j);
  char key[48];
  o->flags &= (uint16_t) ~(TO_PID | TO_PID_NUM);
  if (c == '"') {
    const char *s;
    if (!str_interned(t, &s))
      return false;
    char *k = smr_xasprintf("s:%s", s);
    o->pid_key = smr_intern_get(t->names, k, strlen(k));
    free(k);
  } else if (c == 't' || c == 'f' || c == 'n') {
    bool t_ = c == 't';
    if (!pj_skip(&t->j, 0))
      return false;
    o->pid_key = smr_intern_get(t->names,
                                c == 'n' ? "None"
                                : t_     ? "n:1"
                                         : "n:0",
                                4);
  } else if (c == '{' || c == '[') {
    return pj_skip(&t->j, 0); /* unhashable: the object is dropped */
  } else {
    double v;
    bool is_int;
    if (!pj_number(&t->j, &v, &is_int))
      return false;
    snprintf(key, sizeof key, "n:%.17g", v);
    o->pid_key = smr_intern_get(t->names, key, strlen(key));
    if (isfinite(v) && fabs(v) < 9e18) {
      o->pid = (int64_t)v;
      o->flags |= TO_PID_NUM;
    }
  }
  o->flags |= TO_PID;
  return true;
}

static bool num_field(tparse *t, double *v, uint16_t *flags, uint16_t has,
                      uint16_t is_int_flag) {
  *flags &= (uint16_t) ~(has | is_int_flag);
  char c = pj_peek(&t->j);
  if (c == '"' || c == '{' || c == '[' || c == 't' || c == 'f' || c == 'n')
    return pj_skip(&t->j, 0);
  bool is_int;
  if (!pj_number(&t->j, v, &is_int))
    return false;
  *flags |= has | (is_int ? is_int_flag : 0);
  return true;
}

static bool int_field(tparse *t, int64_t *v, uint16_t *flags, uint16_t has) {
  double d = 0;
  uint16_t f = 0;
  if (!num_field(t, &d, &f, has, 0))
    return false;
  *flags &= (uint16_t)~has;
  if ((f & has) && isfinite(d) && fabs(d) < 9e18) {
    *v = (int64_t)d;
    *flags |= has;
  }
  return true;
}

static bool args_key(tparse *t, trace_obj *o, const char *key) {
  if (!strcmp(key, "name")) {
    if (pj_peek(&t->j) == '"')
      return str_interned(t, &o->pname);
    return value_text(t, &o->pname);
  }
  if (!strcmp(key, "start_time_since_epoch_in_micros"))
    return num_field(t, &o->base, &o->flags, TO_BASE, TO_BASE_INT);
  if (!strcmp(key, "pid"))
    return int_field(t, &o->args_pid, &o->flags, TO_ARGS_PID);
  if (!strcmp(key, "thread_id"))
    return int_field(t, &o->args_tid, &o->flags, TO_ARGS_TID);
  return pj_skip(&t->j, 0);
}

/* args: its text is kept whole; the keys the parser state needs are read
 * on the way. */
static bool args_value(tparse *t, trace_obj *o) {
  pj_ws(&t->j);
  const char *s = t->j.p;
  o->flags &= (uint16_t) ~(TO_ARGS_NONEMPTY | TO_BASE | TO_BASE_INT |
                           TO_ARGS_PID | TO_ARGS_TID);
  o->pname = NULL;
  if (pj_peek(&t->j) != '{') {
    if (!pj_skip(&t->j, 0))
      return false;
  } else {
    t->j.p++;
    if (!pj_lit(&t->j, '}')) {
      o->flags |= TO_ARGS_NONEMPTY;
      for (;;) {
        char key[40];
        if (!read_key(&t->j, key, sizeof key) ||
            !(pj_lit(&t->j, ':') || pj_fail(&t->j, "':'")) ||
            !args_key(t, o, key))
          return false;
        if (pj_lit(&t->j, '}'))
          break;
        if (!pj_lit(&t->j, ','))
          return pj_fail(&t->j, "',' or '}'");
      }
    }
  }
  o->flags |= TO_ARGS;
  o->args_off = t->f->arena.len;
  smr_buf_append(&t->f->arena, s, (size_t)(t->j.p - s));
  smr_buf_append(&t->f->arena, "", 1);
  return true;
}

static bool ph_value(tparse *t, trace_obj *o) {
  o->ph = 0;
  if (pj_peek(&t->j) != '"')
    return pj_skip(&t->j, 0);
  char ph[4];
  size_t n;
  if (pj_string_raw_len(&t->j) >= sizeof ph)
    return pj_string(&t->j, NULL, NULL);
  if (!pj_string(&t->j, ph, &n))
    return false;
  if (n == 1 && strchr("MXBE", ph[0]))
    o->ph = ph[0];
  return true;
}

static bool obj_field(tparse *t, trace_obj *o, const char *key) {
  if (!strcmp(key, "ph"))
    return ph_value(t, o);
  if (!strcmp(key, "name")) {
    o->flags |= TO_NAME;
    bool ok = pj_peek(&t->j) == '"' ? str_interned(t, &o->name)
                                    : value_text(t, &o->name);
    if (ok)
      o->flags = (uint16_t)(strcmp(o->name, "process_name") == 0
                                ? o->flags | TO_PROCESS_NAME
                                : o->flags & ~TO_PROCESS_NAME);
    return ok;
  }
  if (!strcmp(key, "pid"))
    return pid_value(t, o);
  if (!strcmp(key, "tid"))
    return int_field(t, &o->tid, &o->flags, TO_TID);
  if (!strcmp(key, "ts"))
    return num_field(t, &o->ts, &o->flags, TO_TS, TO_TS_INT);
  if (!strcmp(key, "dur"))
    return num_field(t, &o->dur, &o->flags, TO_DUR, TO_DUR_INT);
  if (!strcmp(key, "args"))
    return args_value(t, o);
  return pj_skip(&t->j, 0);
}

/* Whether the reference would act on the object (others are dropped;
 * objects it would crash on are dropped too). */
static bool obj_useful(const trace_obj *o) {
  switch (o->ph) {
  case 'M':
    return (o->flags & TO_BASE) ||
           ((o->flags & TO_PID) && (o->flags & TO_PROCESS_NAME));
  case 'X':
    return (o->flags & (TO_TS | TO_DUR | TO_PID | TO_NAME)) ==
           (TO_TS | TO_DUR | TO_PID | TO_NAME);
  case 'B':
    return (o->flags & (TO_TS | TO_PID | TO_NAME)) ==
           (TO_TS | TO_PID | TO_NAME);
  case 'E':
    return (o->flags & (TO_TS | TO_PID)) == (TO_TS | TO_PID);
  default:
    return false;
  }
}

static void push_obj(trace_file *f, const trace_obj *o) {
  if (f->n == f->cap) {
    f->cap = f->cap ? f->cap * 2 : 64;
    f->objs = smr_xrealloc(f->objs, f->cap * sizeof *f->objs);
  }
  f->objs[f->n++] = *o;
}

static bool parse_obj(tparse *t) {
  trace_obj o;
  memset(&o, 0, sizeof o);
  o.name = "";
  o.args_off = SIZE_MAX;
  size_t arena_mark = t->f->arena.len;
  t->j.p++; /* '{' */
  if (!pj_lit(&t->j, '}')) {
    for (;;) {
      char key[8];
      if (!read_key(&t->j, key, sizeof key) ||
          !(pj_lit(&t->j, ':') || pj_fail(&t->j, "':'")) ||
          !obj_field(t, &o, key))
        return false;
      if (pj_lit(&t->j, '}'))
        break;
      if (!pj_lit(&t->j, ','))
        return pj_fail(&t->j, "',' or '}'");
    }
  }
  if (!obj_useful(&o)) {
    t->f->arena.len = arena_mark; /* drop its args text too */
    return true;
  }
  push_obj(t->f, &o);
  return true;
}

static bool parse_array(tparse *t) {
  t->j.p++; /* '[' */
  if (pj_lit(&t->j, ']'))
    return true;
  for (;;) {
    bool ok = pj_peek(&t->j) == '{' ? parse_obj(t) : pj_skip(&t->j, 1);
    if (!ok)
      return false;
    if (pj_lit(&t->j, ']'))
      return true;
    if (!pj_lit(&t->j, ','))
      return pj_fail(&t->j, "',' or ']'");
  }
}

/* TF profiler files: {"traceEvents": [...], ...}; the last traceEvents
 * key wins, as in a Python dict. */
static bool parse_tf_object(tparse *t, bool *found) {
  t->j.p++;
  if (pj_lit(&t->j, '}'))
    return true;
  for (;;) {
    char key[16];
    if (!read_key(&t->j, key, sizeof key) ||
        !(pj_lit(&t->j, ':') || pj_fail(&t->j, "':'")))
      return false;
    bool ok;
    if (!strcmp(key, "traceEvents") && pj_peek(&t->j) == '[') {
      t->f->n = 0;
      *found = true;
      ok = parse_array(t);
    } else {
      ok = pj_skip(&t->j, 1);
    }
    if (!ok)
      return false;
    if (pj_lit(&t->j, '}'))
      return true;
    if (!pj_lit(&t->j, ','))
      return pj_fail(&t->j, "',' or '}'");
  }
}

/* The metadata the TF reader inserts before a file's own events: pid 0 is
 * "Unknown" and the base time is the profiling start. */
static void tf_prelude(tparse *t, int64_t base) {
  trace_obj o;
  memset(&o, 0, sizeof o);
  o.ph = 'M';
  o.name = smr_intern_get(t->names, "process_name", 12);
  o.pid_key = smr_intern_get(t->names, "n:0", 3);
  o.flags = TO_PID | TO_PID_NUM | TO_NAME | TO_PROCESS_NAME | TO_ARGS |
            TO_ARGS_NONEMPTY | TO_BASE | TO_BASE_INT;
  o.base = (double)base;
  o.args_off = t->f->arena.len;
  char txt[64];
  snprintf(txt, sizeof txt, "{\"start_time_since_epoch_in_micros\": %lld}",
           (long long)base);
  smr_buf_append(&t->f->arena, txt, strlen(txt) + 1);
  push_obj(t->f, &o);
}

int trace_file_parse(const char *text, size_t len, bool tf_wrapper,
                     int64_t tf_base, smr_intern *names, trace_file *out,
                     char *why, size_t nwhy) {
  memset(out, 0, sizeof *out);
  tparse t = {.names = names, .f = out};
  pj_init(&t.j, text, len);
  bool ok, found = false;
  char c = pj_peek(&t.j);
  if (tf_wrapper && c == '{')
    ok = parse_tf_object(&t, &found);
  else if (!tf_wrapper && c == '[')
    ok = parse_array(&t);
  else
    ok = pj_skip(&t.j, 0); /* valid JSON of another shape: no events */
  if (ok && pj_peek(&t.j) != 0)
    ok = pj_fail(&t.j, "the end of the file");
  free(t.buf);
  if (!ok) {
    set_why(why, nwhy, &t.j, "JSON");
    trace_file_free(out);
    return -1;
  }
  if (!tf_wrapper || !found) {
    if (tf_wrapper)
      out->n = 0;
    return 0;
  }
  /* put the prelude first */
  size_t n = out->n;
  tf_prelude(&t, tf_base);
  trace_obj pre = out->objs[n];
  memmove(out->objs + 1, out->objs, n * sizeof *out->objs);
  out->objs[0] = pre;
  return 0;
}

void trace_file_free(trace_file *f) {
  free(f->objs);
  smr_buf_free(&f->arena);
  memset(f, 0, sizeof *f);
}

size_t trace_file_bytes(const trace_file *f) {
  return f->cap * sizeof *f->objs + f->arena.cap + sizeof *f;
}

/* ------------------------------------------------ the parser state machine */

typedef struct b_ent {
  double ts;
  bool ts_int;
  const char *name;
} b_ent;

/* The open "B" objects of one pid key: a ring of at most B_STACK_MAX, the
 * newest at the top; a push onto a full ring forgets the oldest in
 * constant time. */
typedef struct b_stack {
  b_ent *v;
  size_t head, n, cap; /* v[head .. head+n) modulo cap */
} b_stack;

/* Unmatched "B" objects pile up when a file is replayed again (as in the
 * reference); beyond this depth the oldest are forgotten. */
#define B_STACK_MAX 100000

void trace_state_free(trace_state *s) {
  for (size_t i = 0; i < s->nstacks; i++)
    free(s->stacks[i].v);
  free(s->stacks);
  free(s->phases);
  smr_ptrmap_free(&s->phase_of);
  smr_ptrmap_free(&s->stack_of);
  memset(s, 0, sizeof *s);
}

static const char *phase_of(const trace_state *s, const char *pid_key) {
  size_t i;
  return smr_ptrmap_get(&s->phase_of, pid_key, &i) ? s->phases[i] : NULL;
}

static void set_phase(trace_state *s, const char *pid_key, const char *ph) {
  size_t i;
  if (smr_ptrmap_get(&s->phase_of, pid_key, &i)) {
    s->phases[i] = ph;
    return;
  }
  if (s->nproc == s->capproc) {
    s->capproc = s->capproc ? s->capproc * 2 : 16;
    s->phases = smr_xrealloc(s->phases, s->capproc * sizeof(char *));
  }
  smr_ptrmap_put(&s->phase_of, pid_key, s->nproc);
  s->phases[s->nproc++] = ph;
}

static b_stack *stack_of(trace_state *s, const char *pid_key, bool create) {
  size_t i;
  if (smr_ptrmap_get(&s->stack_of, pid_key, &i))
    return &s->stacks[i];
  if (!create)
    return NULL;
  if (s->nstacks == s->capstacks) {
    s->capstacks = s->capstacks ? s->capstacks * 2 : 8;
    s->stacks = smr_xrealloc(s->stacks, s->capstacks * sizeof *s->stacks);
  }
  smr_ptrmap_put(&s->stack_of, pid_key, s->nstacks);
  b_stack *b = &s->stacks[s->nstacks++];
  memset(b, 0, sizeof *b);
  return b;
}

/* The ring grown to twice its size, its entries moved to the start. */
static void grow_ring(b_stack *b) {
  size_t cap = b->cap ? b->cap * 2 : 8;
  if (cap > B_STACK_MAX)
    cap = B_STACK_MAX;
  b_ent *v = smr_xmalloc(cap * sizeof *v);
  for (size_t i = 0; i < b->n; i++)
    v[i] = b->v[(b->head + i) % b->cap];
  free(b->v);
  b->v = v;
  b->cap = cap;
  b->head = 0;
}

static void push_b(trace_state *s, const trace_obj *o) {
  b_stack *b = stack_of(s, o->pid_key, true);
  if (b->n == B_STACK_MAX) { /* forget the oldest */
    b->head = (b->head + 1) % b->cap;
    b->n--;
  }
  if (b->n == b->cap)
    grow_ring(b);
  b->v[(b->head + b->n++) % b->cap] =
      (b_ent){o->ts, (o->flags & TO_TS_INT) != 0, o->name};
}

static bool pop_b(b_stack *b, b_ent *out) {
  if (b->n == 0)
    return false;
  *out = b->v[(b->head + --b->n) % b->cap];
  return true;
}

static void fill_common(smrules_fw_event *e, const trace_state *s,
                        const trace_file *f, const trace_obj *o,
                        const replay_ctx *rc) {
  const char *ph = phase_of(s, o->pid_key);
  e->phase = ph ? ph : "Unknown";
  e->node = rc->node;
  e->file_type = rc->file_type;
  bool args_truthy = o->flags & TO_ARGS_NONEMPTY;
  e->pid = args_truthy && (o->flags & TO_ARGS_PID) ? o->args_pid
           : (o->flags & TO_PID_NUM)               ? o->pid
                                                   : 0;
  e->tid = args_truthy && (o->flags & TO_ARGS_TID) ? o->args_tid
           : (o->flags & TO_TID)                   ? o->tid
                                                   : 0;
  e->args = o->args_off == SIZE_MAX ? NULL : f->arena.data + o->args_off;
}

static void replay_x(trace_state *s, const trace_file *f, const trace_obj *o,
                     const replay_ctx *rc) {
  smrules_fw_event e;
  memset(&e, 0, sizeof e);
  fill_common(&e, s, f, o, rc);
  e.name = o->name;
  e.start_us = o->ts + s->base;
  e.duration_us = o->dur;
  e.end_us = e.start_us + e.duration_us;
  e.times_are_int =
      (o->flags & TO_TS_INT) && (o->flags & TO_DUR_INT) && s->base_int;
  rc->fn(rc->arg, &e);
}

static void replay_e(trace_state *s, const trace_file *f, const trace_obj *o,
                     const replay_ctx *rc) {
  b_stack *b = stack_of(s, o->pid_key, false);
  b_ent be;
  if (!b || !pop_b(b, &be))
    return; /* an "E" without its "B" is skipped */
  smrules_fw_event e;
  memset(&e, 0, sizeof e);
  double start = be.ts + s->base, end = o->ts + s->base;
  double dur = end - start;
  if (dur < 0)
    return; /* the reference logs and drops it */
  fill_common(&e, s, f, o, rc);
  e.name = be.name;
  e.start_us = start;
  e.duration_us = dur;
  e.end_us = start + dur;
  e.times_are_int = be.ts_int && (o->flags & TO_TS_INT) && s->base_int;
  rc->fn(rc->arg, &e);
}

static void replay_m(trace_state *s, const trace_obj *o, const replay_ctx *rc) {
  if ((o->flags & TO_PID) && (o->flags & TO_PROCESS_NAME))
    set_phase(s, o->pid_key,
              o->pname ? o->pname : smr_intern_get(rc->names, "Unknown", 7));
  if (o->flags & TO_BASE) {
    s->base = o->base;
    s->base_int = (o->flags & TO_BASE_INT) != 0;
  }
}

void trace_replay(trace_state *s, const trace_file *f, const replay_ctx *rc) {
  if (!s->started) {
    s->started = true;
    s->base = 0;
    s->base_int = true; /* the initial base time is the integer 0 */
  }
  for (size_t i = 0; i < f->n; i++) {
    const trace_obj *o = &f->objs[i];
    switch (o->ph) {
    case 'M':
      replay_m(s, o, rc);
      break;
    case 'X':
      replay_x(s, f, o, rc);
      break;
    case 'B':
      push_b(s, o);
      break;
    case 'E':
      replay_e(s, f, o, rc);
      break;
    default:
      break;
    }
  }
}

/* ----------------------------------------------- one file, fresh state */

typedef struct trace_fn_adapter {
  smr_fw_event_fn fn;
  void *arg;
  int count;
} trace_fn_adapter;

static void count_event(void *arg, const smrules_fw_event *e) {
  trace_fn_adapter *a = arg;
  a->count++;
  if (a->fn)
    a->fn(a->arg, e);
}

int smr_profiler_parse_trace(const char *text, size_t len, const char *node_id,
                             int file_kind, smr_fw_event_fn fn, void *arg,
                             char *why, size_t nwhy) {
  if (file_kind < 0 || file_kind >= SMR_FW_KINDS)
    file_kind = SMR_FW_PYTHONTIMELINE;
  smr_intern names = {0};
  trace_file f;
  bool tf = file_kind == SMR_FW_TFPROFILER;
  if (trace_file_parse(text, len, tf, 0, &names, &f, why, nwhy) != 0) {
    smr_intern_free(&names);
    return -1;
  }
  trace_state s;
  memset(&s, 0, sizeof s);
  trace_fn_adapter a = {fn, arg, 0};
  char *node = smr_profiler_node_rewrite(node_id ? node_id : "");
  replay_ctx rc = {node, smr_fw_file_types[file_kind], &names, count_event, &a};
  trace_replay(&s, &f, &rc);
  free(node);
  trace_state_free(&s);
  trace_file_free(&f);
  smr_intern_free(&names);
  return a.count;
}

char *smr_profiler_node_rewrite(const char *node_id) {
  /* (.*)-(algo.*): the greedy first group ends at the last "-algo" */
  const char *hit = NULL;
  for (const char *p = node_id; (p = strstr(p, "-algo")) != NULL; p++)
    hit = p;
  if (!hit || strchr(node_id, '\n'))
    return smr_xstrdup(node_id);
  return smr_xasprintf("%s-%.*s", hit + 1, (int)(hit - node_id), node_id);
}

/* ------------------------------------------------------------ args keys */

static const char *keep_text(smr_strv *scratch, const char *s, size_t n) {
  char *c = smr_xstrndup(s, n);
  smr_strv_take(scratch, c);
  return c;
}

static bool arg_value(pj *j, smrules_arg *out, smr_strv *scratch) {
  pj_ws(j);
  const char *s = j->p;
  char c = pj_peek(j);
  memset(out, 0, sizeof *out);
  if (c == '"') {
    char *buf = smr_xmalloc(pj_string_raw_len(j) + 1);
    size_t n;
    if (!pj_string(j, buf, &n)) {
      free(buf);
      return false;
    }
    smr_strv_take(scratch, buf);
    out->type = SMRULES_ARG_STRING;
    out->str = buf;
  } else if (c == '{' || c == '[') {
    if (!pj_skip(j, 1))
      return false;
    out->type = SMRULES_ARG_OTHER;
  } else if (c == 't' || c == 'f') {
    if (!pj_skip(j, 1))
      return false;
    out->type = SMRULES_ARG_BOOL;
    out->b = c == 't';
  } else if (c == 'n') {
    if (!pj_skip(j, 1))
      return false;
    out->type = SMRULES_ARG_NULL;
  } else {
    if (!pj_number(j, &out->num, &out->is_int))
      return false;
    out->type = SMRULES_ARG_NUMBER;
  }
  out->json = keep_text(scratch, s, (size_t)(j->p - s));
  return true;
}

int smr_profiler_fw_arg(const smrules_fw_event *e, const char *key,
                        smrules_arg *out, smr_strv *scratch) {
  memset(out, 0, sizeof *out);
  if (!e->args)
    return SMRULES_ARG_MISSING;
  pj j;
  pj_init(&j, e->args, strlen(e->args));
  if (!pj_lit(&j, '{') || pj_lit(&j, '}'))
    return SMRULES_ARG_MISSING;
  size_t klen = strlen(key);
  for (;;) {
    size_t raw = pj_string_raw_len(&j), n;
    char *k = smr_xmalloc(raw + 1);
    bool ok = pj_string(&j, k, &n) && pj_lit(&j, ':');
    bool hit = ok && n == klen && memcmp(k, key, n) == 0;
    free(k);
    smrules_arg v;
    if (!ok || !arg_value(&j, &v, scratch))
      return out->type;
    if (hit) /* the last duplicate wins, as in a Python dict */
      *out = v;
    if (!pj_lit(&j, ','))
      return out->type;
  }
}
