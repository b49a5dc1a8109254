/* cli_monitor.c - `smrules monitor`: record this machine's system metrics
 * in SageMaker's layout until stopped (SIGTERM, SIGINT) or for a given
 * duration. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "monitor/monitor.h"

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
  (void)sig;
  stop_requested = 1;
}

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: smrules monitor --out PROFILER_DIR [--interval-ms N] "
      "[--node algo-N]\n"
      "                       [--duration SECONDS]\n"
      "\n"
      "Samples CPU (per core), I/O wait, host memory, network, disk and\n"
      "NVIDIA GPUs (through libnvidia-ml.so.1 when present) and writes\n"
      "SageMaker's system-metrics files under PROFILER_DIR/system/, one\n"
      "file per minute, so profiler rules and ProfilerReport can read them.\n"
      "\n"
      "  --out DIR          profiler folder (created if missing)\n"
      "  --interval-ms N    sampling interval, 10..60000 (default 500)\n"
      "  --node algo-N      node name (default: SM_CURRENT_HOST, else\n"
      "                     algo-<node rank + 1> from SLURM_NODEID,\n"
      "                     GROUP_RANK or NODE_RANK, else algo-1)\n"
      "  --duration S       stop after S seconds (default: until SIGTERM\n"
      "                     or SIGINT)\n"
      "\n"
      "exit status: 0 stopped cleanly, 2 usage error, 3 cannot write\n");
}

static int bad(const char *what, const char *arg) {
  fprintf(stderr, "smrules monitor: %s: '%s'\n", what, arg);
  return SMR_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, smr_monitor_opts *o,
                      char *node_buf, size_t node_len) {
  static const struct option longopts[] = {
      {"out", required_argument, 0, 'o'},
      {"interval-ms", required_argument, 0, 'i'},
      {"node", required_argument, 0, 'n'},
      {"duration", required_argument, 0, 'd'},
      {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int c;
  char *end;
  optind = 1;
  opterr = 0; /* smr_cli_bad_option says it, with a suggestion */
  while ((c = getopt_long(argc, argv, ":o:i:n:d:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'o':
      o->out_dir = optarg;
      break;
    case 'i': {
      errno = 0;
      long v = strtol(optarg, &end, 10);
      if (*end || errno || v < 10 || v > 60000)
        return bad("--interval-ms must be an integer from 10 to 60000", optarg);
      o->interval_ms = (int)v;
      break;
    }
    case 'n':
      if (!smr_monitor_node_valid(optarg))
        return bad("--node must be algo-<n> (the profiler readers accept "
                   "only those names)",
                   optarg);
      o->node = optarg;
      break;
    case 'd':
      o->duration_s = strtod(optarg, &end);
      if (*end || !isfinite(o->duration_s) || o->duration_s <= 0)
        return bad("--duration must be a positive number of seconds", optarg);
      break;
    case 'h':
      usage(stdout);
      return -1;
    default:
      return smr_cli_bad_option("monitor", argv, "oindh", longopts);
    }
  }
  if (optind < argc)
    return bad("unexpected argument", argv[optind]);
  if (!o->out_dir) {
    fprintf(stderr, "smrules monitor: --out PROFILER_DIR is required\n");
    usage(stderr);
    return SMR_EXIT_USAGE;
  }
  if (!o->node)
    o->node = smr_monitor_default_node(node_buf, node_len);
  return SMR_EXIT_OK;
}

int smr_cmd_monitor(int argc, char **argv) {
  smr_monitor_opts o = {.interval_ms = 500, .log = stderr};
  char node[32];
  int rc = parse_args(argc, argv, &o, node, sizeof node);
  if (rc != SMR_EXIT_OK)
    return rc < 0 ? SMR_EXIT_OK : rc;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  smr_error err;
  smr_error_clear(&err);
  if (smr_monitor_run(&o, &stop_requested, &err) != SMR_OK) {
    smr_cli_print_error(&err);
    return SMR_EXIT_UNREADABLE;
  }
  return SMR_EXIT_OK;
}
