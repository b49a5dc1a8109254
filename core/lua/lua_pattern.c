/* lua_pattern.c - the steps Lua 5.4's pattern matcher (lstrlib.c) takes,
 * counted by walking the same backtracking algorithm without building
 * results (lua_pattern.h).  Each function below mirrors the matcher's
 * function of the same job; the counts, not the results, are what the
 * sandbox uses, so a difference here changes a charge, never what a
 * script sees (tests/unit/test_lua_charges.c checks the counts against
 * independent models of known patterns). */
#include "lua/lua_pattern.h"

#include <ctype.h>
#include <string.h>

#define ESC '%'
#define SPECIALS "^$*+?.([%-"
#define MAX_CAPTURES 32 /* LUA_MAXCAPTURES */
#define MAX_CALLS 200   /* MAXCCALLS: deeper is "pattern too complex" */
#define CAP_UNFINISHED (-1)
#define CAP_POSITION (-2)

typedef struct counter {
  const char *src_init, *src_end, *p_end;
  int level, depth;
  struct {
    const char *init;
    ptrdiff_t len;
  } capture[MAX_CAPTURES];
  uint64_t steps, limit;
  bool stop; /* over the limit, or malformed: give up */
  bool over;
} counter;

static bool tick(counter *c, uint64_t n) {
  c->steps += n;
  if (c->steps > c->limit) {
    c->over = c->stop = true;
  }
  return !c->stop;
}

static const char *bad(counter *c) {
  c->stop = true; /* the original raises the error */
  return NULL;
}

static const char *class_end(counter *c, const char *p) {
  if (*p == ESC) {
    return p + 1 >= c->p_end ? bad(c) : p + 2;
  }
  if (*p++ == '[') {
    if (*p == '^')
      p++;
    do { /* look for a ']' */
      if (p >= c->p_end)
        return bad(c);
      if (*(p++) == ESC && p < c->p_end)
        p++;
    } while (*p != ']');
    tick(c, 1);
    return p + 1;
  }
  return p;
}

static bool match_class(int ch, int cl) {
  bool res;
  switch (tolower(cl)) {
  case 'a':
    res = isalpha(ch);
    break;
  case 'c':
    res = iscntrl(ch);
    break;
  case 'd':
    res = isdigit(ch);
    break;
  case 'g':
    res = isgraph(ch);
    break;
  case 'l':
    res = islower(ch);
    break;
  case 'p':
    res = ispunct(ch);
    break;
  case 's':
    res = isspace(ch);
    break;
  case 'u':
    res = isupper(ch);
    break;
  case 'w':
    res = isalnum(ch);
    break;
  case 'x':
    res = isxdigit(ch);
    break;
  default:
    return cl == ch;
  }
  return isupper(cl) ? !res : res;
}

/* [set] from p (at '[') to ec (at ']'). */
static bool match_bracket(counter *c, int ch, const char *p, const char *ec) {
  bool sig = true;
  if (*(p + 1) == '^') {
    sig = false;
    p++;
  }
  while (++p < ec) {
    tick(c, 1);
    if (*p == ESC) {
      p++;
      if (match_class(ch, (unsigned char)*p))
        return sig;
    } else if (*(p + 1) == '-' && p + 2 < ec) {
      p += 2;
      if ((unsigned char)*(p - 2) <= ch && ch <= (unsigned char)*p)
        return sig;
    } else if ((unsigned char)*p == ch) {
      return sig;
    }
  }
  return !sig;
}

static bool single_match(counter *c, const char *s, const char *p,
                         const char *ep) {
  tick(c, 1);
  if (s >= c->src_end)
    return false;
  int ch = (unsigned char)*s;
  switch (*p) {
  case '.':
    return true;
  case ESC:
    return match_class(ch, (unsigned char)*(p + 1));
  case '[':
    return match_bracket(c, ch, p, ep - 1);
  default:
    return (unsigned char)*p == ch;
  }
}

static const char *do_match(counter *c, const char *s, const char *p);

static const char *match_balance(counter *c, const char *s, const char *p) {
  if (p >= c->p_end - 1)
    return bad(c);
  if (s >= c->src_end || *s != *p)
    return NULL;
  int b = *p, e = *(p + 1), cont = 1;
  const char *from = s;
  while (++s < c->src_end) {
    if (*s == e) {
      if (--cont == 0) {
        tick(c, (uint64_t)(s - from));
        return s + 1;
      }
    } else if (*s == b) {
      cont++;
    }
  }
  tick(c, (uint64_t)(s - from));
  return NULL;
}

