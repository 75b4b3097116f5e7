// SPDX-License-Identifier: MIT
#include <errno.h>
#include <libfyaml.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/grow.h"
#include "ytree.h"

#if defined(__SANITIZE_ADDRESS__)
#define YTREE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define YTREE_LSAN 1
#endif
#endif
#ifdef YTREE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#define YDEPTH_MAX 64
/*
 * What aliases may add to the document, in nodes and scalar bytes: about
 * what a config file holds at most (16 MiB). Aliases share nodes here, but
 * the loader copies what it reads: a list of 1,000 backends named by 2,000
 * services' aliases is 2,000,000 backends, and aliases of aliases ("billion
 * laughs") grow tenfold with each line.
 */
#define YALIAS_MAX (16u << 20)

/* A document's anchor: its node, and that node's size with every alias in
 * it written out, in nodes and scalar bytes (set when the node ends). */
struct yanchor {
	struct ynode *node;
	size_t size;
};

/* Where a document's nodes, texts and items are carved from, in turn. */
struct ychunk {
	struct ychunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

#define YCHUNK_SIZE (64u << 10)

struct ybuilder {
	struct ydoc *doc;
	struct ynode *stack[YDEPTH_MAX];
	/* Of each open collection: where its items start in kids, the
	 * document's size when it started, its anchor if it has one. */
	size_t kids_from[YDEPTH_MAX], size_from[YDEPTH_MAX];
	struct yanchor *anchor[YDEPTH_MAX];
	/* Where each open flow collection's '[' or '{' is; 0:0 for a block one. */
	struct hashlb_pos flow_open[YDEPTH_MAX];
	int depth;
	/* The items of every open collection, one after another: each is copied
	 * to the arena, as one array, when its collection ends. */
	struct ynode **kids;
	size_t n_kids, cap_kids;
	size_t nodes;
	int documents;
	struct hashlb_pos last_end; /* where the previous event ended; 0:0 if unknown */
	struct hashlb_pos end; /* just past the text's last character */
	/* The document so far with every alias expanded, and what aliases added
	 * to it: in nodes and scalar bytes. */
	size_t size, aliased;
	const char *name;
	const char *text; /* what is parsed, <len> bytes */
	size_t len;
	struct hashlb_error *err;
	char diag_msg[128]; /* libfyaml's first error without a position */
	bool too_deep; /* the error is YDEPTH_MAX's */
	bool prefix; /* on a YAML error, keep the tree of the events before it */
	/* The last event, if a plain scalar over more than one line: with
	 * <prefix>, a YAML error after it may lie in its continuation. */
	struct ynode *plain_lines;
};

/*
 * The bytes of the UTF-8 BOM that starts <text> (<len> bytes), 3 or 0. YAML reads it as no
 * character: libfyaml gives it no column, and every position counted here from the text
 * must step over it alike, or one on line 1 is a column off.
 */
static size_t ybom_len(const char *text, size_t len)
{
	return len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
}

/*
 * <pos>, or the end of the text if it lies past it: libfyaml places an
 * error at the end of a text with no final newline on the line after it,
 * and an empty block scalar ("|" alone) past its indicator.
 */
static struct hashlb_pos pos_in_text(const struct ybuilder *b, struct hashlb_pos pos)
{
	if (b->end.line &&
	    (pos.line > b->end.line || (pos.line == b->end.line && pos.column > b->end.column)))
		return b->end;
	return pos;
}

__attribute__((format(printf, 3, 4))) static int
yfail(struct ybuilder *b, const struct hashlb_pos *pos, const char *fmt, ...)
{
	struct hashlb_pos at = pos_in_text(b, *pos);
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = hashlb_verr(b->err, -EINVAL, HASHLB_ERR_CONFIG, fmt, ap);
	va_end(ap);

	if (b->err) {
		b->err->file = b->name;
		b->err->line = at.line;
		b->err->column = at.column;
	}
	return ret;
}

/*
 * <size> bytes aligned to <align> (a power of 2, at most 16) from <d>'s
 * arena, freed with it; NULL if out of memory. One larger than a quarter
 * chunk gets a chunk of its own, and the chunk in use stays so.
 */
static void *yalloc(struct ydoc *d, size_t size, size_t align)
{
	struct ychunk *c = d->chunks;
	size_t off = c ? (c->used + align - 1) & ~(align - 1) : 0;

	if (c && off <= c->cap && size <= c->cap - off) {
		c->used = off + size;
		return c->data + off;
	}
	if (size > YCHUNK_SIZE / 4) {
		c = malloc(sizeof(*c) + size);
		if (!c)
			return NULL;
		c->used = c->cap = size;
		if (d->chunks) {
			c->next = d->chunks->next;
			d->chunks->next = c;
		} else {
			c->next = NULL;
			d->chunks = c;
		}
		return c->data;
	}
	c = malloc(sizeof(*c) + YCHUNK_SIZE);
	if (!c)
		return NULL;
	c->next = d->chunks;
	c->cap = YCHUNK_SIZE;
	c->used = size;
	d->chunks = c;
	return c->data;
}

/*
 * One more node at <pos>, or -EINVAL (b->err filled) past YNODES_MAX. A node
 * takes 24 bytes and 8 in its collection's items (8 more on the way there
 * while the collection is open), its text aside: a flat list past the cap
 * ("[a,a,...]", 16 MiB) is refused with about 68 MB of tree.
 */
static int node_count(struct ybuilder *b, const struct hashlb_pos *pos)
{
	if (b->nodes >= YNODES_MAX)
		return yfail(
			b, pos,
			"the configuration has more than %u YAML nodes (keys, values, lists "
			"and mappings), the most hashlb reads (100,000 backends with every key "
			"written are 1,700,000)",
			YNODES_MAX);
	b->nodes++;
	return 0;
}

/*
 * A node of <type> at <pos>, zeroed but for them; -EINVAL (b->err filled)
 * past YNODES_MAX nodes, -ENOMEM.
 */
static int node_new(struct ybuilder *b, enum ynode_type type, const struct hashlb_pos *pos,
		    struct ynode **ret)
{
	struct ynode *n;
	int r = node_count(b, pos);

