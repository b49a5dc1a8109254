/* tb_read.c - reading a TensorBoard folder's event files into the model
 * (tb_trial.c): every event file in path order, from where the last
 * refresh stopped, in chunks of CHUNK bytes (so a 40 MB file never sits in
 * memory whole); a record cut short at the end of a file is read again
 * next time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/mode.h"
#include "format/record.h"
#include "format/tb_event.h"
#include "trial/tb_int.h"
#include "trial/tb_series.h"

/* 1 MB: the chunk is a buffer of the source's, kept as a spare after use */
#define CHUNK ((size_t)1 << 20)

/* ------------------------------------------------------------ reading */

typedef struct reading {
  smr_tb *tb;
  tbfile *f;
  uint64_t offset; /* of the record */
  size_t added;
} reading;

static int on_value(void *ctx, const smr_tb_event *ev, const smr_tb_value *v) {
  reading *r = ctx;
  smr_tb *tb = r->tb;
  if (v->kind == SMR_TB_BAD) {
    tb_add_problem(tb, r->f->path, (int64_t)r->offset,
                   "tag '%.*s' at step %lld: %s under the scalars plugin; "
                   "skipped",
                   (int)(v->tag_len > 200 ? 200 : v->tag_len), v->tag,
                   (long long)ev->step, v->why);
    return 0;
  }
  bool untagged_tensor =
      v->kind == SMR_TB_OTHER && v->tensor && !v->plugin && v->dtype;
  if (v->kind != SMR_TB_SCALAR && !untagged_tensor)
    return 0; /* histograms, images, other plugins: not scalars */
  if (!v->tag_len || memchr(v->tag, 0, v->tag_len)) {
    /* no name a tensor could have (and a NUL would never match the
     * file's table of tags: one entry per value) */
    tb_add_problem(tb, r->f->path, (int64_t)r->offset,
                   "a scalar at step %lld whose tag is empty or holds a NUL "
                   "byte; skipped",
                   (long long)ev->step);
    return 0;
  }
  rawtag *rt = tb_resolve(tb, r->f, v->tag, v->tag_len);
  tag *t = &tb->tags[rt->tag];
  if (untagged_tensor && !t->scalar_tensor)
    return 0; /* a tensor no scalars metadata ever claimed */
  if (v->tensor && v->plugin)
    t->scalar_tensor = true;
  if (v->dtype == SMR_DT_DOUBLE)
    t->dbl = true;
  /* the tags of a step come one after another: one lookup per pair */
  if (!tb->noted[rt->mode] || ev->step != tb->noted_step[rt->mode]) {
    tb_pairs_note(&tb->pairs, rt->mode, ev->step, ev->wall_time);
    tb->noted[rt->mode] = true;
    tb->noted_step[rt->mode] = ev->step;
  }
  tb_series_put(&t->s[rt->mode], ev->step, v->value);
  r->added++;
  return 0;
}

static bool header_ok(const uint8_t *p) {
  return smr_le32(p + 8) == smr_crc_mask(smr_crc32c(p, 8));
}

