/* aws_chain.c - AWS credentials as the AWS SDKs find them: the
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN), a profile of the shared credentials file, or - when
 * no profile is named - the machine's role through the container or
 * instance metadata service (aws_metadata.c).  Shared by S3 (source/) and
 * SNS (action/). */
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "aws/aws_chain.h"
#include "aws/aws_metadata.h"

#define PROFILE_FILE_MAX (1u << 20)

static char *strip(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1]))
    s[--n] = '\0';
  return s;
}

/* Reads [profile] of an INI file into out (keys aws_access_key_id,
 * aws_secret_access_key, aws_session_token). */
static void parse_profile(char *text, const char *profile, smr_aws_creds *out) {
  bool in = false;
  for (char *line = text; line;) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    char *l = strip(line);
    size_t n = strlen(l);
    if (l[0] == '[' && n > 1 && l[n - 1] == ']') {
      l[n - 1] = '\0';
      in = strcmp(strip(l + 1), profile) == 0;
    } else if (in && l[0] != '#' && l[0] != ';' && strchr(l, '=')) {
      char *eq = strchr(l, '=');
      *eq = '\0';
      char *key = strip(l), *val = strip(eq + 1);
      char **dst = !strcmp(key, "aws_access_key_id")       ? &out->key_id
                   : !strcmp(key, "aws_secret_access_key") ? &out->secret
                   : !strcmp(key, "aws_session_token")     ? &out->token
                                                           : NULL;
      if (dst) {
        free(*dst);
        *dst = smr_xstrdup(val);
      }
    }
    line = next;
  }
}

int smr_aws_creds_load(const char *profile, smr_aws_creds *out,
                       smr_error *err) {
  memset(out, 0, sizeof *out);
  const char *id = getenv("AWS_ACCESS_KEY_ID");
  const char *secret = getenv("AWS_SECRET_ACCESS_KEY");
  if (!profile && id && *id && secret && *secret) {
    out->key_id = smr_xstrdup(id);
    out->secret = smr_xstrdup(secret);
    const char *tok = getenv("AWS_SESSION_TOKEN");
    out->token = tok && *tok ? smr_xstrdup(tok) : NULL;
    out->from = smr_xstrdup("the environment");
    return SMR_OK;
  }
  const char *name = profile ? profile : getenv("AWS_PROFILE");
  if (!name || !*name)
    name = "default";
  const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE");
  const char *home = getenv("HOME");
  char *path = file && *file ? smr_xstrdup(file)
               : home        ? smr_xasprintf("%s/.aws/credentials", home)
                             : NULL;
  char *text = NULL;
  size_t len = 0;
  smr_error why;
  if (path &&
      smr_read_file(path, PROFILE_FILE_MAX, &text, &len, &why) == SMR_OK) {
    parse_profile(text, name, out);
    explicit_bzero(text, len);
  }
  free(text);
  int rc = SMR_OK;
  if (out->key_id && out->secret)
    out->from = smr_xasprintf("the shared credentials file (profile %s)", name);
  else {
    smr_aws_creds_free(out);
    /* no profile asked for by name: the machine's role, as the SDKs do */
    char *from = NULL;
    smr_error why2;
    bool named = profile || getenv("AWS_PROFILE");
    if (!named && smr_aws_creds_from_metadata(out, &from, &why2) == SMR_OK) {
      out->from = from;
      out->renewable = true;
      free(path);
      return SMR_OK;
    }
    rc = smr_error_set(err, SMR_ERR_USAGE, path ? path : "", -1,
                       "no AWS credentials: set AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY, or profile '%s' in the shared "
                       "credentials file%s%s",
                       name, named ? "" : "; ", named ? "" : why2.msg);
  }
  free(path);
  return rc;
}