	if (r < 0)
		return r;
	n = yalloc(b->doc, sizeof(*n), _Alignof(struct ynode));
	if (!n)
		return -ENOMEM;
	*n = (struct ynode){ .type = type, .pos = *pos };
	*ret = n;
	return 0;
}

/* A redefined anchor stands for its latest node from there on, as YAML says. */
static int anchor_add(struct ybuilder *b, struct fy_token *tok, struct ynode *n, size_t size,
		      struct yanchor **ret)
{
	struct yanchor *a;
	size_t len;
	const char *s;

	if (!tok)
		return 0;
	s = fy_token_get_text(tok, &len);
	if (!s)
		return 0;
	a = yalloc(b->doc, sizeof(*a), _Alignof(struct yanchor));
	if (!a)
		return -ENOMEM;
	*a = (struct yanchor){ n, size };
	if (ret)
		*ret = a;
	return keymap_put(&b->doc->anchors, s, len, a, true) < 0 ? -ENOMEM : 0;
}

/*
 * Where the indicator ('|' or '>') of a block scalar stands, its header
 * line ending just before byte <next> (the start of the next line, where
 * libfyaml marks the scalar): *<pos> is set and true returned if the
 * header reads as one (PROPERTIES | or >, then digits, '+' or '-', then
 * blanks and a comment), else false.
 */
static bool block_indicator(const struct ybuilder *b, size_t next, int line, struct hashlb_pos *pos)
{
	const char *t = b->text;
	size_t end = next < b->len ? next : b->len, start, stop, i;
	char quote = 0;
	int col = 1;

	if (end > 0 && t[end - 1] == '\n') {
		end--;
		line--;
	}
	if (end > 0 && t[end - 1] == '\r')
		end--;
	for (start = end; start > 0 && t[start - 1] != '\n'; start--)
		;
	if (start == 0)
		start = ybom_len(t, end);
	/* the comment, if any: '#' after a blank, outside quotes (a quoted key) */
	for (stop = start; stop < end; stop++) {
		if (quote) {
			if (t[stop] == quote)
				quote = 0;
		} else if (t[stop] == '\'' || t[stop] == '"') {
			quote = t[stop];
		} else if (t[stop] == '#' && stop > start &&
			   (t[stop - 1] == ' ' || t[stop - 1] == '\t')) {
			break;
		}
	}
	while (stop > start && (t[stop - 1] == ' ' || t[stop - 1] == '\t'))
		stop--;
	while (stop > start && (t[stop - 1] == '+' || t[stop - 1] == '-' ||
				(t[stop - 1] >= '1' && t[stop - 1] <= '9')))
		stop--;
	if (stop == start || (t[stop - 1] != '|' && t[stop - 1] != '>'))
		return false;
	/* columns count characters, as libfyaml's do */
	for (i = start; i < stop - 1; i++)
		col += ((unsigned char)t[i] & 0xc0) != 0x80;
	*pos = (struct hashlb_pos){ line, col };
	return true;
}

/*
 * 1-based position of <e>. A quoted scalar's mark is just inside its
 * opening quote: step back onto the quote, where the reader sees the value
 * start. An empty value ("key:" and nothing) has no mark: it is placed
 * where the previous event (its key) ended.
 */
static struct hashlb_pos event_pos(struct ybuilder *b, struct fy_event *e)
{
	const struct fy_mark *m = fy_event_start_mark(e);
	struct hashlb_pos pos = { 1, 1 };

