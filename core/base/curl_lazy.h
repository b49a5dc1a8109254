/* curl_lazy.h - libcurl, loaded the first time it is used.  Linked the
 * usual way, libcurl and the thirty libraries it pulls in are mapped at
 * every start of smrules (about 10 ms, most of a short command's start-up)
 * although only S3 trials and the SNS, email and webhook actions use it.
 * Files that talk to the network include this header instead of
 * <curl/curl.h> and call libcurl as usual: the curl_* functions they use
 * are routed to the library loaded on first call (SMRULES_LIBCURL names
 * another one; by default libcurl.so.4, then libcurl-gnutls.so.4).  When
 * none can be loaded, the calls fail as libcurl calls fail (NULL handles,
 * CURLE_FAILED_INIT) and smr_curl_error says why. */
#ifndef SMR_CURL_LAZY_H
#define SMR_CURL_LAZY_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* Loads libcurl (once, and curl_global_init with it); false when it
 * cannot be, with the reason in `why`. */
bool smr_curl_load(char *why, size_t n);
/* Why libcurl could not be loaded ("" when it was, or was not tried). */
const char *smr_curl_error(void);

CURL *smr_curl_easy_init(void);
void smr_curl_easy_cleanup(CURL *h);
void smr_curl_easy_reset(CURL *h);
CURLcode smr_curl_easy_setopt(CURL *h, CURLoption o, ...);
CURLcode smr_curl_easy_getinfo(CURL *h, CURLINFO i, ...);
CURLcode smr_curl_easy_perform(CURL *h);
const char *smr_curl_easy_strerror(CURLcode c);
struct curl_slist *smr_curl_slist_append(struct curl_slist *l, const char *s);
void smr_curl_slist_free_all(struct curl_slist *l);
CURLM *smr_curl_multi_init(void);
CURLMcode smr_curl_multi_cleanup(CURLM *m);
CURLMcode smr_curl_multi_setopt(CURLM *m, CURLMoption o, ...);
CURLMcode smr_curl_multi_add_handle(CURLM *m, CURL *h);
CURLMcode smr_curl_multi_remove_handle(CURLM *m, CURL *h);
CURLMcode smr_curl_multi_perform(CURLM *m, int *running);
CURLMcode smr_curl_multi_poll(CURLM *m, struct curl_waitfd *fds, unsigned nfds,
                              int timeout_ms, int *numfds);
CURLMsg *smr_curl_multi_info_read(CURLM *m, int *left);

/* curl.h may define some of these as type-checking macros. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_easy_init smr_curl_easy_init
#define curl_easy_cleanup smr_curl_easy_cleanup
#define curl_easy_reset smr_curl_easy_reset
#define curl_easy_setopt smr_curl_easy_setopt
#define curl_easy_getinfo smr_curl_easy_getinfo
#define curl_easy_perform smr_curl_easy_perform
#define curl_easy_strerror smr_curl_easy_strerror
#define curl_slist_append smr_curl_slist_append
#define curl_slist_free_all smr_curl_slist_free_all
#define curl_multi_init smr_curl_multi_init
#define curl_multi_cleanup smr_curl_multi_cleanup
#define curl_multi_setopt smr_curl_multi_setopt
#define curl_multi_add_handle smr_curl_multi_add_handle
#define curl_multi_remove_handle smr_curl_multi_remove_handle
#define curl_multi_perform smr_curl_multi_perform
#define curl_multi_poll smr_curl_multi_poll
#define curl_multi_info_read smr_curl_multi_info_read

#endif
