/* metrics_http.c - the /metrics listener: one thread, one poll() loop,
 * non-blocking sockets.  It answers GET (and HEAD) /metrics with the last
 * published text and nothing else; a request is at most
 * SMR_METRICS_MAX_REQUEST bytes of line and headers, a connection lives
 * at most SMR_METRICS_CLIENT_MS (reading the request and writing the
 * answer), and at most SMR_METRICS_MAX_CLIENTS are served at once (more
 * get 503).  Nothing here waits for the evaluating thread but the short
 * copy of the text under m->mu. */
#include "metrics/metrics_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct client {
  int fd;
  double deadline; /* monotonic seconds */
  char in[SMR_METRICS_MAX_REQUEST];
  size_t in_len;
  char *out; /* the answer, once the request is read */
  size_t out_len, out_off;
} client;

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void count_refusal(smr_metrics *m, int why) {
  pthread_mutex_lock(&m->mu);
  m->refused[why]++;
  pthread_mutex_unlock(&m->mu);
}

static void drop(client *c) {
  close(c->fd);
  free(c->out);
  c->fd = -1;
  c->out = NULL;
  c->in_len = c->out_len = c->out_off = 0;
}

static char *status_answer(const char *status, const char *extra) {
  return smr_xasprintf("HTTP/1.1 %s\r\nContent-Type: text/plain; "
                       "charset=utf-8\r\n%sContent-Length: %zu\r\nConnection: "
                       "close\r\n\r\n%s\n",
                       status, extra, strlen(status) + 1, status);
}

char *smr_metrics_answer(smr_metrics *m, const char *in, size_t len) {
  const char *eol = memchr(in, '\n', len);
  const char *sp1 = eol ? memchr(in, ' ', (size_t)(eol - in)) : NULL;
  const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
  if (!sp2 || (size_t)(eol - sp2 - 1) < 7 || memcmp(sp2 + 1, "HTTP/1.", 7)) {
    count_refusal(m, SMR_MREF_BAD);
    return status_answer("400 Bad Request", "");
  }
  size_t mlen = (size_t)(sp1 - in);
  bool head = mlen == 4 && !memcmp(in, "HEAD", 4);
  if (!head && !(mlen == 3 && !memcmp(in, "GET", 3))) {
    count_refusal(m, SMR_MREF_METHOD);
    return status_answer("405 Method Not Allowed", "Allow: GET, HEAD\r\n");
  }
  const char *path = sp1 + 1;
  size_t plen = (size_t)(sp2 - path);
  if (!(plen >= 8 && !memcmp(path, "/metrics", 8) &&
        (plen == 8 || path[8] == '?'))) {
    count_refusal(m, SMR_MREF_PATH);
    return status_answer("404 Not Found", "");
  }
  pthread_mutex_lock(&m->mu);
  m->scrapes++;
  pthread_mutex_unlock(&m->mu);
  char *text = smr_metrics_text(m);
  size_t tlen = strlen(text);
  char *out = smr_xasprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
                            "version=0.0.4; charset=utf-8\r\nContent-Length: "
                            "%zu\r\nConnection: close\r\n\r\n%s",
                            tlen, head ? "" : text);
  free(text);
  return out;
}

/* Read what came; once the headers are complete, the answer is due. */
static void on_readable(smr_metrics *m, client *c) {
  if (c->in_len == sizeof c->in) {
    count_refusal(m, SMR_MREF_TOO_LARGE);
    c->out = status_answer("431 Request Header Fields Too Large", "");
  } else {
    ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      drop(c);
      return;
    }
    if (n > 0)
      c->in_len += (size_t)n;
    if (memmem(c->in, c->in_len, "\r\n\r\n", 4) ||
        memmem(c->in, c->in_len, "\n\n", 2))
      c->out = smr_metrics_answer(m, c->in, c->in_len);
    else if (c->in_len == sizeof c->in) {
      count_refusal(m, SMR_MREF_TOO_LARGE);
      c->out = status_answer("431 Request Header Fields Too Large", "");
    }
  }
  if (c->out)
    c->out_len = strlen(c->out);
}

static void on_writable(client *c) {
  ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                   MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n <= 0) {
    drop(c);
    return;
  }
  c->out_off += (size_t)n;
  if (c->out_off == c->out_len) {
    shutdown(c->fd, SHUT_WR);
    drop(c);
  }
}

/* A connection over the limit gets 503 if its buffer takes it at once. */
static void refuse_busy(smr_metrics *m, int fd) {
  char *a = status_answer("503 Service Unavailable", "Retry-After: 1\r\n");
  ssize_t n = send(fd, a, strlen(a), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)n; /* best effort: the connection is closed either way */
  free(a);
  close(fd);
  count_refusal(m, SMR_MREF_BUSY);
}

static void accept_one(smr_metrics *m, client *cl) {
  int fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0)
    return;
  for (size_t i = 0; i < SMR_METRICS_MAX_CLIENTS; i++)
    if (cl[i].fd < 0) {
      cl[i].fd = fd;
      cl[i].deadline = mono_s() + SMR_METRICS_CLIENT_MS / 1000.0;
      return;
    }
  refuse_busy(m, fd);
}