	if (m) {
		pos = (struct hashlb_pos){ m->line + 1, m->column + 1 };
		if (e->type == FYET_SCALAR) {
			enum fy_scalar_style st = fy_scalar_token_get_style(e->scalar.value);

			if ((st == FYSS_SINGLE_QUOTED || st == FYSS_DOUBLE_QUOTED) &&
			    pos.column > 1)
				pos.column--;
			/* A block scalar's mark is the line after its header, at column 1:
			 * the reader sees it start at its '|' or '>'. */
			if (st == FYSS_LITERAL || st == FYSS_FOLDED)
				block_indicator(b, m->input_pos, pos.line, &pos);
		}
		/* Likewise an alias's mark is past its '*'. */
		if (e->type == FYET_ALIAS && pos.column > 1)
			pos.column--;
	} else if (b->last_end.line > 0) {
		pos = b->last_end;
	} else if (b->depth > 0) {
		pos = b->stack[b->depth - 1]->pos;
	}
	return pos_in_text(b, pos);
}

static void event_end(struct ybuilder *b, struct fy_event *e)
{
	const struct fy_mark *m = fy_event_end_mark(e);

	if (m)
		b->last_end = (struct hashlb_pos){ m->line + 1, m->column + 1 };
}

/*
 * Attach <n> to the open container, or make it the root. A mapping's first
 * key that stands before it is where it starts: libfyaml marks a pair in a
 * flow list ("[name: a]", a mapping without braces) at its ':'.
 */
static int attach(struct ybuilder *b, struct ynode *n)
{
	struct ynode *parent;

	if (b->depth == 0) {
		b->doc->root = n;
		return 0;
	}
	parent = b->stack[b->depth - 1];
	if (parent->type == YNODE_MAP && b->n_kids == b->kids_from[b->depth - 1] &&
	    (n->pos.line < parent->pos.line ||
	     (n->pos.line == parent->pos.line && n->pos.column < parent->pos.column)))
		parent->pos = n->pos;
	if (hlb_grow((void **)&b->kids, &b->cap_kids, b->n_kids + 1, sizeof(*b->kids), 64) < 0)
		return -ENOMEM;
	b->kids[b->n_kids++] = n;
	return 0;
}

/* Close the innermost open collection: its items to the arena. */
static int collection_end(struct ybuilder *b)
{
	int i = --b->depth;
	struct ynode *n = b->stack[i];
	size_t k = b->n_kids - b->kids_from[i];

	if (k) {
		n->items = yalloc(b->doc, k * sizeof(*n->items), _Alignof(struct ynode *));
		if (!n->items)
			return -ENOMEM;
		memcpy(n->items, b->kids + b->kids_from[i], k * sizeof(*n->items));
	}
	n->n = (uint32_t)k; /* at most YNODES_MAX */
	b->n_kids = b->kids_from[i];
	if (b->anchor[i])
		b->anchor[i]->size = b->size - b->size_from[i];
	return 0;
}

/*
 * A tag (!!str 7, !foo) would change what a value is, and the loader reads
 * values by their text: a tag is refused where it stands rather than
 * silently ignored ("weight: !!str 7" is a string in YAML, not a weight).
 * <pos> is its node's, used only if the tag has no mark of its own: the
 * node may start a line or more after it ("services: !foo" and a list).
 */
static int no_tag(struct ybuilder *b, const struct hashlb_pos *pos, struct fy_token *tag)
{
	const struct fy_mark *m;
	const char *h, *sfx;
	size_t hl = 0, sl = 0;
	struct hashlb_pos at;

	if (!tag)
		return 0;
	m = fy_token_start_mark(tag);
	at = m ? (struct hashlb_pos){ m->line + 1, m->column + 1 } : *pos;
	/* as written: handle "!!" and suffix "str" */
	h = fy_tag_token_handle(tag, &hl);
	sfx = fy_tag_token_suffix(tag, &sl);
	return yfail(b, &at,
		     "a YAML tag ('%.*s%.*s') is not supported here: write the value plainly "
		     "(quoted for a string)",
		     (int)(h && hl < 32 ? hl : 0), h ? h : "", (int)(sfx && sl < 64 ? sl : 0),
		     sfx ? sfx : "");
}

/* Attach a copy of <target> placed at <pos>, sharing its text and items. */
static int alias_attach(struct ybuilder *b, const struct ynode *target,
			const struct hashlb_pos *pos)
{
	struct ynode *n;
	int r = node_new(b, target->type, pos, &n);

	if (r < 0)
		return r;
	if (target->type == YNODE_SCALAR)
		n->text = target->text;
	else
		n->items = target->items;
	n->len = target->len;
	n->quoted = target->quoted;
	n->n = target->n;
	n->alias = true;
	return attach(b, n);
}

/*
 * A "%YAML 1.1" directive: refused, since the config is read by YAML 1.2's
 * rules whatever a directive says ("010" ten, not 1.1's eight); before, the
 * directive was taken and ignored. libfyaml itself refuses 2.0 and up.
 */
static int version_directive(struct ybuilder *b, struct fy_document_state *ds)
{
	const struct fy_version *v = ds ? fy_document_state_version(ds) : NULL;
	struct hashlb_pos pos = { 1, 1 };
	int line;
	size_t i;

	if (!v || !fy_document_state_version_explicit(ds) || (v->major == 1 && v->minor == 2))
		return 0;
	/* at the directive's line (the document state's mark is its "---"), a
	 * directive being a line of its own before it, the first past a BOM */
	i = ybom_len(b->text, b->len);
	for (line = 1; i + 5 <= b->len && memcmp(b->text + i, "%YAML", 5) != 0; line++) {
		const char *nl = memchr(b->text + i, '\n', b->len - i);

		if (!nl)
			break;
		i = (size_t)(nl - b->text) + 1;
	}
	if (i + 5 <= b->len && memcmp(b->text + i, "%YAML", 5) == 0)
		pos.line = line;
	return yfail(b, &pos,
		     "%%YAML %d.%d: hashlb reads its config as YAML 1.2 (\"010\" is ten, not "
		     "eight): write %%YAML 1.2 or no directive",
		     v->major, v->minor);
}

/*
 * Where the '[' or '{' of collection start <e> in <text> (<len> bytes) is; 0:0 if it is a
 * block one, or a pair in a flow list ("[a: b]"), which libfyaml starts with a flow mapping
 * token at its ':' and ends with no '}': none to name as "still open".
 */
static struct hashlb_pos flow_opener(const char *text, size_t len, struct fy_event *e)
{
	struct fy_token *t = e->type == FYET_MAPPING_START ? e->mapping_start.mapping_start
							   : e->sequence_start.sequence_start;
	enum fy_token_type tt = t ? fy_token_get_type(t) : FYTT_NONE;
	const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;

