/* s3_auth.c - where S3 requests go and who signs them: the endpoint
 * (--s3-endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL), the region
 * (AWS_REGION, AWS_DEFAULT_REGION, else us-east-1; a bucket elsewhere is
 * found from S3's redirect answer) and the credentials (the standard
 * environment variables, a profile of the shared credentials file, or the
 * container / instance metadata service; read by the same code as the SNS
 * action). */
#include <stdlib.h>
#include <string.h>

#include "aws/aws_chain.h"
#include "source/s3.h"

static const char *env_nonempty(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

const char *smr_s3_endpoint_env(void) {
  const char *e = env_nonempty("AWS_ENDPOINT_URL_S3");
  return e ? e : env_nonempty("AWS_ENDPOINT_URL");
}

static int pick_endpoint(const char *given, smr_s3_auth *a, smr_error *err) {
  const char *e = given && *given ? given : smr_s3_endpoint_env();
  if (!e)
    return SMR_OK;
  if (strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0)
    return smr_error_set(err, SMR_ERR_USAGE, "", -1,
                         "S3 endpoint '%.200s': expected http://HOST[:PORT] "
                         "or https://HOST[:PORT]",
                         e);
  size_t n = strlen(e);
  while (n > 8 && e[n - 1] == '/')
    n--;
  a->endpoint = smr_xstrndup(e, n);
  return SMR_OK;
}

int smr_s3_auth_load(const char *endpoint, smr_s3_auth *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  int rc = pick_endpoint(endpoint, out, err);
  if (rc)
    return rc;
  const char *r = env_nonempty("AWS_REGION");
  out->region = smr_xstrdup(r ? r
                            : env_nonempty("AWS_DEFAULT_REGION")
                                ? env_nonempty("AWS_DEFAULT_REGION")
                                : "us-east-1");
  smr_aws_creds cr;
  smr_error why;
  if (smr_aws_creds_load(NULL, &cr, &why) == SMR_OK) {
    out->key_id = cr.key_id;
    out->secret = cr.secret;
    out->token = cr.token;
    out->cred_from = cr.from;
    out->renewable = cr.renewable;
  } else {
    /* No credentials: anonymous requests (public buckets); a refusal
     * names the places looked at. */
    out->cred_from = smr_xasprintf("nowhere (%s)", why.msg);
  }
  return SMR_OK;
}

void smr_s3_auth_free(smr_s3_auth *a) {
  if (a->secret)
    explicit_bzero(a->secret, strlen(a->secret));
  if (a->token)
    explicit_bzero(a->token, strlen(a->token));
  free(a->endpoint);
  free(a->region);
  free(a->key_id);
  free(a->secret);
  free(a->token);
  free(a->cred_from);
  memset(a, 0, sizeof *a);
}
