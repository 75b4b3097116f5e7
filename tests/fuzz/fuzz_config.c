/* Fuzzes hashlb_config_parse() with any bytes as a config file: it loads a config whose every field
 * is in range, or refuses it with a file:line:column error inside the text; never a crash, a leak
 * or undefined behaviour. */
// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashlb/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__lsan_default_suppressions(void);

/*
 * libfyaml 0.7.12 leaks its atom iterator's chunk array when a scalar has
 * more than eight chunks, e.g. a dozen escaped quotes in a row ('''...'):
 * libfyaml issue #233, fixed upstream after that release; a few KiB per
 * load of such a config, which hashlb cannot free. Leaks of hashlb's own
 * allocations have no libfyaml frame and still show; a libfyaml object
 * hashlb forgets to free shows in test_config under the sanitizer build.
 */
const char *__lsan_default_suppressions(void)
{
	return "leak:libfyaml.so\n";
}

static const char name[] = "fuzz.yaml";

static void check(bool ok, const char *what, const struct hashlb_error *err)
{
	if (ok)
		return;
	fprintf(stderr, "contract broken: %s (error %d:%d reason %d: %.*s)\n", what, err->line,
		err->column, err->reason, (int)sizeof(err->msg), err->msg);
	abort();
}

/* Lines of <text> (LF or CRLF: a lone CR is refused) and the longest, in bytes. */
static void text_shape(const uint8_t *text, size_t len, int *ret_lines, size_t *ret_longest)
{
	size_t cur = 0, longest = 0;
	int lines = 1;

	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\n') {
			lines++;
			cur = 0;
			continue;
		}
		if (++cur > longest)
			longest = cur;
	}
	*ret_lines = lines;
	*ret_longest = longest;
}

static void check_loaded(const struct hashlb_config *c, const struct hashlb_error *err)
{
	struct hashlb_error w[4];
	int n;

	check(c != NULL && c->n_services > 0 && c->services, "a config has services", err);
	n = hashlb_config_warnings(c, w, 4);
	check(n >= 0 || n == -ENOMEM, "warnings: how many, or -ENOMEM", err);
	for (int i = 0; i < n && i < 4; i++)
		check(w[i].file == c->path && w[i].line >= 1 && w[i].column >= 1 &&
			      memchr(w[i].msg, '\0', sizeof(w[i].msg)) && w[i].msg[0],
		      "a warning names its place and says what", &w[i]);
	check(strcmp(c->path, name) == 0, "the config's path is the name given", err);
	for (uint32_t i = 0; i < c->n_services; i++) {
		const struct hashlb_service_cfg *s = &c->services[i];

		check(s->name && *s->name && s->listen, "a service has a name and a listen address",
		      err);
		check(s->n_backends > 0 && s->n_backends <= HASHLB_BACKENDS_MAX && s->backends,
		      "a service has 1..HASHLB_BACKENDS_MAX backends", err);
		check(s->health.timeout_ms <= s->health.interval_ms,
		      "a health check times out within its interval", err);
		check(s->n_proxy_from == 0 || s->accept_proxy,
		      "accept_proxy_from needs accept_proxy", err);
		check(hashlb_config_service(c, s->name) == s, "service names are unique", err);
		for (uint32_t j = 0; j < s->n_backends; j++) {
			char host[HASHLB_HOST_MAX + 1];
			uint16_t port;

			check(s->backends[j].name && s->backends[j].address &&
				      s->backends[j].weight <= HASHLB_WEIGHT_MAX,
			      "a backend has a name, an address and a weight in range", err);
			check(s->backends[j].addr_len > 0 ||
				      hashlb_name_addr_parse(s->backends[j].address, host, &port) ==
					      0,
			      "a backend's address is numeric or a name:port to resolve", err);
		}
	}
}

/*
 * A refused config read for its admin key alone (hashlb ctl -c): the key, and
 * no service, or refused; nothing written on failure.
 */