	if (!m || (tt != FYTT_FLOW_MAPPING_START && tt != FYTT_FLOW_SEQUENCE_START) ||
	    m->input_pos >= len || (text[m->input_pos] != '[' && text[m->input_pos] != '{'))
		return (struct hashlb_pos){ 0, 0 };
	return (struct hashlb_pos){ m->line + 1, m->column + 1 };
}

static int on_event(struct ybuilder *b, struct fy_event *e)
{
	struct hashlb_pos pos = event_pos(b, e);
	struct fy_token *anchor = NULL;
	enum fy_scalar_style st;
	const struct fy_mark *m, *m0;
	struct ynode *n = NULL;
	struct yanchor *a;
	const char *s;
	size_t len;
	int r;

	switch (e->type) {
	case FYET_DOCUMENT_START:
		if (++b->documents > 1)
			return yfail(b, &pos, "only one YAML document is allowed in a config file");
		return version_directive(b, e->document_start.document_state);
	case FYET_MAPPING_START:
	case FYET_SEQUENCE_START:
		if (b->depth >= YDEPTH_MAX) {
			b->too_deep = true;
			return yfail(b, &pos, "nesting deeper than %d levels", YDEPTH_MAX);
		}
		r = node_new(b, e->type == FYET_MAPPING_START ? YNODE_MAP : YNODE_SEQ, &pos, &n);
		if (r < 0)
			return r;
		anchor = e->type == FYET_MAPPING_START ? e->mapping_start.anchor
						       : e->sequence_start.anchor;
		r = no_tag(b, &pos,
			   e->type == FYET_MAPPING_START ? e->mapping_start.tag
							 : e->sequence_start.tag);
		if (r < 0)
			return r;
		r = attach(b, n);
		if (r < 0)
			return r;
		b->stack[b->depth] = n;
		b->kids_from[b->depth] = b->n_kids;
		b->size_from[b->depth] = b->size++; /* its size: from here until it ends */
		b->anchor[b->depth] = NULL;
		b->flow_open[b->depth] = flow_opener(b->text, b->len, e);
		return anchor_add(b, anchor, n, 0, &b->anchor[b->depth++]);
	case FYET_MAPPING_END:
	case FYET_SEQUENCE_END:
		return b->depth > 0 ? collection_end(b) : 0;
	case FYET_SCALAR:
		r = no_tag(b, &pos, e->scalar.tag);
		if (r < 0)
			return r;
		r = node_new(b, YNODE_SCALAR, &pos, &n);
		if (r < 0)
			return r;
		s = fy_token_get_text(e->scalar.value, &len);
		if (!s) {
			s = "";
			len = 0;
		}
		/* libfyaml 0.7.12 gives an empty block scalar that ends the text
		 * ("send: |" and a line break, last) as one NUL byte: the text holds
		 * none (text_check()), and the value is empty, not a payload "\0". */
		st = fy_scalar_token_get_style(e->scalar.value);
		if ((st == FYSS_LITERAL || st == FYSS_FOLDED) && len == 1 && s[0] == '\0')
			len = 0;
		n->text = yalloc(b->doc, len + 1, 1);
		if (!n->text)
			return -ENOMEM;
		memcpy(n->text, s, len);
		n->text[len] = '\0';
		n->len = (uint32_t)len; /* a text is at most 16 MiB */
		b->size += 1 + len;
		/* FYSS_ANY is the empty (null) value, a plain scalar for YAML. */
		n->quoted = st > FYSS_PLAIN;
		m0 = fy_event_start_mark(e);
		m = fy_event_end_mark(e);
		b->plain_lines = st == FYSS_PLAIN && m0 && m && m->line > m0->line ? n : NULL;
		r = attach(b, n);
		if (r < 0)
			return r;
		return anchor_add(b, e->scalar.anchor, n, 1 + len, NULL);
	case FYET_ALIAS:
		s = fy_token_get_text(e->alias.anchor, &len);
		a = s ? keymap_get(&b->doc->anchors, s, len) : NULL;
		if (!a)
			return yfail(b, &pos, "alias '*%.*s' refers to no anchor defined before it",
				     (int)(s ? len : 0), s ? s : "");
		/* An error about the value itself ("scheme: *pool", a list) is placed
		 * at the alias, where the value is used, not at the anchor. A node still
		 * open (an alias inside its own anchor) may grow yet: shared as is,
		 * counted as one node (the loader refuses it where it stands). */
		for (int i = 0; i < b->depth; i++)
			if (b->stack[i] == a->node) {
				r = node_count(b, &pos);
				if (r < 0)
					return r;
				b->size++;
				return attach(b, a->node);
			}
		b->size += a->size;
		b->aliased += a->size;
		if (b->aliased > YALIAS_MAX)
			return yfail(b, &pos,
				     "alias '*%.*s': with their anchors' values written out, the "
				     "aliases would add more than a config file may hold (16 MiB)",
				     (int)len, s);
		return alias_attach(b, a->node, &pos);
	default:
		return 0;
	}
}

static void diag_sink(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
	/* libfyaml would print to stderr; library code never prints. The
	 * errors themselves are collected and read back with their position,
	 * but not those it reports without one ("unsupport version number
	 * 2.0" for "%YAML 2.0"): the first of those is kept for the message. */
	struct ybuilder *b = user;
	const char *nl = memchr(buf, '\n', len);

	if (nl) /* one line, as every error is */
		len = (size_t)(nl - buf);
	while (len > 0 && buf[len - 1] == ' ')
		len--;
	if (!b->diag_msg[0] && len > 0)
		snprintf(b->diag_msg, sizeof(b->diag_msg), "%.*s", (int)len, buf);
}

/* The offset in the text of <pos> (1-based line and column), or where its line ends. */
static size_t pos_offset(const struct ybuilder *b, struct hashlb_pos pos)
{
	const char *t = b->text;
	size_t i = ybom_len(t, b->len);
	int line = 1, col = 1;

	while (i < b->len && line < pos.line)
		line += t[i++] == '\n';
	/* columns count characters: step over a character's continuation bytes */
	for (; i < b->len && col < pos.column && t[i] != '\n'; col++)
		for (i++; i < b->len && ((unsigned char)t[i] & 0xc0) == 0x80; i++)
			;
	return i;
}

/* The spaces that indent line <line>; -1 if it is blank or past the text's end. */
static int line_indent(const struct ybuilder *b, int line)
{
	size_t i = pos_offset(b, (struct hashlb_pos){ line, 1 }), n = 0;

	while (i + n < b->len && b->text[i + n] == ' ')
		n++;
	return i + n >= b->len || b->text[i + n] == '\n' || b->text[i + n] == '\r' ? -1 : (int)n;
}

/*
 * Whether the text at <pos> is the ':' of an unquoted "[IPV6]:PORT": YAML
 * reads "[::1]" as a flow list, and libfyaml's error at the ':' after it
 * ("invalid value after mapping") does not say that the address wants
 * quotes, the most common way to get there.
 */
static bool at_bracket_port(const struct ybuilder *b, struct hashlb_pos pos)
{
	const char *t = b->text;
	size_t i = pos_offset(b, pos);

	return i > 0 && i + 1 < b->len && t[i] == ':' && t[i - 1] == ']' && t[i + 1] >= '0' &&
	       t[i + 1] <= '9';
}

/*
 * The first character of line <line> that shows as a space or as nothing
 * (yinvisible()), outside quotes and comments: its code point, and its
 * position in *<ret_pos>; -1 if none. The BOM that starts a text is not
 * one: YAML reads it as such.
 */
static int32_t invisible_on_line(const struct ybuilder *b, int line, struct hashlb_pos *ret_pos)
{
	const unsigned char *t = (const unsigned char *)b->text;
	size_t i = 0, n;
	int l = 1, col = 1;
	char quote = 0;

	while (i < b->len && l < line)
		l += t[i++] == '\n';
	if (l != line)
		return -1;
	if (i == 0)
		i = ybom_len(b->text, b->len);
	for (; i < b->len && t[i] != '\n'; i += n, col++) {
		int32_t c = yutf8_decode(t + i, b->len - i, &n);

		if (quote) {
			quote = t[i] == quote ? 0 : quote;
		} else if (t[i] == '\'' || t[i] == '"') {
			quote = (char)t[i];
		} else if (t[i] == '#' && (col == 1 || t[i - 1] == ' ' || t[i - 1] == '\t')) {
			break;
		} else if (yinvisible(c)) {
			*ret_pos = (struct hashlb_pos){ line, col };
			return c;
		}
	}
	return -1;
}

static struct fy_parser *parser_new(const char *text, size_t n, fy_diag_output_fn sink, void *user,
				    struct fy_diag **ret_diag);
static void parser_free(struct fy_parser *fyp, struct fy_diag *diag);
static size_t flow_cut(const char *t, size_t len);

static void diag_none(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
	(void)diag;
	(void)user;
	(void)buf;
	(void)len;
}

/*
 * The innermost flow collection open at offset <off> of the text, position <pos>: its '[' or
 * '{' in *<ret>, whether a '[' in *<ret_seq>; false if none, or not known. As libfyaml reads
 * the text up to there, parsed again to <off>: its scanner reads on past the last event
 * before it gives up (where a plain scalar in a '{' may still be a key, it holds the '{'
 * until the line ends: "a: [ {b: c ]" stops with no '{' in the tree), and only a YAML
 * scanner reads that text right (a scan of its brackets outside quotes and comments named a
 * '[' in a string after a quoted scalar ending in ',' or ':', one in a comment at a line's
 * start, one in a string after an anchor or a tag). Not known if that parse stops short of
 * <off> (a fault there that the first one's scanner read past before its parser got to it),
 * nor past flow_cut()'s depth (a parse of such a line is costly, and no hint is owed).
 */
static bool flow_open_at(const struct ybuilder *b, size_t off, struct hashlb_pos pos,
			 struct hashlb_pos *ret, bool *ret_seq)
{
	struct hashlb_pos open[YDEPTH_MAX];
	bool seq[YDEPTH_MAX], known = true;
	struct fy_diag_error *de;
	struct fy_parser *fyp;
	struct fy_diag *diag;
	struct fy_event *e;
	void *it = NULL;
	int n = 0;

