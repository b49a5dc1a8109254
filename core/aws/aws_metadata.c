/* aws_metadata.c - AWS credentials from the machine smrules runs on, for
 * when neither the environment nor the shared credentials file has any:
 *
 *  1. a container's credentials endpoint (ECS tasks, EKS pod identity):
 *     AWS_CONTAINER_CREDENTIALS_FULL_URI, or
 *     AWS_CONTAINER_CREDENTIALS_RELATIVE_URI under http://169.254.170.2,
 *     with the Authorization header from AWS_CONTAINER_AUTHORIZATION_TOKEN
 *     (or the file named by AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE);
 *  2. the EC2 instance metadata service, IMDSv2 only (a session token
 *     from PUT /latest/api/token first): the instance profile's role.
 *     AWS_EC2_METADATA_DISABLED=true skips it;
 *     AWS_EC2_METADATA_SERVICE_ENDPOINT overrides http://169.254.169.254.
 *
 * Both answer with JSON {AccessKeyId, SecretAccessKey, Token, Expiration}.
 * Requests are short (1 s to connect, 3 s in all): off EC2 the metadata
 * address does not answer, and that must not hold up a run for long. */
#include "aws/aws_metadata.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "base/curl_lazy.h"

#define ANSWER_MAX 65536

typedef struct answer {
  smr_buf body;
  bool too_big;
} answer;

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
  answer *a = arg;
  if (a->body.len + size * n > ANSWER_MAX) {
    a->too_big = true;
    return 0;
  }
  smr_buf_append(&a->body, p, size * n);
  return size * n;
}

/* One request; the body (NUL-terminated) when the status is 200. */
static char *request(const char *url, const char *method,
                     struct curl_slist *hdrs, char *why, size_t why_len) {
  CURL *h = curl_easy_init();
  if (!h) {
    snprintf(why, why_len, "cannot create a libcurl handle%s%s",
             smr_curl_error()[0] ? ": " : "", smr_curl_error());
    return NULL;
  }
  answer a = {{0}, false};
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  if (strcmp(method, "PUT") == 0)
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3000L);
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*"); /* link-local: never a proxy */
  CURLcode cc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  if (cc != CURLE_OK || status != 200 || a.too_big) {
    snprintf(why, why_len, "%s %s: %s", method, url,
             cc != CURLE_OK ? curl_easy_strerror(cc)
             : a.too_big    ? "answer too large"
                            : "not HTTP 200");
    if (cc == CURLE_OK && status != 200 && !a.too_big)
      snprintf(why, why_len, "%s %s: HTTP %ld", method, url, status);
    smr_buf_free(&a.body);
    return NULL;
  }
  smr_buf_append(&a.body, "", 1);
  return a.body.data;
}

static char *json_str(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) && v->valuestring[0] ? smr_xstrdup(v->valuestring)
                                                : NULL;
}

/* {AccessKeyId, SecretAccessKey, Token} of an answer from `who`; the
 * answer (NULL: the request failed, *why says so) is wiped and freed. */
static bool take_creds(char *body, const char *who, smr_aws_creds *out,
                       char *why, size_t n) {
  if (!body)
    return false;
  cJSON *o = cJSON_Parse(body);
  if (o) {
    out->key_id = json_str(o, "AccessKeyId");
    out->secret = json_str(o, "SecretAccessKey");
    out->token = json_str(o, "Token");
    cJSON_Delete(o);
  }
  explicit_bzero(body, strlen(body));
  free(body);
  if (out->key_id && out->secret)
    return true;
  smr_aws_creds_free(out);
  snprintf(why, n, "%s answered without AccessKeyId and SecretAccessKey", who);
  return false;
}

static const char *env_set(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* Plain http only to the addresses AWS's container agents listen on. */
static bool container_url_ok(const char *url) {
  if (strncmp(url, "https://", 8) == 0)
    return true;
  static const char *const hosts[] = {
      "http://127.0.0.1",      "http://localhost", "http://169.254.170.2",
      "http://169.254.170.23", "http://[::1]",     "http://[fd00:ec2::23]"};
  for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++) {
    size_t n = strlen(hosts[i]);
    if (strncmp(url, hosts[i], n) == 0 &&
        (url[n] == ':' || url[n] == '/' || url[n] == '\0'))
      return true;
  }
  return false;
}

