/* smrules.h - the public SDK for smrules rule plugins (docs/plugin-sdk.md).
 *
 * A plugin is a shared object exporting one function,
 *
 *     const smrules_rule *smrules_plugin_init(const smrules_api *api);
 *
 * (declare it with SMRULES_PLUGIN_INIT).  The host calls it once after
 * dlopen with its function table; the plugin keeps the pointer and returns
 * its registration.  The host checks `api_version` and `struct_size` of the
 * registration before using anything else, and refuses a plugin built for
 * another API version.
 *
 * Compatibility (from smrules 1.0 on; docs/plugin-sdk.md#compatibility):
 *   - SMRULES_API_VERSION changes only if something already in this header
 *     changes meaning or place, which 1.x never does;
 *   - smrules_api and smrules_rule only grow at the end: nothing is
 *     removed, reordered or retyped;
 *   - a registration built against an older smrules.h (smaller
 *     struct_size, at least SMRULES_RULE_MIN_SIZE) still loads; the members
 *     it lacks read as absent (NULL/0);
 *   - a plugin that may run on an older host tests
 *     SMRULES_API_HAS(api, function) before calling a function that a
 *     later smrules.h appended (each says since when it is there);
 *   - structs the host fills for the plugin (smrules_values, ...) may grow
 *     at the end too: the plugin passes the size it knows, the host fills
 *     no more than that.
 * tests/fixtures/sdk-1.0/ keeps this header as released with 1.0, and a
 * plugin built against it runs in the tests: a change that breaks an old
 * plugin fails them.
 *
 * Parameters are declared in a table (smrules_param) and parsed, type- and
 * range-checked by the host, which fills the plugin's settings struct at
 * the declared offsets; the plugin never sees raw configuration.
 *
 * Everything a rule may touch goes through the function table, laid out
 * by topic: logging and parameters, trial queries, values and statistics,
 * reports, output files, time and profiler data. */
#ifndef SMRULES_H
#define SMRULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smrules/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SMRULES_VERSION, the smrules release, is in smrules/version.h. */

/* The plugin ABI: smrules_rule.api_version must equal the host's.  2 is
 * the layout of 1.0 (1 was the pre-release table, ordered by history, and
 * is refused rather than misread). */
#define SMRULES_API_VERSION 2

/* ------------------------------------------------------------ statuses */
/* Host functions return SMRULES_OK or a negative status below. */
#define SMRULES_OK 0

/* What invoke_at_step returns. */
#define SMRULES_NO_TRIGGER 0 /* evaluated, no issue */
#define SMRULES_TRIGGERED 1  /* evaluated, the rule's condition holds */
#define SMRULES_SKIPPED 2    /* nothing to evaluate at this step: no data */
/* Not evaluated at this step by design (a rule that checks every
 * num_steps steps, a step of another mode): counted apart from SKIPPED,
 * which reads as missing data. */
#define SMRULES_NOT_DUE 3
/* Negative values are errors or availability statuses.  Host functions
 * return these too; returning one from invoke_at_step has the meaning
 * smdebug's invoker gives the matching exception: */
#define SMRULES_ERR -1                          /* the rule failed (Error) */
#define SMRULES_STEP_UNAVAILABLE -10            /* skip this step */
#define SMRULES_STEP_NOT_YET -11                /* wait for the step */
#define SMRULES_TENSOR_UNAVAILABLE_FOR_STEP -12 /* skip this step */
#define SMRULES_TENSOR_UNAVAILABLE -13          /* skip this step */
#define SMRULES_NO_MORE_DATA -14                /* the rule is done */

/* Levels of api->log. */
#define SMRULES_LOG_DEBUG 0   /* shown with `smrules run -v` */
#define SMRULES_LOG_INFO 1    /* shown with `smrules run -v` */
#define SMRULES_LOG_WARNING 2 /* stderr, and the report's Warnings */
#define SMRULES_LOG_ERROR 3   /* stderr, and the report's Warnings */

/* Modes (smdebug's ModeKeys). */
#define SMRULES_MODE_TRAIN 1
#define SMRULES_MODE_EVAL 2
#define SMRULES_MODE_PREDICT 3
#define SMRULES_MODE_GLOBAL 4

/* Data types of smrules_tensor.dtype: TensorFlow's DataType numbers
 * (docs/formats.md#data-types), every one smrules knows.  Every string
 * tensor reads as SMRULES_DT_STRING, whatever type it was saved with.
 * Values of RESOURCE, VARIANT and the 8-bit floats are never read
 * (no writer smrules reads saves them): they are named for completeness. */
#define SMRULES_DT_INVALID 0
#define SMRULES_DT_FLOAT 1 /* float32 */
#define SMRULES_DT_DOUBLE 2
#define SMRULES_DT_INT32 3
#define SMRULES_DT_UINT8 4
#define SMRULES_DT_INT16 5
#define SMRULES_DT_INT8 6
#define SMRULES_DT_STRING 7
#define SMRULES_DT_COMPLEX64 8
#define SMRULES_DT_INT64 9
#define SMRULES_DT_BOOL 10
#define SMRULES_DT_QINT8 11 /* quantized: read as the plain integer */
#define SMRULES_DT_QUINT8 12
#define SMRULES_DT_QINT32 13
#define SMRULES_DT_BFLOAT16 14
#define SMRULES_DT_QINT16 15
#define SMRULES_DT_QUINT16 16
#define SMRULES_DT_UINT16 17
#define SMRULES_DT_COMPLEX128 18
#define SMRULES_DT_HALF 19 /* float16 */
#define SMRULES_DT_RESOURCE 20
#define SMRULES_DT_VARIANT 21
#define SMRULES_DT_UINT32 22
#define SMRULES_DT_UINT64 23
#define SMRULES_DT_FLOAT8_E5M2 24
#define SMRULES_DT_FLOAT8_E4M3FN 25