static void *serve(void *arg) {
  smr_metrics *m = arg;
  client *cl = smr_xcalloc(SMR_METRICS_MAX_CLIENTS, sizeof *cl);
  for (size_t i = 0; i < SMR_METRICS_MAX_CLIENTS; i++)
    cl[i].fd = -1;
  struct pollfd p[2 + SMR_METRICS_MAX_CLIENTS];
  size_t who[SMR_METRICS_MAX_CLIENTS];
  for (;;) {
    double now = mono_s(), next = now + 3600;
    p[0] = (struct pollfd){m->wake[0], POLLIN, 0};
    p[1] = (struct pollfd){m->lfd, POLLIN, 0};
    nfds_t n = 2;
    for (size_t i = 0; i < SMR_METRICS_MAX_CLIENTS; i++) {
      if (cl[i].fd < 0)
        continue;
      if (now >= cl[i].deadline) { /* a slow or stalled client is cut */
        count_refusal(m, SMR_MREF_TIMEOUT);
        drop(&cl[i]);
        continue;
      }
      next = cl[i].deadline < next ? cl[i].deadline : next;
      who[n - 2] = i;
      p[n++] = (struct pollfd){cl[i].fd, cl[i].out ? POLLOUT : POLLIN, 0};
    }
    int ms = (int)((next - now) * 1000) + 1;
    if (poll(p, n, ms) < 0 && errno != EINTR)
      break;
    if (p[0].revents)
      break; /* smr_metrics_listen_stop */
    for (nfds_t k = 2; k < n; k++) {
      client *c = &cl[who[k - 2]];
      if (!p[k].revents)
        continue;
      if (c->out)
        on_writable(c);
      else
        on_readable(m, c);
      if (c->fd >= 0 && c->out && c->out_off == 0)
        on_writable(c); /* most answers fit the socket buffer at once */
    }
    if (p[1].revents & POLLIN)
      accept_one(m, cl);
  }
  for (size_t i = 0; i < SMR_METRICS_MAX_CLIENTS; i++)
    if (cl[i].fd >= 0)
      drop(&cl[i]);
  free(cl);
  return NULL;
}

/* HOST:PORT, [V6]:PORT or :PORT (loopback) into host and port. */
static int split_addr(const char *addr, char **host, char **port,
                      smr_error *err) {
  const char *colon = strrchr(addr, ':');
  if (!colon || !colon[1])
    return smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "--metrics-listen needs HOST:PORT, got '%s'", addr);
  const char *h = addr;
  size_t hl = (size_t)(colon - addr);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  *host = hl ? smr_xstrndup(h, hl) : smr_xstrdup("127.0.0.1");
  *port = smr_xstrdup(colon + 1);
  return SMR_OK;
}

static int bind_addr(smr_metrics *m, const char *addr, smr_error *err) {
  char *host = NULL, *port = NULL;
  if (split_addr(addr, &host, &port, err))
    return err->status;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int g = getaddrinfo(host, port, &hints, &res);
  int rc = SMR_OK;
  if (g != 0) {
    rc = smr_error_set(err, SMR_ERR_USAGE, NULL, -1, "--metrics-listen %s: %s",
                       addr, gai_strerror(g));
  } else {
    int fd =
        socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
        listen(fd, 64) != 0) {
      rc = smr_error_set(err, SMR_ERR_USAGE, NULL, -1,
                         "--metrics-listen %s: cannot listen there: %s", addr,
                         strerror(errno));
      if (fd >= 0)
        close(fd);
    } else {
      m->lfd = fd;
    }
    freeaddrinfo(res);
  }
  free(host);
  free(port);
  return rc;
}

static void announce(int fd) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char h[NI_MAXHOST], s[NI_MAXSERV];
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
      getnameinfo((struct sockaddr *)&ss, len, h, sizeof h, s, sizeof s,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  bool v6 = ss.ss_family == AF_INET6;
  fprintf(stderr, "smrules: metrics on http://%s%s%s:%s/metrics\n",
          v6 ? "[" : "", h, v6 ? "]" : "", s);
}

int smr_metrics_listen(smr_metrics *m, const char *addr, bool show,
                       smr_error *err) {
  if (bind_addr(m, addr, err))
    return err->status;
  if (pipe2(m->wake, O_CLOEXEC) != 0)
    return smr_error_set(err, SMR_ERR_IO, NULL, -1, "pipe: %s",
                         strerror(errno));
  if (show)
    announce(m->lfd);
  /* signals are the evaluating thread's business: none lands here */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  m->thread = pthread_create(&m->th, NULL, serve, m) == 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!m->thread)
    return smr_error_set(err, SMR_ERR_IO, NULL, -1,
                         "cannot start the metrics listener");
  return SMR_OK;
}

void smr_metrics_listen_stop(smr_metrics *m) {
  if (m->thread) {
    ssize_t w = write(m->wake[1], "x", 1);
    (void)w; /* the pipe is empty and ours: it cannot be full */
    pthread_join(m->th, NULL);
    m->thread = false;
  }
  for (int i = 0; i < 2; i++)
    if (m->wake[i] >= 0)
      close(m->wake[i]);
  if (m->lfd >= 0)
    close(m->lfd);
  m->lfd = m->wake[0] = m->wake[1] = -1;
}
