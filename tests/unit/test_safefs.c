/* test_safefs.c - smr_safe_write_below: the path a plugin names is checked
 * as text, folders are made on the way, and no link below the folder is
 * followed (docs/security.md#against-the-trial-folder); smr_mkdirs, the
 * mkdir -p of the user's own folders. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/safefs.h"
#include "unit.h"

static char root[256];

static char *at(const char *rel) {
  return smr_xasprintf("%s/%s", root, rel);
}

static int put(int dirfd, const char *rel, const char *text, smr_error *err) {
  smr_error_clear(err);
  return smr_safe_write_below(dirfd, rel, text, strlen(text), root, err);
}

static char *slurp(const char *rel) {
  char *p = at(rel);
  FILE *f = fopen(p, "r");
  free(p);
  if (!f)
    return NULL;
  char *buf = smr_xcalloc(1, 256);
  size_t n = fread(buf, 1, 255, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static bool is_link(const char *rel) {
  struct stat st;
  char *p = at(rel);
  bool l = lstat(p, &st) == 0 && S_ISLNK(st.st_mode);
  free(p);
  return l;
}

static void test_writes_and_makes_folders(void) {
  int fd = open(root, O_RDONLY | O_DIRECTORY);
  smr_error e;
  CHECK_EQ_INT(put(fd, "a/b/c.txt", "one", &e), SMR_OK);
  char *got = slurp("a/b/c.txt");
  CHECK_STR(got, "one");
  free(got);
  CHECK_EQ_INT(put(fd, "a/b/c.txt", "two", &e), SMR_OK);
  got = slurp("a/b/c.txt");
  CHECK_STR(got, "two");
  free(got);
  char *tmp = at("a/b/c.txt.tmp");
  CHECK(access(tmp, F_OK) != 0); /* no temporary left behind */
  free(tmp);
  close(fd);
}

static void test_refuses_bad_paths(void) {
  int fd = open(root, O_RDONLY | O_DIRECTORY);
  smr_error e;
  const char *bad[] = {"",      "/etc/x", "../x", "a/../x", "a//x",
                       "a/./x", "a/",     ".",    "a/\x01"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK_EQ_INT(put(fd, bad[i], "x", &e), SMR_ERR_USAGE);
    CHECK(e.msg[0] != '\0');
  }
  CHECK_EQ_INT(smr_safe_write_below(fd, NULL, "", 0, root, &e), SMR_ERR_USAGE);
  close(fd);
}

static void test_links_are_not_followed(void) {
  int fd = open(root, O_RDONLY | O_DIRECTORY);
  smr_error e;
  char *outside = at("outside");
  mkdir(outside, 0755);
  char *victim = at("outside/victim");
  FILE *f = fopen(victim, "w");
  fputs("precious", f);
  fclose(f);
  /* a folder on the way: refused, naming it */
  char *dirlink = at("d");
  CHECK_EQ_INT(symlink(outside, dirlink), 0);
  CHECK_EQ_INT(put(fd, "d/victim", "x", &e), SMR_ERR_IO);
  CHECK(strstr(e.msg, "'d' is a symbolic link") != NULL);
  /* the file itself: replaced, the target untouched */
  char *filelink = at("f");
  CHECK_EQ_INT(symlink(victim, filelink), 0);
  CHECK_EQ_INT(put(fd, "f", "x", &e), SMR_OK);
  CHECK(!is_link("f"));
  char *got = slurp("outside/victim");
  CHECK_STR(got, "precious");
  free(got);
  /* its temporary name: removed, never written through */
  char *tmplink = at("g.tmp");
  CHECK_EQ_INT(symlink(victim, tmplink), 0);
  CHECK_EQ_INT(put(fd, "g", "x", &e), SMR_OK);
  got = slurp("outside/victim");
  CHECK_STR(got, "precious");
  free(got);
  free(tmplink);
  free(filelink);
  free(dirlink);
  free(victim);
  free(outside);
  close(fd);
}

/* Appending: a regular file is made or kept and appended to; a link, a
 * FIFO (read or not) and a folder are refused without being written
 * through or waited on, the message saying what was found. */