#define SMRULES_MAX_DIMS 32

/* --------------------------------------------------------- parameters */
typedef enum smrules_param_type {
  SMRULES_PARAM_END = 0, /* terminates a parameter table */
  SMRULES_PARAM_FLOAT,   /* double */
  SMRULES_PARAM_INT,     /* int64_t (a float string with integral value ok) */
  SMRULES_PARAM_BOOL,    /* bool: true/false, "True"/"true"/"False"/"false" */
  SMRULES_PARAM_STRING,  /* const char * (NULL when unset) */
  SMRULES_PARAM_STRLIST, /* smrules_strlist: YAML list or "a, b" string */
  SMRULES_PARAM_NUMLIST  /* smrules_numlist */
} smrules_param_type;

/* Flags of a parameter. */
#define SMRULES_P_REQUIRED 0x01
#define SMRULES_P_MIN 0x02 /* value >= min (or > min with MIN_OPEN) */
#define SMRULES_P_MAX 0x04 /* value <= max (or < max with MAX_OPEN) */
#define SMRULES_P_MIN_OPEN 0x08
#define SMRULES_P_MAX_OPEN 0x10
#define SMRULES_P_REGEX 0x20 /* strings/list items must compile as regexes */

typedef struct smrules_strlist {
  size_t n;
  const char *const *v;
} smrules_strlist;

typedef struct smrules_numlist {
  size_t n;
  const double *v;
} smrules_numlist;

typedef struct smrules_param {
  smrules_param_type type;
  const char *name;          /* SageMaker's parameter name */
  const char *default_value; /* as a string; NULL = unset unless given */
  unsigned flags;
  double min, max;            /* with SMRULES_P_MIN / SMRULES_P_MAX */
  const char *const *allowed; /* NULL-terminated allowed strings, or NULL */
  const char *aliases;        /* comma-separated older names, or NULL */
  size_t offset;              /* offsetof(settings struct, field) */
  const char *description;
} smrules_param;

/* ---------------------------------------------------------- opaque types */
typedef struct smrules_ctx smrules_ctx;     /* one rule instance's context */
typedef struct smrules_trial smrules_trial; /* a trial the rule reads */
typedef struct smrules_json smrules_json;   /* a report object being built */

/* ------------------------------------------------ values and statistics */

/* A tensor value.  `data` holds `count` little-endian elements of `dtype`
 * (row-major); use api->get() to read elements as double.  `data` usually
 * points into the event file itself (not copied) and has no particular
 * alignment: read raw elements with memcpy, not through a cast pointer. */
typedef struct smrules_tensor {
  int dtype; /* SMRULES_DT_* */
  int ndim;
  int64_t shape[SMRULES_MAX_DIMS];
  int64_t count;
  const void *data;
  size_t nbytes;
  const uint8_t *const *strings; /* string tensors */
  const size_t *string_lens;
  int64_t step; /* global step it was saved at */
  int mode;
  int64_t mode_step;
  double wall_time; /* seconds since the epoch when it was written */
  const char *worker;
  void *host_; /* owned by the host; release with api->release() */
} smrules_tensor;

/* The work of api->pair_value on a value of this rule's trial (a) and
 * the same tensor's of another trial (b): writes at most
 * SMRULES_PAIR_RESULT_MAX bytes at result; returns SMRULES_OK, or
 * nonzero for a pair it cannot work on (pair_value answers SMRULES_ERR). */
#define SMRULES_PAIR_RESULT_MAX 64
typedef int (*smrules_pair_fn)(const smrules_tensor *a, const smrules_tensor *b,
                               const void *arg, void *result);
/* pair_value_parts' merge: `part`, the result of fn on the next run of
 * elements, folded into `into`, the result so far (see pair_value_parts). */
typedef void (*smrules_pair_merge_fn)(void *into, const void *part,
                                      const void *arg);

/* api->value_pieces' callback: elements [first, first + piece->count) of
 * the value (row-major), as a 1-D tensor of the value's dtype whose data
 * is valid during the call only (step, mode, mode_step, wall_time and
 * worker the value's).  SMRULES_OK to be handed the next piece; anything
 * else stops the reads. */
typedef int (*smrules_piece_fn)(void *arg, int64_t first,
                                const smrules_tensor *piece);

/* Reductions, with smdebug's meaning (NumPy over every element, NaN
 * included; population std and variance; vector norms): what
 * SMRULES_Q_RED(r) and SMRULES_Q_ABS_RED(r) ask for. */
enum {
  SMRULES_RED_MIN,
  SMRULES_RED_MAX,
  SMRULES_RED_MEAN,
  SMRULES_RED_STD,
  SMRULES_RED_VARIANCE,
  SMRULES_RED_SUM,
  SMRULES_RED_PROD,
  SMRULES_RED_L1,
  SMRULES_RED_L2,
  SMRULES_RED_LINF
};
#define SMRULES_RED_COUNT 10

/* One-pass statistics over the finite elements, with counts of the rest
 * (SMRULES_Q_STATS; SMRULES_Q_COUNTS fills the counts alone). */
typedef struct smrules_stats {
  int64_t count, finite, nan, pinf, ninf, zeros;
  bool has_finite; /* false: min ... linf describe no element */
  double min, max, sum, mean, l1, l2, linf;
} smrules_stats;