static const char *max_expand(counter *c, const char *s, const char *p,
                              const char *ep) {
  ptrdiff_t i = 0;
  while (!c->stop && single_match(c, s + i, p, ep))
    i++;
  while (i >= 0 && !c->stop) { /* try with the most repetitions first */
    const char *res = do_match(c, s + i, ep + 1);
    if (res)
      return res;
    i--;
  }
  return NULL;
}

static const char *min_expand(counter *c, const char *s, const char *p,
                              const char *ep) {
  while (!c->stop) {
    const char *res = do_match(c, s, ep + 1);
    if (res)
      return res;
    if (!single_match(c, s, p, ep))
      return NULL;
    s++;
  }
  return NULL;
}

static const char *start_capture(counter *c, const char *s, const char *p,
                                 ptrdiff_t what) {
  if (c->level >= MAX_CAPTURES)
    return bad(c);
  c->capture[c->level].init = s;
  c->capture[c->level].len = what;
  c->level++;
  const char *res = do_match(c, s, p);
  if (!res)
    c->level--;
  return res;
}

static const char *end_capture(counter *c, const char *s, const char *p) {
  int l = c->level - 1;
  while (l >= 0 && c->capture[l].len != CAP_UNFINISHED)
    l--;
  if (l < 0)
    return bad(c);
  c->capture[l].len = s - c->capture[l].init;
  const char *res = do_match(c, s, p);
  if (!res)
    c->capture[l].len = CAP_UNFINISHED;
  return res;
}

static const char *match_capture(counter *c, const char *s, int l) {
  l -= '1';
  if (l < 0 || l >= c->level || c->capture[l].len == CAP_UNFINISHED)
    return bad(c);
  size_t len = (size_t)c->capture[l].len; /* a position: huge, no match */
  if ((size_t)(c->src_end - s) >= len) {
    tick(c, len); /* the memcmp */
    if (memcmp(c->capture[l].init, s, len) == 0)
      return s + len;
  }
  return NULL;
}

static const char *frontier(counter *c, const char *s, const char **pp) {
  const char *p = *pp + 2;
  if (*p != '[')
    return bad(c);
  const char *ep = class_end(c, p);
  if (!ep)
    return NULL;
  int prev = s == c->src_init ? '\0' : (unsigned char)*(s - 1);
  int cur = s < c->src_end ? (unsigned char)*s : '\0';
  if (!match_bracket(c, prev, p, ep - 1) && match_bracket(c, cur, p, ep - 1)) {
    *pp = ep;
    return s;
  }
  return NULL;
}

/* One item that is not a capture, anchor or %-special, with what follows
 * it ('?', '+', '*', '-'); *pp moves on when the match goes on. */
static const char *item(counter *c, const char *s, const char **pp,
                        bool *again) {
  const char *p = *pp, *ep = class_end(c, p);
  *again = false;
  if (!ep)
    return NULL;
  if (!single_match(c, s, p, ep)) {
    if (*ep == '*' || *ep == '?' || *ep == '-') {
      *pp = ep + 1;
      *again = true;
      return s;
    }
    return NULL;
  }
  switch (*ep) {
  case '?': {
    const char *res = do_match(c, s + 1, ep + 1);
    if (res)
      return res;
    *pp = ep + 1;
    *again = true;
    return s;
  }
  case '+':
    return max_expand(c, s + 1, p, ep);
  case '*':
    return max_expand(c, s, p, ep);
  case '-':
    return min_expand(c, s, p, ep);
  default:
    *pp = ep;
    *again = true;
    return s + 1;
  }
}

