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

#include "action/action_kind.h"
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

/* --------------------------------------------------------- the kinds */

static const smr_setting SETTINGS[] = {
    {.name = "topic_arn",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_sns_cfg, topic_arn),
     .description = "arn:aws:sns:<region>:<account>:<topic>"},
    {.name = "region",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_sns_cfg, region),
     .description = "AWS region (default: the topic's, else the profile's)"},
    {.name = "endpoint",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_sns_cfg, endpoint),
     .description = "http(s):// endpoint instead of AWS's"},
    {.name = "phone_number",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_sns_cfg, phone_number),
     .description = "E.164 number SMS sends to when a rule names none"},
    {.name = "profile",
     .type = SMR_SETTING_STRING,
     .offset = offsetof(smr_sns_cfg, profile),
     .description = "AWS credentials profile"},
    {.name = "hook",
     .type = SMR_SETTING_CUSTOM,
     .offset = offsetof(smr_sns_cfg, hook),
     .read = smr_act_read_hook_ref,
     .schema = "{\"type\":\"string\"}",
     .description = "a hook of actions.hooks that sends the message"},
    SMR_ACT_TIMEOUT_SETTING(smr_sns_cfg),
    SMR_ACT_RETRY_SETTINGS(smr_sns_cfg),
    {.type = SMR_SETTING_END}};

static bool valid_topic(const char *t) {
  return strncmp(t, "arn:", 4) == 0 && strstr(t, ":sns:") &&
         !smr_act_has_space_or_control(t);
}

static int configure(smr_act_parse *c, const smr_node *m, void *settings) {
  smr_sns_cfg *s = settings;
  if (!m)
    return SMR_OK;
  s->present = true;
  static const char *const HTTP[] = {"http://", "https://", NULL};
  const char *bad = NULL, *why = NULL;
  if (s->topic_arn && !valid_topic(s->topic_arn))
    bad = "topic_arn", why = "arn:aws:sns:<region>:<account>:<topic>";
  else if (s->region && !smr_act_valid_name_token(s->region))
    bad = "region", why = "a region name such as us-east-1";
  else if (s->endpoint && !smr_act_has_scheme(s->endpoint, HTTP))
    bad = "endpoint", why = "http://... or https://...";
  else if (s->phone_number && !smr_act_valid_phone(s->phone_number))
    bad = "phone_number", why = "an E.164 number such as \"+15555550100\"";
  else if (s->profile && !smr_act_valid_name_token(s->profile))
    bad = "profile", why = "a profile name";
  return bad ? smr_settings_error(&c->sc, smr_node_value(m, bad),
                                  "%s: expected %s", bad, why)
             : SMR_OK;
}

/* The one string of an SMS or SNS item (the phone number, the topic): the
 * item's scalar value or its key `key`, else `fallback` from actions.SNS.
 * *at is where to point errors. */
static int item_string(smr_act_parse *c, const smr_act_src *s, const char *key,
                       const char *fallback, char **out, const smr_node **at) {
  const smr_node *v = s->value;
  int rc = SMR_OK;
  *at = s->at;
  if (v && v->type == SMR_NODE_STRING) {
    *out = smr_xstrdup(v->s);
    *at = v;
  } else if (v) {
    const smr_setting ONE[] = {
        {.name = key, .type = SMR_SETTING_STRING, .offset = 0},
        {.type = SMR_SETTING_END}};
    rc = smr_settings_read(&c->sc, ONE, v, out);
    *at = smr_node_value(v, key) ? smr_node_value(v, key) : v;
  }
  if (!rc && !*out && fallback)
    *out = smr_xstrdup(fallback);
  return rc;
}

static const smr_sns_cfg *sns_cfg(const smr_act_plan *p) {
  return smr_act_plan_settings(p, &smr_action_sns);
}

static int finish_item(const smr_sns_cfg *n, smr_act_item *it,
                       const char *kind) {
  it->retry = n->hook ? n->hook->retry : n->retry;
  it->target = smr_xstrdup(it->data);
  it->key = smr_xasprintf("%s:%s", kind, (const char *)it->data);
  return SMR_OK;
}