	if (flow_cut(b->text, off) < off ||
	    !(fyp = parser_new(b->text, off, diag_none, NULL, &diag)))
		return false;
	while (known && (e = fy_parser_parse(fyp)) != NULL) {
		if (e->type == FYET_MAPPING_START || e->type == FYET_SEQUENCE_START) {
			known = n < YDEPTH_MAX;
			if (known) {
				open[n] = flow_opener(b->text, off, e);
				seq[n++] = e->type == FYET_SEQUENCE_START;
			}
		} else if ((e->type == FYET_MAPPING_END || e->type == FYET_SEQUENCE_END) && n > 0) {
			n--;
		}
		fy_parser_event_free(fyp, e);
	}
	/* stopped where the text does (a flow collection not closed), not before */
	de = fy_diag_errors_iterate(diag, &it);
	known = known &&
		(!de || de->line > pos.line || (de->line == pos.line && de->column >= pos.column));
	parser_free(fyp, diag);
	/* the innermost with a bracket: a pair in a flow list has none, nor has a block
	 * collection (one open innermost: no flow one is) */
	while (known && n > 0 && !open[n - 1].line)
		n--;
	if (!known || !n)
		return false;
	*ret = open[n - 1];
	*ret_seq = seq[n - 1];
	return true;
}

/* libfyaml's error <de> at <pos>, with the '[' (<seq>) or '{' at <o> still open there. */
static int still_open(struct ybuilder *b, struct hashlb_pos pos, const struct fy_diag_error *de,
		      struct hashlb_pos o, bool seq)
{
	return yfail(b, &pos,
		     "YAML syntax error: %s (the '%c' at %d:%d is still open here: a "
		     "missing '%c'?)",
		     de->msg ? de->msg : "invalid YAML", seq ? '[' : '{', o.line, o.column,
		     seq ? ']' : '}');
}

static int syntax_error(struct ybuilder *b, struct fy_diag *diag)
{
	struct hashlb_pos pos = { 1, 1 }, at;
	struct fy_diag_error *de;
	void *it = NULL;
	int32_t c;

	de = diag ? fy_diag_errors_iterate(diag, &it) : NULL;
	if (!de)
		return yfail(b, &pos, "YAML syntax error%s%s", b->diag_msg[0] ? ": " : "",
			     b->diag_msg);
	/* Collected errors carry 1-based positions already. */
	pos.line = de->line > 0 ? de->line : 1;
	pos.column = de->column > 0 ? de->column : 1;
	/* A no-break space pasted as indentation, or a zero-width space after a
	 * colon, reads as text to YAML: libfyaml's error ("invalid multiline
	 * plain key", "could not find expected ':'") is about what it made of
	 * it, often on another column, where nothing looks wrong. The
	 * character is the likely culprit, on the error's line or the one
	 * before (where a key that it made text runs on). */
	if ((c = invisible_on_line(b, pos.line, &at)) >= 0 ||
	    (c = invisible_on_line(b, pos.line - 1, &at)) >= 0)
		return yfail(b, &at,
			     "YAML syntax error at U+%04X, which shows as a space or as nothing "
			     "but is none to YAML: retype it (the parser's error, at %d:%d: %s)",
			     (unsigned)c, pos.line, pos.column, de->msg ? de->msg : "invalid YAML");
	/* A flow collection left open ("backends: [" and no ']') is reported
	 * where libfyaml gave up: at the end of the text, or on a later line
	 * that cannot go on in it. Its opener, far above, is what to look at; not
	 * on a line indented deeper than the opener's, which goes on in it (a
	 * comma missing between two items, as the parser says), nor where the
	 * error is at a ']' or '}' of the innermost's kind, which closes it there
	 * (wrongly indented): "a missing ']'?" would name the wrong fault. A ']'
	 * reached with an inner '{' open (or a '}' with a '['), libfyaml's
	 * "mismatched flow sequence end" at the ']', is that '{' left open: it is
	 * named (before, the parser's words alone). */
	size_t off = pos_offset(b, pos);
	bool at_closer = off < b->len && (b->text[off] == ']' || b->text[off] == '}');
	int indent = line_indent(b, pos.line);
	struct hashlb_pos o;
	bool seq;

	if (at_closer && flow_open_at(b, off, pos, &o, &seq) && seq != (b->text[off] == ']'))
		return still_open(b, pos, de, o, seq);
	for (int i = b->depth - 1; i >= 0 && !at_closer; i--) {
		o = b->flow_open[i];
		seq = b->stack[i]->type == YNODE_SEQ;
		if (!o.line)
			continue;
		if (o.line < pos.line && indent <= line_indent(b, o.line))
			return still_open(b, pos, de, o, seq);
		break;
	}
	return yfail(b, &pos, "YAML syntax error: %s%s", de->msg ? de->msg : "invalid YAML",
		     at_bracket_port(b, pos) ? " (an IPv6 address and port must be quoted: "
					       "\"[::1]:80\")"
					     : "");
}

bool yinvisible(int32_t c)
{
	return (c >= 0x80 && c <= 0xa0) || c == 0xad || c == 0x34f || c == 0x61c || c == 0x115f ||
	       c == 0x1160 || c == 0x1680 || c == 0x180e || (c >= 0x2000 && c <= 0x200f) ||
	       (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x206f) || c == 0x3000 ||
	       c == 0x3164 || c == 0xfeff || c == 0xffa0 || (c >= 0xfff9 && c <= 0xfffb);
}

int32_t yutf8_decode(const unsigned char *s, size_t n, size_t *ret_len)
{
	size_t len;
	uint32_t c;

	*ret_len = 1;
	if (s[0] < 0x80)
		return s[0];
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return -1;
	if (n < len)
		return -1;
	c = s[0] & (0x7fu >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80) /* a NUL ends the string here too */
			return -1;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* overlong, a UTF-16 surrogate, or past U+10FFFF */
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) || (c >= 0xd800 && c <= 0xdfff) ||
	    c > 0x10ffff)
		return -1;
	*ret_len = len;
	return (int32_t)c;
}

