/* tb_series.h - one TensorBoard tag's values in one mode, by step
 * (private to core/trial: tb_trial.c's model).
 *
 * A folder of 1 M scalars is held in memory, so a value takes what it
 * needs: 4 bytes of step while every step is in [0, 2^32) and 4 bytes of
 * value while every value is exactly a float32 (what add_scalar writes),
 * 8 + 8 once one is not; the arrays widen in place on the first value
 * that needs it.  They grow by a quarter once large, not double: the
 * slack is memory a reader of a big folder pays for. */
#ifndef SMR_TB_SERIES_H
#define SMR_TB_SERIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tb_series {
  void *steps;  /* uint32_t[] (narrow) or int64_t[] (wide) */
  void *values; /* float[] (narrow) or double[] (wide) */
  size_t n, cap;
  bool wide_steps, wide_values;
} tb_series;

int64_t tb_series_step(const tb_series *s, size_t i);
double tb_series_value(const tb_series *s, size_t i);
/* Position of `step` (or where it would go); *found says which. */
size_t tb_series_find(const tb_series *s, int64_t step, bool *found);
/* The value read last at a step wins. */
void tb_series_put(tb_series *s, int64_t step, double value);
void tb_series_free(tb_series *s);

#endif
