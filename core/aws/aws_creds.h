/* aws_creds.h - a set of AWS credentials (found by aws_chain.c or a
 * metadata service, aws_metadata.c). */
#ifndef SMR_AWS_CREDS_H
#define SMR_AWS_CREDS_H

#include <stdbool.h>

#include "base/common.h"

typedef struct smr_aws_creds {
  char *key_id, *secret, *token;
  char *from;     /* where they came from, for messages */
  bool renewable; /* from a metadata service: ask again when expired */
} smr_aws_creds;

/* Wipes the secrets and frees; *c is zeroed. */
void smr_aws_creds_free(smr_aws_creds *c);

#endif