/* What api->query and api->tensor_query compute: a mask of these.
 *   SMRULES_Q_COUNTS   stats.count, finite, nan, pinf, ninf, zeros and
 *                      has_finite; the other stats fields NaN.  A cheap
 *                      pass (float32 elements counted from their bits).
 *   SMRULES_Q_STATS    all of stats: also min, max, sum, mean, l1, l2,
 *                      linf over the finite elements, in one pass.
 *   SMRULES_Q_RED(r)   red[r], reduction r (SMRULES_RED_*) as smdebug's
 *                      reduction_value gives it: the value the hook saved
 *                      when it saved that reduction, else computed.
 *   SMRULES_Q_ABS_RED(r)  abs_red[r], the same of the absolute values
 *                      (smdebug's abs=True: "abs_mean" is
 *                      SMRULES_Q_ABS_RED(SMRULES_RED_MEAN)).
 * Counts and statistics read by api->query are shared by every rule of
 * the run that asks for the same value while it is recent: computed once,
 * the record is not read again. */
#define SMRULES_Q_COUNTS 0x1u
#define SMRULES_Q_STATS 0x2u
#define SMRULES_Q_RED(r) (0x100u << (r))
#define SMRULES_Q_ABS_RED(r) (0x40000u << (r))
/* The reductions by name, e.g. SMRULES_Q_MIN | SMRULES_Q_STD. */
#define SMRULES_Q_MIN SMRULES_Q_RED(SMRULES_RED_MIN)
#define SMRULES_Q_MAX SMRULES_Q_RED(SMRULES_RED_MAX)
#define SMRULES_Q_MEAN SMRULES_Q_RED(SMRULES_RED_MEAN)
#define SMRULES_Q_STD SMRULES_Q_RED(SMRULES_RED_STD)
#define SMRULES_Q_VARIANCE SMRULES_Q_RED(SMRULES_RED_VARIANCE)
#define SMRULES_Q_SUM SMRULES_Q_RED(SMRULES_RED_SUM)
#define SMRULES_Q_PROD SMRULES_Q_RED(SMRULES_RED_PROD)
#define SMRULES_Q_L1 SMRULES_Q_RED(SMRULES_RED_L1)
#define SMRULES_Q_L2 SMRULES_Q_RED(SMRULES_RED_L2)
#define SMRULES_Q_LINF SMRULES_Q_RED(SMRULES_RED_LINF)

/* The answer of a query for one tensor.  What was not asked for, or could
 * not be computed, is NaN (counts 0).  May grow at the end: pass
 * sizeof(smrules_values) as out_size. */
typedef struct smrules_values {
  smrules_stats stats;               /* SMRULES_Q_COUNTS, SMRULES_Q_STATS */
  double red[SMRULES_RED_COUNT];     /* SMRULES_Q_RED(r): red[r] */
  double abs_red[SMRULES_RED_COUNT]; /* SMRULES_Q_ABS_RED(r): abs_red[r] */
} smrules_values;

/* ------------------------------------------------------ profiler data
 * What SMRULES_KIND_PROFILER rules read (docs/formats.md#profiler-output,
 * docs/rule-semantics.md#profiler-rules-windows). Events returned by
 * api->system_events / api->framework_events are host-owned and stay valid
 * until the next call of the same function by the same rule, or until
 * invoke_at_step returns. */

/* One system-metrics reading: a line of a system/incremental file. */
typedef struct smrules_sys_event {
  const char *type;      /* Type: "cpu", "gpu", "memory", "network", ... */
  const char *name;      /* Name: "cpu0", "gpu1", "MemoryUsedPercent", ...;
                            "" when the line has none (see has_name) */
  const char *dimension; /* Dimension: "CPUUtilization", "GPUUtilization",
                            "GPUMemoryUtilization", "I/OWaitPercentage",
                            "Algorithm", "Platform", "" ... */
  const char *node;      /* NodeId: "algo-1" */
  double value;          /* Value */
  double timestamp;      /* Timestamp: seconds since the epoch */
  bool has_name;
  bool timestamp_is_int; /* Timestamp was written as an integer: Python's
                            str() of it has no ".0" (matters for keys) */
} smrules_sys_event;

/* One framework trace event (Chrome trace "X" object or a B/E pair), with
 * the reference parser's semantics (docs/formats.md#framework-traces): absolute
 * times in µs. */
typedef struct smrules_fw_event {
  const char *name;      /* event name (operator, module, step phase) */
  const char *phase;     /* training phase: the process_name of its pid
                            ("Step:ModeKeys.TRAIN", "Forward",
                            "DataLoaderWorker", ...), "Unknown" if none */
  const char *node;      /* node id from the file name; "<rank>-algo-<n>"
                            is rewritten "algo-<n>-<rank>" */
  const char *file_type; /* "PythontimelineMetrics",
                            "DetailedframeworkMetrics", "TFProfilerMetrics",
                            "SMDataParallelMetrics", or "" for Horovod */
  double start_us, end_us, duration_us; /* end = start + duration */
  bool times_are_int; /* start and end are exact integers (Python ints
                         in the reference: ts, dur and base were ints) */
  int64_t pid;        /* args.pid if present, else the phase pid */
  int64_t tid;        /* args.thread_id if present, else the tid */
  const char *args;   /* the args object as JSON text, NULL if none;
                         read single values with api->fw_arg */
} smrules_fw_event;

/* A value of a framework event's args (api->fw_arg). */
#define SMRULES_ARG_MISSING 0 /* no args, or no such key */
#define SMRULES_ARG_NULL 1
#define SMRULES_ARG_BOOL 2
#define SMRULES_ARG_NUMBER 3
#define SMRULES_ARG_STRING 4
#define SMRULES_ARG_OTHER 5 /* an array or object */
typedef struct smrules_arg {
  int type;         /* SMRULES_ARG_* */
  bool b;           /* BOOL */
  double num;       /* NUMBER */
  bool is_int;      /* NUMBER written as an integer */
  const char *str;  /* STRING, decoded (UTF-8) */
  const char *json; /* the value as JSON text (every type but MISSING):
                       compare these to tell "12" from 12 as Python does */
} smrules_arg;