/*
 * The offset of the first byte of <text> that libfyaml is not given, or
 * <len>; at <ret_pos> its position (columns count characters, as
 * libfyaml's do) and in <ret_why> what is wrong with it:
 * - a byte that is not UTF-8: YAML is Unicode text, and libfyaml 0.7.12
 *   (Debian 12) loops forever on a stray byte in a directive line
 *   ("%\xdd": its issue #101, fixed upstream after that release);
 * - a CR not followed by LF: libfyaml 0.7.12 breaks the line there but
 *   its positions do not, so every error after it would point elsewhere;
 * - a control character other than tab, LF and CR, which YAML does not
 *   allow: at a NUL libfyaml stops reading, and the rest of the file (a
 *   zero-filled tail after a crash, say) would be silently left out;
 * - more than YBLANK_RUN_MAX spaces or tabs in a row after the first
 *   character of a line that is not one, outside a comment (at the run's
 *   first): libfyaml 0.7.12 peeks at each blank after a flow collection's
 *   end, an anchor, a tag, a quoted scalar, a '-' or a '?' from the start
 *   of the run again, a time that grows with the run's square:
 *   "{name: a}" and 20,000 spaces took 2.7 s, 200,000 (a line of a
 *   generated file padded with blanks) 4 minutes, and a reload took that
 *   in the running daemon. Leading blanks (indentation) and a comment's
 *   are read once each, and stay unbounded.
 */
#define YBLANK_RUN_MAX 256 /* as the error says */