static void test_open_append(void) {
  int fd = open(root, O_RDONLY | O_DIRECTORY);
  smr_error e;
  int f = -1;
  CHECK_EQ_INT(smr_safe_open_append(fd, "log", "log", &f, &e), SMR_OK);
  CHECK(f >= 0 && write(f, "a", 1) == 1);
  close(f);
  CHECK_EQ_INT(smr_safe_open_append(fd, "log", "log", &f, &e), SMR_OK);
  CHECK(f >= 0 && write(f, "b", 1) == 1);
  close(f);
  char *got = slurp("log");
  CHECK_STR(got, "ab");
  free(got);
  char *victim = at("append-victim");
  FILE *v = fopen(victim, "w");
  fputs("precious", v);
  fclose(v);
  char *link = at("alink");
  CHECK_EQ_INT(symlink(victim, link), 0);
  CHECK_EQ_INT(smr_safe_open_append(fd, "alink", "alink", &f, &e), SMR_ERR_IO);
  CHECK(f == -1 && strstr(e.msg, "symbolic link") != NULL);
  got = slurp("append-victim");
  CHECK_STR(got, "precious");
  free(got);
  char *fifo = at("afifo");
  CHECK_EQ_INT(mkfifo(fifo, 0644), 0);
  CHECK_EQ_INT(smr_safe_open_append(fd, "afifo", "afifo", &f, &e), SMR_ERR_IO);
  CHECK(strstr(e.msg, "a FIFO") != NULL);
  int reader = open(fifo, O_RDONLY | O_NONBLOCK);
  CHECK_EQ_INT(smr_safe_open_append(fd, "afifo", "afifo", &f, &e), SMR_ERR_IO);
  CHECK(f == -1 && strstr(e.msg, "a FIFO") != NULL);
  close(reader);
  char *dir = at("adir");
  mkdir(dir, 0755);
  free(dir);
  CHECK_EQ_INT(smr_safe_open_append(fd, "adir", "adir", &f, &e), SMR_ERR_IO);
  CHECK_EQ_INT(smr_safe_open_append(fd, "../x", "../x", &f, &e), SMR_ERR_IO);
  free(fifo);
  free(link);
  free(victim);
  close(fd);
}

/* mkdir -p of the user's own folders: every missing level made with the
 * mode asked (less the umask), an existing one kept, the path given left
 * as it was; a file in the way is an error with errno set. */
static void test_mkdirs(void) {
  mode_t old = umask(022);
  char *deep = at("own/state/0123abcd");
  CHECK(smr_mkdirs(deep, 0700));
  char *same = at("own/state/0123abcd");
  CHECK_STR(deep, same); /* no '\0' left in the path given */
  free(same);
  struct stat st;
  char *mid = at("own/state");
  CHECK(stat(mid, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK_EQ_INT((int)(st.st_mode & 0777), 0700);
  CHECK(stat(deep, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK_EQ_INT((int)(st.st_mode & 0777), 0700);
  CHECK(smr_mkdirs(deep, 0700)); /* already there */
  umask(077);
  char *wide = at("own/wide");
  CHECK(smr_mkdirs(wide, 0755)); /* the umask still applies */
  CHECK(stat(wide, &st) == 0 && (st.st_mode & 0777) == 0700);
  umask(old);
  char *file = at("own/file");
  FILE *f = fopen(file, "w");
  fclose(f);
  char *below = at("own/file/sub/dir");
  errno = 0;
  CHECK(!smr_mkdirs(below, 0700));
  CHECK_EQ_INT(errno, ENOTDIR);
  errno = 0;
  CHECK(!smr_mkdirs("", 0700) && errno == ENOENT);
  free(below);
  free(file);
  free(wide);
  free(mid);
  free(deep);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/smr-safefs-XXXXXX");
  if (!mkdtemp(root))
    return 1;
  TEST_RUN(test_writes_and_makes_folders);
  TEST_RUN(test_refuses_bad_paths);
  TEST_RUN(test_links_are_not_followed);
  TEST_RUN(test_open_append);
  TEST_RUN(test_mkdirs);
  char *cmd = smr_xasprintf("rm -rf '%s'", root);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", root);
  free(cmd);
  return TEST_REPORT("test_safefs");
}
