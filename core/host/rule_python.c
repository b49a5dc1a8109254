/* rule_python.c - the kind of rule written in Python (`python:` in
 * rules.yaml): a SageMaker custom rule, a class deriving smdebug's Rule,
 * run unchanged by Debian's /usr/bin/python3 in a process of its own
 * (python/smrules/_rule_host.py is the other side).
 *
 * Why a process and not an embedded interpreter: a Python rule is trusted
 * code that imports what it likes (NumPy, SciPy, ...), and an extension
 * that crashes, leaks or takes the GIL forever would take the whole rule
 * engine with it.  In a process of its own a crash is this rule's Error
 * status while the other rules go on and their actions fire; smrules
 * links no libpython (a Python of another version or none at all changes
 * nothing for the C and Lua rules), and Python's threads, signal handlers
 * and global interpreter state never meet the runner's threads.  The price,
 * one line of JSON per step over a socket and the process's own reading of
 * the trial, is small beside what a rule reads (docs/python.md).
 *
 * Messages are lines of JSON: smrules sends load, step and finish; the
 * process answers each with a status (smrules.h's), after any number of log
 * lines.  A failure to load (an exception at import or in __init__) is not
 * a configuration error: the rule's first step reports it as the rule's
 * Error, with the traceback, and the other rules run. */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/jsonw.h"
#include "base/text.h"
#include "host/rulekind.h"

extern char **environ;

#define DEFAULT_PYTHON "/usr/bin/python3"
#define CHILD_FD 3
/* A reply or log line longer than this is the rule misbehaving. */
#define MAX_LINE (16u << 20)
/* A hang guard per call (one step, finish): a rule that takes longer is
 * stopped and reported as an Error.  $SMRULES_PYTHON_TIMEOUT (seconds) sets
 * another; loading (the interpreter, NumPy, the rule's imports) always has
 * at least this long. */
#define CALL_TIMEOUT_S 600
/* After smrules closes the socket, the process has this long to exit on
 * its own before SIGKILL. */
#define EXIT_GRACE_MS 2000
#define SLOT 16 /* bytes of settings per string parameter */

typedef struct py_rule {
  pid_t pid;    /* 0: no process */
  int fd;       /* the socket, -1 when closed */
  char *broken; /* why the rule cannot run: its next call reports it */
  smr_buf in;   /* bytes received, not yet a whole line */
  size_t in_off;
  bool loading;     /* a failure is kept in `broken` rather than reported */
  double timeout_s; /* per call */
  char *asked;      /* the actions the rule's action_str names, as JSON */
  const smrules_api *api;
} py_rule;

/* ------------------------------------------------------- the process */

/* The folder holding the smrules package: $SMRULES_PYTHONPATH, else
 * <folder of this binary>/python when it holds it (make python's build
 * tree), else NULL (the interpreter's own path: make install-python). */
static char *package_dir(void) {
  const char *env = getenv("SMRULES_PYTHONPATH");
  if (env && *env)
    return smr_xstrdup(env);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash)
    return NULL;
  *slash = '\0';
  char *dir = smr_xasprintf("%s/python", exe);
  char *probe = smr_xasprintf("%s/smrules/_rule_host.py", dir);
  struct stat st;
  bool ok = stat(probe, &st) == 0 && S_ISREG(st.st_mode);
  free(probe);
  if (ok)
    return dir;
  free(dir);
  return NULL;
}

/* environ with PYTHONPATH led by the package folder, and no bytecode
 * written next to the user's rule. */
static char **child_env(void) {
  char *pkg = package_dir();
  size_t n = 0;
  while (environ && environ[n])
    n++;
  char **env = smr_xcalloc(n + 3, sizeof *env);
  size_t k = 0;
  const char *old = getenv("PYTHONPATH");
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "PYTHONPATH=", 11) != 0 &&
        strncmp(environ[i], "PYTHONDONTWRITEBYTECODE=", 24) != 0)
      env[k++] = smr_xstrdup(environ[i]);
  if (pkg)
    env[k++] = smr_xasprintf("PYTHONPATH=%s%s%s", pkg, old && *old ? ":" : "",
                             old && *old ? old : "");
  else if (old)
    env[k++] = smr_xasprintf("PYTHONPATH=%s", old);
  env[k++] = smr_xstrdup("PYTHONDONTWRITEBYTECODE=1");
  free(pkg);
  return env;
}