/* The profiler trial (docs/formats.md#timestamps-and-windows with Decision
 * F13). */
typedef struct smrules_profiler_info {
  int64_t first_us;  /* start of window 0 */
  int64_t latest_us; /* the invoker stops at the first window starting at
                        or after this once the job has finished */
  int64_t system_first_us, system_latest_us;       /* 0: no system files */
  int64_t framework_first_us, framework_latest_us; /* 0: no trace files */
  bool job_finished; /* end marker found, or an offline run (F11) */
  size_t system_files, framework_files;
} smrules_profiler_info;

/* What api->profiler_names lists (names seen in the system metrics read
 * so far by the profiler rules of the run, in first-seen order). */
#define SMRULES_NAMES_NODES 0 /* NodeId values */
#define SMRULES_NAMES_CPUS 1  /* Name of CPUUtilization readings of a node */
#define SMRULES_NAMES_GPUS 2  /* Name of GPUUtilization readings of a node */

/* What a time-driven rule needs to know while following a run. */
typedef struct smrules_live_info {
  bool live;            /* following a run as it writes (run --watch) */
  bool training_ended;  /* training_job_end.ts seen */
  double now;           /* seconds since the epoch */
  double last_activity; /* when smrules last saw a new step appear, or
                           when it started watching (epoch seconds) */
  int64_t newest_step;  /* newest saved global step, -1 if none */
} smrules_live_info;

/* ----------------------------------------------------------- the host */
/* The host's function table, by topic.  Statuses are SMRULES_OK or a
 * negative SMRULES_* code.  "Host-owned" results stay valid until freed
 * with the function named.  Any rule thread may call any function. */
