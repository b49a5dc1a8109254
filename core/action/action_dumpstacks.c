/* action_dumpstacks.c - DumpStacks: before anything is killed, ask the
 * training process for its stacks and keep them under the rule's output
 * folder (docs/actions.md#dumpstacks).  A Python trainer that called
 *   faulthandler.register(signal.SIGUSR1, file=open("stacks.txt", "w"),
 *                         all_threads=True)
 * writes every thread's stack into its stacks.txt when it gets SIGUSR1;
 * DumpStacks sends the signal (through a pidfd, to the process proved to be
 * the one smrules started or was given with --training-pid), waits until
 * that file has grown and stopped growing or `timeout_seconds` pass, and
 * copies what was added, at most `max_bytes`, to
 * <output>/<rule>/stacks-step<N>.txt.  A relative stacks_file is the
 * trainer's: resolved in its working directory (/proc/<pid>/cwd).
 * With `command` (e.g. [py-spy, dump, --pid, "{pid}"] or gdb -batch), no
 * signal is sent: that program is run instead (an argv, never a shell;
 * "{pid}" replaced by the trainer's pid; killed with its process group
 * after timeout_seconds) and what it printed, at most max_bytes, is kept
 * the same way. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "action/action_kind.h"
#include "base/safefs.h"

typedef struct smr_dump_cfg {
  int sig;
  smr_strv command; /* argv template, or empty: the signal */
  char *stacks_file;
  double timeout;
  int64_t max_bytes;
  /* the target, remembered at run start (start) */
  smr_proc_id id;
  bool have_id;
} smr_dump_cfg;

static const smr_setting SETTINGS[] = {
    {.name = "signal",
     .type = SMR_SETTING_CUSTOM,
     .offset = offsetof(smr_dump_cfg, sig),
     .def = "USR1",
     .read = smr_act_read_signal,
     .schema = "{\"type\":[\"string\",\"integer\"]}",
     .description = "the signal the trainer registered with faulthandler"},
    {.name = "command",
     .type = SMR_SETTING_STRLIST,
     .offset = offsetof(smr_dump_cfg, command),
     .description = "a program that prints the trainer's stacks, run "
                    "instead of the signal: an argv, {pid} replaced (e.g. "
                    "[py-spy, dump, --pid, '{pid}'])"},
    {.name = "stacks_file",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_dump_cfg, stacks_file),
     .def = "stacks.txt",
     .description = "the file the trainer writes its stacks to (relative: "
                    "to its working directory)"},
    {.name = "timeout_seconds",
     .type = SMR_SETTING_NUMBER,
     .offset = offsetof(smr_dump_cfg, timeout),
     .min = 0.001,
     .max = SMR_ACT_MAX_TIMEOUT,
     .def = "10",
     .description = "seconds to wait for the stacks"},
    {.name = "max_bytes",
     .type = SMR_SETTING_INT,
     .offset = offsetof(smr_dump_cfg, max_bytes),
     .min = 1,
     .max = 67108864,
     .def = "1048576",
     .description = "the most bytes of stacks kept"},
    {.type = SMR_SETTING_END}};

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

/* Waits until `path` is longer than `before` and kept its size for one
 * look (faulthandler writes everything in its handler), or the deadline;
 * the size then (-1: never grew). */
