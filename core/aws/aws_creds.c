/* aws_creds.c - a set of AWS credentials, whoever found them. */
#include "aws/aws_creds.h"

#include <stdlib.h>
#include <string.h>

void smr_aws_creds_free(smr_aws_creds *c) {
  if (c->secret)
    explicit_bzero(c->secret, strlen(c->secret));
  if (c->token)
    explicit_bzero(c->token, strlen(c->token));
  free(c->key_id);
  free(c->secret);
  free(c->token);
  free(c->from);
  memset(c, 0, sizeof *c);
}
