/* plugin.c - dlopen, ABI checks, search path. */
#include "host/plugin.h"

#include "base/suggest.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/rulectx.h"

/* The SDK's statuses are the host's: rule results and host-function
 * returns pass between the two unchanged (see host_api.c), so the public
 * numbers must never drift from the internal ones. */
_Static_assert(SMRULES_OK == SMR_OK, "status: ok");
_Static_assert(SMRULES_NO_TRIGGER == SMR_OK, "status: no trigger / ok");
_Static_assert(SMRULES_STEP_UNAVAILABLE == SMR_STEP_UNAVAILABLE,
               "status: step unavailable");
_Static_assert(SMRULES_STEP_NOT_YET == SMR_STEP_NOT_YET,
               "status: step not yet");
_Static_assert(SMRULES_TENSOR_UNAVAILABLE_FOR_STEP ==
                   SMR_TENSOR_UNAVAILABLE_FOR_STEP,
               "status: tensor unavailable for step");
_Static_assert(SMRULES_TENSOR_UNAVAILABLE == SMR_TENSOR_UNAVAILABLE,
               "status: tensor unavailable");
_Static_assert(SMRULES_NO_MORE_DATA == SMR_NO_MORE_DATA,
               "status: no more data");
/* SMRULES_ERR is the one generic failure; it must not collide with an
 * availability status. */
_Static_assert(SMRULES_ERR > SMR_STEP_UNAVAILABLE && SMRULES_ERR < 0,
               "status: SMRULES_ERR is a plain error");

static size_t field_size(smrules_param_type t) {
  switch (t) {
  case SMRULES_PARAM_FLOAT:
    return sizeof(double);
  case SMRULES_PARAM_INT:
    return sizeof(int64_t);
  case SMRULES_PARAM_BOOL:
    return sizeof(bool);
  case SMRULES_PARAM_STRING:
    return sizeof(const char *);
  case SMRULES_PARAM_STRLIST:
    return sizeof(smrules_strlist);
  case SMRULES_PARAM_NUMLIST:
    return sizeof(smrules_numlist);
  default:
    return 0;
  }
}

static int check_params(const smrules_rule *r, const char *path,
                        smr_error *err) {
  if (!r->params)
    return SMR_OK;
  for (const smrules_param *p = r->params; p->type != SMRULES_PARAM_END; p++) {
    size_t sz = field_size(p->type);
    if (!p->name || !sz)
      return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                           "rule %s declares a parameter with no name or an "
                           "unknown type",
                           r->name);
    if (p->offset + sz > r->settings_size)
      return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                           "rule %s: parameter '%s' lies outside its "
                           "%zu-byte settings",
                           r->name, p->name, r->settings_size);
  }
  return SMR_OK;
}

static int check_registration(const smrules_rule *r, const char *path,
                              smr_error *err) {
  if (!r)
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "smrules_plugin_init returned no rule");
  if (r->api_version != SMRULES_API_VERSION)
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "plugin was built for smrules plugin API version "
                         "%u; this smrules speaks version %d: rebuild it "
                         "against this smrules' smrules.h",
                         r->api_version, SMRULES_API_VERSION);
  if (r->struct_size < SMRULES_RULE_MIN_SIZE)
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "plugin registration is %u bytes, less than the "
                         "%zu bytes every smrules.h has: it is not an "
                         "smrules_rule",
                         r->struct_size, (size_t)SMRULES_RULE_MIN_SIZE);
  if (r->struct_size > sizeof(smrules_rule))
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "plugin registration is %u bytes, this smrules "
                         "knows %zu: it was built against a newer smrules.h "
                         "(upgrade smrules)",
                         r->struct_size, sizeof(smrules_rule));
  if (!r->name || !r->invoke_at_step)
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "plugin registration lacks a name or "
                         "invoke_at_step");
  if (r->kind != SMRULES_KIND_TENSOR && r->kind != SMRULES_KIND_PROFILER)
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "rule %s has unknown kind %d", r->name, r->kind);
  return check_params(r, path, err);
}

