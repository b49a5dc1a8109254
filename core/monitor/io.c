/* io.c - network traffic (/proc/net/dev) and disk I/O (/proc/diskstats)
 * per second of the interval.  Network: every interface but "lo" (in a
 * container that is the container's own traffic).  Disk: whole devices
 * only (those with /sys/block/<name>/device), so partitions and
 * device-mapper or loop devices stacked on a disk are not counted twice.
 * Sectors in diskstats are always 512 bytes. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "monitor/samplers.h"

static bool read_net(smr_procfile *f, uint64_t *rx, uint64_t *tx) {
  const char *text = smr_procfile_read(f);
  if (!text)
    return false;
  *rx = *tx = 0;
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
    const char *colon = strchr(p, ':'), *nl = strchr(p, '\n');
    if (!colon || (nl && colon > nl))
      continue; /* the two header lines */
    while (*p == ' ')
      p++;
    if (colon - p == 2 && strncmp(p, "lo", 2) == 0)
      continue;
    unsigned long long v[9];
    if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
               &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) != 9)
      continue;
    *rx += v[0]; /* receive bytes; transmit bytes is the 9th field */
    *tx += v[8];
  }
  return true;
}

static bool whole_disk(const char *name) {
  char path[96];
  snprintf(path, sizeof path, "/sys/block/%s/device", name);
  return access(path, F_OK) == 0;
}

static bool read_disk(smr_procfile *f, uint64_t *rd, uint64_t *wr,
                      uint64_t *ops) {
  const char *text = smr_procfile_read(f);
  if (!text)
    return false;
  *rd = *wr = *ops = 0;
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
    char name[64];
    unsigned long long reads, rsect, writes, wsect, skip;
    if (sscanf(p, "%*u %*u %63s %llu %llu %llu %llu %llu %llu %llu", name,
               &reads, &skip, &rsect, &skip, &writes, &skip, &wsect) != 8)
      continue;
    if (strchr(name, '/') || !whole_disk(name))
      continue;
    *rd += rsect * 512;
    *wr += wsect * 512;
    *ops += reads + writes;
  }
  return true;
}

void smr_io_open(smr_io_sampler *s) {
  memset(s, 0, sizeof *s);
  smr_procfile_open(&s->net, "/proc/net/dev");
  smr_procfile_open(&s->disk, "/proc/diskstats");
  s->have_net = read_net(&s->net, &s->rx, &s->tx);
  s->have_disk = read_disk(&s->disk, &s->rd_bytes, &s->wr_bytes, &s->ops);
}

/* Counters shrink when an interface or disk goes away: count 0, not a
 * wrapped-around number. */
static double rate(uint64_t now, uint64_t before, double seconds) {
  return now > before && seconds > 0 ? (double)(now - before) / seconds : 0;
}

void smr_io_sample(smr_io_sampler *s, double seconds, smr_mon_round *r) {
  uint64_t rx, tx, rd, wr, ops;
  if (s->have_net && read_net(&s->net, &rx, &tx)) {
    smr_mon_emit(r, "network", "ReceiveBytesPerSecond", "Algorithm",
                 rate(rx, s->rx, seconds));
    smr_mon_emit(r, "network", "TransmitBytesPerSecond", "Algorithm",
                 rate(tx, s->tx, seconds));
    s->rx = rx;
    s->tx = tx;
  }
  if (s->have_disk && read_disk(&s->disk, &rd, &wr, &ops)) {
    smr_mon_emit(r, "i/o", "ReadThroughputInBytesPerSecond", "",
                 rate(rd, s->rd_bytes, seconds));
    smr_mon_emit(r, "i/o", "WriteThroughputInBytesPerSecond", "",
                 rate(wr, s->wr_bytes, seconds));
    smr_mon_emit(r, "i/o", "IOPS", "", rate(ops, s->ops, seconds));
    s->rd_bytes = rd;
    s->wr_bytes = wr;
    s->ops = ops;
  }
}

void smr_io_close(smr_io_sampler *s) {
  smr_procfile_close(&s->net);
  smr_procfile_close(&s->disk);
}