static void free_env(char **env) {
  for (size_t i = 0; env && env[i]; i++)
    free(env[i]);
  free(env);
}

/* In the child (async-signal-safe calls only: the runner may have threads):
 * its own process group (a terminal's Ctrl-C and StopTraining are not for
 * it), killed if smrules dies, stdin from /dev/null, stdout to stderr
 * (smrules' stdout may be a report), default signals, the socket as fd 3,
 * nothing else inherited. */
static void child_exec(const char *python, char *const argv[],
                       char *const envp[], int sock, int report) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int null = open("/dev/null", O_RDONLY);
  if (null >= 0)
    dup2(null, STDIN_FILENO);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  struct sigaction sa = {.sa_handler = SIG_DFL};
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &sa, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (sock == CHILD_FD)
    fcntl(CHILD_FD, F_SETFD, 0);
  else
    dup2(sock, CHILD_FD); /* dup2 clears close-on-exec */
  if (report == CHILD_FD + 1 || report > CHILD_FD + 1) {
    /* every other descriptor goes, but the exec-failure report (cloexec) */
    for (int fd = CHILD_FD + 1; fd < report; fd++)
      close(fd);
#ifdef SYS_close_range
    syscall(SYS_close_range, (unsigned)report + 1, ~0u, 0);
#endif
  }
  execve(python, argv, envp);
  int e = errno;
  ssize_t w = write(report, &e, sizeof e);
  (void)w;
  _exit(127);
}

static int spawn(py_rule *p, const char *python, char **why) {
  int sv[2], report[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    *why = smr_xasprintf("socketpair: %s", strerror(errno));
    return -1;
  }
  if (pipe2(report, O_CLOEXEC) != 0) {
    *why = smr_xasprintf("pipe: %s", strerror(errno));
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  char fdarg[16];
  snprintf(fdarg, sizeof fdarg, "%d", CHILD_FD);
  char *argv[] = {(char *)python, "-m", "smrules._rule_host", fdarg, NULL};
  char **envp = child_env();
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    close(report[0]);
    child_exec(python, argv, envp, sv[1], report[1]);
  }
  int fork_errno = errno;
  free_env(envp);
  close(sv[1]);
  close(report[1]);
  if (pid < 0) {
    *why = smr_xasprintf("fork: %s", strerror(fork_errno));
    close(sv[0]);
    close(report[0]);
    return -1;
  }
  setpgid(pid, pid); /* also in the child: whichever runs first */
  int e = 0;
  ssize_t n;
  do
    n = read(report[0], &e, sizeof e);
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == (ssize_t)sizeof e) { /* exec failed */
    waitpid(pid, NULL, 0);
    close(sv[0]);
    *why = smr_xasprintf("cannot run %s: %s (SMRULES_PYTHON names another "
                         "interpreter)",
                         python, strerror(e));
    return -1;
  }
  p->pid = pid;
  p->fd = sv[0];
  return 0;
}

/* How the process ended, for a message ("exited with status 1", "was
 * killed by signal 11 (Segmentation fault)"); reaps it. */
