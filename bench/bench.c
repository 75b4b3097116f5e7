// SPDX-License-Identifier: MIT
/* Shared helpers of hashlb-bench (see bench.h). */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "hashlb/tuple.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_client_keys_into(uint64_t *k, size_t n, uint64_t seed)
{
	struct hashlb_tuple t;

	memset(&t, 0, sizeof(t));
	for (size_t i = 0; i < n; i++) {
		/* ::ffff:10.x.y.z as the 8-byte lane that XXH64 reads back:
		 * byte stores would stall each hash on a failed store-to-load
		 * forward, and the reference would measure that */
		uint64_t xyz = (i >> 16 & 0xff) | (i >> 8 & 0xff) << 8 | (i & 0xff) << 16;
		uint64_t hi = 0x0000000affff0000ull | xyz << 40;

		memcpy(t.src + 8, &hi, 8);
		k[i] = hashlb_tuple_hash(&t, HASHLB_KEY_SRC_IP, seed);
	}
}

uint64_t *bench_client_keys(size_t n, uint64_t seed)
{
	uint64_t *k = malloc(n * sizeof(*k));

	if (k)
		bench_client_keys_into(k, n, seed);
	return k;
}
