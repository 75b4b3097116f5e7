// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <limits.h>
#include <string.h>

#include "answer.h"

/* The list element of digits at *<v> (OWS around it) into *<n>, *<v> past it: false if it is
 * not digits alone or passes ULLONG_MAX. */
static bool length_element(const char **v, unsigned long long *n)
{
	const char *p = *v + strspn(*v, " \t");
	size_t digits = 0;

	*n = 0;
	for (; isdigit((unsigned char)*p); p++, digits++) {
		if (*n > (ULLONG_MAX - (unsigned)(*p - '0')) / 10)
			return false;
		*n = *n * 10 + (unsigned)(*p - '0');
	}
	*v = p + strspn(p, " \t");
	return digits > 0;
}

const char *hlb_answer_length(const char *buf, const char *body, bool *ret_has,
			      unsigned long long *ret_want)
{
	const char *h = buf;

	*ret_has = false;
	*ret_want = 0;
	while ((h = strcasestr(h, "\r\ncontent-length:")) && h < body) {
		const char *v = h + 17;

		do {
			unsigned long long n;

			if (!length_element(&v, &n))
				return "a Content-Length that is not a number of digits";
			if (*ret_has && n != *ret_want)
				return "two different Content-Lengths";
			*ret_has = true;
			*ret_want = n;
		} while (*v == ',' && v++);
		if (*v != '\r')
			return "a Content-Length that is not a number of digits";
		h = v;
	}
	return NULL;
}

bool hlb_answer_cut(const char *buf, const char *body, size_t got, size_t *ret_have,
		    unsigned long long *ret_want)
{
	unsigned long long want;
	size_t have;
	bool has;

	if (hlb_answer_length(buf, body, &has, &want) || !has)
		return false;
	have = got - (size_t)(body + 4 - buf);
	if (have >= want)
		return false;
	*ret_have = have;
	*ret_want = want;
	return true;
}