static char *reap(py_rule *p, bool kill_it) {
  if (p->pid <= 0)
    return smr_xstrdup("is not running");
  if (kill_it)
    kill(p->pid, SIGKILL);
  int status = 0;
  pid_t w;
  for (int waited = 0;; waited += 10) {
    w = waitpid(p->pid, &status, WNOHANG);
    if (w != 0 || waited >= EXIT_GRACE_MS)
      break;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (w == 0) {
    kill(p->pid, SIGKILL);
    while ((w = waitpid(p->pid, &status, 0)) < 0 && errno == EINTR)
      ;
  }
  p->pid = 0;
  if (w < 0)
    return smr_xasprintf("ended (%s)", strerror(errno));
  if (WIFSIGNALED(status))
    return smr_xasprintf("was killed by signal %d (%s)", WTERMSIG(status),
                         strsignal(WTERMSIG(status)));
  return smr_xasprintf("exited with status %d", WEXITSTATUS(status));
}

static void close_socket(py_rule *p) {
  if (p->fd >= 0)
    close(p->fd);
  p->fd = -1;
}

/* The process is gone or must go: stop it and remember why the rule
 * cannot run any more: "<op>: the Python process <why>", `why` NULL for
 * how it ended (reap). */
static void set_broken(py_rule *p, bool kill_it, const char *op,
                       const char *why) {
  close_socket(p);
  char *how = reap(p, kill_it);
  free(p->broken);
  p->broken = smr_xasprintf("%s: the Python process %s", op, why ? why : how);
  free(how);
}

/* --------------------------------------------------------- messages */

static int send_all(py_rule *p, const char *data, size_t len) {
  while (len > 0) {
    ssize_t w = send(p->fd, data, len, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    data += w;
    len -= (size_t)w;
  }
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The next whole line (malloc'ed, without its newline), or NULL: *why
 * says why (the process ended, the time ran out, a line too long). */
static char *read_line(py_rule *p, double deadline, char **why) {
  for (;;) {
    char *nl = p->in.len > p->in_off
                   ? memchr(p->in.data + p->in_off, '\n', p->in.len - p->in_off)
                   : NULL;
    if (nl) {
      char *line = smr_xstrndup(p->in.data + p->in_off,
                                (size_t)(nl - (p->in.data + p->in_off)));
      p->in_off = (size_t)(nl - p->in.data) + 1;
      if (p->in_off == p->in.len)
        p->in.len = p->in_off = 0;
      return line;
    }
    if (p->in.len - p->in_off > MAX_LINE) {
      *why = smr_xasprintf("sent a line longer than %u bytes", MAX_LINE);
      return NULL;
    }
    if (p->in_off > 0) { /* keep the buffer from growing with old lines */
      memmove(p->in.data, p->in.data + p->in_off, p->in.len - p->in_off);
      p->in.len -= p->in_off;
      p->in_off = 0;
    }
    double left = deadline - now_s();
    if (left <= 0) {
      *why = smr_xasprintf("took longer than %g s and was stopped",
                           p->loading && p->timeout_s < CALL_TIMEOUT_S
                               ? (double)CALL_TIMEOUT_S
                               : p->timeout_s);
      return NULL;
    }
    struct pollfd pf = {p->fd, POLLIN, 0};
    int pr = poll(&pf, 1, left > 1000 ? 1000 * 1000 : (int)(left * 1000) + 1);
    if (pr < 0 && errno != EINTR) {
      *why = smr_xasprintf("poll: %s", strerror(errno));
      return NULL;
    }
    if (pr <= 0)
      continue;
    char buf[65536];
    ssize_t n = recv(p->fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n <= 0) {
      *why = NULL; /* the process ended: reap() says how */
      return NULL;
    }
    smr_buf_append(&p->in, buf, (size_t)n);
  }
}

/* The rule's Details, as its report dict holds them after the call. */
static void take_details(py_rule *p, smrules_ctx *ctx, const cJSON *d) {
  if (!ctx || !cJSON_IsObject(d))
    return;
  smrules_json *det = p->api->details_reset(ctx);
  for (const cJSON *c = d->child; c; c = c->next) {
    char *text = cJSON_PrintUnformatted(c);
    if (text && c->string)
      p->api->json_raw(det, c->string, text);
    free(text);
  }
}

/* What the rule printed is shown as it is (the user asked for it); what it
 * logged goes through the rule's log, at its level (INFO shows with -v). */
static void log_line(py_rule *p, smrules_ctx *ctx, const cJSON *msg) {
  const cJSON *lv = cJSON_GetObjectItemCaseSensitive(msg, "log");
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(msg, "msg");
  const cJSON *pr = cJSON_GetObjectItemCaseSensitive(msg, "print");
  if (!ctx || !cJSON_IsNumber(lv) || !cJSON_IsString(m))
    return;
  if (cJSON_IsTrue(pr)) {
    char *safe = smr_term_safe(m->valuestring);
    fprintf(stderr, "smrules: %s: %s\n", smr_ctx_rule_name(ctx), safe);
    free(safe);
  } else {
    p->api->log(ctx, (int)lv->valuedouble, "%s", m->valuestring);
  }
}

/* Send one request and wait for its answer: the status, or SMRULES_ERR
 * with api->fail's message set.  `op` is for messages ("step 12"). */
static int call(py_rule *p, smrules_ctx *ctx, const char *request,
                const char *op) {
  if (p->broken) {
    if (ctx && !p->loading)
      p->api->fail(ctx, "%s", p->broken);
    return SMRULES_ERR;
  }
  if (send_all(p, request, strlen(request)) != 0) {
    set_broken(p, false, op, NULL);
    return call(p, ctx, "", op);
  }
  double limit = p->loading && p->timeout_s < CALL_TIMEOUT_S ? CALL_TIMEOUT_S
                                                             : p->timeout_s;
  double deadline = now_s() + limit;
  for (;;) {
    char *why = NULL;
    char *line = read_line(p, deadline, &why);
    if (!line) {
      set_broken(p, why != NULL, op, why);
      free(why);
      return call(p, ctx, "", op);
    }
    cJSON *j = cJSON_Parse(line);
    free(line);
    if (!cJSON_IsObject(j)) {
      cJSON_Delete(j);
      set_broken(p, true, op,
                 "answered with something that is not JSON (a rule must not "
                 "write to file descriptor 3)");
      return call(p, ctx, "", op);
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "log")) {
      log_line(p, ctx, j);
      cJSON_Delete(j);
      continue;
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
    int status = cJSON_IsNumber(st) ? (int)st->valuedouble : SMRULES_ERR;
    take_details(p, ctx, cJSON_GetObjectItemCaseSensitive(j, "details"));
    const cJSON *acts = cJSON_GetObjectItemCaseSensitive(j, "actions");
    if (p->loading && cJSON_IsArray(acts) && !p->asked)
      p->asked = cJSON_PrintUnformatted(acts);
    const char *text = cJSON_IsString(m) ? m->valuestring : NULL;
    if (status == SMRULES_ERR && p->loading) {
      free(p->broken);
      p->broken = smr_xasprintf("%s: %s", op, text ? text : "failed");
    } else if (status == SMRULES_ERR && ctx)
      p->api->fail(ctx, "%s: %s", op, text ? text : "the rule failed");
    else if (status < 0 && text && ctx) /* unavailable data: why */
      p->api->log(ctx, 0, "%s: %s", op, text);
    cJSON_Delete(j);
    return status;
  }
}

/* ------------------------------------------------------ the rule ops */

static int py_invoke(void *impl, smrules_ctx *ctx, int64_t step) {
  char req[64], op[48];
  snprintf(req, sizeof req, "{\"op\":\"step\",\"step\":%lld}\n",
           (long long)step);
  snprintf(op, sizeof op, "step %lld", (long long)step);
  return call(impl, ctx, req, op);
}

static int py_finish(void *impl, smrules_ctx *ctx) {
  py_rule *p = impl;
  if (p->broken) /* reported by the step that found it */
    return 0;
  int st = call(p, ctx, "{\"op\":\"finish\"}\n", "finish");
  return st == SMRULES_ERR ? SMRULES_ERR : 0;
}

static void py_destroy(void *impl) {
  py_rule *p = impl;
  if (!p)
    return;
  close_socket(p); /* the process reads the end of its input and exits */
  free(reap(p, false));
  free(p->broken);
  free(p->asked);
  smr_buf_free(&p->in);
  free(p);
}

static const smr_rule_ops PYTHON_OPS = {
    .kind = "python",
    .invoke_at_step = py_invoke,
    .finish = py_finish,
    .destroy = py_destroy,
};

/* ---------------------------------------------------------- the kind */

static bool py_claims(const smr_rule_config *rc) {
  return rc->python != NULL;
}

int smr_python_rule_check(const smr_rule_config *rc, const char *config_path,
                          smr_error *err) {
  const smr_node *given = rc->parameters;
  size_t n = given && given->type == SMR_NODE_MAP ? given->n : 0;
  for (size_t i = 0; i < n; i++) {
    smr_node_type ty = given->items[i]->type;
    if (ty == SMR_NODE_LIST || ty == SMR_NODE_MAP)
      return smr_error_set(
          err, SMR_ERR_USAGE, config_path, -1,
          "line %d, column %d: parameter '%s' of a python rule is a %s; "
          "SageMaker passes a custom rule's parameters as strings: give it "
          "as one (e.g. \"a,b\") and split it in the rule",
          given->items[i]->line, given->items[i]->col, given->keys[i],
          ty == SMR_NODE_LIST ? "list" : "map");
  }
  return SMR_OK;
}

/* SageMaker passes a custom rule's parameters as strings: every scalar is
 * a string parameter, listed in RuleParameters as given. */
static int py_params(smr_rule *r, const smr_rule_config *rc,
                     const smr_rule_env *env, smr_error *err) {
  int bad = smr_python_rule_check(rc, env->config_path, err);
  if (bad)
    return bad;
  const smr_node *given = rc->parameters;
  size_t n = given && given->type == SMR_NODE_MAP ? given->n : 0;
  smrules_param *t = smr_xcalloc(n + 1, sizeof *t);
  for (size_t i = 0; i < n; i++) {
    t[i].type = SMRULES_PARAM_STRING;
    t[i].name = given->keys[i];
    t[i].offset = i * SLOT;
  }
  void *settings = smr_xcalloc(n + 1, SLOT);
  int st = smr_params_apply(r->type, t, given, rc->line, rc->col,
                            env->config_path, settings, &r->params, err);
  free(settings);
  free(t);
  return st;
}

static int py_prepare(smr_rule *r, const smr_rule_config *rc,
                      const smr_rule_env *env, smr_error *err) {
  if (rc->python_class) {
    r->type = smr_xasprintf("python:%s", rc->python_class);
  } else {
    const char *b = strrchr(rc->python, '/');
    b = b ? b + 1 : rc->python;
    const char *dot = strrchr(b, '.');
    r->type = smr_xasprintf(
        "python:%.*s", (int)(dot && dot != b ? dot - b : (long)strlen(b)), b);
  }
  r->code = rc->python;
  return py_params(r, rc, env, err);
}

/* {"op":"load", ...}: the file, the class, the parameters as strings, the
 * trial and the instance's name. */
static char *load_request(const smr_rule_config *rc, const char *trial_root) {
  smr_jw w = {0};
  smr_jw_obj(&w);
  smr_jw_key(&w, "op");
  smr_jw_str(&w, "load");
  smr_jw_key(&w, "file");
  smr_jw_str(&w, rc->python);
  smr_jw_key(&w, "class");
  if (rc->python_class)
    smr_jw_str(&w, rc->python_class);
  else
    smr_jw_null(&w);
  smr_jw_key(&w, "rule");
  smr_jw_str(&w, rc->name);
  smr_jw_key(&w, "trial");
  smr_jw_str(&w, trial_root);
  smr_jw_key(&w, "params");
  smr_jw_obj(&w);
  const smr_node *given = rc->parameters;
  for (size_t i = 0; given && given->type == SMR_NODE_MAP && i < given->n;
       i++) {
    smr_jw_key(&w, given->keys[i]);
    if (given->items[i]->type == SMR_NODE_NULL)
      smr_jw_str(&w, "None");
    else
      smr_jw_str(&w, given->items[i]->s ? given->items[i]->s : "");
  }
  smr_jw_obj_end(&w);
  smr_jw_obj_end(&w);
  char *text = smr_jw_finish(&w);
  char *line = smr_xasprintf("%s\n", text);
  free(text);
  return line;
}

/* ---- started early: processes sent their load before the C trial is
 * open (smr_python_prestart), parked until their rule starts */
#define PARKED_MAX 64
typedef struct parked {
  pid_t pid;
  int fd;
  char *python, *load; /* the interpreter and the request sent */
} parked;
static parked park[PARKED_MAX];
static size_t nparked;

static const char *python_path(void) {
  const char *python = getenv("SMRULES_PYTHON");
  return python && *python ? python : DEFAULT_PYTHON;
}

void smr_python_prestart(const smr_config *cfg, const char *trial_root) {
  const char *python = python_path();
  for (size_t i = 0; i < cfg->n_rules && nparked < PARKED_MAX; i++) {
    if (!cfg->rules[i].python)
      continue;
    py_rule p = {.fd = -1};
    char *why = NULL;
    if (spawn(&p, python, &why) != 0) { /* py_start tries and reports */
      free(why);
      return;
    }
    char *load = load_request(&cfg->rules[i], trial_root);
    if (send_all(&p, load, strlen(load)) != 0) {
      free(load);
      close_socket(&p);
      free(reap(&p, true));
      continue;
    }
    park[nparked++] = (parked){p.pid, p.fd, smr_xstrdup(python), load};
  }
}

/* A parked process sent exactly `load` by `python`: moved into p. */
static bool unpark(py_rule *p, const char *python, const char *load) {
  for (size_t i = 0; i < nparked; i++) {
    if (strcmp(park[i].python, python) != 0 || strcmp(park[i].load, load) != 0)
      continue;
    p->pid = park[i].pid;
    p->fd = park[i].fd;
    free(park[i].python);
    free(park[i].load);
    park[i] = park[--nparked];
    return true;
  }
  return false;
}

void smr_python_prestart_end(void) {
  while (nparked) {
    parked *k = &park[--nparked];
    py_rule p = {.pid = k->pid, .fd = k->fd};
    close_socket(&p); /* it reads the end of its input and exits */
    free(reap(&p, false));
    free(k->python);
    free(k->load);
  }
}

static int py_start(smr_rule *r, const smr_rule_config *rc,
                    const smr_rule_env *env, smr_error *err) {
  (void)err;
  py_rule *p = smr_xcalloc(1, sizeof *p);
  p->fd = -1;
  p->api = smr_host_api();
  const char *t = getenv("SMRULES_PYTHON_TIMEOUT");
  char *end = NULL;
  p->timeout_s = t && *t ? strtod(t, &end) : CALL_TIMEOUT_S;
  if (!(p->timeout_s > 0) || (end && *end))
    p->timeout_s = CALL_TIMEOUT_S;
  r->impl = p;
  r->ops = &PYTHON_OPS;
  const char *python = python_path();
  char *req = load_request(rc, smr_trial_root(env->trial));
  /* started early with this very request: its answer is what is left */
  bool sent = unpark(p, python, req);
  char *why = NULL;
  if (!sent && spawn(p, python, &why) != 0) {
    p->broken = why;
    free(req);
    return SMR_OK; /* the rule's Error, not the run's */
  }
  /* the load's own failure (an exception at import or in __init__) is
   * kept for the first step, which reports it */
  p->loading = true;
  int st = call(p, r->ctx, sent ? "" : req, "loading the rule");
  p->loading = false;
  free(req);
  if (st != SMRULES_NO_TRIGGER && !p->broken)
    p->broken = smr_xasprintf("loading the rule: %s", smr_status_name(st));
  if (p->broken) { /* the process is of no more use */
    close_socket(p);
    free(reap(p, false));
  }
  /* smdebug's action_str is the rule's wish; rules.yaml decides what a
   * trigger does (docs/python.md: checked before the run, and code alone
   * never stops training) */
  if (p->asked && !(rc->actions && rc->actions->n > 0))
    p->api->log(r->ctx, 2,
                "the rule's action_str asks for actions that rules.yaml does "
                "not give it; smrules takes a rule's actions from rules.yaml: "
                "add 'actions: %s' to the rule's entry",
                p->asked);
  return SMR_OK;
}

const smr_rule_kind smr_kind_python = {
    .name = "python",
    .claims = py_claims,
    .prepare = py_prepare,
    .start = py_start,
};
