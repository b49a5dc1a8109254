/* aws_metadata.h - AWS credentials from a container's credentials
 * endpoint or the EC2 instance metadata service (see aws_metadata.c). */
#ifndef SMR_AWS_METADATA_H
#define SMR_AWS_METADATA_H

#include "aws/aws_creds.h"
#include "base/common.h"

/* SMR_OK with the credentials and *from (malloc'ed, for messages: which
 * service gave them); else an error whose message says what was tried. */
int smr_aws_creds_from_metadata(smr_aws_creds *out, char **from,
                                smr_error *err);

/* Forget the answer kept for this process, so that the next call asks
 * again (after S3 said the credentials expired). */
void smr_aws_metadata_forget(void);

#endif
