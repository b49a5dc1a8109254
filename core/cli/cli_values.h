/* cli_values.h - tensor elements as NumPy prints an array (`smrules
 * tensor --values`): nested brackets, elements right-aligned to one
 * width, up to 8 digits after the point (scientific notation when the
 * magnitudes call for it), lines wrapped at 75 columns, and above 1,000
 * elements each axis summarised to its first and last 3 entries around
 * "...". */
#ifndef SMR_CLI_VALUES_H
#define SMR_CLI_VALUES_H

#include <stdbool.h>
#include <stddef.h>

#include "format/tensor.h"

/* Print t on stdout (no final newline); `all`: no summary. */
void smr_cli_print_values(const smr_tensor *t, bool all);
/* One float as NumPy prints it: positional with up to 8 digits after the
 * point, or (sci) scientific; "nan", "inf", "-inf". */
void smr_cli_float_text(double d, bool sci, char *buf, size_t n);

#endif
