/* SPDX-License-Identifier: MIT */
/*
 * A map from byte strings to pointers, hashed with XXH3 (open addressing,
 * at most half full), for what the loader finds by name: YAML anchors,
 * the services met so far. The keys are copied into the map; the values
 * are borrowed. Private to src/config/.
 */
#ifndef HASHLB_CONFIG_KEYMAP_H
#define HASHLB_CONFIG_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct keymap_slot {
	uint64_t hash;
	uint32_t off, len; /* the key's bytes in keys */
	void *val; /* NULL: a free slot */
};

/* All zeroes is an empty map. */
struct keymap {
	struct keymap_slot *slots; /* cap of them, a power of 2 */
	size_t n, cap;
	char *keys; /* every key's bytes, one after another */
	uint32_t keys_len, keys_cap;
};

/* The value of the <len> bytes of <key>, or NULL if absent. */
void *keymap_get(const struct keymap *m, const void *key, size_t len);
/*
 * <key> (<len> bytes) with <val>, not NULL. If it is there already: its
 * value is replaced when <replace>, else kept, and 1 returned; else 0.
 * -ENOMEM, also past 4 GiB of keys.
 */
int keymap_put(struct keymap *m, const void *key, size_t len, void *val, bool replace);
/* Frees what <m> holds (not the values) and leaves it empty. */
void keymap_free(struct keymap *m);
/*
 * The slots looked at by this thread's keymaps, ever: what the loader's
 * lookups cost, counted for tests/unit/test_config.c, as a CPU time is not
 * the same from one run to the next.
 */
extern _Thread_local uint64_t keymap_looks;

#endif
