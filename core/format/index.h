/* index.h - the JSON side of a trial: index files, collections files, and
 * the file-name conventions of smdebug (docs/formats.md#the-trial-directory,
 * docs/formats.md#index-files, docs/formats.md#collections-files,
 * docs/formats.md#reductions). Parsing uses cJSON; nothing here opens files. */
#ifndef SMR_INDEX_H
#define SMR_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/mode.h"
#include "format/tensor.h"

/* ---- index files (docs/formats.md#index-files) ---- */
typedef struct smr_index_tensor {
  char *name;
  int64_t start_idx, length;
  /* Set when this entry's start_idx or length is not valid: the entry
   * (that tensor at that step) cannot be read, the rest of the index can. */
  char *problem;
} smr_index_tensor;

typedef struct smr_index_shape {
  char *name, *originalname;
  int ndim;
  int64_t shape[SMR_MAX_DIMS];
} smr_index_shape;

typedef struct smr_index {
  int mode;
  int64_t mode_step;
  char *event_file_name; /* NULL when the step saved only shapes */
  /* Set (and event_file_name NULL) when event_file_name was unsafe: the
   * index still counts, its values cannot be read. */
  char *event_file_problem;
  size_t n_tensors, n_shapes;
  smr_index_tensor *tensors;
  smr_index_shape *shapes;
} smr_index;

/* Parse an index file's bytes.  SMR_ERR_FORMAT (file = `file`, offset of
 * the problem when known) when it is not JSON, lacks `meta`, has neither
 * payload list, has entries of the wrong type, negative offsets/lengths,
 * or an unknown mode.  An unsafe event_file_name (see smr_path_is_safe,
 * base/path.h)
 * is not a parse failure: see smr_index.event_file_problem.  Nor is one
 * bad tensor_payload entry: one with an invalid start_idx or length is
 * kept with its `problem`, one without a usable tensorname is left out. */
int smr_index_parse(const char *json, size_t len, const char *file,
                    smr_index *out, smr_error *err);
void smr_index_free(smr_index *ix);
/* Serialize as smdebug does (keys meta/tensor_payload/shape_payload). */
char *smr_index_to_json(const smr_index *ix);

/* ---- collections files (docs/formats.md#collections-files) ---- */
typedef struct smr_collection {
  char *name;
  char **include_regex;
  size_t n_include_regex;
  char **tensor_names;
  size_t n_tensor_names;
  /* reduction_config; reductions is the comma-separated string as stored */
  bool has_reduction_config, save_raw_tensor, save_shape;
  char *reductions;
} smr_collection;

typedef struct smr_collections {
  smr_collection *items;
  size_t n;
  int num_workers;
} smr_collections;

int smr_collections_parse(const char *json, size_t len, const char *file,
                          smr_collections *out, smr_error *err);
void smr_collections_free(smr_collections *c);
char *smr_collections_to_json(const smr_collections *c);

/* ---- file names (docs/formats.md#the-trial-directory,
 * docs/formats.md#workers) ---- */
/* Parse "<digits>_<worker>.json" / ".tfevents" basenames.  TF device names
 * (a worker part starting with '_', i.e. "__" right after the digits) are
 * deserialized ('_' -> '/', then '-' -> ':').  Returns SMR_OK and a
 * malloc'ed worker, or SMR_ERR_FORMAT. */
int smr_parse_step_worker(const char *basename, int64_t *step, char **worker);
/* Worker name from "<worker>_collections.json"; NULL if not that form. */
char *smr_parse_collections_worker(const char *basename);
/* Serialize a worker name for file names (device names -> '_'/'-' form). */
char *smr_worker_serialize(const char *worker);
/* "events/000000000012/000000000012_worker_0.tfevents" etc. (malloc'ed) */
char *smr_event_file_relpath(int64_t step, const char *worker);
char *smr_index_file_relpath(int64_t step, const char *worker);
char *smr_collections_file_relpath(const char *worker);

/* ---- reduction tensor names (docs/formats.md#reductions) ---- */
/* "smdebug/reductions/abs_mean/gradient/x" -> base "gradient/x",
 * reduction SMR_RED_MEAN, abs true.  Returns true when `stored` is a
 * reduction name with a known reduction (outputs malloc'ed base). */
bool smr_reduction_name_parse(const char *stored, char **base, int *reduction,
                              bool *abs);
char *smr_reduction_tensor_name(const char *base, int reduction, bool abs);

#endif
