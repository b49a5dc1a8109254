/* action_hook.c - configured hooks: `exec` runs a program (posix_spawn,
 * never a shell) whose argv is a template expanded per argument, with the
 * event in SMRULES_* environment variables and as JSON on stdin, killed
 * (with its process group) when it outlives its timeout; `webhook` POSTs
 * the event JSON over HTTP(S) with libcurl (smr_act_http_post, which the
 * Alertmanager action shares). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "action/action_kind.h"
#include "base/curl_lazy.h"

#define OUTPUT_MAX 4096
#define TERM_WAIT 1.0

extern char **environ;

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------- exec */

static char **build_env(const smr_exec_req *q) {
  size_t n = 0, m = 0;
  for (char **e = environ; q->inherit_env && e && *e; e++)
    n++;
  for (char **e = q->env; e && *e; e++)
    m++;
  char **out = smr_xcalloc(n + m + 2, sizeof *out);
  size_t k = 0;
  for (char **e = environ; q->inherit_env && e && *e; e++)
    if (strncmp(*e, "SMRULES_", 8) != 0) /* ours are set below */
      out[k++] = *e;
  if (!q->inherit_env)
    out[k++] = "PATH=/usr/local/bin:/usr/bin:/bin";
  for (char **e = q->env; e && *e; e++)
    out[k++] = *e;
  return out;
}

typedef struct child_io {
  int in, out; /* our ends; -1 once closed */
  const char *data;
  size_t len, sent;
  smr_buf output;
  size_t cap; /* output kept, at most */
} child_io;

static void close_fd(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

static void drop_pending_sigpipe(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  struct timespec zero = {0, 0};
  while (sigtimedwait(&set, NULL, &zero) > 0) {
  }
}

static void pump(child_io *io, int wait_ms) {
  struct pollfd p[2] = {{.fd = io->in, .events = POLLOUT},
                        {.fd = io->out, .events = POLLIN}};
  if (poll(p, 2, wait_ms) <= 0)
    return;
  if (io->in >= 0 && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
    ssize_t k = write(io->in, io->data + io->sent, io->len - io->sent);
    if (k > 0)
      io->sent += (size_t)k;
    if (k < 0 && errno != EAGAIN && errno != EINTR) {
      drop_pending_sigpipe(); /* the hook does not read its stdin */
      io->sent = io->len;
    }
    if (io->sent >= io->len)
      close_fd(&io->in);
  }
  if (io->out >= 0 && (p[1].revents & (POLLIN | POLLERR | POLLHUP))) {
    char buf[1024];
    ssize_t k = read(io->out, buf, sizeof buf);
    size_t room = io->output.len < io->cap ? io->cap - io->output.len : 0;
    if (k > 0 && room)
      smr_buf_append(&io->output, buf, (size_t)k < room ? (size_t)k : room);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
      close_fd(&io->out);
  }
}

/* Waits for pid until `deadline`; true when it exited (status set). */
static bool wait_until(pid_t pid, child_io *io, double deadline, int *status) {
  /* A child usually exits right after closing its output: poll for it
   * with a short, growing sleep (0.2 ms .. 10 ms) rather than a fixed
   * 10 ms, which would add that much to every action's latency. */
  long sleep_ns = 200 * 1000;
  for (;;) {
    pid_t w = waitpid(pid, status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR))
      return true;
    double left = deadline - mono();
    if (left <= 0)
      return false;
    if (io && (io->in >= 0 || io->out >= 0)) {
      pump(io, left > 0.05 ? 50 : 1);
    } else {
      struct timespec ts = {0, sleep_ns};
      nanosleep(&ts, NULL);
      if (sleep_ns < 10 * 1000 * 1000)
        sleep_ns *= 2;
    }
  }
}

static int spawn(const smr_exec_req *q, int in_fd, int out_fd, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
  posix_spawnattr_init(&at);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  posix_spawnattr_setpgroup(&at, 0); /* its own group: killed as a whole */
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                    POSIX_SPAWN_SETPGROUP);
  char **envp = build_env(q);
  int rc = posix_spawnp(pid, q->argv[0], &fa, &at, q->argv, envp);
  free(envp);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