static int64_t wait_growth(const char *path, int64_t before, double deadline) {
  int64_t last = -1;
  for (;;) {
    int64_t now = file_size(path);
    if (now > before && now == last)
      return now;
    last = now;
    if (smr_act_mono() >= deadline)
      return now > before ? now : -1;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Up to `n` bytes of `path` from offset `from` (malloc'ed, *len set). */
static char *read_range(const char *path, int64_t from, int64_t n,
                        size_t *len) {
  int in = open(path, O_RDONLY | O_CLOEXEC);
  if (in < 0)
    return NULL;
  char *buf = smr_xmalloc((size_t)n + 1);
  size_t got = 0;
  while ((int64_t)got < n) {
    ssize_t k = pread(in, buf + got, (size_t)n - got, (off_t)(from + got));
    if (k <= 0)
      break;
    got += (size_t)k;
  }
  close(in);
  *len = got;
  return buf;
}

/* Writes the stacks to <output>/<rule>/stacks-step<N>.txt, never through
 * a link planted there (base/safefs.h); the path written, or NULL. */
static char *keep(const char *out_dir, const smr_act_event *e, const char *data,
                  size_t len, smr_error *err) {
  int fd;
  if (smr_safe_dir_open(out_dir, NULL, true, &fd, err) != SMR_OK)
    return NULL;
  char *rel =
      smr_xasprintf("%s/stacks-step%lld.txt", e->rule, (long long)e->step);
  int rc = smr_safe_write_below(fd, rel, data, len, out_dir, err);
  close(fd);
  char *path = rc == SMR_OK ? smr_xasprintf("%s/%s", out_dir, rel) : NULL;
  free(rel);
  return path;
}

/* A rule name that is one path component (the runner's folders). */
static bool plain_name(const char *s) {
  const char *why;
  return s && smr_safe_name(s, &why);
}

static void dump(const smr_act_exec *x, smr_dump_cfg *s, const smr_act_event *e,
                 smr_act_result *r) {
  int64_t pid = s->id.pid;
  int pidfd = smr_act_pidfd_of(&s->id);
  if (pidfd < 0) {
    smr_act_set(r, SMR_ACT_REFUSED,
                "pid %lld is gone or is not the training process any more; "
                "nothing signalled",
                (long long)pid);
    return;
  }
  char *src =
      s->stacks_file[0] == '/'
          ? smr_xstrdup(s->stacks_file)
          : smr_xasprintf("/proc/%lld/cwd/%s", (long long)pid, s->stacks_file);
  int64_t before = file_size(src);
  if (before < 0)
    before = 0;
  const char *sname = smr_act_signal_name(s->sig);
  if (smr_act_pidfd_signal(pidfd, s->sig) != 0) {
    smr_act_set(r, SMR_ACT_FAILED, "cannot signal pid %lld: %s", (long long)pid,
                strerror(errno));
  } else {
    int64_t after = wait_growth(src, before, smr_act_mono() + s->timeout);
    if (after < 0) {
      smr_act_set(r, SMR_ACT_FAILED,
                  "sent %s to pid %lld; %s did not grow within %g s (did the "
                  "trainer call faulthandler.register?)",
                  sname ? sname : "the signal", (long long)pid, s->stacks_file,
                  s->timeout);
    } else {
      int64_t n = after - before;
      bool cut = n > s->max_bytes;
      if (cut)
        n = s->max_bytes;
      size_t len = 0;
      char *data = read_range(src, before, n, &len);
      smr_error err;
      smr_error_clear(&err);
      char *dst = data ? keep(x->o->output_dir, e, data, len, &err) : NULL;
      if (!data)
        smr_act_set(r, SMR_ACT_FAILED, "cannot read %s: %s", s->stacks_file,
                    strerror(errno));
      else if (!dst)
        smr_act_set(r, SMR_ACT_FAILED, "cannot keep the stacks: %s", err.msg);
      else
        smr_act_set(r, SMR_ACT_OK, "%zu bytes of stacks%s in %s", len,
                    cut ? " (cut at max_bytes)" : "", dst);
      free(dst);
      free(data);
    }
  }
  free(src);
  close(pidfd);
}

/* `arg` with every "{pid}" replaced by `pid`. */
static char *with_pid(const char *arg, int64_t pid) {
  smr_buf b = {0};
  smr_buf_puts(&b, "");
  for (const char *p = arg; *p;) {
    if (strncmp(p, "{pid}", 5) == 0) {
      smr_buf_printf(&b, "%lld", (long long)pid);
      p += 5;
    } else {
      smr_buf_append(&b, p++, 1);
    }
  }
  return b.data;
}

/* The configured command instead of the signal; the trainer is checked to
 * be the remembered process first, as for the signal. */
static void run_command(const smr_act_exec *x, smr_dump_cfg *s,
                        const smr_act_event *e, smr_act_result *r) {
  int pidfd = smr_act_pidfd_of(&s->id);
  if (pidfd < 0) {
    smr_act_set(r, SMR_ACT_REFUSED,
                "pid %lld is gone or is not the training process any more; "
                "nothing run",
                (long long)s->id.pid);
    return;
  }
  char **argv = smr_xcalloc(s->command.n + 1, sizeof *argv);
  for (size_t i = 0; i < s->command.n; i++)
    argv[i] = with_pid(s->command.v[i], s->id.pid);
  size_t len = 0;
  smr_exec_req q = {.argv = argv,
                    .inherit_env = true,
                    .timeout = s->timeout,
                    .keep_output = (size_t)s->max_bytes,
                    .output_len = &len};
  char *out = NULL;
  int status = smr_exec(&q, &out, r);
  if (status > 0) {
    smr_act_set(r, SMR_ACT_FAILED, "%s exited with status %d: %.200s", argv[0],
                status, out ? out : "");
  } else if (status == 0 && len == 0) {
    smr_act_set(r, SMR_ACT_FAILED, "%s printed nothing", argv[0]);
  } else if (status == 0) {
    smr_error err;
    smr_error_clear(&err);
    char *dst = keep(x->o->output_dir, e, out, len, &err);
    if (!dst)
      smr_act_set(r, SMR_ACT_FAILED, "cannot keep the stacks: %s", err.msg);
    else
      smr_act_set(r, SMR_ACT_OK, "%zu bytes of stacks%s from %s in %s", len,
                  len >= (size_t)s->max_bytes ? " (cut at max_bytes)" : "",
                  argv[0], dst);
    free(dst);
  } else if (r->rc == SMR_ACT_RETRY) {
    r->rc = SMR_ACT_FAILED; /* a second run would not see the same stacks */
  }
  free(out);
  for (size_t i = 0; i < s->command.n; i++)
    free(argv[i]);
  free(argv);
  close(pidfd);
}

static void run(const smr_act_exec *x, const smr_act_item *it,
                const smr_act_event *e, smr_act_result *r) {
  (void)it;
  smr_dump_cfg *s = smr_act_plan_settings(x->plan, &smr_action_dumpstacks);
  if (!s->have_id) {
    smr_act_set(r, SMR_ACT_REFUSED,
                "no training process to ask (run -- COMMAND or "
                "--training-pid N); nothing signalled");
    return;
  }
  if (!x->o->output_dir || !plain_name(e->rule)) {
    smr_act_set(r, SMR_ACT_REFUSED, "no output folder for rule %s", e->rule);
    return;
  }
  if (x->dry_run && s->command.n) {
    smr_act_set(r, SMR_ACT_OK, "would run %s for pid %lld and keep its output",
                s->command.v[0], (long long)s->id.pid);
    return;
  }
  if (s->command.n) {
    run_command(x, s, e, r);
    return;
  }
  if (x->dry_run) {
    smr_act_set(r, SMR_ACT_OK, "would send %s to pid %lld and keep %s",
                smr_act_signal_name(s->sig) ? smr_act_signal_name(s->sig)
                                            : "the signal",
                (long long)s->id.pid, s->stacks_file);
    return;
  }
  dump(x, s, e, r);
}

/* Remember the training process as it is now, so a pid reused later is
 * never signalled. */
static void start(const smr_act_exec *x, size_t n_items) {
  smr_dump_cfg *s = smr_act_plan_settings(x->plan, &smr_action_dumpstacks);
  if (n_items && x->o->training_pid > 0 &&
      smr_proc_identity(x->o->training_pid, &s->id) == 0)
    s->have_id = true;
}

static int parse(smr_act_parse *c, const smr_act_src *src, smr_act_item *it) {
  it->key = smr_xstrdup("DumpStacks");
  it->target = c->o->training_pid > 0
                   ? smr_xasprintf("pid %lld", (long long)c->o->training_pid)
                   : smr_xstrdup("training process");
  if (c->o->training_pid > 0 || c->o->launched)
    return SMR_OK;
  if (c->o->validate_only) {
    smr_settings_warn(&c->sc, src->at,
                      "DumpStacks has no target here: run -- COMMAND, or "
                      "give --training-pid to smrules run");
    return SMR_OK;
  }
  return smr_settings_error(&c->sc, src->at,
                            "DumpStacks needs the training process: "
                            "smrules run ... -- COMMAND, or --training-pid N");
}

/* command as one string is split at spaces (an argv, never a shell). */
static int configure(smr_act_parse *c, const smr_node *m, void *settings) {
  smr_dump_cfg *s = settings;
  const smr_node *v = m ? smr_node_value(m, "command") : NULL;
  if (v && v->type == SMR_NODE_STRING && s->command.n == 1) {
    char *text = smr_xstrdup(s->command.v[0]), *save = NULL;
    smr_strv_free(&s->command);
    for (char *w = strtok_r(text, " ", &save); w;
         w = strtok_r(NULL, " ", &save))
      smr_strv_push(&s->command, w);
    free(text);
  }
  if (v && (s->command.n == 0 || !s->command.v[0][0]))
    return smr_settings_error(&c->sc, v,
                              "command: expected a program and its "
                              "arguments, e.g. [py-spy, dump, --pid, "
                              "'{pid}']");
  return SMR_OK;
}

static const char *const ITEM_KEYS[] = {NULL};

const smr_action_kind smr_action_dumpstacks = {
    .name = "DumpStacks",
    .settings_key = "DumpStacks",
    .settings = SETTINGS,
    .settings_size = sizeof(smr_dump_cfg),
    .configure = configure,
    .item_keys = ITEM_KEYS,
    .parse = parse,
    .default_repeat = {SMR_REPEAT_FIRST, 0},
    .run = run,
    .start = start,
};
