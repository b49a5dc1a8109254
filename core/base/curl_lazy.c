/* curl_lazy.c - see curl_lazy.h.  One table of libcurl's functions, filled
 * by dlopen/dlsym under pthread_once; each smr_curl_* function loads the
 * table if needed and calls through it.  curl_easy_setopt and friends are
 * variadic with one argument whose type the option number gives (as
 * libcurl itself reads it), so the argument is read as that type and
 * passed on. */
#include "base/curl_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct curl_fns {
  CURLcode (*global_init)(long flags);
  CURL *(*easy_init)(void);
  void (*easy_cleanup)(CURL *h);
  void (*easy_reset)(CURL *h);
  CURLcode (*easy_setopt)(CURL *h, CURLoption o, ...);
  CURLcode (*easy_getinfo)(CURL *h, CURLINFO i, ...);
  CURLcode (*easy_perform)(CURL *h);
  const char *(*easy_strerror)(CURLcode c);
  struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
  void (*slist_free_all)(struct curl_slist *l);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_cleanup)(CURLM *m);
  CURLMcode (*multi_setopt)(CURLM *m, CURLMoption o, ...);
  CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
  CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
  CURLMcode (*multi_perform)(CURLM *m, int *running);
  CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd *fds, unsigned nfds,
                          int timeout_ms, int *numfds);
  CURLMsg *(*multi_info_read)(CURLM *m, int *left);
} curl_fns;

static curl_fns fn;
static bool loaded;
static char load_error[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* dlsym into a function pointer: POSIX guarantees the conversion works,
 * ISO C does not, hence the memcpy (as in host/plugin.c). */
static bool sym(void *lib, const char *name, void *slot, size_t size) {
  void *p = dlsym(lib, name);
  if (!p) {
    snprintf(load_error, sizeof load_error, "%s has no %s", "libcurl", name);
    return false;
  }
  memcpy(slot, &p, size);
  return true;
}

#define SYM(lib, f) sym(lib, "curl_" #f, &fn.f, sizeof fn.f)

static bool resolve(void *lib) {
  return SYM(lib, global_init) && SYM(lib, easy_init) &&
         SYM(lib, easy_cleanup) && SYM(lib, easy_reset) &&
         SYM(lib, easy_setopt) && SYM(lib, easy_getinfo) &&
         SYM(lib, easy_perform) && SYM(lib, easy_strerror) &&
         SYM(lib, slist_append) && SYM(lib, slist_free_all) &&
         SYM(lib, multi_init) && SYM(lib, multi_cleanup) &&
         SYM(lib, multi_setopt) && SYM(lib, multi_add_handle) &&
         SYM(lib, multi_remove_handle) && SYM(lib, multi_perform) &&
         SYM(lib, multi_poll) && SYM(lib, multi_info_read);
}

static void load(void) {
  const char *env = getenv("SMRULES_LIBCURL");
  const char *names[] = {env && *env ? env : "libcurl.so.4",
                         env && *env ? NULL : "libcurl-gnutls.so.4"};
  void *lib = NULL;
  for (size_t i = 0; i < 2 && !lib && names[i]; i++)
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(load_error, sizeof load_error,
             "cannot load libcurl (%s): %s; S3 trials and the SNS, email and "
             "webhook actions need it (install libcurl4)",
             names[0], e ? e : "not found");
    return;
  }
  if (!resolve(lib)) {
    dlclose(lib);
    memset(&fn, 0, sizeof fn);
    return;
  }
  if (fn.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    snprintf(load_error, sizeof load_error, "curl_global_init failed");
    return;
  }
  loaded = true; /* the library stays loaded until the process ends */
}

static bool ensure(void) {
  pthread_once(&load_once, load);
  return loaded;
}

bool smr_curl_load(char *why, size_t n) {
  bool ok = ensure();
  if (why && n)
    snprintf(why, n, "%s", ok ? "" : load_error);
  return ok;
}

const char *smr_curl_error(void) {
  return load_error;
}

CURL *smr_curl_easy_init(void) {
  return ensure() ? fn.easy_init() : NULL;
}