static char *last_line(const smr_buf *b) {
  if (!b->len)
    return smr_xstrdup("");
  char *text = smr_xstrndup(b->data, b->len);
  size_t n = strlen(text);
  while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
    text[--n] = '\0';
  char *nl = strrchr(text, '\n');
  char *line = smr_act_oneline(nl ? nl + 1 : text, 200);
  free(text);
  return line;
}

/* A hook that does not read its stdin must not kill smrules: while we
 * write to it, SIGPIPE is blocked for this thread (write() then fails with
 * EPIPE) and a pending one is dropped before the mask is restored. */
static int exec_piped(const smr_exec_req *q, char **output, smr_act_result *r);

int smr_exec(const smr_exec_req *q, char **output, smr_act_result *r) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  int rc = exec_piped(q, output, r);
  drop_pending_sigpipe();
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

static int exec_piped(const smr_exec_req *q, char **output, smr_act_result *r) {
  int in[2], out[2];
  *output = NULL;
  if (pipe2(in, O_CLOEXEC) != 0)
    return smr_act_set(r, SMR_ACT_RETRY, "pipe: %s", strerror(errno)), -1;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return smr_act_set(r, SMR_ACT_RETRY, "pipe: %s", strerror(errno)), -1;
  }
  pid_t pid;
  int rc = spawn(q, in[0], out[1], &pid);
  close(in[0]);
  close(out[1]);
  child_io io = {.in = in[1],
                 .out = out[0],
                 .data = q->stdin_text,
                 .len = q->stdin_text ? strlen(q->stdin_text) : 0,
                 .cap = q->keep_output ? q->keep_output : OUTPUT_MAX};
  if (rc != 0) {
    close_fd(&io.in);
    close_fd(&io.out);
    smr_act_set(r,
                rc == ENOENT || rc == EACCES ? SMR_ACT_FAILED : SMR_ACT_RETRY,
                "cannot run %s: %s", q->argv[0], strerror(rc));
    return -1;
  }
  fcntl(io.in, F_SETFL, O_NONBLOCK);
  fcntl(io.out, F_SETFL, O_NONBLOCK);
  if (!io.len)
    close_fd(&io.in);
  int status = 0;
  double t0 = mono();
  bool exited = wait_until(pid, &io, t0 + q->timeout, &status);
  if (!exited) {
    kill(-pid, SIGTERM);
    if (!wait_until(pid, NULL, mono() + TERM_WAIT, &status)) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
  }
  pump(&io, 0); /* what it wrote last */
  close_fd(&io.in);
  close_fd(&io.out);
  if (q->keep_output) {
    if (q->output_len)
      *q->output_len = io.output.len;
    *output = smr_xmalloc(io.output.len + 1); /* bytes as written */
    if (io.output.len)
      memcpy(*output, io.output.data, io.output.len);
    (*output)[io.output.len] = '\0';
  } else {
    *output = last_line(&io.output);
  }
  smr_buf_free(&io.output);
  if (!exited) {
    smr_act_set(r, SMR_ACT_RETRY, "%s timed out after %g s and was killed",
                q->argv[0], q->timeout);
    return -1;
  }
  if (WIFSIGNALED(status)) {
    smr_act_set(r, SMR_ACT_RETRY, "%s was killed by signal %d", q->argv[0],
                WTERMSIG(status));
    return -1;
  }
  return WEXITSTATUS(status);
}

/* ------------------------------------------------------------- hooks */

static void push_env(smr_strv *env, const char *name, const char *value) {
  smr_strv_take(env, smr_xasprintf("SMRULES_%s=%s", name, value ? value : ""));
}

