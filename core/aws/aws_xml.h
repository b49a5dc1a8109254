/* aws_xml.h - the XML of AWS answers (see aws_xml.c). */
#ifndef SMR_AWS_XML_H
#define SMR_AWS_XML_H

#include <stdbool.h>
#include <stddef.h>

#include "base/common.h"

/* Just after the first "<tag>" (or "<tag ...>", or the empty element
 * "<tag/>": *empty set) in [p, end); NULL when absent. */
const char *smr_xml_open(const char *p, const char *end, const char *tag,
                         bool *empty);
/* The first "</tag>" in [p, end), or NULL. */
const char *smr_xml_close(const char *p, const char *end, const char *tag);
/* The text of the first <tag>...</tag> in [p, end), entities decoded
 * (malloc'ed); *next (optional) points after the closing tag.  NULL when
 * absent or malformed (bad entity, NUL). */
char *smr_xml_child(const char *p, const char *end, const char *tag,
                    const char **next);
/* Decode XML entities (&amp; &lt; &gt; &quot; &apos; &#N; &#xH;) of n
 * bytes; NULL when malformed or when the text would hold a NUL. */
char *smr_xml_unescape(const char *s, size_t n);

#endif