static const char *do_match(counter *c, const char *s, const char *p) {
  if (c->depth++ >= MAX_CALLS)
    return bad(c);
  while (s && p != c->p_end && tick(c, 1)) {
    bool again = false;
    if (*p == '(') {
      s = p[1] == ')' ? start_capture(c, s, p + 2, CAP_POSITION)
                      : start_capture(c, s, p + 1, CAP_UNFINISHED);
    } else if (*p == ')') {
      s = end_capture(c, s, p + 1);
    } else if (*p == '$' && p + 1 == c->p_end) {
      s = s == c->src_end ? s : NULL;
    } else if (*p == ESC && p[1] == 'b') {
      s = match_balance(c, s, p + 2);
      p += 4;
      again = s != NULL;
    } else if (*p == ESC && p[1] == 'f') {
      s = frontier(c, s, &p);
      again = s != NULL;
    } else if (*p == ESC && isdigit((unsigned char)p[1])) {
      s = match_capture(c, s, (unsigned char)p[1]);
      p += 2;
      again = s != NULL;
    } else {
      s = item(c, s, &p, &again);
    }
    if (!again)
      break;
  }
  c->depth--;
  return c->stop ? NULL : s;
}

static void counter_init(counter *c, const char *s, size_t n, const char *p,
                         size_t m, uint64_t limit) {
  memset(c, 0, sizeof *c);
  c->src_init = s;
  c->src_end = s + n;
  c->p_end = p + m;
  c->limit = limit;
}

static const char *match_at(counter *c, const char *s, const char *p) {
  c->level = 0;
  c->depth = 0;
  return do_match(c, s, p);
}

static smr_pattern_count result(const counter *c) {
  return (smr_pattern_count){c->steps, c->over};
}

bool smr_pattern_is_plain(const char *p, size_t m) {
  for (size_t i = 0; i < m; i++)
    if (strchr(SPECIALS, p[i]) && p[i] != '\0')
      return false;
  return true;
}

/* lmemfind: the first byte by memchr, then the rest compared. */
static void count_plain(counter *c, const char *s, size_t n, const char *p,
                        size_t m) {
  if (m == 0 || m > n) {
    tick(c, 1);
    return;
  }
  const char *at = s, *end = s + n - m + 1;
  while (at < end && !c->stop) {
    const char *hit = memchr(at, *p, (size_t)(end - at));
    if (!hit) {
      tick(c, (uint64_t)(end - at));
      return;
    }
    tick(c, (uint64_t)(hit - at) + m);
    if (memcmp(hit + 1, p + 1, m - 1) == 0)
      return;
    at = hit + 1;
  }
}

smr_pattern_count smr_pattern_find(const char *s, size_t n, const char *p,
                                   size_t m, size_t init, bool plain,
                                   uint64_t limit) {
  counter c;
  if (init > n)
    return (smr_pattern_count){1, false};
  if (plain) {
    counter_init(&c, s, n, p, m, limit);
    count_plain(&c, s + init, n - init, p, m);
    return result(&c);
  }
  bool anchor = m > 0 && *p == '^';
  if (anchor) {
    p++;
    m--;
  }
  counter_init(&c, s, n, p, m, limit);
  const char *s1 = s + init;
  do {
    if (match_at(&c, s1, p) || c.stop)
      break;
  } while (s1++ < c.src_end && !anchor);
  return result(&c);
}

smr_pattern_count smr_pattern_gsub(const char *s, size_t n, const char *p,
                                   size_t m, int64_t max_n, uint64_t limit) {
  counter c;
  bool anchor = m > 0 && *p == '^';
  if (anchor) {
    p++;
    m--;
  }
  counter_init(&c, s, n, p, m, limit);
  const char *src = s, *last = NULL;
  for (int64_t k = 0; k < max_n && !c.stop;) {
    const char *e = match_at(&c, src, p);
    if (e && e != last) {
      k++;
      src = last = e;
    } else if (src < c.src_end && !c.stop) {
      src++;
    } else {
      break;
    }
    if (anchor)
      break;
  }
  return result(&c);
}

smr_pattern_count smr_pattern_gmatch_next(const char *s, size_t n,
                                          const char *p, size_t m, size_t *src,
                                          int64_t *last, bool *found,
                                          uint64_t limit) {
  counter c;
  counter_init(&c, s, n, p, m, limit);
  *found = false;
  for (const char *at = s + *src; at <= c.src_end && !c.stop; at++) {
    const char *e = match_at(&c, at, p);
    if (e && (*last < 0 || e != s + *last)) {
      *src = (size_t)(e - s);
      *last = (int64_t)(e - s);
      *found = true;
      break;
    }
  }
  return result(&c); /* no match: the next call searches the same again */
}