/* Read one file from f->done to `size`. */
static int read_file(smr_tb *tb, smr_source *src, tbfile *f, uint64_t size,
                     bool waiting, size_t *added, smr_error *err) {
  if (size == 0 && !waiting && !f->tail_said) {
    tb_add_problem(tb, f->path, 0,
                   "empty file: expected a TFRecord holding a file_version "
                   "Event (a TensorBoard writer writes one first)");
    f->tail_said = true;
  }
  while (!f->dead && f->done < size) {
    uint64_t want = size - f->done < CHUNK ? size - f->done : CHUNK;
    smr_range rg;
    int rc = smr_source_read_range(src, f->path, f->done, want, &rg, err);
    if (rc != SMR_OK)
      return rc;
    size_t pos = 0;
    bool stop = false;
    while (pos < rg.len && !stop) {
      const uint8_t *p = rg.data + pos;
      size_t left = rg.len - pos;
      uint64_t at = f->done + pos;
      if (left >= SMR_RECORD_HEADER && !header_ok(p)) {
        tb_add_problem(tb, f->path, (int64_t)at,
                       at == 0
                           ? "not a TFRecord file: the first 12 bytes are "
                             "not a length and its masked CRC32C"
                           : "record header damaged: its length does not "
                             "match its masked CRC32C; the rest of the file "
                             "is not read");
        f->dead = true;
        break;
      }
      uint64_t need = left >= SMR_RECORD_HEADER
                          ? smr_le64(p) + SMR_RECORD_OVERHEAD
                          : SMR_RECORD_HEADER;
      if (left >= SMR_RECORD_HEADER &&
          need < SMR_RECORD_OVERHEAD) { /* length overflowed */
        tb_add_problem(tb, f->path, (int64_t)at,
                       "record claims %llu payload bytes: not an event file",
                       (unsigned long long)smr_le64(p));
        f->dead = true;
        break;
      }
      if (need > left) {
        if (at + need > size) { /* cut short at the end */
          if (!waiting && !f->tail_said) {
            tb_add_problem(tb, f->path, (int64_t)at,
                           "truncated record: it needs %llu bytes, the file "
                           "ends after %llu",
                           (unsigned long long)need,
                           (unsigned long long)(size - at));
            f->tail_said = true;
          }
          pos = rg.len; /* read again from `at` next time */
          f->done = at;
          smr_range_release(&rg);
          return SMR_OK;
        }
        if (need > CHUNK && pos == 0) {
          /* an image or a graph, never a scalar: skipped unread */
          f->done += need;
          stop = true;
          continue;
        }
        break; /* read the next chunk from this record */
      }
      const uint8_t *payload;
      uint64_t plen;
      smr_error e;
      if (smr_record_parse(p, left, f->path, at, &payload, &plen, &e) !=
          SMR_OK) {
        tb_add_problem(tb, f->path, e.offset, "%s; the record is skipped",
                       e.msg);
      } else {
        reading r = {tb, f, at, 0};
        smr_tb_event ev;
        if (smr_tb_event_decode(payload, (size_t)plen, f->path, at, &ev,
                                on_value, &r, &e) != SMR_OK)
          tb_add_problem(tb, f->path, at, "%s; the record is skipped", e.msg);
        *added += r.added;
      }
      pos += (size_t)need;
    }
    if (!stop)
      f->done += pos;
    smr_range_release(&rg);
  }
  return SMR_OK;
}

static tbfile *file_of(smr_tb *tb, const char *path) {
  for (size_t i = 0; i < tb->nfiles; i++)
    if (strcmp(tb->files[i].path, path) == 0)
      return &tb->files[i];
  return NULL;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Event files under the root, by path, relative ("./" dropped). */
static int list_event_files(smr_source *src, smr_source_listing *out,
                            smr_error *err) {
  smr_source_listing l;
  int rc =
      smr_source_list(src, smr_source_is_remote(src) ? "" : ".", "", &l, err);
  memset(out, 0, sizeof *out);
  if (rc != SMR_OK)
    return rc;
  for (size_t i = 0; i < l.n; i++) {
    const char *p = l.files[i].path;
    if (strncmp(p, "./", 2) == 0)
      p += 2;
    if (smr_tb_is_event_file(base_name(p)) && strncmp(p, ".smrules/", 9))
      smr_source_listing_add(out, smr_xstrdup(p), l.files[i].size,
                             l.files[i].mtime_ns);
  }
  smr_source_listing_free(&l);
  return SMR_OK;
}

bool smr_tb_probe(smr_source *src) {
  smr_source_listing l;
  smr_error e;
  bool any = list_event_files(src, &l, &e) == SMR_OK && l.n > 0;
  smr_source_listing_free(&l);
  return any;
}

int smr_tb_sync(smr_tb *tb, smr_source *src, bool waiting, size_t *added,
                bool *reset, smr_error *err) {
  smr_source_listing l;
  *added = 0;
  *reset = false;
  int rc = list_event_files(src, &l, err);
  if (rc != SMR_OK)
    return rc;
  pthread_rwlock_wrlock(&tb->lock);
  memset(tb->noted, 0, sizeof tb->noted);
  /* a file that vanished or shrank: the folder was rewritten */
  size_t present = 0;
  for (size_t i = 0; i < l.n; i++) {
    tbfile *f = file_of(tb, l.files[i].path);
    present += f != NULL;
    if (f && (uint64_t)l.files[i].size < f->done)
      *reset = true;
  }
  if (present != tb->nfiles)
    *reset = true;
  if (*reset)
    tb_free_model(tb);
  for (size_t i = 0; rc == SMR_OK && i < l.n; i++) {
    tbfile *f = file_of(tb, l.files[i].path);
    if (!f) {
      tb->files = smr_xrealloc(tb->files, (tb->nfiles + 1) * sizeof *tb->files);
      f = &tb->files[tb->nfiles++];
      memset(f, 0, sizeof *f);
      f->path = smr_xstrdup(l.files[i].path);
      tb_folder_of(tb, f->path, &f->folder_mode, &f->prefix);
    }
    rc = read_file(tb, src, f, (uint64_t)l.files[i].size, waiting, added, err);
  }
  tb_pairs_number(&tb->pairs);
  pthread_rwlock_unlock(&tb->lock);
  smr_source_listing_free(&l);
  return rc;
}