static void event_env(const smr_act_event *e, const char *action,
                      const smr_act_args *args, smr_strv *env) {
  char num[32];
  push_env(env, "EVENT", "rule_triggered");
  push_env(env, "RULE", e->rule);
  push_env(env, "RULE_TYPE", e->rule_type);
  snprintf(num, sizeof num, "%lld", (long long)e->step);
  push_env(env, "STEP", num);
  snprintf(num, sizeof num, "%lld", (long long)e->trigger);
  push_env(env, "TRIGGER", num);
  push_env(env, "STATUS", e->status);
  push_env(env, "TRIAL", e->trial);
  push_env(env, "JOB", e->job);
  push_env(env, "ACTION", action);
  push_env(env, "MESSAGE", e->summary);
  push_env(env, "TIME", e->time);
  for (size_t i = 0; args && i < args->names.n; i++) {
    char *name = smr_xasprintf("ARG_%s", args->names.v[i]);
    for (char *p = name; *p; p++)
      *p = (char)toupper((unsigned char)*p);
    push_env(env, name, args->values.v[i]);
    free(name);
  }
  smr_strv_take(env, NULL); /* NULL-terminated for posix_spawn */
  env->n--;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static void run_exec(const smr_hook_cfg *h, const char *action,
                     const smr_act_args *args, const smr_act_event *e,
                     const char *stdin_text, bool dry_run, smr_act_result *r) {
  smr_strv argv = {0}, env = {0};
  for (size_t i = 0; i < h->argv.n; i++) {
    char *bad = NULL,
         *arg = smr_act_expand(h->argv.v[i], e, action, args, &bad);
    if (!arg) {
      smr_act_set(r, SMR_ACT_FAILED, "unknown placeholder {%s}", bad);
      free(bad);
      smr_strv_free(&argv);
      return;
    }
    smr_strv_take(&argv, arg);
  }
  smr_strv_take(&argv, NULL); /* argv[n] = NULL for posix_spawn */
  argv.n--;
  const char *prog = base_name(argv.v[0]);
  if (dry_run) {
    smr_act_set(r, SMR_ACT_DRY_RUN,
                "would run hook '%s': %s with %zu "
                "argument%s, the event on stdin",
                h->name, prog, argv.n - 1, argv.n == 2 ? "" : "s");
    smr_strv_free(&argv);
    return;
  }
  event_env(e, action, args, &env);
  char *json = stdin_text ? NULL : smr_act_event_json(e, action, args);
  smr_exec_req q = {.argv = argv.v,
                    .env = env.v,
                    .inherit_env = h->inherit_env,
                    .stdin_text = stdin_text ? stdin_text : json,
                    .timeout = h->timeout};
  char *out = NULL;
  double t0 = mono();
  int st = smr_exec(&q, &out, r);
  if (st == 0)
    smr_act_set(r, SMR_ACT_OK, "hook '%s' ran %s (exit 0, %.1f s)", h->name,
                prog, mono() - t0);
  else if (st > 0)
    smr_act_set(r, SMR_ACT_RETRY, "hook '%s': %s exited with status %d%s%s",
                h->name, prog, st, out && *out ? ": " : "", out ? out : "");
  free(out);
  free(json);
  smr_strv_free(&env);
  smr_strv_free(&argv);
}

/* ----------------------------------------------------------- webhook */

static size_t discard(char *p, size_t size, size_t n, void *arg) {
  (void)p;
  (void)arg;
  return size * n;
}

void smr_act_http_post(const smr_http_post *q, smr_act_result *r) {
  char *where = smr_act_redact_url(q->url);
  CURL *c = curl_easy_init();
  if (!c) {
    smr_act_set(r, SMR_ACT_RETRY, "cannot start libcurl%s%s",
                smr_curl_error()[0] ? ": " : "", smr_curl_error());
    free(where);
    return;
  }
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: "
                                                   "application/json");
  hdr = curl_slist_append(hdr, "User-Agent: smrules");
  for (size_t i = 0; q->headers && i < q->headers->n; i++)
    hdr = curl_slist_append(hdr, q->headers->v[i]);
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, q->url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(q->body));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(q->timeout * 1000));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  if (q->ca_file)
    curl_easy_setopt(c, CURLOPT_CAINFO, q->ca_file);
  if (q->bearer) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
    curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, q->bearer);
  } else if (q->username && q->password) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, q->username);
    curl_easy_setopt(c, CURLOPT_PASSWORD, q->password);
  }
  CURLcode cc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  if (cc != CURLE_OK)
    smr_act_set(r, SMR_ACT_RETRY, "%s (%s): %s", q->who, where,
                errbuf[0] ? errbuf : curl_easy_strerror(cc));
  else if (code >= 200 && code < 300)
    smr_act_set(r, SMR_ACT_OK, "%s: POST to %s answered %ld", q->who, where,
                code);
  else
    smr_act_set(r,
                code >= 400 && code < 500 && code != 408 && code != 429
                    ? SMR_ACT_FAILED
                    : SMR_ACT_RETRY,
                "%s: POST to %s answered HTTP %ld", q->who, where, code);
  curl_slist_free_all(hdr);
  curl_easy_cleanup(c);
  free(where);
}