typedef struct smrules_api {
  uint32_t api_version; /* SMRULES_API_VERSION of the host */
  uint32_t struct_size; /* sizeof(smrules_api) of the host */

  /* ---- logging, failure, parameters ---- */

  /* A printf-style message at `level` (SMRULES_LOG_*).  Warnings and
   * errors go to stderr as "smrules: <instance>: warning: ..." and into
   * the report's Warnings (the first 100); debug and info only with
   * `smrules run -v`. */
  void (*log)(smrules_ctx *ctx, int level, const char *fmt, ...)
      __attribute__((format(printf, 3, 4)));
  /* The message shown with status Error (or with a configuration init
   * refused); then return SMRULES_ERR. */
  void (*fail)(smrules_ctx *ctx, const char *fmt, ...)
      __attribute__((format(printf, 2, 3)));
  /* Whether parameter `name` (its main name) has a value, given or
   * defaulted: tells "unset" from a zero value. */
  bool (*param_is_set)(smrules_ctx *ctx, const char *name);
  /* A parameter's value as text, as given in the configuration or
   * defaulted; NULL when unset.  Host-owned until the rule ends. */
  const char *(*param_text)(smrules_ctx *ctx, const char *name);

  /* ---- trial queries ---- */

  /* The trial being evaluated. */
  smrules_trial *(*trial)(smrules_ctx *ctx);
  /* Another trial by path (e.g. the reference run of SimilarAcrossRuns),
   * read as a finished trial, opened once per path per rule instance and
   * closed by the host.  NULL with the rule's failure message set. */
  smrules_trial *(*open_trial)(smrules_ctx *ctx, const char *path);
  /* Every tensor name, sorted (host-owned: free with strlist_free). */
  int (*tensor_names)(smrules_trial *t, smrules_strlist *out);
  /* The saved tensors of a collection, sorted; empty when unknown. */
  int (*collection)(smrules_trial *t, const char *name, smrules_strlist *out);
  /* The union of the collections' members and the names one of the
   * regexes is found in (docs/rule-semantics.md#tensor-selection); either
   * list may be NULL; both empty give an empty list. */
  int (*select)(smrules_trial *t, const smrules_strlist *collections,
                const smrules_strlist *regexes, smrules_strlist *out);
  /* Whether `name` was ever saved. */
  bool (*has_tensor)(smrules_trial *t, const char *name);
  /* Free a list of tensor_names, collection, select or profiler_names. */
  void (*strlist_free)(smrules_strlist *l);
  /* Complete steps of `mode`: global steps for SMRULES_MODE_GLOBAL, else
   * that mode's steps; ascending, malloc'ed (free with steps_free). */
  int (*steps)(smrules_trial *t, int mode, int64_t **out, size_t *n);
  /* The same for one tensor (SMRULES_TENSOR_UNAVAILABLE when unknown). */
  int (*tensor_steps)(smrules_trial *t, const char *name, int mode,
                      int64_t **out, size_t *n);
  void (*steps_free)(int64_t *steps);
  /* Mode and mode step of a global step (SMRULES_STEP_UNAVAILABLE when
   * unknown), and the global step of a mode step. */
  int (*step_mode)(smrules_trial *t, int64_t step, int *mode,
                   int64_t *mode_step);
  int (*global_step)(smrules_trial *t, int mode, int64_t mode_step,
                     int64_t *step);

  /* ---- values and statistics ----
   * `step` is a global step with SMRULES_MODE_GLOBAL, else a step of
   * `mode`.  Values come from the worker with the smallest name that saved
   * the tensor at that step.  A record that cannot be decoded is reported
   * once as a warning (file, offset) and reads as not saved at the step:
   * SMRULES_TENSOR_UNAVAILABLE_FOR_STEP. */

  /* Read a tensor: SMRULES_OK, or an availability status
   * (SMRULES_TENSOR_UNAVAILABLE_FOR_STEP, SMRULES_STEP_UNAVAILABLE,
   * SMRULES_TENSOR_UNAVAILABLE, ...).  Release it with release. */
  int (*value)(smrules_trial *t, const char *name, int64_t step, int mode,
               smrules_tensor *out);
  void (*release)(smrules_tensor *t);
  /* Element i (row-major) as double: 0/1 for bools, the real part of a
   * complex number; NaN for strings and i out of range. */
  double (*get)(const smrules_tensor *t, int64_t i);
  /* What `what` asks (SMRULES_Q_*) of each of the n tensors names[i] at
   * one step, into out[i] (out_size: sizeof(smrules_values)), in one call:
   * the records are read and reduced in parallel on the run's threads
   * (--jobs; the calling thread takes part), with the same results
   * whatever the number of threads.  status[i] is SMRULES_OK when all
   * that was asked of names[i] was computed, else what value() returns
   * for it, or SMRULES_ERR for statistics of a string tensor, or
   * SMRULES_TENSOR_UNAVAILABLE_FOR_STEP for a reduction it has not (a
   * string tensor); the statistics' status first, then the reductions'
   * in SMRULES_RED_* order.  Returns SMRULES_OK, or SMRULES_ERR for a bad
   * argument (then no status is set). */
  int (*query)(smrules_trial *t, const char *const *names, size_t n,
               int64_t step, int mode, unsigned what, smrules_values *out,
               size_t out_size, int *status);
  /* The same for a value in hand (reductions computed, never saved ones;
   * nothing shared): SMRULES_OK, or SMRULES_ERR for a string tensor, a
   * complex one (but for abs and norms), the min, max, mean, std or
   * variance of an empty one. */
  int (*tensor_query)(const smrules_tensor *v, unsigned what,
                      smrules_values *out, size_t out_size);

  /* ---- reports (docs/plugin-sdk.md#reporting) ---- */

  /* A new, empty finding at the step being evaluated (one per tensor x
   * check), kept when the step returns SMRULES_TRIGGERED. */
  smrules_json *(*violation)(smrules_ctx *ctx);
  /* Add n (tensor, step) evaluations to the report's Datapoints (without
   * a call, Datapoints is the number of evaluated steps). */
  void (*datapoints)(smrules_ctx *ctx, int64_t n);
  /* The report's Details object; details_reset empties it first. */
  smrules_json *(*details)(smrules_ctx *ctx);
  smrules_json *(*details_reset)(smrules_ctx *ctx);
  /* Profiler rules: the report is exactly the reference's
   * {"RuleTriggered", "Violations", "Details", "Datapoints",
   * "RuleParameters"} (docs/rule-semantics.md#profiler-rules-the-report),
   * its counters set here by the rule. */
  void (*report_set)(smrules_ctx *ctx, int64_t rule_triggered,
                     int64_t violations, int64_t datapoints);
  /* The RuleParameters string (default: the host's "name:value" lines). */
  void (*rule_parameters)(smrules_ctx *ctx, const char *text);
  /* Members of a report object, written in call order: "key": value.
   * json_num writes NaN and infinities as "nan", "inf", "-inf";
   * json_nums writes them as null; json_str of NULL is null. */
  void (*json_str)(smrules_json *j, const char *key, const char *v);
  void (*json_num)(smrules_json *j, const char *key, double v);
  void (*json_int)(smrules_json *j, const char *key, int64_t v);
  void (*json_bool)(smrules_json *j, const char *key, bool v);
  void (*json_null)(smrules_json *j, const char *key);
  /* A pre-encoded JSON value (e.g. smrules_arg.json); null for NULL. */
  void (*json_raw)(smrules_json *j, const char *key, const char *json);
  void (*json_nums)(smrules_json *j, const char *key, const double *v,
                    size_t n);
  void (*json_ints)(smrules_json *j, const char *key, const int64_t *v,
                    size_t n);
  void (*json_strs)(smrules_json *j, const char *key, const char *const *v,
                    size_t n);
  /* A nested object under `key` (valid until its parent is finished). */
  smrules_json *(*json_obj)(smrules_json *j, const char *key);
  /* A standalone JSON object, not part of the rule's report (e.g. a side
   * report written with write_output): create it, render it to text
   * (malloc'ed: free() it), free it with its nested objects. */
  smrules_json *(*json_new)(void);
  char *(*json_text)(const smrules_json *j);
  void (*json_free)(smrules_json *j);
  /* Python's str()/repr() of a float (shortest round trip; "100.0",
   * "1e+16", "1.5e-05", "nan"), or of an integer when is_int: the text of
   * float dictionary keys in reference reports. */
  void (*py_str)(double v, bool is_int, char *buf, size_t n);

  /* ---- output files ---- */

  /* The directory where this rule instance may write files (reports),
   * created on first call: <output>/<instance name>.  NULL when it cannot
   * be made without following a symbolic link inside the trial (the rule
   * has then failed, with the reason).  Write in it with write_output: the
   * trial's writer may plant links. */
  const char *(*output_dir)(smrules_ctx *ctx);
  /* Replaces the file `relpath` below output_dir(ctx) with `len` bytes of
   * `data`, atomically: a temporary file is written and renamed, so a
   * reader never sees half a file.  `relpath` is relative, '/'-separated,
   * without '.', '..' or empty components; the folders on the way are
   * created.  Nothing is followed below the rule's folder (nor at it, when
   * it lies in the trial): a symbolic link planted as a folder on the way
   * is refused, one at the file or its temporary name is replaced, never
   * written through.  SMRULES_OK, or SMRULES_ERR with the rule's failure
   * message set (as api->fail does) saying what and why. */
  int (*write_output)(smrules_ctx *ctx, const char *relpath, const void *data,
                      size_t len);

  /* ---- time and profiler data ---- */

  /* Wall-clock facts for rules driven by time (StalledTrainingRule): see
   * smrules_live_info and smrules_rule.invoke_at_time. */
  int (*live_info)(smrules_ctx *ctx, smrules_live_info *out);
  /* Profiler rules (SMRULES_KIND_PROFILER), which read the data of
   * docs/formats.md#profiler-output; without it they fail ("no profiler
   * data").  The window being evaluated: index k (the "step" handed to
   * invoke_at_step) and [start_us, end_us], both ends inclusive:
   * start = first + k * scan_interval_us
   * (docs/formats.md#timestamps-and-windows).  SMRULES_ERR when the rule
   * is not a profiler rule. */
  int (*window)(smrules_ctx *ctx, int64_t *index, int64_t *start_us,
                int64_t *end_us);
  /* System metrics with start_us <= Timestamp <= end_us (compared in ns
   * as the reference does), in the reference's order: files by timestamp,
   * then path, then line.  Usually called with the window's bounds. */
  int (*system_events)(smrules_ctx *ctx, int64_t start_us, int64_t end_us,
                       const smrules_sys_event **out, size_t *n);
  /* Framework events overlapping [start_us, end_us] (end >= start_us and
   * start <= end_us), in the reference's order: pythontimeline,
   * model_timeline, TF profiler, Horovod, SMDataParallel files; within a
   * kind by file timestamp and path; within a file in completion order. */
  int (*framework_events)(smrules_ctx *ctx, int64_t start_us, int64_t end_us,
                          const smrules_fw_event **out, size_t *n);
  /* One key of an event's args (valid as long as the event). */
  int (*fw_arg)(smrules_ctx *ctx, const smrules_fw_event *e, const char *key,
                smrules_arg *out);
  /* First and latest timestamps, file counts, whether the job finished. */
  int (*profiler_info)(smrules_ctx *ctx, smrules_profiler_info *out);
  /* Names seen so far (SMRULES_NAMES_*; `node` selects the node for CPUS
   * and GPUS).  Free the list with strlist_free. */
  int (*profiler_names)(smrules_ctx *ctx, int what, const char *node,
                        smrules_strlist *out);

  /* ---- appended after 1.0: each with "since smrules X.Y", tested with
   * SMRULES_API_HAS by a plugin that may meet an older host ---- */

  /* Appended after the 1.0 layout: test SMRULES_API_HAS(api, sub_rule). */
  /* A rule that runs other rules itself (ProfilerReport runs the profiler
   * rules): a context for one of them, named `name`, to hand to that
   * rule's own callbacks with this same table.  It reads this rule's
   * parameters "<name>_<param>" as its "<param>", has a report of its own
   * (violation, details, report_set, rule_parameters, fail), sees this
   * rule's trial, window and profiler data (events this rule read for the
   * window are handed out, not read again), logs under this rule as
   * "<name>: ...", and writes no files.  Freed by the host with ctx.  NULL
   * for an empty name, when ctx is itself such a context, or past 256 of
   * them for one rule. */
  smrules_ctx *(*sub_rule)(smrules_ctx *ctx, const char *name);
  /* The report of a sub_rule context, as the host writes a profiler
   * rule's ({"RuleTriggered", "Violations", "Details", "Datapoints",
   * "RuleParameters"}): malloc'ed JSON text, read back with
   * smr_json_parse (smrules/json.h), released with free().  NULL for
   * another context. */
  char *(*rule_report)(smrules_ctx *ctx);
  /* The message of a sub_rule context's last api->fail, or NULL: valid
   * until its next call. */
  const char *(*rule_failure)(smrules_ctx *ctx);

  /* Appended: test SMRULES_API_HAS(api, live_workers). */
  /* The newest global step each worker of the trial has saved, as of the
   * host's last scan: (*names)[i] saved up to (*steps)[i], names sorted;
   * *n is 0 before any step and for a trial with one worker (TensorBoard).
   * Owned by the host, valid until the rule returns.  (A rule driven by the
   * clock may also call system_events over any span of a live run: the
   * system metrics recorded beside it by smrules monitor or run --profile,
   * read afresh; SMRULES_NO_MORE_DATA, the rule not failed, when none
   * are.) */
  int (*live_workers)(smrules_ctx *ctx, const char *const **names,
                      const int64_t **steps, size_t *n);

  /* Appended: test SMRULES_API_HAS(api, value_head). */
  /* The first elements of a value, as value() reads it (same statuses,
   * same warning for a record that cannot be read), without reading the
   * rest of a large record when its first and last bytes are enough.
   * dtype and shape are the value's (its element count is the product of
   * the shape); out->count elements are held, exactly the value's first
   * ones: at least max_elems (or all when the value has fewer), and all of
   * them when the whole record was read anyway (a small record, a layout
   * or checksum only a whole read can check).  Release with release. */
  int (*value_head)(smrules_trial *t, const char *name, int64_t step, int mode,
                    size_t max_elems, smrules_tensor *out);

  /* Appended: test SMRULES_API_HAS(api, value_runs). */
  /* Runs of a value's elements without reading the rest of a large
   * record: nruns (at most 64) runs of run_elems (at most 4096) elements
   * of elem_size bytes each (the value's dtype's size), starting at
   * elements at[0..nruns-1], copied back to back into dest (nruns *
   * run_elems * elem_size bytes).  SMRULES_OK; SMRULES_ERR when they
   * cannot be read that way (a remote trial, a record only a whole read
   * can check, a run outside the value, another dtype): read the value
   * with value(), which says why when it cannot be read either.  The
   * runs are as value() would give them; nothing checks the record's
   * payload checksum (value() does). */
  int (*value_runs)(smrules_trial *t, const char *name, int64_t step, int mode,
                    const int64_t *at, size_t nruns, size_t run_elems,
                    size_t elem_size, void *dest);

  /* Appended: test SMRULES_API_HAS(api, pair_value). */
  /* fn over a pair of values: `name` at `step` in `mode` of this rule's
   * trial (a) and of `other` (b, a trial from open_trial), default
   * worker: SMRULES_OK and fn's result_size bytes (at most
   * SMRULES_PAIR_RESULT_MAX) at result; or the status value() gives for
   * the first of a, b that cannot be read (with its warning; b is not
   * read when a cannot be); SMRULES_ERR when fn returned nonzero.  The host may
   * call fn ahead, on another thread, while another rule has a in
   * memory: once a rule has asked for `name`, a read of it at a later
   * step does the work then and keeps the result for this call, so that
   * the trial is not read a second time for it (SimilarAcrossRuns).  So
   * fn must depend only on its arguments (a, b, arg), write only result,
   * and be safe to run on several threads at once; the tensors are the
   * host's (do not release them).  Ask for a step's tensors in
   * increasing step order for the work to be done ahead.  SMRULES_ERR
   * for a result_size above the maximum. */
  int (*pair_value)(smrules_ctx *ctx, smrules_trial *other, const char *name,
                    int64_t step, int mode, smrules_pair_fn fn, const void *arg,
                    void *result, size_t result_size);

  /* Appended: test SMRULES_API_HAS(api, pair_value_parts). */
  /* pair_value, for work that runs element by element: the host may also
   * call fn on runs of elements at the same offsets of a and b (1-D
   * tensors of equal length, a and b of one dtype and shape) and fold
   * the runs' results in order with merge(result so far, next run's
   * result, arg), so that b's record is read in pieces beside a instead
   * of whole (SimilarAcrossRuns: the maximum difference and whether any
   * element differs).  The answer must be the same as fn on the whole
   * values; merge, like fn, on any thread. */
  int (*pair_value_parts)(smrules_ctx *ctx, smrules_trial *other,
                          const char *name, int64_t step, int mode,
                          smrules_pair_fn fn, smrules_pair_merge_fn merge,
                          const void *arg, void *result, size_t result_size);

  /* Appended: test SMRULES_API_HAS(api, value_pieces). */
  /* A value's elements handed to fn(arg, first, piece) in order, in
   * pieces of piece_elems elements (fewer when that is more than 4 MiB,
   * the last one shorter), read from the record piece by piece, so that
   * work that may stop early (UnchangedTensor: the first elements that
   * are not allclose) reads only the pieces it was handed.  Before the
   * first call, *out gets the value as value() gives it but its elements
   * (data NULL; dtype, shape, count, step, mode, wall_time, worker; no
   * release needed).  SMRULES_OK when every piece was handed over or fn
   * stopped them; the status value() gives, without a warning, for a value
   * that is not there (SMRULES_TENSOR_UNAVAILABLE_FOR_STEP, ...);
   * SMRULES_ERR when it cannot be read in pieces: a remote or TensorBoard
   * trial, a record of less than about 16 KB, a string tensor, one with no
   * element, elements in typed fields, a real payload checksum (only a
   * whole read checks it), any layout value_head would read whole, a
   * damaged record, or a piece that could not be read (then possibly after
   * some pieces: forget them).  Then read the value with value(), which
   * gives its status, and its warning when the record is damaged.  As
   * with value_head, the record's framing, name, dtype, shape and the
   * fields around the elements are checked from its first and last bytes;
   * with smdebug's constant payload checksum there is nothing else a whole
   * read checks. */
  int (*value_pieces)(smrules_trial *t, const char *name, int64_t step,
                      int mode, size_t piece_elems, smrules_piece_fn fn,
                      void *arg, smrules_tensor *out);

  /* Appended: test SMRULES_API_HAS(api, value_keep). */
  /* v, a value this rule read with value(), stays held past this step
   * (until release) because the rule will use it again at a later step
   * (WeightUpdateRatio: w_s is w_p at the next step).  SMRULES_OK: the
   * host counts its record in the run's record budget rather than in the
   * step's, so that other rules' records make room for it.  Nonzero: keeping
   * it would not spare a read (the host keeps records of that size for
   * the rules anyway, or the value is not a record read whole) or the
   * budget has no room: release it as usual and read it again. */
  int (*value_keep)(smrules_tensor *v);
} smrules_api;