/* The registration as a whole smrules_rule of this host, in `copy`:
 * members past the plugin's struct_size (appended after it was built)
 * stay zero, i.e. absent.  The checks then read only the copy. */
static const smrules_rule *whole_registration(const smrules_rule *given,
                                              smrules_rule *copy) {
  if (!given)
    return NULL;
  memset(copy, 0, sizeof *copy);
  size_t n = given->struct_size;
  if (n < SMRULES_RULE_MIN_SIZE || n > sizeof *copy)
    n = offsetof(smrules_rule, name); /* refused: keep the two versions */
  memcpy(copy, given, n);
  copy->struct_size = given->struct_size;
  return copy;
}

int smr_plugin_load(const char *path, smr_plugin **out, smr_error *err) {
  *out = NULL;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return smr_error_set(err, SMR_ERR_USAGE, path, -1, "cannot load plugin: %s",
                         dlerror());
  smrules_plugin_init_fn init;
  /* dlsym returns void*; POSIX guarantees the conversion to a function
   * pointer works, ISO C does not, hence the memcpy. */
  void *sym = dlsym(h, "smrules_plugin_init");
  if (!sym) {
    dlclose(h);
    return smr_error_set(err, SMR_ERR_USAGE, path, -1,
                         "not an smrules plugin: no smrules_plugin_init");
  }
  memcpy(&init, &sym, sizeof init);
  const smrules_rule *given = init(smr_host_api());
  smr_plugin *p = smr_xcalloc(1, sizeof *p);
  const smrules_rule *r = whole_registration(given, &p->reg_copy);
  int rc = check_registration(r, path, err);
  if (rc != SMR_OK) {
    free(p);
    dlclose(h);
    return rc;
  }
  p->handle = h;
  p->reg = r;
  p->path = smr_xstrdup(path);
  *out = p;
  return SMR_OK;
}

void smr_plugin_unload(smr_plugin *p) {
  if (!p)
    return;
  dlclose(p->handle);
  free(p->path);
  free(p);
}

void smr_plugin_dirs(smr_strv *out) {
  const char *env = getenv("SMRULES_PLUGIN_PATH");
  if (env && *env) {
    char *copy = smr_xstrdup(env);
    for (char *save = NULL, *tok = strtok_r(copy, ":", &save); tok;
         tok = strtok_r(NULL, ":", &save))
      smr_strv_push(out, tok);
    free(copy);
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash)
    return;
  *slash = '\0';
  smr_strv_take(out, smr_xasprintf("%s/plugins", exe));
  smr_strv_take(out, smr_xasprintf("%s/../lib/smrules/plugins", exe));
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int cmp_plugin(const void *a, const void *b) {
  const smr_plugin *x = *(smr_plugin *const *)a, *y = *(smr_plugin *const *)b;
  return strcmp(x->reg->name, y->reg->name);
}

static bool have_name(smr_plugin **v, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v[i]->reg->name, name) == 0)
      return true;
  return false;
}

static void scan_dir(const char *dir, smr_plugin ***v, size_t *n) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *de;
  smr_strv files = {0};
  while ((de = readdir(d)) != NULL)
    if (ends_with(de->d_name, ".so"))
      smr_strv_take(&files, smr_xasprintf("%s/%s", dir, de->d_name));
  closedir(d);
  smr_strv_sort_unique(&files);
  for (size_t i = 0; i < files.n; i++) {
    smr_plugin *p;
    smr_error e;
    if (smr_plugin_load(files.v[i], &p, &e) != SMR_OK)
      continue;
    if (have_name(*v, *n, p->reg->name)) {
      smr_plugin_unload(p);
      continue;
    }
    *v = smr_xrealloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = p;
  }
  smr_strv_free(&files);
}

