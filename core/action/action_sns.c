/* action_sns.c - SMS and SNS actions: one SNS Publish request (form
 * encoded, Action=Publish) signed with AWS Signature Version 4 by
 * libcurl (CURLOPT_AWS_SIGV4).  Credentials come from AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or from a profile of the
 * shared credentials file; the endpoint from the settings,
 * AWS_ENDPOINT_URL_SNS / AWS_ENDPOINT_URL, or the region's.  An SMS goes
 * to the phone number directly, or - when a topic is configured - to the
 * topic with the number as message attribute `phone_num`, as SageMaker's
 * SMDebugRules topic does. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "action/action_int.h"
#include "aws/aws_chain.h"
#include "aws/aws_xml.h"
#include "base/curl_lazy.h"

#define RESPONSE_MAX 16384

/* ------------------------------------------------------------ request */

/* application/x-www-form-urlencoded as browsers and Python's urlencode
 * write it (space as '+'), so servers that re-encode the parsed form to
 * check the signature (moto) hash the same bytes. */
static void form_value(smr_buf *b, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~')
      smr_buf_append(b, p, 1);
    else if (*p == ' ')
      smr_buf_puts(b, "+");
    else
      smr_buf_printf(b, "%%%02X", *p);
  }
}

static void form_pair(smr_buf *b, const char *key, const char *value) {
  smr_buf_printf(b, "&%s=", key);
  form_value(b, value);
}

char *smr_sns_publish_body(const char *topic, const char *phone,
                           const char *subject, const char *message) {
  smr_buf b = {0};
  smr_buf_puts(&b, "Action=Publish&Version=2010-03-31");
  form_pair(&b, "Message", message);
  if (topic) {
    form_pair(&b, "TopicArn", topic);
    if (subject)
      form_pair(&b, "Subject", subject);
    if (phone) {
      form_pair(&b, "MessageAttributes.entry.1.Name", "phone_num");
      form_pair(&b, "MessageAttributes.entry.1.Value.DataType", "String");
      form_pair(&b, "MessageAttributes.entry.1.Value.StringValue", phone);
    }
  } else {
    form_pair(&b, "PhoneNumber", phone);
  }
  return b.data;
}

/* arn:aws:sns:<region>:<account>:<name> */
static char *region_of_arn(const char *arn) {
  const char *p = arn;
  for (int i = 0; i < 3 && p; i++) {
    p = strchr(p, ':');
    p = p ? p + 1 : NULL;
  }
  const char *end = p ? strchr(p, ':') : NULL;
  return end && end > p ? smr_xstrndup(p, (size_t)(end - p)) : NULL;
}

static char *pick_region(const smr_sns_cfg *c, const char *topic) {
  const char *env[] = {"AWS_REGION", "AWS_DEFAULT_REGION"};
  if (c->region)
    return smr_xstrdup(c->region);
  for (int i = 0; i < 2; i++)
    if (getenv(env[i]) && *getenv(env[i]))
      return smr_xstrdup(getenv(env[i]));
  char *r = topic ? region_of_arn(topic) : NULL;
  return r ? r : smr_xstrdup("us-east-1");
}

static char *pick_endpoint(const smr_sns_cfg *c, const char *region) {
  const char *env[] = {"AWS_ENDPOINT_URL_SNS", "AWS_ENDPOINT_URL"};
  if (c->endpoint)
    return smr_xstrdup(c->endpoint);
  for (int i = 0; i < 2; i++)
    if (getenv(env[i]) && *getenv(env[i]))
      return smr_xstrdup(getenv(env[i]));
  return smr_xasprintf("https://sns.%s.amazonaws.com/", region);
}

/* A field of SNS's answer as one safe line (entities decoded), or NULL. */
static char *xml_field(const char *xml, const char *tag) {
  if (!xml)
    return NULL;
  char *raw = smr_xml_child(xml, xml + strlen(xml), tag, NULL);
  char *out = raw ? smr_act_oneline(raw, 200) : NULL;
  free(raw);
  return out;
}

static size_t collect(char *p, size_t size, size_t n, void *arg) {
  smr_buf *b = arg;
  if (b->len < RESPONSE_MAX)
    smr_buf_append(b, p, size * n);
  return size * n;
}

typedef struct publish_req {
  const char *endpoint, *region, *body, *where, *target;
  const smr_aws_creds *cr;
  double timeout;
} publish_req;