/* Whether the host's table `api` has `member` (appended after the host
 * was built when not), e.g. SMRULES_API_HAS(api, profiler_names).  Every
 * member of the 1.0 table is in every 1.x host. */
#define SMRULES_API_HAS(api, member)                                           \
  ((api)->struct_size >= offsetof(smrules_api, member) + sizeof((api)->member))

/* -------------------------------------------------------- the plugin */
#define SMRULES_KIND_TENSOR 1   /* invoked per global step */
#define SMRULES_KIND_PROFILER 2 /* invoked per profiler time window */

/* Flags of a rule. */
#define SMRULES_RULE_STATELESS                                                 \
  0x01 /* keeps nothing between steps: a                                       \
          re-run may resume after the last                                     \
          evaluated step without save_state */

typedef struct smrules_rule {
  uint32_t api_version;    /* SMRULES_API_VERSION the plugin was built with */
  uint32_t struct_size;    /* sizeof(smrules_rule) */
  const char *name;        /* SageMaker's rule name, e.g. "LossNotDecreasing" */
  const char *description; /* one line */
  int kind;
  const smrules_param *params; /* ends with type SMRULES_PARAM_END */
  size_t settings_size;        /* size of the settings struct */
  const char *data_needed;     /* one line for `describe`, e.g.
                                  "collection gradients" */
  /* Create the rule's state from validated settings.  Return 0, or
   * SMRULES_ERR after api->fail() for a configuration problem. */
  int (*init)(smrules_ctx *ctx, const void *settings, void **state);
  /* Evaluate one step; see the statuses above. */
  int (*invoke_at_step)(smrules_ctx *ctx, void *state, int64_t step);
  /* Optional: add summary Details to the report when the run ends. */
  int (*finish)(smrules_ctx *ctx, void *state);
  /* Optional: free the state. */
  void (*destroy)(void *state);
  unsigned flags; /* SMRULES_RULE_* */
  /* Optional, for stateful rules: serialize the state after the last
   * evaluated step (malloc'ed text, freed by the host with free()) and
   * restore it in a later run, so that run evaluates only new steps.
   * Without them a stateful rule re-evaluates from the first step when
   * new steps appear (results stay exact; actions are never repeated). */
  char *(*save_state)(smrules_ctx *ctx, void *state);
  int (*load_state)(smrules_ctx *ctx, void *state, const char *text);
  /* Optional, for rules driven by time: called while following a run
   * (run --watch) at least every second, also when nothing new is
   * written; api->live_info tells the time and the last activity.
   * Returns SMRULES_TRIGGERED (recorded at the newest saved step),
   * SMRULES_NO_TRIGGER, or SMRULES_ERR after api->fail(). */
  int (*invoke_at_time)(smrules_ctx *ctx, void *state, double now);
} smrules_rule;