/* SMS: the item's data is its phone number. */
static int parse_sms(smr_act_parse *c, const smr_act_src *s, smr_act_item *it) {
  const smr_sns_cfg *n = sns_cfg(c->p);
  const smr_node *at;
  char *phone = NULL;
  int rc = item_string(c, s, "phone_number", n->phone_number, &phone, &at);
  it->data = phone;
  if (rc)
    return rc;
  if (!phone)
    return smr_settings_error(&c->sc, at,
                              "SMS needs a phone number: 'SMS: "
                              "\"+15555550100\"' or actions.SNS.phone_number");
  if (!smr_act_valid_phone(phone))
    return smr_settings_error(&c->sc, at,
                              "SMS: '%s' is not an E.164 phone number "
                              "(expected + and 1 to 15 digits, quoted: "
                              "\"+15555550100\")",
                              phone);
  return finish_item(n, it, "SMS");
}

/* SNS: the item's data is its topic ARN. */
static int parse_sns(smr_act_parse *c, const smr_act_src *s, smr_act_item *it) {
  const smr_sns_cfg *n = sns_cfg(c->p);
  const smr_node *at;
  char *topic = NULL;
  int rc = item_string(c, s, "topic_arn", n->topic_arn, &topic, &at);
  it->data = topic;
  if (rc)
    return rc;
  if (!topic)
    return smr_settings_error(&c->sc, at,
                              "SNS needs a topic: 'SNS: arn:aws:sns:...' or "
                              "actions.SNS.topic_arn");
  if (!valid_topic(topic))
    return smr_settings_error(&c->sc, at,
                              "SNS: expected a topic ARN arn:aws:sns:"
                              "<region>:<account>:<topic>");
  return finish_item(n, it, "SNS");
}

/* Through a hook: {args.phone_number} or {args.topic_arn}, {args.message}. */
static void via_hook(const smr_act_exec *x, const smr_sns_cfg *n,
                     const smr_act_item *it, const char *name,
                     const smr_act_event *e, smr_act_result *r) {
  char *raw = smr_xasprintf("SMDebugRule:%s fired. %s", e->rule, e->summary);
  char *text = smr_act_oneline(raw, 1000);
  smr_act_args args = {0};
  smr_strv_push(&args.names, name);
  smr_strv_push(&args.values, it->data);
  smr_strv_push(&args.names, "message");
  smr_strv_push(&args.values, text);
  smr_act_via_hook(x, n->hook, it, &args, e, r);
  smr_strv_free(&args.names);
  smr_strv_free(&args.values);
  free(text);
  free(raw);
}

static void run_sms(const smr_act_exec *x, const smr_act_item *it,
                    const smr_act_event *e, smr_act_result *r) {
  const smr_sns_cfg *n = sns_cfg(x->plan);
  if (n->hook)
    via_hook(x, n, it, "phone_number", e, r);
  else
    smr_sns_publish(n, n->topic_arn, it->data, e, x->dry_run, r);
}

static void run_sns(const smr_act_exec *x, const smr_act_item *it,
                    const smr_act_event *e, smr_act_result *r) {
  const smr_sns_cfg *n = sns_cfg(x->plan);
  if (n->hook)
    via_hook(x, n, it, "topic_arn", e, r);
  else
    smr_sns_publish(n, it->data, NULL, e, x->dry_run, r);
}

static const char *const SMS_KEYS[] = {"phone_number", NULL};
static const char *const SNS_KEYS[] = {"topic_arn", NULL};

/* SMS has no settings of its own: it reads actions.SNS. */
const smr_action_kind smr_action_sms = {
    .name = "SMS",
    .item_keys = SMS_KEYS,
    .parse = parse_sms,
    .free_item = free,
    .default_repeat = {SMR_REPEAT_FIRST, 0},
    .run = run_sms,
};

const smr_action_kind smr_action_sns = {
    .name = "SNS",
    .settings_key = "SNS",
    .settings = SETTINGS,
    .settings_size = sizeof(smr_sns_cfg),
    .configure = configure,
    .item_keys = SNS_KEYS,
    .parse = parse_sns,
    .free_item = free,
    .default_repeat = {SMR_REPEAT_FIRST, 0},
    .run = run_sns,
};
