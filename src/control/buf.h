/* SPDX-License-Identifier: MIT */
/* A growable byte buffer for building admin responses. */
#ifndef HLB_CONTROL_BUF_H
#define HLB_CONTROL_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hlb_buf {
	char *p;
	size_t len, cap;
	bool oom; /* an append failed: the content is truncated */
};

void hlb_buf_put(struct hlb_buf *b, const void *data, size_t n);
void hlb_buf_puts(struct hlb_buf *b, const char *s);
void hlb_buf_printf(struct hlb_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* <v> in decimal, as printf's "%" PRIu64 writes it. */
void hlb_buf_u64(struct hlb_buf *b, uint64_t v);
/* <v> in the fewest significant digits (15 to 17) that read back as <v>, as
 * Prometheus clients write it: 0.001234567, not %.17g's 0.0012345670000000001;
 * an integer below 1e17 whole, as %.17g writes it (without printf). */
void hlb_buf_shortest(struct hlb_buf *b, double v);
/* <s> as a JSON string, quotes included; NULL as null. */
void hlb_buf_json_str(struct hlb_buf *b, const char *s);
/* <s> as a Prometheus label value (quotes included). */
void hlb_buf_label(struct hlb_buf *b, const char *s);
void hlb_buf_reset(struct hlb_buf *b);

/* The plural ending a count of <n> takes in a message: "" for one, else "s". */
static inline const char *hlb_plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}
void hlb_buf_free(struct hlb_buf *b);

#endif