static char *container_token(void) {
  const char *t = env_set("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  if (t)
    return smr_xstrdup(t);
  const char *file = env_set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  char *text = NULL;
  size_t len;
  smr_error e;
  if (file && smr_read_file(file, 16384, &text, &len, &e) == SMR_OK)
    text[strcspn(text, "\r\n")] = '\0';
  return text;
}

static int from_container(smr_aws_creds *out, char *why, size_t n) {
  const char *full = env_set("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  const char *rel = env_set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  if (!full && !rel)
    return 1; /* not in such a container */
  char *url =
      full ? smr_xstrdup(full) : smr_xasprintf("http://169.254.170.2%s", rel);
  if (!container_url_ok(url)) {
    snprintf(why, n,
             "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https or a "
             "loopback/ECS agent address, not '%.200s'",
             url);
    free(url);
    return -1;
  }
  struct curl_slist *hdrs = NULL;
  char *token = container_token();
  if (token) {
    char *h = smr_xasprintf("Authorization: %s", token);
    hdrs = curl_slist_append(hdrs, h);
    explicit_bzero(h, strlen(h));
    free(h);
    explicit_bzero(token, strlen(token));
    free(token);
  }
  char *body = request(url, "GET", hdrs, why, n);
  curl_slist_free_all(hdrs);
  free(url);
  bool ok = take_creds(body, "the container credentials endpoint", out, why, n);
  return ok ? 0 : -1;
}

static bool imds_disabled(void) {
  const char *d = env_set("AWS_EC2_METADATA_DISABLED");
  return d && strcasecmp(d, "true") == 0;
}

static int from_imds(smr_aws_creds *out, char **role, char *why, size_t n) {
  if (imds_disabled()) {
    snprintf(why, n,
             "the instance metadata service is disabled "
             "(AWS_EC2_METADATA_DISABLED)");
    return 1;
  }
  const char *base = env_set("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  size_t blen = base ? strlen(base) : 0;
  while (blen && base[blen - 1] == '/')
    blen--;
  char *root =
      base ? smr_xstrndup(base, blen) : smr_xstrdup("http://169.254.169.254");
  struct curl_slist *hdrs =
      curl_slist_append(NULL, "X-aws-ec2-metadata-token-ttl-seconds: 21600");
  char *url = smr_xasprintf("%s/latest/api/token", root);
  char *token = request(url, "PUT", hdrs, why, n);
  curl_slist_free_all(hdrs);
  free(url);
  int rc = -1;
  char *names = NULL, *body = NULL;
  if (token) {
    token[strcspn(token, "\r\n")] = '\0';
    char *h = smr_xasprintf("X-aws-ec2-metadata-token: %s", token);
    hdrs = curl_slist_append(NULL, h);
    free(h);
    url = smr_xasprintf("%s/latest/meta-data/iam/security-credentials/", root);
    names = request(url, "GET", hdrs, why, n);
    free(url);
    if (names) {
      names[strcspn(names, "\r\n")] = '\0'; /* the first role */
      if (!names[0] || strchr(names, '/'))
        snprintf(why, n, "the instance has no IAM role");
      else {
        url = smr_xasprintf("%s/latest/meta-data/iam/security-credentials/%s",
                            root, names);
        body = request(url, "GET", hdrs, why, n);
        free(url);
      }
    }
    curl_slist_free_all(hdrs);
    free(token);
  }
  if (take_creds(body, "the instance metadata service", out, why, n)) {
    *role = smr_xstrdup(names);
    rc = 0;
  }
  free(names);
  free(root);
  return rc;
}

static int lookup(smr_aws_creds *out, char **from, smr_error *err) {
  memset(out, 0, sizeof *out);
  *from = NULL;
  char why[512] = "";
  int rc = from_container(out, why, sizeof why);
  if (rc == 0) {
    *from = smr_xstrdup("the container credentials endpoint");
    return SMR_OK;
  }
  if (rc < 0)
    return smr_error_set(err, SMR_ERR_USAGE, "", -1, "%s", why);
  char *role = NULL;
  rc = from_imds(out, &role, why, sizeof why);
  if (rc == 0) {
    *from = smr_xasprintf("the instance metadata service (role %s)", role);
    free(role);
    return SMR_OK;
  }
  return smr_error_set(err, SMR_ERR_USAGE, "", -1, "%s", why);
}

/* The answer is looked up once per process (several S3 sources and the SNS
 * action ask; off EC2 each lookup waits for a connect timeout). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static bool g_done;
static int g_rc;
static smr_aws_creds g_creds;
static char *g_from;
static smr_error g_err;

static char *dup_or_null(const char *s) {
  return s ? smr_xstrdup(s) : NULL;
}

int smr_aws_creds_from_metadata(smr_aws_creds *out, char **from,
                                smr_error *err) {
  pthread_mutex_lock(&g_mu);
  if (!g_done) {
    smr_error_clear(&g_err);
    g_rc = lookup(&g_creds, &g_from, &g_err);
    g_done = true;
  }
  memset(out, 0, sizeof *out);
  *from = NULL;
  int rc = g_rc;
  if (rc == SMR_OK) {
    out->key_id = dup_or_null(g_creds.key_id);
    out->secret = dup_or_null(g_creds.secret);
    out->token = dup_or_null(g_creds.token);
    *from = dup_or_null(g_from);
  } else if (err) {
    *err = g_err;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

void smr_aws_metadata_forget(void) {
  pthread_mutex_lock(&g_mu);
  if (g_done)
    smr_aws_creds_free(&g_creds);
  free(g_from);
  g_from = NULL;
  g_done = false;
  pthread_mutex_unlock(&g_mu);
}
