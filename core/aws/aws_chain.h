/* aws_chain.h - where AWS credentials are looked for, in the AWS SDKs'
 * order (see aws_chain.c). */
#ifndef SMR_AWS_CHAIN_H
#define SMR_AWS_CHAIN_H

#include "aws/aws_creds.h"
#include "base/common.h"

/* From AWS_ACCESS_KEY_ID/..., the shared credentials file, or (when no
 * profile is named) the container or instance metadata service. */
int smr_aws_creds_load(const char *profile, smr_aws_creds *out, smr_error *err);

#endif
