/* fuzz_profiler.c - libFuzzer target for the profiler-output parsers: the
 * input is read as system-metric JSON lines (every line), as a Chrome
 * trace file (array of events), as a TF profiler trace object and as the
 * gzip bytes of a trace.json.gz (inflated in memory, then parsed).  Every
 * event produced must be consistent (end = start + duration, strings set)
 * and its args must answer fw_arg for any key. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/profiler.h"

static void fuzz_lines(const char *data, size_t size) {
  char *scratch = malloc(size + 8);
  if (!scratch)
    return;
  for (size_t i = 0; i < size;) {
    size_t j = i;
    while (j < size && data[j] != '\n' && data[j] != '\r')
      j++;
    smr_sys_line l;
    char why[160];
    if (smr_profiler_parse_sys_line(data + i, j - i, scratch, &l, why,
                                    sizeof why) == 0) {
      if (!isfinite(l.timestamp) || !l.type || !l.name || !l.dimension ||
          !l.node)
        abort();
      /* the strings live in scratch and are terminated */
      if (strlen(l.type) > j - i || strlen(l.node) > j - i)
        abort();
    } else if (!strstr(why, "expected")) {
      abort(); /* every refusal says what was expected */
    }
    i = j + 1;
  }
  free(scratch);
}

static void check_event(void *arg, const smrules_fw_event *e) {
  (void)arg;
  if (!e->name || !e->phase || !e->node || !e->file_type)
    abort();
  if (!isnan(e->start_us) && !isnan(e->duration_us) &&
      !(e->end_us == e->start_us + e->duration_us) && !isnan(e->end_us))
    abort();
  static const char *const keys[] = {"pid", "step_num", "name", "x", ""};
  smr_strv scratch = {0};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    smrules_arg a;
    int t = smr_profiler_fw_arg(e, keys[i], &a, &scratch);
    if (t != a.type || (t != SMRULES_ARG_MISSING && !a.json) ||
        (t == SMRULES_ARG_STRING && !a.str))
      abort();
  }
  smr_strv_free(&scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *d = (const char *)data;
  fuzz_lines(d, size);
  char why[160];
  for (int kind = 0; kind < SMR_FW_KINDS; kind++)
    if (kind == SMR_FW_PYTHONTIMELINE || kind == SMR_FW_TFPROFILER)
      smr_profiler_parse_trace(d, size, "0-algo-1", kind, check_event, NULL,
                               why, sizeof why);
  /* the input as trace.json.gz bytes: inflated, or refused saying what
   * was expected; the output is bounded and NUL-terminated */
  char *text = NULL;
  size_t len = 0;
  smr_error err;
  if (smr_profiler_gunzip(d, size, 1u << 20, "fuzz.trace.json.gz", &text, &len,
                          &err) == SMR_OK) {
    if (len > (1u << 20) || text[len] != '\0')
      abort();
    smr_profiler_parse_trace(text, len, "host", SMR_FW_TFPROFILER, check_event,
                             NULL, why, sizeof why);
  } else if (text || (!strstr(err.msg, "expected") &&
                      !strstr(err.msg, "out of memory"))) {
    abort();
  }
  free(text);
  char *node = malloc(size + 1);
  if (node) {
    memcpy(node, d, size);
    node[size] = '\0';
    free(smr_profiler_node_rewrite(node));
    free(node);
  }
  return 0;
}