static void run_webhook(const smr_hook_cfg *h, const char *action,
                        const smr_act_args *args, const smr_act_event *e,
                        bool dry_run, smr_act_result *r) {
  if (dry_run) {
    char *where = smr_act_redact_url(h->url);
    smr_act_set(r, SMR_ACT_DRY_RUN, "would POST the event to hook '%s' (%s)",
                h->name, where);
    free(where);
    return;
  }
  char *json = smr_act_event_json(e, action, args);
  char *who = smr_xasprintf("hook '%s'", h->name);
  smr_http_post q = {.who = who,
                     .url = h->url,
                     .headers = &h->headers,
                     .body = json,
                     .timeout = h->timeout};
  smr_act_http_post(&q, r);
  free(who);
  free(json);
}

void smr_hook_run(const smr_hook_cfg *h, const char *action,
                  const smr_act_args *args, const smr_act_event *e,
                  const char *stdin_text, bool dry_run, smr_act_result *r) {
  if (h->type == SMR_HOOK_EXEC)
    run_exec(h, action, args, e, stdin_text, dry_run, r);
  else
    run_webhook(h, action, args, e, dry_run, r);
}

/* ---------------------------------------------------------- the kind */

static int read_headers(const smr_settings_ctx *c, const smr_setting *s,
                        const smr_node *m, void *field) {
  smr_strv *out = field;
  if (m->type != SMR_NODE_MAP)
    return smr_settings_error(
        c, m, "%s: expected a map of header names to values", s->name);
  for (size_t i = 0; i < m->n; i++) {
    const smr_node *v = m->items[i];
    bool token = m->keys[i][0] != '\0';
    for (const char *q = m->keys[i]; *q; q++)
      token &= isalnum((unsigned char)*q) || *q == '-';
    if (!token)
      return smr_settings_error(c, v,
                                "%s: '%s' is not a header name (letters, "
                                "digits and '-')",
                                s->name, m->keys[i]);
    if (!v->s || v->type == SMR_NODE_LIST || v->type == SMR_NODE_MAP ||
        strpbrk(v->s, "\r\n"))
      return smr_settings_error(c, v, "%s: %s: expected a one-line value",
                                s->name, m->keys[i]);
    smr_strv_take(out, smr_xasprintf("%s: %s", m->keys[i], v->s));
  }
  return SMR_OK;
}

static const char *const HOOK_TYPES[] = {"exec", "webhook", NULL};

static const smr_setting SETTINGS[] = {
    {.name = "type",
     .type = SMR_SETTING_ENUM,
     .offset = offsetof(smr_hook_cfg, type),
     .choices = HOOK_TYPES,
     .description = "exec: run a program; webhook: POST the event as JSON"},
    {.name = "argv",
     .type = SMR_SETTING_STRLIST,
     .offset = offsetof(smr_hook_cfg, argv),
     .flags = SMR_SETTING_LIST_ONLY,
     .description = "exec: the program and its arguments (templates)"},
    {.name = "url",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_hook_cfg, url),
     .description = "webhook: http(s)://..."},
    {.name = "headers",
     .type = SMR_SETTING_CUSTOM,
     .offset = offsetof(smr_hook_cfg, headers),
     .read = read_headers,
     .schema = "{\"type\":\"object\",\"additionalProperties\":{\"type\":"
               "[\"string\",\"number\",\"boolean\"]}}",
     .description = "webhook: extra request headers"},
    SMR_ACT_TIMEOUT_SETTING(smr_hook_cfg),
    {.name = "inherit_env",
     .type = SMR_SETTING_BOOL,
     .offset = offsetof(smr_hook_cfg, inherit_env),
     .def = "true",
     .description = "exec: pass smrules' environment on"},
    SMR_ACT_RETRY_SETTINGS(smr_hook_cfg),
    {.type = SMR_SETTING_END}};

static const char *const REQUIRED[] = {"type", NULL};