void smr_curl_easy_cleanup(CURL *h) {
  if (h && ensure())
    fn.easy_cleanup(h);
}

void smr_curl_easy_reset(CURL *h) {
  if (h && ensure())
    fn.easy_reset(h);
}

/* The argument of an option numbered `o` read as its type says (the
 * CURLOPTTYPE_* bases are shared by easy and multi options), and the
 * setter called with it. */
#define SET_BY_TYPE(setter, h, o, ap)                                           \
  ((o) < CURLOPTTYPE_OBJECTPOINT     ? setter(h, o, va_arg(ap, long))           \
   : (o) < CURLOPTTYPE_FUNCTIONPOINT ? setter(h, o, va_arg(ap, void *))         \
   : (o) < CURLOPTTYPE_OFF_T         ? setter(h, o, va_arg(ap, void (*)(void))) \
   : (o) < CURLOPTTYPE_BLOB          ? setter(h, o, va_arg(ap, curl_off_t))     \
                                     : setter(h, o, va_arg(ap, void *)))

CURLcode smr_curl_easy_setopt(CURL *h, CURLoption o, ...) {
  if (!ensure())
    return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, o);
  CURLcode rc = SET_BY_TYPE(fn.easy_setopt, h, o, ap);
  va_end(ap);
  return rc;
}

CURLcode smr_curl_easy_getinfo(CURL *h, CURLINFO i, ...) {
  if (!ensure())
    return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, i);
  void *out = va_arg(ap, void *); /* every CURLINFO takes a pointer */
  va_end(ap);
  return fn.easy_getinfo(h, i, out);
}

CURLcode smr_curl_easy_perform(CURL *h) {
  return ensure() ? fn.easy_perform(h) : CURLE_FAILED_INIT;
}

const char *smr_curl_easy_strerror(CURLcode c) {
  if (!ensure())
    return c == CURLE_FAILED_INIT && load_error[0] ? load_error
                                                   : "libcurl not loaded";
  return fn.easy_strerror(c);
}

struct curl_slist *smr_curl_slist_append(struct curl_slist *l, const char *s) {
  return ensure() ? fn.slist_append(l, s) : NULL;
}

void smr_curl_slist_free_all(struct curl_slist *l) {
  if (l && ensure())
    fn.slist_free_all(l);
}

CURLM *smr_curl_multi_init(void) {
  return ensure() ? fn.multi_init() : NULL;
}

CURLMcode smr_curl_multi_cleanup(CURLM *m) {
  return ensure() ? fn.multi_cleanup(m) : CURLM_INTERNAL_ERROR;
}

CURLMcode smr_curl_multi_setopt(CURLM *m, CURLMoption o, ...) {
  if (!ensure())
    return CURLM_INTERNAL_ERROR;
  va_list ap;
  va_start(ap, o);
  CURLMcode rc = SET_BY_TYPE(fn.multi_setopt, m, o, ap);
  va_end(ap);
  return rc;
}

CURLMcode smr_curl_multi_add_handle(CURLM *m, CURL *h) {
  return ensure() ? fn.multi_add_handle(m, h) : CURLM_INTERNAL_ERROR;
}

CURLMcode smr_curl_multi_remove_handle(CURLM *m, CURL *h) {
  return ensure() ? fn.multi_remove_handle(m, h) : CURLM_INTERNAL_ERROR;
}

CURLMcode smr_curl_multi_perform(CURLM *m, int *running) {
  return ensure() ? fn.multi_perform(m, running) : CURLM_INTERNAL_ERROR;
}

CURLMcode smr_curl_multi_poll(CURLM *m, struct curl_waitfd *fds, unsigned nfds,
                              int timeout_ms, int *numfds) {
  return ensure() ? fn.multi_poll(m, fds, nfds, timeout_ms, numfds)
                  : CURLM_INTERNAL_ERROR;
}

CURLMsg *smr_curl_multi_info_read(CURLM *m, int *left) {
  return ensure() ? fn.multi_info_read(m, left) : NULL;
}
