/* SPDX-License-Identifier: MIT */
/*
 * A YAML document as a small tree whose every node knows its line and
 * column. libfyaml's document API does not export node positions in 0.7.x,
 * so the tree is built from its event stream, where every event has a mark.
 * Private to src/config/.
 */
#ifndef HASHLB_CONFIG_YTREE_H
#define HASHLB_CONFIG_YTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hashlb/config.h"
#include "hashlb/error.h"
#include "keymap.h"

enum ynode_type { YNODE_SCALAR = 0, YNODE_MAP, YNODE_SEQ, YNODE_MAX };

/*
 * 24 bytes: a config may hold YNODES_MAX of them (ytree.c), each with a
 * pointer in its parent's items and its text, all in the document's arena.
 */
struct ynode {
	struct hashlb_pos pos;
	union {
		/* Scalars: the value (NUL-terminated, may contain NULs: see len). */
		char *text;
		/* Maps: n / 2 pairs of nodes, key then value; sequences: n nodes. */
		struct ynode **items;
	};
	uint32_t len; /* scalars; 0 for collections */
	uint32_t n : 28; /* collections; 0 for scalars */
	enum ynode_type type : 2;
	/* A scalar quoted (or block), i.e. a string whatever it reads. */
	bool quoted : 1;
	/* Where an alias stands: a copy of its anchor's node that shares the
	 * anchor's text and items. */
	bool alias : 1;
};

struct ychunk;

struct ydoc {
	struct ynode *root; /* NULL for an empty stream */
	/* Every node, text and items array, for freeing at once: one malloc
	 * each took 130 bytes a node ("[a,a,...]": 1 GB for a 16 MiB file). */
	struct ychunk *chunks;
	/* Anchors (struct yanchor) by name: a list searched at each alias made
	 * 40,000 anchors and as many aliases, a 550 kB file, take 6.6 CPU s. */
	struct keymap anchors;
};

/*
 * Parse <len> bytes of <text> (borrowed for the call). On a YAML error
 * returns -EINVAL and fills <err> (reason HASHLB_ERR_CONFIG, file = <name>,
 * 1-based line and column as libfyaml reports them); nothing is printed.
 * A stream with more than one document is an error, and so is one of more
 * than YNODES_MAX nodes (every key, value and collection; an alias is one).
 */
#define YNODES_MAX 2000000u
_Static_assert(YNODES_MAX < (1u << 28), "a collection's n holds it");
int ydoc_parse(const char *text, size_t len, const char *name, struct ydoc **ret_doc,
	       struct hashlb_error *err);
/*
 * The same, but on a YAML error in the text (-EINVAL, <err> filled) returns 1, and the
 * tree of the events libfyaml gave before the error into *<ret_doc>: every node in it
 * whole as the text has it, but for the collections still open at the error, ended
 * there (a mapping's last key may then have no value: ynode_pairs() leaves it out).
 * For a reader that needs one key of a file being edited (hashlb ctl -c): what comes
 * after the error is unknown, a key there included. A text refused before it is parsed
 * (a byte that is no text) has no tree.
 */
int ydoc_parse_prefix(const char *text, size_t len, const char *name, struct ydoc **ret_doc,
		      struct hashlb_error *err);
/* Accepts NULL. */
void ydoc_free(struct ydoc *d);
/*
 * The code point of the UTF-8 sequence at <s> (at most <n> bytes: SIZE_MAX
 * for a NUL-terminated string, where the NUL ends a sequence too), its length
 * in *<ret_len>; -1 (length 1) if it is not valid UTF-8: overlong, a UTF-16
 * surrogate, past U+10FFFF, or cut short.
 */
int32_t yutf8_decode(const unsigned char *s, size_t n, size_t *ret_len);

/*
 * Whether code point <c> beyond ASCII shows as nothing, or as a plain space:
 * C1 controls, the Unicode spaces (no-break, en, em, ...), zero-width and
 * bidirectional formatting characters, the BOM. "a\u00a0" looks like "a",
 * and "scheme\u200b" like "scheme".
 */
bool yinvisible(int32_t c);

/* "a string", "a mapping", "a list", "null"... for messages. */
const char *ynode_kind(const struct ynode *n);
/* A plain scalar that YAML reads as null: empty, "~", "null". */
bool ynode_is_null(const struct ynode *n);
/* Number of key/value pairs of map <n>. */
static inline size_t ynode_pairs(const struct ynode *n)
{
	return n->n / 2;
}
/* Key node of pair <i> / value node of pair <i> of map <n>. */
static inline struct ynode *ynode_key(const struct ynode *n, size_t i)
{
	return n->items[2 * i];
}
static inline struct ynode *ynode_value(const struct ynode *n, size_t i)
{
	return n->items[2 * i + 1];
}

#endif
