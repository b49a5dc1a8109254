/* rpt_int.h - ProfilerReport internals shared by its files.
 *
 * How it works (docs/profiler-report.md): ProfilerReport is one plugin that
 * runs the eleven profiler rules itself, each with its own state and report,
 * over the window the host hands it.  Two kinds of sub-rules:
 *
 * - the system-metric rules are "engines" (plugins/engines/prof_rules.h):
 *   ProfilerReport calls them with the window's events and their own
 *   clock pinned at the trial start (docs/profiler-report.md#evaluation), and
 * reads their reports;
 * - the framework-metric rules are engines too (plugins/engines/
 *   fw_rules.h), written as plugin registrations bound to the host's
 *   function table.  ProfilerReport runs each through the host: a context
 *   of the host's made for it (api->sub_rule) reads "<Rule>_<param>" as
 *   its parameters (docs/profiler-report.md#parameters) and this window
 *   and its events, and holds the sub-rule's own report, which
 *   ProfilerReport reads back (api->rule_report) with the JSON model
 *   (smrules/json.h), as it reads an engine's (rpt_report.c). */
#ifndef RPT_INT_H
#define RPT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "fw_rules.h"
#include "prof_rules.h"
#include "smrules/json.h"
#include "smrules/rulekit.h"

#define RPT_NSUB 11

/* The host's function table (ProfilerReport's and its sub-rules'). */
extern const smrules_api *rpt_host;

/* The window being evaluated, fetched from the host at most once. */
typedef struct rpt_window {
  smrules_ctx *host_ctx;
  int64_t index, start, end;
  int64_t first_us; /* the sub-rules' own clock
                       (docs/profiler-report.md#evaluation) */
  const smrules_sys_event *sys;
  size_t nsys;
  const smrules_fw_event *fw;
  size_t nfw;
} rpt_window;

/* One sub-rule: its code (a plugin registration or an engine), state and
 * report. */
typedef struct rpt_sub {
  const char *name;         /* "CPUBottleneck" */
  const smrules_rule *reg;  /* a rule run through the host, or */
  const pr_engine_ops *eng; /* an engine; neither: not built in */
  smrules_ctx *ctx;         /* reg's context (api->sub_rule) */
  void *state;              /* reg's state or the engine */
  const void *settings;     /* inside ProfilerReport's settings */
  bool ready;               /* set up */
  rpt_window *win;
  /* the report as last read back (rpt_report.c) */
  smr_json *details;
  int64_t triggered, violations, datapoints;
  char *rule_params;   /* NULL until known */
  int64_t windows_met; /* windows whose condition was met */
  int64_t errors;      /* windows that failed */
} rpt_sub;

/* A framework-metric engine (fw_rules.h): the rule's registration, with
 * `api` as its function table. */
typedef const smrules_rule *(*rpt_sub_init_fn)(const smrules_api *api);

/* rpt_report.c: the sub-rule's report read back (from the host for a
 * rule, from its engine for an engine), 0 or SMRULES_ERR when it cannot
 * be; and the report as its JSON file holds it (malloc'ed). */
int rpt_sub_read_report(rpt_sub *s);
char *rpt_sub_report_json(const rpt_sub *s);

/* ---- the HTML report (rpt_html*.c) ---- */
typedef struct rpt_view {
  const rpt_sub *subs; /* RPT_NSUB, evaluation order */
  int64_t windows;     /* evaluated so far */
  int64_t first_us, scan_interval_us;
  bool finished; /* the job ended and every window was evaluated */
} rpt_view;

/* The whole self-contained HTML document (malloc'ed). */
char *rpt_html(const rpt_view *v);

/* The sub-rule named `name` in the view, or NULL. */
const rpt_sub *rpt_find(const rpt_view *v, const char *name);

#endif