const smr_hook_cfg *smr_act_find_hook(const smr_act_plan *p, const char *name) {
  const smr_hooks_cfg *hs = smr_act_plan_settings(p, &smr_action_hook);
  for (size_t i = 0; hs && i < hs->n; i++)
    if (strcasecmp(hs->v[i].name, name) == 0)
      return &hs->v[i];
  return NULL;
}

int smr_act_read_hook_ref(const smr_settings_ctx *c, const smr_setting *s,
                          const smr_node *v, void *field) {
  const smr_act_parse *pc = c->user;
  const smr_hook_cfg *h =
      v->type == SMR_NODE_STRING ? smr_act_find_hook(pc->p, v->s) : NULL;
  if (!h)
    return smr_settings_error(c, v,
                              "%s: expected the name of a hook defined "
                              "under actions.hooks",
                              s->name);
  *(const smr_hook_cfg **)field = h;
  return SMR_OK;
}

/* What the table cannot say: which settings each type needs. */
static int check_hook(smr_act_parse *c, const smr_node *v, smr_hook_cfg *h) {
  const smr_node *argv = smr_node_value(v, "argv"),
                 *url = smr_node_value(v, "url");
  if (h->type == SMR_HOOK_EXEC) {
    if (!argv)
      return smr_settings_error(&c->sc, v,
                                "hook '%s': an exec hook needs argv: "
                                "[program, arguments...]",
                                h->name);
    if (url || h->headers.n)
      return smr_settings_error(&c->sc, url ? url : v,
                                "hook '%s': url and headers belong to "
                                "webhook hooks",
                                h->name);
    return smr_act_check_templates(c, argv, &h->argv, &h->arg_names);
  }
  if (!url)
    return smr_settings_error(
        &c->sc, v, "hook '%s': a webhook needs url: http(s)://...", h->name);
  static const char *const HTTP[] = {"http://", "https://", NULL};
  if (!smr_act_has_scheme(h->url, HTTP))
    return smr_settings_error(
        &c->sc, url, "hook '%s': url: expected http://... or https://...",
        h->name);
  if (argv)
    return smr_settings_error(&c->sc, argv,
                              "hook '%s': argv belongs to exec hooks", h->name);
  return SMR_OK;
}

static bool builtin_name(const char *name) {
  for (size_t i = 0; i < smr_n_action_kinds; i++)
    if (!smr_action_kinds[i]->match &&
        strcasecmp(smr_action_kinds[i]->name, name) == 0)
      return true;
  return false;
}

static int check_name(smr_act_parse *c, const smr_hooks_cfg *hs,
                      const smr_node *at, const char *name) {
  if (!smr_act_valid_name_token(name))
    return smr_settings_error(&c->sc, at,
                              "hook name '%s': expected letters, digits, "
                              "'_', '.' or '-'",
                              name);
  if (builtin_name(name))
    return smr_settings_error(&c->sc, at,
                              "hook name '%s' is the name of a built-in "
                              "action; choose another",
                              name);
  for (size_t i = 0; i < hs->n; i++)
    if (strcasecmp(hs->v[i].name, name) == 0)
      return smr_settings_error(&c->sc, at,
                                "hook name '%s' is used twice (names are "
                                "compared case-insensitively)",
                                name);
  return SMR_OK;
}

static int configure(smr_act_parse *c, const smr_node *m, void *settings) {
  smr_hooks_cfg *hs = settings;
  if (!m || m->type != SMR_NODE_MAP)
    return SMR_OK;
  hs->v = smr_xcalloc(m->n ? m->n : 1, sizeof *hs->v);
  for (size_t i = 0; i < m->n; i++) {
    smr_node at = {.line = m->key_lines[i], .col = m->key_cols[i]};
    int rc = check_name(c, hs, &at, m->keys[i]);
    if (rc)
      return rc;
    smr_hook_cfg *h = &hs->v[hs->n++];
    h->name = smr_xstrdup(m->keys[i]);
    rc = smr_settings_read(&c->sc, SETTINGS, m->items[i], h);
    if (!rc)
      rc = check_hook(c, m->items[i], h);
    if (rc)
      return rc;
  }
  return SMR_OK;
}

