/* source.c - the source interface: dispatch to the implementation and the
 * helpers every implementation shares.  Which implementation a location
 * names is decided in locate.c. */
#include "source/source.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void smr_source_close(smr_source *s) {
  if (s)
    s->ops->close(s);
}

const char *smr_source_root(const smr_source *s) {
  return s->root;
}

int smr_source_list(smr_source *s, const char *dir, const char *suffix,
                    smr_source_listing *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  return s->ops->list(s, dir, suffix, out, err);
}

void smr_source_listing_add(smr_source_listing *l, char *path, int64_t size,
                            int64_t mtime_ns) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->files = smr_xrealloc(l->files, l->cap * sizeof *l->files);
  }
  smr_source_file *f = &l->files[l->n++];
  f->path = path;
  f->size = size;
  f->mtime_ns = mtime_ns;
}

void smr_source_listing_free(smr_source_listing *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->files[i].path);
  free(l->files);
  memset(l, 0, sizeof *l);
}

bool smr_source_exists(smr_source *s, const char *rel, int64_t *size,
                       int64_t *mtime_ns) {
  return s->ops->exists(s, rel, size, mtime_ns);
}

int smr_source_read_all(smr_source *s, const char *rel, size_t max, char **buf,
                        size_t *len, smr_error *err) {
  int rc = s->ops->read_all(s, rel, max, buf, len, err);
  if (rc == SMR_OK)
    atomic_fetch_add_explicit(&s->bytes_read_, *len, memory_order_relaxed);
  return rc;
}

int smr_source_read_range(smr_source *s, const char *rel, uint64_t off,
                          uint64_t len, smr_range *out, smr_error *err) {
  memset(out, 0, sizeof *out);
  int rc = s->ops->read_range(s, rel, off, len, out, err);
  if (rc == SMR_OK)
    atomic_fetch_add_explicit(&s->bytes_read_, out->len, memory_order_relaxed);
  return rc;
}

int smr_source_read_range_aligned(smr_source *s, const char *rel, uint64_t off,
                                  uint64_t len, uint64_t align_at,
                                  smr_range *out, smr_error *err) {
  if (!s->ops->read_range_aligned || align_at == SMR_NO_ALIGN)
    return smr_source_read_range(s, rel, off, len, out, err);
  memset(out, 0, sizeof *out);
  int rc = s->ops->read_range_aligned(s, rel, off, len, align_at, out, err);
  if (rc == SMR_OK)
    atomic_fetch_add_explicit(&s->bytes_read_, out->len, memory_order_relaxed);
  return rc;
}

int smr_source_read_into(smr_source *s, const char *rel, uint64_t off,
                         uint64_t len, void *dest, smr_error *err) {
  int rc;
  if (s->ops->read_into) {
    rc = s->ops->read_into(s, rel, off, len, dest, err);
  } else {
    smr_range r;
    rc = s->ops->read_range(s, rel, off, len, &r, err);
    if (rc == SMR_OK && r.len != len)
      rc = smr_error_set(err, SMR_ERR_FORMAT, rel, (int64_t)off,
                         "read %zu of %llu bytes", r.len,
                         (unsigned long long)len);
    if (rc == SMR_OK)
      memcpy(dest, r.data, (size_t)len);
    smr_range_release(&r);
  }
  if (rc == SMR_OK)
    atomic_fetch_add_explicit(&s->bytes_read_, len, memory_order_relaxed);
  return rc;
}

bool smr_source_range_kept(smr_source *s, const char *rel, uint64_t off,
                           uint64_t len, smr_range *out) {
  memset(out, 0, sizeof *out);
  if (!s->ops->range_kept || !s->ops->range_kept(s, rel, off, len, out))
    return false;
  atomic_fetch_add_explicit(&s->bytes_read_, out->len, memory_order_relaxed);
  return true;
}

uint64_t smr_source_bytes_read(const smr_source *s) {
  return atomic_load_explicit(&s->bytes_read_, memory_order_relaxed);
}

void smr_range_release(smr_range *r) {
  if (r->give_back_)
    r->give_back_(r->lent_);
  if (r->map_)
    munmap(r->map_, r->map_len_);
  free(r->heap_);
  memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------- optional operations */

int smr_source_list_after(smr_source *s, const char *dir, const char *suffix,
                          const char *start_after, smr_source_listing *out,
                          smr_error *err) {
  memset(out, 0, sizeof *out);
  if (s->ops->list_after)
    return s->ops->list_after(s, dir, suffix, start_after, out, err);
  int rc = s->ops->list(s, dir, suffix, out, err);
  if (rc != SMR_OK || !start_after)
    return rc;
  size_t keep = 0;
  for (size_t i = 0; i < out->n; i++) {
    if (strcmp(out->files[i].path, start_after) > 0)
      out->files[keep++] = out->files[i];
    else
      free(out->files[i].path);
  }
  out->n = keep;
  return SMR_OK;
}

void smr_source_read_ahead(smr_source *s, const smr_source_listing *files) {
  if (s->ops->read_ahead)
    s->ops->read_ahead(s, files);
}

size_t smr_source_cache_budget(const smr_source *s) {
  return s->ops->cache_budget ? s->ops->cache_budget(s) : 0;
}

void smr_source_share_records(smr_source *s, bool on) {
  if (s->ops->share_records)
    s->ops->share_records(s, on);
}

void smr_source_prefetch(smr_source *s, const char *rel, uint64_t off,
                         uint64_t len) {
  if (s->ops->prefetch)
    s->ops->prefetch(s, rel, off, len);
}

bool smr_source_is_remote(const smr_source *s) {
  return s->ops->remote;
}