/* The smallest registration a host accepts: the members up to
 * invoke_at_step, which every smrules.h has had.  Members after it were or
 * will be appended; a host reads those a registration's struct_size does
 * not cover as absent. */
#define SMRULES_RULE_MIN_SIZE                                                  \
  (offsetof(smrules_rule, invoke_at_step) +                                    \
   sizeof(((smrules_rule *)0)->invoke_at_step))

typedef const smrules_rule *(*smrules_plugin_init_fn)(const smrules_api *);
/* The one symbol a plugin exports, defined with SMRULES_PLUGIN_INIT (or
 * rulekit's RK_PLUGIN); the host finds it with dlsym. */
const smrules_rule *smrules_plugin_init(const smrules_api *api);

#define SMRULES_PLUGIN_INIT                                                    \
  __attribute__((visibility("default"))) const smrules_rule *                  \
  smrules_plugin_init(const smrules_api *api)

/* Helpers for parameter tables. */
#define SMRULES_OFFSET(type, field) offsetof(type, field)

/* One parameter-table entry per line, by name rather than ten positional
 * fields:
 *
 *   static const smrules_param params[] = {
 *       SMRULES_FLOAT_PARAM("threshold", "1.0", settings, threshold,
 *                           "fire above this", SMRULES_MIN(0)),
 *       SMRULES_STRING_PARAM("mode", NULL, settings, mode, "a mode",
 *                            .allowed = modes, .aliases = "old_name"),
 *       SMRULES_END_PARAMS};
 *
 * Arguments: the parameter's name, its default as a string (NULL: unset
 * unless given), the settings struct type and the field the host fills,
 * the description, then optional designated initializers of the entry:
 * the range/flag helpers below (one per entry: each sets .flags), and
 * .allowed or .aliases.  For a combination no helper covers, write
 * SMRULES_FLAGS(SMRULES_P_REQUIRED | SMRULES_P_MIN), .min = 0. */