int smr_plugin_all(smr_plugin ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  smr_strv dirs = {0};
  smr_plugin_dirs(&dirs);
  for (size_t i = 0; i < dirs.n; i++)
    scan_dir(dirs.v[i], out, n);
  smr_strv_free(&dirs);
  if (*n > 1)
    qsort(*out, *n, sizeof **out, cmp_plugin);
  return SMR_OK;
}

void smr_plugin_all_free(smr_plugin **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    smr_plugin_unload(v[i]);
  free(v);
}

/* The file a rule's plugin is conventionally built as: VanishingGradient
 * -> vanishing_gradient.so, CPUBottleneck -> cpu_bottleneck.so. */
static char *conventional_file(const char *dir, const char *name) {
  size_t n = strlen(name);
  char *snake = smr_xcalloc(2 * n + 1, 1), *o = snake;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    bool upper = isupper(c);
    bool after_lower = i > 0 && (islower((unsigned char)name[i - 1]) ||
                                 isdigit((unsigned char)name[i - 1]));
    bool ends_acronym = i > 0 && isupper((unsigned char)name[i - 1]) &&
                        islower((unsigned char)name[i + 1]);
    if (upper && (after_lower || ends_acronym))
      *o++ = '_';
    *o++ = (char)tolower(c);
  }
  char *path = smr_xasprintf("%s/%s.so", dir, snake);
  free(snake);
  return path;
}

/* The plugin registering `name` in one directory: the conventional file
 * when it is that plugin (one dlopen instead of one per plugin), else the
 * first *.so in name order that is; NULL when none is. */
static smr_plugin *find_in_dir(const char *dir, const char *name) {
  char *path = conventional_file(dir, name);
  smr_plugin *p = NULL;
  smr_error e;
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
      smr_plugin_load(path, &p, &e) == SMR_OK &&
      strcmp(p->reg->name, name) != 0) {
    smr_plugin_unload(p);
    p = NULL;
  }
  free(path);
  if (p)
    return p;
  smr_plugin **v = NULL;
  size_t n = 0;
  scan_dir(dir, &v, &n);
  for (size_t i = 0; i < n; i++)
    if (!p && strcmp(v[i]->reg->name, name) == 0) {
      p = v[i];
      v[i] = NULL;
    }
  for (size_t i = 0; i < n; i++)
    smr_plugin_unload(v[i]);
  free(v);
  return p;
}

int smr_plugin_find(const char *name, smr_plugin **out, smr_error *err) {
  *out = NULL;
  smr_strv dirs = {0};
  smr_plugin_dirs(&dirs);
  for (size_t i = 0; i < dirs.n && !*out; i++)
    *out = find_in_dir(dirs.v[i], name);
  smr_strv_free(&dirs);
  if (*out)
    return SMR_OK;
  /* not found: every installed rule, for the suggestion */
  smr_plugin **all;
  size_t n;
  smr_plugin_all(&all, &n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(all[i]->reg->name, name) == 0) {
      *out = all[i];
      all[i] = NULL;
    }
  /* the error stays short enough to be whole: a suggestion, not the list
   * of every installed rule (`smrules list` shows them) */
  const char **names = smr_xcalloc(n ? n : 1, sizeof *names);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (all[i])
      names[k++] = all[i]->reg->name;
  int rc = SMR_OK;
  if (!*out) {
    const char *near = smr_suggest(name, names, k);
    if (near)
      rc = smr_error_set(err, SMR_ERR_USAGE, "", -1,
                         "unknown rule '%s': did you mean '%s'? ('smrules "
                         "list' shows the %zu installed rules)",
                         name, near, k);
    else
      rc = smr_error_set(err, SMR_ERR_USAGE, "", -1,
                         "unknown rule '%s' ('smrules list' shows the %zu "
                         "installed rules; SMRULES_PLUGIN_PATH adds plugin "
                         "directories)",
                         name, k);
  }
  for (size_t i = 0; i < n; i++)
    if (all[i])
      smr_plugin_unload(all[i]);
  free(all);
  free(names);
  return rc;
}