static void publish_result(CURLcode cc, long code, const char *errbuf,
                           const smr_buf *resp, const publish_req *q,
                           smr_act_result *r) {
  char *xml = resp->len ? smr_xstrndup(resp->data, resp->len) : NULL;
  if (cc != CURLE_OK) {
    smr_act_set(r, SMR_ACT_RETRY, "SNS %s: %s", q->where,
                errbuf[0] ? errbuf : curl_easy_strerror(cc));
  } else if (code >= 200 && code < 300) {
    char *id = xml_field(xml, "MessageId");
    smr_act_set(r, SMR_ACT_OK, "published to %s via %s (MessageId %s)",
                q->target, q->where, id ? id : "?");
    free(id);
  } else {
    char *ecode = xml_field(xml, "Code"), *emsg = xml_field(xml, "Message");
    bool final = code >= 400 && code < 500 && code != 408 && code != 429 &&
                 !(ecode && strstr(ecode, "Throttl"));
    smr_act_set(r, final ? SMR_ACT_FAILED : SMR_ACT_RETRY,
                "SNS %s answered HTTP %ld%s%s%s%s", q->where, code,
                ecode ? ": " : "", ecode ? ecode : "", emsg ? ": " : "",
                emsg ? emsg : "");
    free(ecode);
    free(emsg);
  }
  free(xml);
}

static void publish(const publish_req *q, smr_act_result *r) {
  CURL *h = curl_easy_init();
  if (!h) {
    smr_act_set(r, SMR_ACT_RETRY, "cannot start libcurl%s%s",
                smr_curl_error()[0] ? ": " : "", smr_curl_error());
    return;
  }
  char *sigv4 = smr_xasprintf("aws:amz:%s:sns", q->region);
  struct curl_slist *hdr = curl_slist_append(
      NULL, "Content-Type: application/x-www-form-urlencoded; charset=utf-8");
  char *tok = q->cr->token
                  ? smr_xasprintf("X-Amz-Security-Token: %s", q->cr->token)
                  : NULL;
  if (tok)
    hdr = curl_slist_append(hdr, tok);
  smr_buf resp = {0};
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(h, CURLOPT_URL, q->endpoint);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
  curl_easy_setopt(h, CURLOPT_USERNAME, q->cr->key_id);
  curl_easy_setopt(h, CURLOPT_PASSWORD, q->cr->secret);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(q->body));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(q->timeout * 1000));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode cc = curl_easy_perform(h);
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  publish_result(cc, code, errbuf, &resp, q, r);
  smr_buf_free(&resp);
  curl_slist_free_all(hdr);
  if (tok)
    explicit_bzero(tok, strlen(tok));
  free(tok);
  free(sigv4);
  curl_easy_cleanup(h);
}

void smr_sns_publish(const smr_sns_cfg *c, const char *topic, const char *phone,
                     const smr_act_event *e, bool dry_run, smr_act_result *r) {
  char *region = pick_region(c, topic), *endpoint = pick_endpoint(c, region);
  char *where = smr_act_redact_url(endpoint);
  const char *target = phone ? phone : topic;
  smr_aws_creds cr;
  smr_error why;
  int have = smr_aws_creds_load(c->profile, &cr, &why);
  static const char *const HTTP[] = {"http://", "https://"};
  bool url_ok = strncasecmp(endpoint, HTTP[0], 7) == 0 ||
                strncasecmp(endpoint, HTTP[1], 8) == 0;
  if (!url_ok) {
    smr_act_set(r, SMR_ACT_FAILED, "SNS endpoint %s: expected http(s)://",
                where);
  } else if (dry_run) {
    smr_act_set(r, SMR_ACT_DRY_RUN, "would publish to %s via %s (region %s)%s",
                target, where, region,
                have == SMR_OK ? "" : "; no AWS credentials found");
  } else if (have != SMR_OK) {
    smr_act_set(r, SMR_ACT_FAILED, "%s", why.msg);
  } else {
    char *subject = smr_email_subject(e);
    /* SNS subjects: printable ASCII, under 100 characters */
    for (char *p = subject; *p; p++)
      if ((unsigned char)*p >= 0x80)
        *p = '?';
    if (strlen(subject) > 99)
      subject[99] = '\0';
    char *raw = smr_xasprintf("SMDebugRule:%s fired. %s", e->rule, e->summary);
    char *message = smr_act_oneline(raw, phone && !topic ? 1000 : 8000);
    char *body = smr_sns_publish_body(topic, phone, subject, message);
    publish_req q = {endpoint, region, body, where, target, &cr, c->timeout};
    publish(&q, r);
    free(body);
    free(message);
    free(raw);
    free(subject);
  }
  if (have == SMR_OK)
    smr_aws_creds_free(&cr);
  free(where);
  free(endpoint);
  free(region);
}