static size_t text_check(const char *text, size_t len, struct hashlb_pos *ret_pos,
			 const char **ret_why)
{
	const unsigned char *s = (const unsigned char *)text;
	struct hashlb_pos pos = { 1, 1 }, run_pos = pos;
	size_t i, n, run = 0, run_at = 0;
	bool indent = true, comment = false; /* of the line, so far */

	i = ybom_len(text, len); /* no column, as libfyaml gives it */
	while (i < len) {
		if ((s[i] == ' ' || s[i] == '\t') && !indent && !comment) {
			if (!run++) {
				run_at = i;
				run_pos = pos;
			}
			if (run > YBLANK_RUN_MAX) {
				/* 256: YBLANK_RUN_MAX */
				*ret_why = "over 256 spaces or tabs in a row after a line's "
					   "start (the YAML parser's time grows with their "
					   "square): remove the blanks";
				*ret_pos = run_pos;
				return run_at;
			}
		} else if (s[i] != ' ' && s[i] != '\t') {
			/* a '#' after a blank, or first on its line, starts a comment */
			comment = comment || (s[i] == '#' && (indent || run));
			indent = false;
			run = 0;
		}
		if (yutf8_decode(s + i, len - i, &n) < 0) {
			*ret_why = "the configuration is not UTF-8 text";
			break;
		}
		if ((s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') || s[i] == 0x7f) {
			/* libfyaml ends the text at a NUL, the rest of the file unread */
			*ret_why = s[i] ? "a control character (YAML text may not hold one)"
					: "a NUL byte (YAML text may not hold one; the file may be "
					  "damaged)";
			break;
		}
		if (s[i] == '\r' && (i + 1 == len || s[i + 1] != '\n')) {
			*ret_why =
				"a carriage return without a line feed (line breaks are LF or CRLF)";
			break;
		}
		if (s[i] == '\n') {
			pos = (struct hashlb_pos){ pos.line + 1, 1 };
			indent = true;
			comment = false;
			run = 0;
		} else {
			pos.column++;
		}
		i += n;
	}
	*ret_pos = pos;
	return i;
}

/*
 * Whether libfyaml's parser <diag> reported on is one fy_parser_destroy() must
 * not be given. libfyaml 0.7.12's fy_fetch_value() recycles the simple key of
 * a complex key's value ("? K:" then a tab before '|', '>', '?', ':' or "- ")
 * twice when it refuses the tab ("cannot use tab for indentation of block
 * entry"): the parser stops there, but destroying it walks the list the key
 * is on twice, a use after free (a SIGSEGV in hashlb check and in a reload).
 * Such a parser is left allocated: about 3 KiB, once per config refused.
 * Fixed upstream since (the key is cleared once recycled).
 */
static bool parser_poisoned(struct fy_diag *diag)
{
	struct fy_diag_error *de;
	void *it = NULL;

	while ((de = fy_diag_errors_iterate(diag, &it)) != NULL)
		if (de->msg && strstr(de->msg, "cannot use tab for indentation of block entry"))
			return true;
	return false;
}

/*
 * Where libfyaml may stop reading <text> (<len> bytes) with nothing lost: just
 * past the YFLOW_CUT-th '[' or '{' of flow collections open at once, or <len>.
 * libfyaml 0.7.12 turns a whole line of nested flow collections into tokens
 * before it gives the parser's first event, as each might start a key
 * ("[[a]: b]"): 1,000,000 '[' (2 MB) took 540 MB and 0.7 s, a 16 MiB file
 * 4.4 GB and 6 s, whatever YDEPTH_MAX says at the 65th. A reload does it in
 * the running daemon. This is a scan, not a parser: it reads quotes,
 * comments and block scalars as YAML does, but may be wrong on odd text
 * (a plain scalar's continuation line starting with '['), so its cut is only
 * used if the text up to it is refused for its depth.
 */
#define YFLOW_CUT (2 * YDEPTH_MAX)

static bool yspace(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static size_t flow_cut(const char *t, size_t len)
{
	size_t depth = 0, line = 0, i = 0;
	bool node = true; /* a node may start here */

	while (i < len) {
		char c = t[i];
		bool ends =
			i + 1 == len || yspace(t[i + 1]) || (depth && strchr(",[]{}", t[i + 1]));

		if (c == '\n') {
			line = ++i;
			node = node || !depth;
		} else if (yspace(c)) {
			i++;
		} else if (c == '#' && (i == 0 || yspace(t[i - 1]))) {
			while (i < len && t[i] != '\n')
				i++;
		} else if (node && (c == '\'' || c == '"')) {
			for (i++; i < len && t[i] != c; i++)
				if (c == '"' && t[i] == '\\')
					i++;
			i++; /* '' in a single-quoted one: two scalars here, alike */
			node = false;
		} else if (c == '[' || c == '{') {
			if (depth || node) {
				if (++depth == YFLOW_CUT)
					return i + 1;
				node = true;
			}
			i++;
		} else if (c == ']' || c == '}') {
			depth -= depth > 0;
			node = false;
			i++;
		} else if ((c == ',' && depth) || (strchr("-?:", c) && ends)) {
			node = true;
			i++;
		} else if ((c == '&' || c == '!') && node) {
			while (i < len && !yspace(t[i]) && !(depth && strchr(",[]{}", t[i])))
				i++;
		} else if ((c == '|' || c == '>') && node && !depth) {
			/* a block scalar: the lines indented more than this one's */
			size_t indent = 0;

			while (line + indent < len && t[line + indent] == ' ')
				indent++;
			while (i < len && t[i] != '\n')
				i++;
			while (i < len) {
				size_t j = i + 1, n = 0;

				while (j + n < len && t[j + n] == ' ')
					n++;
				if (n <= indent && j + n < len && !yspace(t[j + n]))
					break;
				for (i = j + n; i < len && t[i] != '\n'; i++)
					;
			}
			node = false;
		} else {
			node = false;
			i++;
		}
	}
	return len;
}

/*
 * A parser of <text> (<n> bytes) that prints nothing: its errors collected in *<ret_diag>,
 * those it says without a position given to <sink> with <user>; NULL if out of memory.
 */
static struct fy_parser *parser_new(const char *text, size_t n, fy_diag_output_fn sink, void *user,
				    struct fy_diag **ret_diag)
{
	struct fy_parse_cfg pcfg = { 0 };
	struct fy_diag_cfg dcfg;
	struct fy_parser *fyp;
	struct fy_diag *diag;

	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL;
	dcfg.output_fn = sink;
	dcfg.user = user;
	dcfg.show_type = false;
	dcfg.show_source = false;
	dcfg.show_position = false;
	dcfg.show_module = false;
	dcfg.colorize = false;
	diag = fy_diag_create(&dcfg);
	if (!diag)
		return NULL;
	fy_diag_set_collect_errors(diag, true);
	pcfg.flags = FYPCF_QUIET;
	pcfg.diag = diag;
	fyp = fy_parser_create(&pcfg);
	if (fyp && fy_parser_set_string(fyp, text, n) != 0) {
		fy_parser_destroy(fyp);
		fyp = NULL;
	}
	if (!fyp) {
		fy_diag_destroy(diag);
		return NULL;
	}
	*ret_diag = diag;
	return fyp;
}

/* <fyp> and its <diag> freed; a poisoned one (parser_poisoned()) left allocated. */
static void parser_free(struct fy_parser *fyp, struct fy_diag *diag)
{
	if (!parser_poisoned(diag))
		fy_parser_destroy(fyp);
#ifdef YTREE_LSAN
	else
		__lsan_ignore_object(fyp); /* left on purpose, not forgotten */
#endif
	fy_diag_destroy(diag);
}

/* Parse <n> bytes of b->text into b->doc (new); 0 or -errno, b->err filled. */
static int parse(struct ybuilder *b, size_t n)
{
	struct fy_diag *diag;
	struct fy_parser *fyp;
	struct fy_event *e;
	int r = 0;

	b->doc = calloc(1, sizeof(*b->doc));
	if (!b->doc)
		return -ENOMEM;
	fyp = parser_new(b->text, n, diag_sink, b, &diag);
	if (!fyp)
		return -ENOMEM;
	while ((e = fy_parser_parse(fyp)) != NULL) {
		b->plain_lines = NULL;
		r = on_event(b, e);
		event_end(b, e);
		fy_parser_event_free(fyp, e);
		if (r < 0)
			break;
	}
	if (r == 0 && fy_parser_get_stream_error(fyp))
		r = syntax_error(b, diag);
	parser_free(fyp, diag);
	/* What came before the error, its open collections ended there. A plain
	 * scalar over several lines just before it is left out: its lines may run
	 * into what the error is about ("admin: 127.0.0.1:9" and a line "\tbad"
	 * is the value "127.0.0.1:9 bad"), so it is not known whole. */
	if (r == -EINVAL && b->prefix && b->plain_lines && b->depth > 0 &&
	    b->n_kids > b->kids_from[b->depth - 1] && b->kids[b->n_kids - 1] == b->plain_lines)
		b->n_kids--;
	while (r == -EINVAL && b->prefix && b->depth > 0)
		if (collection_end(b) < 0)
			r = -ENOMEM;
	free(b->kids);
	b->kids = NULL;
	return r;
}

static bool yline_continues(char c)
{
	return c == ' ' || c == '\t' || c == '#' || c == '\r' || c == '\n';
}

/*
 * For ydoc_parse_prefix(), once text_check() refused the byte at <bad>
 * (line <line>; its error in b->err, which stays): the text before the
 * top-level entry that holds it, parsed into b->doc, as a YAML syntax
 * error's prefix is (hashlb ctl -c reads the admin key there). The entry
 * itself is left out whole, from its first line (one that starts with
 * neither a blank nor a comment): a value of it may run on into the refused
 * line ("admin: a" then "  b\x01"). 0, or -errno with b->doc NULL.
 */
static int text_prefix(struct ybuilder *b, size_t bad, int line)
{
	struct hashlb_error first = { 0 };
	size_t cut = bad;
	int r;

	if (b->err)
		first = *b->err;
	for (;;) {
		while (cut > 0 && b->text[cut - 1] != '\n')
			cut--;
		if (cut == 0 || !yline_continues(b->text[cut])) /* the refused byte too */
			break;
		cut--; /* the line before: this one may go on with what it holds */
		line--;
	}
	b->end = (struct hashlb_pos){ line, 1 };
	r = parse(b, cut);
	if (b->err && r != -ENOMEM)
		*b->err = first; /* what comes first, and what hashlb check says */
	if (r == -ENOMEM || !b->doc) {
		ydoc_free(b->doc);
		b->doc = NULL;
		return r < 0 ? r : -EINVAL;
	}
	return 0;
}

static int doc_parse(const char *text, size_t len, const char *name, bool prefix,
		     struct ydoc **ret_doc, struct hashlb_error *err)
{
	struct ybuilder b = {
		.name = name, .text = text, .len = len, .err = err, .prefix = prefix
	};
	struct hashlb_pos pos;
	const char *why = NULL;
	size_t bad, cut;
	int r;

	bad = text_check(text, len, &pos, &why);
	if (bad < len) {
		r = text[bad] == ' ' || text[bad] == '\t'
			    ? yfail(&b, &pos, "%s", why)
			    : yfail(&b, &pos, "%s: byte 0x%02x", why, (unsigned char)text[bad]);
		if (!prefix)
			return r;
		r = text_prefix(&b, bad, pos.line);
		if (r == -ENOMEM)
			hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
		if (r < 0)
			return r;
		*ret_doc = b.doc;
		return 1;
	}
	b.end = pos;
	cut = flow_cut(text, len);
	if (cut < len) {
		r = parse(&b, cut);
		if (r < 0 && b.too_deep)
			goto out;
		/* the scan was wrong: all of it, as if it had not been cut */
		ydoc_free(b.doc);
		b = (struct ybuilder){ .name = name,
				       .text = text,
				       .len = len,
				       .err = err,
				       .end = pos,
				       .prefix = prefix };
	}
	r = parse(&b, len);
out:
	if (r == -ENOMEM)
		hashlb_err(err, r, HASHLB_ERR_NOMEM, "out of memory");
	if (r == -EINVAL && prefix && b.doc) {
		*ret_doc = b.doc;
		return 1;
	}
	if (r < 0) {
		ydoc_free(b.doc);
		return r;
	}
	*ret_doc = b.doc;
	return 0;
}

int ydoc_parse(const char *text, size_t len, const char *name, struct ydoc **ret_doc,
	       struct hashlb_error *err)
{
	return doc_parse(text, len, name, false, ret_doc, err);
}

int ydoc_parse_prefix(const char *text, size_t len, const char *name, struct ydoc **ret_doc,
		      struct hashlb_error *err)
{
	return doc_parse(text, len, name, true, ret_doc, err);
}

void ydoc_free(struct ydoc *d)
{
	struct ychunk *c, *next;

	if (!d)
		return;
	for (c = d->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	keymap_free(&d->anchors);
	free(d);
}

bool ynode_is_null(const struct ynode *n)
{
	if (n->type != YNODE_SCALAR || n->quoted)
		return false;
	return n->len == 0 || strcmp(n->text, "~") == 0 || strcmp(n->text, "null") == 0 ||
	       strcmp(n->text, "Null") == 0 || strcmp(n->text, "NULL") == 0;
}

const char *ynode_kind(const struct ynode *n)
{
	switch (n->type) {
	case YNODE_MAP:
		return "a mapping";
	case YNODE_SEQ:
		return "a list";
	default:
		break;
	}
	if (ynode_is_null(n))
		return "nothing (null)";
	return n->quoted ? "a quoted string" : "a scalar";
}