static void free_settings(void *settings) {
  smr_hooks_cfg *hs = settings;
  for (size_t i = 0; i < hs->n; i++) {
    smr_settings_free(SETTINGS, &hs->v[i]);
    smr_strv_free(&hs->v[i].headers); /* CUSTOM: the table cannot free it */
    free(hs->v[i].name);
    smr_strv_free(&hs->v[i].arg_names);
  }
  free(hs->v);
}

static bool match(const smr_act_parse *c, const char *name) {
  return smr_act_find_hook(c->p, name) != NULL;
}

static void hint(const smr_act_parse *c, smr_buf *b) {
  smr_buf_puts(b, " or a hook defined under actions.hooks");
  const smr_hooks_cfg *hs = smr_act_plan_settings(c->p, &smr_action_hook);
  for (size_t i = 0; hs && i < hs->n; i++)
    smr_buf_printf(b, "%s%s", i ? ", " : "; hooks defined: ", hs->v[i].name);
}

/* The item's arguments: its scalar value as {args.value}, or every key of
 * its map but `repeat`. */
static int item_args(smr_act_parse *c, const smr_act_src *s,
                     smr_hook_item *hi) {
  const smr_node *v = s->value;
  if (v && v->type == SMR_NODE_STRING) {
    smr_strv_push(&hi->args.names, "value");
    smr_strv_push(&hi->args.values, v->s);
  } else if (v) {
    for (size_t i = 0; i < v->n; i++) {
      const smr_node *a = v->items[i];
      if (strcmp(v->keys[i], "repeat") == 0)
        continue;
      if (!smr_act_valid_env_name(v->keys[i]))
        return smr_settings_error(&c->sc, a,
                                  "%s: argument name '%s': expected letters, "
                                  "digits and '_'",
                                  s->name, v->keys[i]);
      if (a->type == SMR_NODE_LIST || a->type == SMR_NODE_MAP)
        return smr_settings_error(&c->sc, a,
                                  "%s: argument %s: expected a single value",
                                  s->name, v->keys[i]);
      smr_strv_push(&hi->args.names, v->keys[i]);
      smr_strv_push(&hi->args.values, a->s ? a->s : "");
    }
  }
  const smr_strv *need = &hi->hook->arg_names;
  for (size_t i = 0; i < need->n; i++)
    if (!smr_act_arg(&hi->args, need->v[i]))
      return smr_settings_error(&c->sc, v ? v : s->at,
                                "hook '%s' uses {args.%s}: give it here, "
                                "e.g. '%s: {%s: ...}'",
                                hi->hook->name, need->v[i], s->name,
                                need->v[i]);
  return SMR_OK;
}

static int parse(smr_act_parse *c, const smr_act_src *s, smr_act_item *it) {
  smr_hook_item *hi = it->data = smr_xcalloc(1, sizeof *hi);
  hi->hook = smr_act_find_hook(c->p, s->name);
  it->retry = hi->hook->retry;
  it->target =
      smr_xstrdup(hi->hook->type == SMR_HOOK_EXEC ? "exec" : "webhook");
  it->key = smr_xasprintf("hook:%s", hi->hook->name);
  return item_args(c, s, hi);
}

static void free_item(void *data) {
  smr_hook_item *hi = data;
  smr_strv_free(&hi->args.names);
  smr_strv_free(&hi->args.values);
  free(hi);
}

static void run(const smr_act_exec *x, const smr_act_item *it,
                const smr_act_event *e, smr_act_result *r) {
  const smr_hook_item *hi = it->data;
  smr_hook_run(hi->hook, it->label, &hi->args, e, NULL, x->dry_run, r);
}

void smr_act_via_hook(const smr_act_exec *x, const smr_hook_cfg *h,
                      const smr_act_item *it, const smr_act_args *args,
                      const smr_act_event *e, smr_act_result *r) {
  smr_hook_run(h, it->label, args, e, NULL, x->dry_run, r);
}

const smr_action_kind smr_action_hook = {
    .name = "hook",
    .settings_key = "hooks",
    .settings = SETTINGS,
    .settings_size = sizeof(smr_hooks_cfg),
    .named = true,
    .required = REQUIRED,
    .configure = configure,
    .free_settings = free_settings,
    .match = match,
    .parse = parse,
    .free_item = free_item,
    .hint = hint,
    .default_repeat = {SMR_REPEAT_FIRST, 0},
    .run = run,
};
