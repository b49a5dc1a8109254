/* aws_creds.h - AWS credentials from the environment, the shared
 * credentials file or the machine's role (see aws_creds.c). */
#ifndef SMR_AWS_CREDS_H
#define SMR_AWS_CREDS_H

#include <stdbool.h>

#include "base/common.h"

typedef struct smr_aws_creds {
  char *key_id, *secret, *token;
  char *from;     /* where they came from, for messages */
  bool renewable; /* from a metadata service: ask again when expired */
} smr_aws_creds;

/* From AWS_ACCESS_KEY_ID/..., the shared credentials file, or (when no
 * profile is named) the container or instance metadata service. */
int smr_aws_creds_load(const char *profile, smr_aws_creds *out, smr_error *err);
/* Wipes the secrets and frees; *c is zeroed. */
void smr_aws_creds_free(smr_aws_creds *c);

#endif
