// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "answer.h"

bool hlb_answer_cut(const char *buf, const char *body, size_t got, size_t *ret_have,
		    unsigned long long *ret_want)
{
	const char *h = strcasestr(buf, "\r\ncontent-length:");
	unsigned long long want;
	size_t have;

	if (!h || h > body)
		return false;
	have = got - (size_t)(body + 4 - buf);
	want = strtoull(h + 17, NULL, 10);
	if (have >= want)
		return false;
	*ret_have = have;
	*ret_want = want;
	return true;
}