static void admin_only(const uint8_t *data, size_t size)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	int r;

	memset(&err, 0, sizeof(err));
	r = hashlb_config_parse_flags((const char *)data, size, name, HASHLB_LOAD_ADMIN_ONLY, &c,
				      &err);
	if (r == 0) {
		check(c != NULL && c->n_services == 0, "admin only: no service", &err);
		hashlb_config_free(c);
		return;
	}
	check(c == NULL, "admin only: ret_config written only on success", &err);
	check(r == -EINVAL || r == -ENOENT || r == -ENOMEM, "admin only: -EINVAL or -ENOENT", &err);
	check(memchr(err.msg, '\0', sizeof(err.msg)) && err.msg[0], "admin only: says what", &err);
}

static bool same_error(const struct hashlb_error *a, const struct hashlb_error *b)
{
	return a->reason == b->reason && a->file == b->file && a->line == b->line &&
	       a->column == b->column && strcmp(a->msg, b->msg) == 0;
}

/*
 * The same text loaded going on past each error (hashlb_config_load_list(), what hashlb check
 * and a start print): it comes to the same end as a load that stops at the first, <r> (and
 * <first>), and lists each error in file order, inside the text (<lines>, <longest>), the
 * first found among them; nothing leaks from the list, whatever state an error leaves a
 * value in while loading goes on.
 */
static void all_errors(const uint8_t *data, size_t size, int r, const struct hashlb_error *first)
{
	struct hashlb_error_list l = { 0 };
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	size_t longest;
	bool found = false;
	int r2, lines;

	memset(&err, 0, sizeof(err));
	r2 = hashlb_config_parse_list((const char *)data, size, name, 0, &c, &err, &l);
	if (r == -ENOMEM || r2 == -ENOMEM) {
		hashlb_config_free(c);
		hashlb_error_list_free(&l);
		return;
	}
	check(r2 == r, "listing every error ends as stopping at the first does", &err);
	check(r2 < 0 || (c && !l.n && !l.total), "a config that loads has no error listed", &err);
	hashlb_config_free(c);
	check(l.n <= l.total && l.n <= HASHLB_ERRORS_KEPT, "the list keeps at most what it counts",
	      &err);
	check(r2 == 0 || !l.n || same_error(&err, first),
	      "the first error found is the one a load that stops says", &err);
	text_shape(data, size, &lines, &longest);
	for (size_t i = 0; i < l.n; i++) {
		const struct hashlb_error *e = &l.v[i];

		check(e->file == name && e->line >= 1 && e->line <= lines && e->column >= 1 &&
			      (size_t)e->column <= longest + 1 && e->msg[0] &&
			      memchr(e->msg, '\0', sizeof(e->msg)),
		      "each error listed names its place in the text and says what", e);
		check(i == 0 || l.v[i - 1].line < e->line ||
			      (l.v[i - 1].line == e->line && l.v[i - 1].column <= e->column),
		      "the errors are listed in file order", e);
		found |= same_error(e, first);
	}
	check(!l.n || l.n < l.total || found, "the first error found is listed", first);
	hashlb_error_list_free(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	size_t longest;
	int r, lines;

	memset(&err, 0, sizeof(err));
	r = hashlb_config_parse((const char *)data, size, name, &c, &err);
	all_errors(data, size, r, &err);
	if (r == 0) {
		check_loaded(c, &err);
		hashlb_config_free(c);
		return 0;
	}
	check(c == NULL, "ret_config written only on success", &err);
	check(memchr(err.msg, '\0', sizeof(err.msg)) && err.msg[0], "an error says what", &err);
	admin_only(data, size);
	if (r == -ENOMEM) {
		check(err.reason == HASHLB_ERR_NOMEM, "out of memory says so", &err);
		return 0;
	}
	/* past table_memory: -E2BIG, as every table_memory refusal (hashlb_table_memory_add()) */
	check(r == -EINVAL || r == -E2BIG, "a bad config is -EINVAL, or -E2BIG", &err);
	check(err.reason == (r == -E2BIG ? HASHLB_ERR_MEMORY_CAP : HASHLB_ERR_CONFIG),
	      "a bad config is a config error, or past table_memory", &err);
	check(err.file == name, "the error names the file", &err);
	text_shape(data, size, &lines, &longest);
	check(err.line >= 1 && err.line <= lines, "the error's line is in the text", &err);
	check(err.column >= 1 && (size_t)err.column <= longest + 1,
	      "the error's column is in the text", &err);
	return 0;
}