#define SMRULES_PARAM_ENTRY(type_, name_, default_, settings_, field_, ...)    \
  {                                                                            \
    .type = (type_), .name = (name_), .default_value = (default_),             \
    .offset = offsetof(settings_, field_), .description = __VA_ARGS__          \
  }
#define SMRULES_FLOAT_PARAM(...)                                               \
  SMRULES_PARAM_ENTRY(SMRULES_PARAM_FLOAT, __VA_ARGS__)
#define SMRULES_INT_PARAM(...)                                                 \
  SMRULES_PARAM_ENTRY(SMRULES_PARAM_INT, __VA_ARGS__)
#define SMRULES_BOOL_PARAM(...)                                                \
  SMRULES_PARAM_ENTRY(SMRULES_PARAM_BOOL, __VA_ARGS__)
#define SMRULES_STRING_PARAM(...)                                              \
  SMRULES_PARAM_ENTRY(SMRULES_PARAM_STRING, __VA_ARGS__)
#define SMRULES_STRLIST_PARAM(...)                                             \
  SMRULES_PARAM_ENTRY(SMRULES_PARAM_STRLIST, __VA_ARGS__)
#define SMRULES_NUMLIST_PARAM(...)                                             \
  SMRULES_PARAM_ENTRY(SMRULES_PARAM_NUMLIST, __VA_ARGS__)
#define SMRULES_END_PARAMS                                                     \
  { .type = SMRULES_PARAM_END }

/* Flags and ranges of an entry (the trailing arguments above). */
#define SMRULES_FLAGS(f) .flags = (f)
#define SMRULES_REQUIRED .flags = SMRULES_P_REQUIRED
#define SMRULES_MIN(lo) .flags = SMRULES_P_MIN, .min = (lo) /* >= lo */
#define SMRULES_ABOVE(lo)                                                      \
  .flags = SMRULES_P_MIN | SMRULES_P_MIN_OPEN, .min = (lo)  /* > lo */
#define SMRULES_MAX(hi) .flags = SMRULES_P_MAX, .max = (hi) /* <= hi */
#define SMRULES_RANGE(lo, hi) /* lo <= value <= hi */                          \
  .flags = SMRULES_P_MIN | SMRULES_P_MAX, .min = (lo), .max = (hi)
#define SMRULES_REGEX .flags = SMRULES_P_REGEX /* must compile as a regex */

#ifdef __cplusplus
}
#endif

#endif
