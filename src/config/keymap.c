// SPDX-License-Identifier: MIT
/*
 * The loader's map from names to pointers (keymap.h). A list searched at
 * each lookup made 40,000 YAML anchors and as many aliases take 6.6 CPU s
 * to parse.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "keymap.h"

_Thread_local uint64_t keymap_looks;

static struct keymap_slot *keymap_slot(const struct keymap *m, const void *key, size_t len,
				       uint64_t hash)
{
	size_t mask = m->cap - 1;

	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		struct keymap_slot *e = &m->slots[i];

		keymap_looks++;
		if (!e->val || (e->hash == hash && e->len == len &&
				(!len || memcmp(m->keys + e->off, key, len) == 0)))
			return e;
	}
}

static int keymap_grow(struct keymap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	struct keymap_slot *old = m->slots;
	size_t old_cap = m->cap;

	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots) {
		m->slots = old;
		return -ENOMEM;
	}
	m->cap = cap;
	for (size_t i = 0; i < old_cap; i++) {
		if (old[i].val)
			*keymap_slot(m, m->keys + old[i].off, old[i].len, old[i].hash) = old[i];
	}
	free(old);
	return 0;
}

void *keymap_get(const struct keymap *m, const void *key, size_t len)
{
	if (!m->n)
		return NULL;
	return keymap_slot(m, key, len, XXH3_64bits(key, len))->val;
}

int keymap_put(struct keymap *m, const void *key, size_t len, void *val, bool replace)
{
	struct keymap_slot *e;
	uint64_t hash;

	if ((m->n + 1) * 2 > m->cap && keymap_grow(m) < 0)
		return -ENOMEM;
	hash = XXH3_64bits(key, len);
	e = keymap_slot(m, key, len, hash);
	if (e->val) {
		if (replace)
			e->val = val;
		return 1;
	}
	if (len > UINT32_MAX - m->keys_len)
		return -ENOMEM;
	if (m->keys_len + len > m->keys_cap) {
		uint64_t cap = m->keys_cap ? m->keys_cap : 256;
		char *keys;

		while (cap < m->keys_len + len)
			cap *= 2;
		if (cap > UINT32_MAX)
			cap = UINT32_MAX;
		keys = realloc(m->keys, cap);
		if (!keys)
			return -ENOMEM;
		m->keys = keys;
		m->keys_cap = (uint32_t)cap;
	}
	if (len)
		memcpy(m->keys + m->keys_len, key, len);
	*e = (struct keymap_slot){
		.hash = hash, .off = m->keys_len, .len = (uint32_t)len, .val = val
	};
	m->keys_len += (uint32_t)len;
	m->n++;
	return 0;
}

void keymap_free(struct keymap *m)
{
	free(m->slots);
	free(m->keys);
	memset(m, 0, sizeof(*m));
}
