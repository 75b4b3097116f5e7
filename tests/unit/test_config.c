/* Proves a bad config is refused at its exact line:column with what is wrong, defaults fill every
 * field, and every example config in configs/ loads. */
// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/keymap.h"
#include "hashlb/config.h"

/* One service with one backend: the smallest valid config. */
#define MINIMAL                        \
	"services:\n"                  \
	"  - name: web\n"              \
	"    listen: 127.0.0.1:8080\n" \
	"    backends:\n"              \
	"      - name: a\n"            \
	"        address: 127.0.0.1:9001\n"

static struct hashlb_config *load_ok(const char *yaml)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	int r;

	memset(&err, 0, sizeof(err));
	r = hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &err);
	if (r < 0)
		fail_msg("expected the config to load, got %s:%d:%d: %s", err.file, err.line,
			 err.column, err.msg);
	assert_non_null(c);
	return c;
}

/*
 * <yaml> must be refused at <line>:<col> with a message containing <what>, returning <ret>,
 * the error's reason <reason>. The file name in the error is the one given to the parser.
 */
static void expect_error_as(const char *yaml, int line, int col, const char *what, int ret,
			    enum hashlb_err_reason reason)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	int r;

	memset(&err, 0, sizeof(err));
	r = hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &err);
	if (r >= 0) {
		hashlb_config_free(c);
		fail_msg("expected an error at %d:%d (%s), the config loaded", line, col, what);
	}
	assert_int_equal(r, ret);
	assert_null(c);
	assert_int_equal(err.reason, reason);
	assert_non_null(err.file);
	assert_string_equal(err.file, "t.yaml");
	if (err.line != line || err.column != col || !strstr(err.msg, what))
		fail_msg("expected %d:%d '%s', got %d:%d '%s'", line, col, what, err.line,
			 err.column, err.msg);
}

/* A config error: -EINVAL, HASHLB_ERR_CONFIG. */
static void expect_error(const char *yaml, int line, int col, const char *what)
{
	expect_error_as(yaml, line, col, what, -EINVAL, HASHLB_ERR_CONFIG);
}

/* A refusal past table_memory: -E2BIG, HASHLB_ERR_MEMORY_CAP, as every one is (the loader's,
 * a resolve's, a reload's, ctl set's, an upgrade's). */
static void expect_table_memory_error(const char *yaml, int line, int col, const char *what)
{
	expect_error_as(yaml, line, col, what, -E2BIG, HASHLB_ERR_MEMORY_CAP);
}

/* --- file-level errors ------------------------------------------------- */

static void test_empty(void **state)
{
	expect_error("", 1, 1, "empty");
	expect_error("# only a comment\n\n", 1, 1, "empty");
	expect_error("---\n", 1, 1, "empty");
}

static void test_not_a_mapping(void **state)
{
	expect_error("- a\n- b\n", 1, 1, "must be a mapping");
	expect_error("\n  hello\n", 2, 3, "must be a mapping");
}

static void test_yaml_syntax(void **state)
{
	/* An unclosed flow sequence: libfyaml's own position and words. */
	expect_error("services: [a, b\n", 2, 1, "YAML syntax error");
	/* With no final newline, at the end of the text, not on a line past it
	 * (found by tests/fuzz/fuzz_config). */
	expect_error("services: [a, b", 1, 16, "YAML syntax error");
	/* A flow collection left open is reported where the parser gave up, far
	 * below: the error names the '[' or '{' that is still open, the innermost,
	 * not one closed since nor one in quotes or a comment. */
	expect_error("services: [a, b\n", 2, 1,
		     "(the '[' at 1:11 is still open here: a missing ']'?)");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:8080\n"
		     "    backends: [ {name: a, address: 127.0.0.1:9001},\n"
		     "      {name: \"[{\", address: 127.0.0.1:9002} # ]\n"
		     "admin: off\n",
		     6, 1, "(the '[' at 4:15 is still open here: a missing ']'?)");
	expect_error(MINIMAL "      - {name: b, address: 127.0.0.1:9002\n"
			     "      - name: c\n",
		     8, 13,
		     "missing comma in flow mapping (the '{' at 7:9 is still open here: a "
		     "missing '}'?)");
	/* a pair in a flow list is a mapping with no '{' (libfyaml starts it at its ':'): the
	 * '[' is open, not a '{' at the ':' */
	expect_error("a: [ x: \"y\"\nb: c\n", 2, 1,
		     "(the '[' at 1:4 is still open here: a missing ']'?)");
	/* A ']' reached with an inner '{' still open (or a '}' with a '['): the '{' is named,
	 * where the parser said only "mismatched flow sequence end" at the ']' */
	expect_error("a: [\n  {b: c,\n  d: e]\n", 3, 7,
		     "mismatched flow sequence end (the '{' at 2:3 is still open here: a missing "
		     "'}'?)");
	expect_error("a: {b: [1, 2}\n", 1, 13,
		     "mismatched flow mapping end (the '[' at 1:8 is still open here: a missing "
		     "']'?)");
	expect_error(MINIMAL "      - {name: b, address: 127.0.0.1:9002\n    ]\n", 8, 5,
		     "(the '{' at 7:9 is still open here: a missing '}'?)");
	/* on one line, where the parser reads to the ']' before it passes the '{' on; brackets
	 * in quotes and in a comment are none */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:8080\n"
		     "    backends: [ {name: a, address: 127.0.0.1:9001 ]\n",
		     4, 51, "(the '{' at 4:17 is still open here: a missing '}'?)");
	expect_error("a: [ x, {d: 'it''s [', e: \"]\\\"{\" # [\n ]\n", 2, 2,
		     "(the '{' at 1:9 is still open here: a missing '}'?)");
	/* the opener as YAML reads the text, not a bracket in a string or a comment: after a
	 * quoted value that ends in ',' or ':' (its closing quote was read as an opening one:
	 * a '[' in the next string named, or the '{' missed), in a quoted value after an anchor
	 * or a tag (a '[' in it named, or none) */
	expect_error("a: [ \"x,\", \"[\" }\n", 1, 16,
		     "(the '[' at 1:4 is still open here: a missing ']'?)");
	expect_error("a: [ \"x,\",\n  {b: c ]\n", 2, 9,
		     "(the '{' at 2:3 is still open here: a missing '}'?)");
	expect_error("a: {b: [ &x \"[\" }\n", 1, 17,
		     "(the '[' at 1:8 is still open here: a missing ']'?)");
	expect_error("a: {b: [ !!str '{x' }\n", 1, 21,
		     "(the '[' at 1:8 is still open here: a missing ']'?)");
	/* ... but not where the error is at a ']' or '}' of the innermost's kind: the collection
	 * closes there (its closer wrongly indented), and "a missing ']'?" would name the wrong
	 * fault, or one that is not; */
	{
		static const struct {
			const char *yaml;
			int line, col;
			const char *what;
		} closers[] = {
			{ MINIMAL "    b: [1,\n      2\n    ]\n", 9, 5,
			  "wrongly indented sequence end in flow mode" },
			/* nor on a line indented deeper than the opener's, which goes on in
			 * it: a comma is what is missing there, as the parser says */
			{ "services:\n  - name: web\n    listen: 127.0.0.1:8080\n    backends: [\n"
			  "      {name: a, address: 127.0.0.1:9001}\n"
			  "      {name: b, address: 127.0.0.1:9002}\n    ]\n",
			  6, 7, "missing comma in flow sequence" },
			{ "a: [\n  b, c\n  d: e: f\n]\n", 3, 7, "missing comma in flow sequence" },
			/* nor a pair in a flow list (no '{': its ':' was named), nor a '{' in a
			 * comment at a line's start */
			{ "a: {b: [c: d\n]\n", 2, 1, "wrongly indented sequence end in flow mode" },
			{ "a: [ x,\n# {\n]\n", 3, 1, "wrongly indented sequence end in flow mode" },
		};

		for (size_t i = 0; i < sizeof(closers) / sizeof(closers[0]); i++) {
			struct hashlb_config *c = NULL;
			struct hashlb_error err = { 0 };
			const char *y = closers[i].yaml;

			assert_int_equal(hashlb_config_parse(y, strlen(y), "t.yaml", &c, &err),
					 -EINVAL);
			if (err.line != closers[i].line || err.column != closers[i].col ||
			    !strstr(err.msg, closers[i].what) || strstr(err.msg, "still open"))
				fail_msg(
					"%zu: expected %d:%d '%s' naming no opener, got %d:%d '%s'",
					i, closers[i].line, closers[i].col, closers[i].what,
					err.line, err.column, err.msg);
		}
	}
	expect_error("|", 1, 1, "must be a mapping"); /* at the block scalar's indicator */
	/* "[::1]:80" unquoted is a flow list and a ':': the error says to quote it */
	expect_error(MINIMAL "      - name: b\n        address: [::1]:80\n", 8, 23,
		     "invalid value after mapping (an IPv6 address and port must be quoted");
	expect_error(MINIMAL "      - {name: \xc3\xa9, address: [fe80::1]:80}\n", 7, 37,
		     "(an IPv6 address and port must be quoted");
	/* and "[::1]" without its port is a list of one: said so, not "found a list" alone */
	expect_error(MINIMAL "      - name: b\n        address: [::1]\n", 8, 18,
		     "found a list: [::1] unquoted is YAML's list of one item; write the address "
		     "in quotes with its port, as \"[::1]:80\"");
	expect_error("admin: [::1]\n" MINIMAL, 1, 8, "found a list: [::1] unquoted is YAML's");
	expect_error("services:\n  - name: web\n    listen: [::]\n", 3, 13,
		     "'listen' must be an address (IPv4 a.b.c.d:PORT or IPv6 [ADDR]:PORT), found a "
		     "list: [::] unquoted");
	expect_error("services:\n  - name: web\n    listen: [fd00::]\n", 3, 13,
		     "found a list: [fd00::] unquoted is YAML's list of one item");
	/* a list that is no such address is just a list */
	expect_error("services:\n  - name: web\n    listen: [x:]\n", 3, 13,
		     "[ADDR]:PORT), found a list");
	expect_error("services:\n  - name: web\n    listen: [1.2.3.4]\n", 3, 13,
		     "[ADDR]:PORT), found a list");
	/* A tab used for indentation. */
	expect_error("services:\n\t- name: x\n", 2, 1, "YAML syntax error");
	/* A plain scalar that runs on into a key: libfyaml points at its start. */
	expect_error("a: 1\n  b: 2\n", 1, 4, "YAML syntax error");
	expect_error("a: 1\n---\nb: 2\n", 2, 1, "only one YAML document");
	/* an error libfyaml reports with no position still says what it is */
	expect_error("%YAML 2.0\n---\na: 1\n", 1, 1,
		     "YAML syntax error: unsupport version number 2.0");
	/* YAML 1.1's rules are not hashlb's: its directive was taken, 010 still read as ten */
	expect_error("# a comment first\n%YAML 1.1\n---\na: 1\n", 2, 1,
		     "%YAML 1.1: hashlb reads its config as YAML 1.2");
	hashlb_config_free(load_ok("%YAML 1.2\n---\n" MINIMAL));
	expect_error("services: *nothing\n", 1, 11, "alias '*nothing'");
}

/*
 * A character that shows as a space or as nothing is text to YAML: a syntax
 * error it causes is placed at it, and says so. libfyaml's own error is
 * about what it made of it, often elsewhere on the line ("could not find
 * expected ':'" at the key for a zero-width space after its colon).
 */
static void test_invisible_character_in_syntax(void **state)
{
	expect_error("services:\n  - name: web\n  \xc2\xa0 listen: 127.0.0.1:80\n", 3, 3,
		     "YAML syntax error at U+00A0, which shows as a space or as nothing");
	expect_error("services:\n  - name: web\n    listen:\xe2\x80\x8b"
		     "127.0.0.1:80\n",
		     3, 12, "at U+200B");
	/* on the line before the error: a key that it made text runs on */
	expect_error("services:\xc2\xa0\n  - name: web\n", 1, 10, "at U+00A0");
	/* the BOM that starts a text is one; the column is libfyaml's, without it */
	expect_error("\xef\xbb\xbf"
		     "admin:\xc2\xa0off\nservices: []\n",
		     1, 7, "at U+00A0");
	expect_error("\xef\xbb\xbfservices: 1\n", 1, 11, "'services' must be a list");
	/* in quotes or a comment it is not the culprit */
	expect_error("a: \"\xc2\xa0\" b: 1\n", 1, 8, "YAML syntax error: invalid trailing");
	expect_error("a: b: c # \xc2\xa0\n", 1, 5, "YAML syntax error: invalid nested");
}

/*
 * An error on line 1 of a config that starts with a UTF-8 BOM (as some Windows editors
 * write) names the column and says what it would without the BOM: libfyaml gives the BOM
 * no column, and the hints hashlb adds read the text at its position. Before, they read it
 * a byte early there: the IPv6 quoting hint, the "still open" one at a mismatched closer
 * and a block scalar's column were lost or a column off.
 */
static void expect_same_with_bom(const char *yaml, const char *what)
{
	struct hashlb_error plain, bom;
	struct hashlb_config *c = NULL;
	char text[512];

	assert_true(strlen(yaml) + 3 < sizeof(text));
	snprintf(text, sizeof(text), "\xef\xbb\xbf%s", yaml);
	memset(&plain, 0, sizeof(plain));
	memset(&bom, 0, sizeof(bom));
	assert_true(hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &plain) < 0);
	assert_true(hashlb_config_parse(text, strlen(text), "t.yaml", &c, &bom) < 0);
	if (plain.line != 1 || !strstr(plain.msg, what))
		fail_msg("'%s': expected an error on line 1 with '%s', got %d:%d '%s'", yaml, what,
			 plain.line, plain.column, plain.msg);
	if (bom.line != plain.line || bom.column != plain.column || strcmp(bom.msg, plain.msg))
		fail_msg("'%s': %d:%d '%s' without a BOM, %d:%d '%s' with one", yaml, plain.line,
			 plain.column, plain.msg, bom.line, bom.column, bom.msg);
}

static void test_bom_line_one_same_error(void **state)
{
	expect_same_with_bom("admin: [::1]:8080\n", "an IPv6 address and port must be quoted");
	expect_same_with_bom("services: [{a: b]\n", "the '{' at 1:12 is still open");
	expect_same_with_bom("services: {a: [b}\n", "the '[' at 1:15 is still open");
	expect_same_with_bom("services: |\n  x\n", "'services' must be a list");
	expect_same_with_bom("admin: >-\n  x\n", "'admin': 'x' is not a valid address");
	expect_same_with_bom("services: \"x\"\n", "'services' must be a list");
	expect_same_with_bom("services: *x\n", "alias '*x'");
	expect_same_with_bom("services: !!str x\n", "a YAML tag ('!!str')");
	expect_same_with_bom("services: [a, b]]\n", "invalid extra closing bracket");
	expect_same_with_bom("a: \"x\" b\n", "invalid trailing content");
	expect_same_with_bom("services: [\"a\", 'b' x]\n", "missing comma");
	expect_same_with_bom("admin:\xc2\xa0x: 1\nb\n", "at U+00A0");
	expect_same_with_bom("a: 1\x01\n", "a control character");
	expect_same_with_bom("a: \xff\n", "byte 0xff");
	expect_same_with_bom("%YAML 1.1\n---\na: 1\n", "%YAML 1.1");
	expect_same_with_bom("sérvices: 1\n", "unknown key 'sérvices'");
	expect_same_with_bom("services: []\n", "");
}

/*
 * A tab before a block indicator after a complex key's ':' is refused, and
 * the refusal does not crash: libfyaml 0.7.12 frees a key twice there, and
 * destroying its parser after that was a SIGSEGV in hashlb check and in a
 * reload. Found by tests/fuzz/fuzz_config.
 */
static void test_tab_after_complex_key(void **state)
{
	expect_error("? T:\t|", 1, 5, "cannot use tab for indentation of block entry");
	expect_error("? T:\t>\n", 1, 5, "cannot use tab for indentation");
	expect_error("? [T]:\t- a\n", 1, 7, "cannot use tab for indentation");
	expect_error("a:\n  ? b:\t? c\n", 2, 7, "cannot use tab for indentation");
	/* the same tab elsewhere (no key recycled twice): refused as before */
	expect_error("-\t- a\n", 1, 2, "cannot use tab for indentation");
	expect_error("? a\n:\t|\n", 2, 2, "cannot use tab for indentation");
	expect_error("services:\n  - ? a\n    :\t|\n", 3, 6, "cannot use tab for indentation");
}

/*
 * A byte that is not UTF-8 is refused where it stands, before libfyaml sees
 * it: libfyaml 0.7.12 hung on one in a directive line. Found by
 * tests/fuzz/fuzz_config.
 */
static void test_not_utf8(void **state)
{
	expect_error("%\xdd\n", 1, 2, "not UTF-8 text: byte 0xdd");
	expect_error("%s:\xdd"
		     "d:%d: %s",
		     1, 4, "not UTF-8");
	expect_error("services:\n  - name: w\xff", 2, 12, "byte 0xff");
	expect_error("services:\n  - name: \xc3\xa9\xc3", 2, 12, "byte 0xc3"); /* cut short */
	expect_error("a: \xed\xa0\x80\n", 1, 4, "byte 0xed"); /* a UTF-16 surrogate */
	expect_error("a: \xc0\xaf\n", 1, 4, "byte 0xc0"); /* overlong '/' */
	/* after a BOM, at libfyaml's column, which gives the BOM none */
	expect_error("\xef\xbb\xbf"
		     "a: \xff\n",
		     1, 4, "byte 0xff");
	/* UTF-8 itself is fine, in a value and in an error's column */
	expect_error("sérvices: 1\n", 1, 1, "unknown key 'sérvices'");
	expect_error("é: *x\n", 1, 4, "alias '*x'");
}

/*
 * A CR alone is refused where it stands: libfyaml 0.7.12 breaks the line
 * there but not its positions, so later errors pointed elsewhere ("\r-"
 * was refused at line 2 of a one-line file). CRLF is fine. Found by
 * tests/fuzz/fuzz_config.
 */
static void test_lone_cr(void **state)
{
	expect_error("\r-", 1, 1, "a carriage return without a line feed");
	expect_error("a: 1\rb: 2\n", 1, 5, "line breaks are LF or CRLF");
	expect_error("a: 1\r\nb: *x\r\n", 2, 4, "alias '*x'");
}

/*
 * A NUL ends the text for libfyaml: what follows was left out without a
 * word (a zero-filled tail after a crash, a second service). It, and any
 * other control character YAML does not allow, is refused where it stands.
 */
static void test_control_chars(void **state)
{
	static const char text[] = MINIMAL "\0  - name: api\n    bogus: key\n";
	struct hashlb_config *c = NULL;
	struct hashlb_error err = { 0 };

	assert_int_equal(hashlb_config_parse(text, sizeof(text) - 1, "t.yaml", &c, &err), -EINVAL);
	assert_null(c);
	assert_int_equal(err.line, 7);
	assert_int_equal(err.column, 1);
	assert_non_null(strstr(err.msg, "a NUL byte"));
	expect_error("services:\n  - name: w\x01\n", 2, 12, "a control character");
	expect_error("services:\n  - name: w\x7f\n", 2, 12, "a control character");
	/* a tab is text */
	expect_error("a:\t1\n", 1, 1, "unknown key 'a'");
}

/* <yaml>, its "%s" replaced by <n> spaces (with <tab>, one tab among them), in a new string. */
static char *with_blanks(const char *yaml, size_t n, bool tab)
{
	const char *at = strstr(yaml, "%s");
	size_t len = strlen(yaml) - 2 + n;
	char *t = malloc(len + 1);

	assert_non_null(t);
	memcpy(t, yaml, (size_t)(at - yaml));
	memset(t + (at - yaml), ' ', n);
	if (tab && n > 1)
		t[at - yaml + n / 2] = '\t';
	strcpy(t + (at - yaml) + n, at + 2);
	return t;
}

/*
 * A long run of blanks inside a line is refused where it starts: libfyaml
 * 0.7.12 peeks at each blank after a flow collection's end (a quoted scalar,
 * an anchor, ...) from the run's start again, and "{name: a}" followed by
 * 200,000 spaces took 4 minutes to load, in a reload too. Up to 256 load, and
 * indentation and comments are not bounded (read once each).
 */
static void test_blank_runs(void **state)
{
	static const char *const bad[] = {
		"services:\n  - name: web\n    listen: 127.0.0.1:8080\n    backends:\n"
		"      - {name: a, address: 127.0.0.1:9001}%s\n",
		"services:\n  - name: web%s\n",
		"services:\n  - name: \"web\"%s# c\n",
	};
	const int cols[] = { 43, 14, 16 };
	char *t;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = with_blanks(bad[i], 257, true);
		expect_error(t, i ? 2 : 5, cols[i], "over 256 spaces or tabs in a row");
		free(t);
		t = with_blanks(bad[i], 200000, true);
		expect_error(t, i ? 2 : 5, cols[i], "over 256 spaces or tabs in a row");
		free(t);
	}
	t = with_blanks("services:\n  - name: web\n    listen: 127.0.0.1:8080\n    backends:\n"
			"      - {name: a, address: 127.0.0.1:9001}%s\n",
			256, true);
	hashlb_config_free(load_ok(t));
	free(t);
	t = with_blanks(MINIMAL "%s\n        weight: 2 # a comment\n", 100000, false);
	hashlb_config_free(load_ok(t));
	free(t);
	t = with_blanks(MINIMAL "        weight: 2 #%s\n", 100000, true);
	hashlb_config_free(load_ok(t));
	free(t);
}

static void test_no_services(void **state)
{
	expect_error("workers: 2\n", 1, 1, "no 'services'");
	expect_error("services: []\n", 1, 11, "'services' is empty");
	expect_error("services:\n", 1, 9, "found nothing (null)");
	expect_error("services:\n  web: {}\n", 2, 3, "'services' must be a list");
}

/* --- keys ---------------------------------------------------------------- */

/*
 * A NUL ("\0" in a double-quoted string) in a key or a value is refused:
 * everything but a health payload is read as a C string, and "ring\0junk"
 * loaded as ring, silently, like the typos the loader exists to catch.
 */
static void test_nul_refused(void **state)
{
	struct hashlb_config *c;

	expect_error(MINIMAL "    scheme: \"ring\\0junk\"\n", 7, 13,
		     "'scheme' must not contain NUL characters");
	expect_error(MINIMAL "    hash_key: \"4-tuple\\0\"\n", 7, 15,
		     "'hash_key' must not contain NUL");
	expect_error(MINIMAL "        state: \"drain\\0x\"\n", 7, 16,
		     "'state' must not contain NUL");
	expect_error(MINIMAL "    timeouts: {connect: \"2s\\0\"}\n", 7, 25,
		     "'connect' must not contain NUL");
	expect_error("services:\n  - name: web\n    \"listen\\0x\": 127.0.0.1:8080\n", 3, 5,
		     "a key in service must not contain NUL characters");
	/* a health check's payload is bytes: NULs allowed there */
	c = load_ok(MINIMAL "    health: {send: \"a\\0b\"}\n");
	assert_int_equal(c->services[0].health.send_len, 3);
	hashlb_config_free(c);
}

static void test_unknown_keys(void **state)
{
	expect_error("service: []\n", 1, 1,
		     "unknown key 'service' in the configuration (did you mean 'services'?)");
	expect_error("services:\n"
		     "  - name: web\n"
		     "    listen: 127.0.0.1:8080\n"
		     "    tabel_size: 3\n",
		     4, 5, "unknown key 'tabel_size' in service (did you mean 'table_size'?)");
	expect_error("services:\n"
		     "  - name: web\n"
		     "    listen: 127.0.0.1:8080\n"
		     "    hash-key: src-ip\n",
		     4, 5, "did you mean 'hash_key'?");
	expect_error(MINIMAL "        wieght: 2\n", 7, 9,
		     "unknown key 'wieght' in backend (did you mean 'weight'?)");
	expect_error(MINIMAL "    health: {intervall: 2s}\n", 7, 14, "did you mean 'interval'?");
	expect_error(MINIMAL "    timeouts: {conect: 2s}\n", 7, 16, "did you mean 'connect'?");
	/* Two letters swapped, the commonest slip, is one edit: short keys too
	 * (before, 'nmae' was two edits from 'name', past the 1 a 4-letter key allows,
	 * and got no suggestion). */
	expect_error("services:\n  - nmae: web\n", 2, 5,
		     "unknown key 'nmae' in service (did you mean 'name'?)");
	expect_error(MINIMAL "    health: {rsie: 2}\n", 7, 14, "did you mean 'rise'?");
	expect_error(MINIMAL "    sede: 1\n", 7, 5, "did you mean 'seed'?");
	expect_error(MINIMAL "        sttae: drain\n", 7, 9, "did you mean 'state'?");
	expect_error(MINIMAL "    colour: blue\n", 7, 5, "unknown key 'colour' in service");
	/* A valid key at the wrong level says where it goes. */
	expect_error(MINIMAL "    weight: 2\n", 7, 5,
		     "unknown key 'weight' in service: it belongs in a backend");
	expect_error(MINIMAL "    interval: 2s\n", 7, 5, "it belongs in a service's 'health'");
	expect_error(MINIMAL "    timeout: 2s\n", 7, 5,
		     "(did you mean 'timeouts'? 'timeout' belongs in a service's 'health')");
	/* HAProxy's and Envoy's names for a timeout (hashlb run --help used them too) */
	expect_error(MINIMAL "    connect_timeout: 2s\n", 7, 5,
		     "unknown key 'connect_timeout' in service: timeouts go under 'timeouts' "
		     "(timeouts: {connect: ...})");
	expect_error(MINIMAL "    drain_timeout: 2s\n", 7, 5, "(timeouts: {drain: ...})");
	/* Another tool's longer name for a key, too far to be a typo, that starts with hashlb's:
	 * that key is suggested (before, nothing was). Not for a key valid elsewhere: its home. */
	expect_error(MINIMAL "    healthcheck: {interval: 2s}\n", 7, 5,
		     "unknown key 'healthcheck' in service (did you mean 'health'?)");
	expect_error(MINIMAL "    listen_address: 127.0.0.1:80\n", 7, 5,
		     "unknown key 'listen_address' in service (did you mean 'listen'?)");
	expect_error("admin_address: 127.0.0.1:9901\n" MINIMAL, 1, 1,
		     "unknown key 'admin_address' in the configuration (did you mean 'admin'?)");
	expect_error(
		MINIMAL "        max_connections_per_client: 2\n", 7, 9,
		"unknown key 'max_connections_per_client' in backend: it belongs in a service");
	expect_error(MINIMAL "    health-checks: {interval: 2s}\n", 7, 5,
		     "(did you mean 'health'?)");
	expect_error(MINIMAL "    max_connections_total: 9\n", 7, 5,
		     "(did you mean 'max_connections'?)");
	/* Nothing close: no suggestion. Nor for a key that starts with a valid one but is another
	 * word ('portal' suggested 'port', 'fallback' 'fall', 'namespace' 'name'). */
	static const char *const far[] = {
		MINIMAL "    zzzzzzzz: 1\n",
		MINIMAL "    health: {portal: 80}\n",
		MINIMAL "    health: {fallback: 3}\n",
		MINIMAL "    namespace: x\n",
		MINIMAL "        statefile: x\n",
		/* of a longer key's family, past a typo of it: not the short key, a total
		 * where a per-client limit is meant (it suggested 'max_connections') */
		MINIMAL "    max_connections_per_source_ip: 9\n",
	};
	for (size_t i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
		struct hashlb_config *c = NULL;
		struct hashlb_error err;

		assert_int_equal(hashlb_config_parse(far[i], strlen(far[i]), "t.yaml", &c, &err),
				 -EINVAL);
		assert_non_null(strstr(err.msg, "unknown key"));
		if (strstr(err.msg, "did you mean"))
			fail_msg("%s: %s", far[i], err.msg);
	}
}

/*
 * An error quoting a long key or name still says, at its end, what is wrong:
 * the message is cut in its middle, not at the end of the 256-byte buffer
 * ("unknown key 'kkk...kkk" and nothing more, before).
 */
static void test_long_quote_keeps_the_end(void **state)
{
	char yaml[2048], key[512], name[HASHLB_NAME_MAX + 1];

	memset(key, 'k', 300);
	key[300] = '\0';
	snprintf(yaml, sizeof(yaml), MINIMAL "    %s: 1\n", key);
	expect_error(yaml, 7, 5, "kkk' in service");

	/* escaped control characters: each \x01 is 4 bytes written */
	key[0] = '\0';
	for (int i = 0; i < 100; i++)
		strcat(key, "\\x01");
	snprintf(yaml, sizeof(yaml), MINIMAL "    \"%s\": 1\n", key);
	expect_error(yaml, 7, 5, "\\x01\\x01' in service");
	/* a valid backend name of 255 bytes, twice */
	memset(name, 'b', HASHLB_NAME_MAX);
	name[HASHLB_NAME_MAX] = '\0';
	snprintf(yaml, sizeof(yaml),
		 "services:\n  - name: web\n    listen: 127.0.0.1:8080\n    backends:\n"
		 "      - {name: %s, address: 127.0.0.1:9001}\n"
		 "      - {name: %s, address: 127.0.0.1:9002}\n",
		 name, name);
	expect_error(yaml, 6, 16, "bbb' in service 'web' (first at line 5)");
	/* through an alias: the note is kept with the end of the message */
	snprintf(yaml, sizeof(yaml),
		 MINIMAL "      - &b {name: %s, address: 127.0.0.1:9002}\n"
			 "  - name: api\n    listen: 127.0.0.1:8081\n    backends: [*b, *b]\n",
		 name);
	expect_error(yaml, 7, 19,
		     "bbb' in service 'api' (first at line 10) (through the alias at line 10, "
		     "column 20)");
}

/*
 * A name refused for its length keeps the whole rule it breaks, and says its length: the
 * quoted name is cut, not the message's middle, which lost "must be 1 to 255 bytes" (the
 * name and the rule together are longer than an error holds).
 */
static void test_long_name_keeps_the_rule(void **state)
{
	char yaml[2048], name[301];

	memset(name, 'b', 300);
	name[300] = '\0';
	snprintf(yaml, sizeof(yaml),
		 "services:\n  - name: web\n    listen: 127.0.0.1:8080\n    backends:\n"
		 "      - {name: %s, address: 127.0.0.1:9001}\n",
		 name);
	expect_error(yaml, 5, 16, "backend name 'bbbbbbbbbbbbbbbb");
	expect_error(yaml, 5, 16,
		     "bbbbbbbbbbbbbbbb' (300 bytes) must be " HASHLB_BACKEND_NAME_RULE);
	expect_error(yaml, 5, 16, "bbb...bbb");
	memset(name, 's', 300);
	snprintf(yaml, sizeof(yaml),
		 "services:\n  - name: %s\n    listen: 127.0.0.1:8080\n    backends:\n"
		 "      - {name: a, address: 127.0.0.1:9001}\n",
		 name);
	expect_error(yaml, 2, 11,
		     "sss' (300 bytes) must be 1 to 64 characters from A-Z a-z 0-9 . _ -");
	/* a message too long for the value alone to make room: its middle is cut, as before */
	{
		char out[64];

		hashlb_err_fit(out, sizeof(out),
			       "'ab' and then a long text that says what is wrong, longer than the "
			       "error holds, and its end");
		assert_int_equal(strlen(out), sizeof(out) - 1);
		assert_non_null(strstr(out, "'ab' and then"));
		assert_non_null(strstr(out, "..."));
		assert_non_null(strstr(out, "and its end"));
	}
}

/*
 * A quoted value cut to fit is cut between the escapes its error writes for what it cannot
 * show (\u200b, \x01), never inside one: a cut in "\u200b" left "\u20..." before the cut and
 * "...b" after it, a 'b' the key does not hold. Each place of the cut is tried (the key after
 * 0 to 5 bytes of 'a').
 */
static void test_cut_keeps_escapes_whole(void **state)
{
	/* YAML's escapes, in a double-quoted key, are the error's */
	static const char *const shown[] = { "\\u200b", "\\x01" };

	for (int e = 0; e < 2; e++) {
		size_t w = strlen(shown[e]);

		for (int off = 0; off < (int)w; off++) {
			char yaml[2048], key[1024] = "", *value, *dots, *end;
			struct hashlb_config *c = NULL;
			struct hashlb_error err = { 0 };

			memset(key, 'a', (size_t)off);
			key[off] = '\0';
			for (int i = 0; i < 70; i++)
				strcat(key, shown[e]);
			snprintf(yaml, sizeof(yaml), MINIMAL "    \"%s\": 1\n", key);
			assert_int_equal(
				hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &err),
				-EINVAL);
			value = strstr(err.msg, "unknown key '");
			assert_non_null(value);
			value += strlen("unknown key '") + off;
			dots = strstr(value, "...");
			end = strstr(value, "' in service");
			if (!dots || !end || dots > end)
				fail_msg("%s: no cut in the key: %s", shown[e], err.msg);
			for (char *p = value; p < dots; p += w)
				if (dots - p < (long)w || strncmp(p, shown[e], w))
					fail_msg("cut %d: '%.*s' before the cut: %s", off,
						 (int)(dots - p), p, err.msg);
			for (char *p = dots + 3; p < end; p += w)
				if (end - p < (long)w || strncmp(p, shown[e], w))
					fail_msg("cut %d: '%.*s' after the cut: %s", off,
						 (int)(end - p), p, err.msg);
		}
	}
}

/*
 * HASHLB_LOAD_ADMIN_ONLY (hashlb ctl -c) reads the admin key of a file whose
 * other keys have errors, and refuses an admin key it cannot read.
 */
static void test_admin_only(void **state)
{
	static const char broken[] = "? [a]\n: 1\nadmin: unix:/run/h.sock\nservices: 3\n";
	struct hashlb_config *c = NULL;
	struct hashlb_error err = { 0 };

	expect_error(broken, 1, 3, "a key in the configuration must be a plain name");
	assert_int_equal(hashlb_config_parse_flags(broken, strlen(broken), "t.yaml",
						   HASHLB_LOAD_ADMIN_ONLY, &c, &err),
			 0);
	assert_string_equal(c->admin, "unix:/run/h.sock");
	assert_int_equal(c->admin_addr.ss_family, AF_UNIX);
	assert_int_equal(c->n_services, 0);
	hashlb_config_free(c);
	c = NULL;
	assert_int_equal(hashlb_config_parse_flags("foo: 1\n", 7, "t.yaml", HASHLB_LOAD_ADMIN_ONLY,
						   &c, &err),
			 0);
	assert_string_equal(c->admin, "127.0.0.1:9901");
	hashlb_config_free(c);
	c = NULL;
	assert_int_equal(hashlb_config_parse_flags("admin: [x]\nfoo: 1\n", 18, "t.yaml",
						   HASHLB_LOAD_ADMIN_ONLY, &c, &err),
			 -EINVAL);
	assert_int_equal(err.line, 1);
	assert_non_null(strstr(err.msg, "'admin' must be"));
	assert_int_equal(hashlb_config_parse_flags("admin: off\nadmin: off\n", 22, "t.yaml",
						   HASHLB_LOAD_ADMIN_ONLY, &c, &err),
			 -EINVAL);
	assert_int_equal(err.line, 2);
	assert_non_null(strstr(err.msg, "duplicate key 'admin'"));
	assert_null(c);
}

/*
 * Case <i>: <y>, which a whole load refuses (that error returned), read with
 * HASHLB_LOAD_ADMIN_ONLY gives the admin address <admin>, or (NULL) is refused
 * with the same error, -ENOENT.
 */
static struct hashlb_error expect_admin_only(size_t i, const char *y, const char *admin)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err, whole;
	int r;

	memset(&whole, 0, sizeof(whole));
	memset(&err, 0, sizeof(err));
	assert_int_equal(hashlb_config_parse(y, strlen(y), "t.yaml", &c, &whole), -EINVAL);
	r = hashlb_config_parse_flags(y, strlen(y), "t.yaml", HASHLB_LOAD_ADMIN_ONLY, &c, &err);
	if (!admin) {
		if (r != -ENOENT || strcmp(err.msg, whole.msg) || err.line != whole.line)
			fail_msg("case %zu: expected the error '%s', got %d '%s'", i, whole.msg, r,
				 err.msg);
		assert_null(c);
		return whole;
	}
	if (r != 0)
		fail_msg("case %zu: expected admin %s, got %d '%s'", i, admin, r, err.msg);
	if (strcmp(admin, "off"))
		assert_string_equal(c->admin, admin);
	assert_int_equal(c->admin_addr_len == 0, !strcmp(admin, "off"));
	assert_int_equal(c->n_services, 0);
	hashlb_config_free(c);
	return whole;
}

/*
 * HASHLB_LOAD_ADMIN_ONLY of a file with a YAML syntax error (an edit half done): the admin
 * key is read if it comes whole before the error, so that hashlb ctl -c FILE still reaches
 * the hashlb that runs; otherwise the error, as before, since the key (or the default) may
 * be after it. Before, every such file was the error alone.
 */
static void test_admin_only_before_a_syntax_error(void **state)
{
	static const struct {
		const char *yaml;
		const char *admin; /* NULL: the YAML error */
	} cases[] = {
		{ "admin: unix:/run/h.sock\nservices:\n  - name: [a\n  - b\n", "unix:/run/h.sock" },
		{ "workers: 2\nadmin: '127.0.0.1:9902'\nservices: {\n", "127.0.0.1:9902" },
		{ "admin: off\nservices: \"a\n  - b\n", "off" },
		{ "services: [a\nadmin: unix:/run/h.sock\n", NULL }, /* after the error */
		{ "workers: 2\nservices: [a\n", NULL }, /* none before: the default may not be it */
		{ "admin: \"127.0.0.1:9902\nservices: []\n", NULL }, /* the value cut */
		{ "admin: [127.0.0.1:9902,\n", NULL }, /* not a whole scalar */
		{ "- admin: 127.0.0.1:9902\n- [\n", NULL }, /* no mapping */
		/* a plain value over lines, the error right after: its lines may run
		 * into what the error is about, not whole (was '127.0.0.1:9902 bad') */
		{ "admin: 127.0.0.1:9902\n  bad\n]\n", NULL },
		{ "admin: unix:/run/h.sock\n  more\n]\n", NULL },
		/* one that ends on its line is whole, the error right after it too */
		{ "admin: 127.0.0.1:9902\n]\n", "127.0.0.1:9902" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hashlb_error whole = expect_admin_only(i, cases[i].yaml, cases[i].admin);

		assert_non_null(strstr(whole.msg, "YAML syntax error"));
	}
}

/*
 * HASHLB_LOAD_ADMIN_ONLY of a file with a byte the loader refuses before YAML is read (a
 * control character, one that is not UTF-8, a CR alone, a long run of blanks): the admin
 * key is read if the top-level entry that holds it ends before the refused line, as before
 * a YAML syntax error; the error stays the one hashlb check gives. Before, hashlb ctl -c
 * FILE stopped at the error whatever came before it.
 */
static void test_admin_only_before_a_bad_byte(void **state)
{
	static const struct {
		const char *yaml;
		int line, column;
		const char *admin; /* NULL: the error */
	} cases[] = {
		{ "admin: unix:/run/h.sock\nservices:\n  - name: a\x01\n", 3, 12,
		  "unix:/run/h.sock" },
		{ "workers: 2\nadmin: '127.0.0.1:9902'\n\x01\n", 3, 1, "127.0.0.1:9902" },
		{ "admin: off\n# c\n\nservices: \xff\n", 4, 11, "off" },
		{ "admin: 127.0.0.1:9902\nservices: a\rb\n", 2, 12, "127.0.0.1:9902" },
		/* the refused byte's entry is left out whole: its value may run on there */
		{ "admin: 127.0.0.1:9902\n  b\x01\n", 2, 4, NULL },
		{ "admin: 127.0.0.1:9902\n\n  # c\n  \x01\n", 4, 3, NULL },
		{ "admin: |\n  x\n  \x01\n", 3, 3, NULL },
		{ "admin: 127.0.0.1:9902\x01\n", 1, 22, NULL },
		{ "services: [a\nadmin: off\x01\n", 2, 11, NULL }, /* after a YAML error */
		{ "workers: 2\x01\nadmin: off\n", 1, 11, NULL }, /* after the byte */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hashlb_error whole = expect_admin_only(i, cases[i].yaml, cases[i].admin);

		if (whole.line != cases[i].line || whole.column != cases[i].column)
			fail_msg("case %zu: expected the error at %d:%d, got %d:%d '%s'", i,
				 cases[i].line, cases[i].column, whole.line, whole.column,
				 whole.msg);
	}
}

static void test_duplicate_key(void **state)
{
	expect_error(MINIMAL "    listen: 127.0.0.1:8081\n", 7, 5,
		     "duplicate key 'listen' in service (first at line 3)");
}

static void test_missing_keys(void **state)
{
	expect_error("services:\n  - listen: 127.0.0.1:80\n", 2, 5, "service has no 'name'");
	expect_error("services:\n  - name: web\n", 2, 5, "has no 'listen'");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n", 2, 5,
		     "has no 'backends'");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends: []\n", 4,
		     15, "empty list of backends");
	expect_error(
		"services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n      - name: a\n",
		5, 9, "backend 'a' has no 'address' (a.b.c.d:PORT, [ADDR]:PORT or HOST:PORT)");
	expect_error(
		"services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n      - address: 127.0.0.1:1\n",
		5, 9, "backend has no 'name'");
}

/* --- types --------------------------------------------------------------- */

static void test_wrong_types(void **state)
{
	struct hashlb_config *c;

	(void)state;
	expect_error(MINIMAL "        weight: \"3\"\n", 7, 17,
		     "'weight' must be an integer, found the quoted string \"3\"");
	expect_error(MINIMAL "        weight: heavy\n", 7, 17,
		     "'weight' must be an integer, found 'heavy'");
	expect_error(MINIMAL "        weight: [1]\n", 7, 17,
		     "'weight' must be an integer, found a list");
	expect_error(MINIMAL "        weight: -1\n", 7, 17, "'weight' -1 is out of range 0..10000");
	expect_error(MINIMAL "    timeouts: [1s]\n", 7, 15, "'timeouts' must be a mapping");
	expect_error(MINIMAL "    health: true\n", 7, 13, "'health' must be a mapping");
	expect_error(MINIMAL "    health: {enabled: maybe}\n", 7, 23,
		     "'enabled' must be true or false, found 'maybe'");
	expect_error(MINIMAL "    balance_factor: much\n", 7, 21,
		     "'balance_factor' must be a number");
	/* a C hex fraction is no YAML number (strtod() took it: 8 and 3) */
	expect_error(MINIMAL "    balance_factor: 0x1p3\n", 7, 21,
		     "'balance_factor' must be a number, found '0x1p3'");
	expect_error(MINIMAL "    balance_factor: 0x1.8\n", 7, 21,
		     "'balance_factor' must be a number, found '0x1.8'");
	/* YAML's integers are numbers, octal as hexadecimal (0o2 was refused, 0x2 taken) */
	for (const char *const *t = (const char *const[]){ "0o2", "0x2", NULL }; *t; t++) {
		char yaml[256];

		snprintf(yaml, sizeof(yaml), MINIMAL "    balance_factor: %s\n", *t);
		c = load_ok(yaml);
		assert_true(c->services[0].balance_factor == 2.0);
		hashlb_config_free(c);
	}
	expect_error(MINIMAL "    balance_factor: 0o8\n", 7, 21,
		     "'balance_factor' must be an integer, found '0o8'");
	expect_error("services:\n  - name: {a: 1}\n", 2, 11,
		     "'name' must be a string, found a mapping");
	/* An empty value is placed at the end of its key. */
	expect_error("services:\n  - name:\n    listen: 127.0.0.1:80\n", 2, 9,
		     "'name' must be a string, found nothing");
	expect_error("services:\n  - web\n", 2, 5, "service must be a mapping");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends: {a: 1}\n",
		     4, 15, "'backends' must be a list");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends: [a]\n", 4,
		     16, "backend must be a mapping");
	expect_error("workers: [2]\n" MINIMAL, 1, 10, "'workers' must be auto or a number");
	expect_error("workers: many\n" MINIMAL, 1, 10, "'workers' must be auto or a number");
	expect_error(MINIMAL "    scheme: consistent\n", 7, 13,
		     "'scheme' must be ring or maglev, found 'consistent'");
	expect_error(MINIMAL "    hash_key: dst-ip\n", 7, 15,
		     "'hash_key' must be src-ip, src-ip-port or 4-tuple");
	expect_error(MINIMAL "        state: down\n", 7, 16,
		     "'state' must be ready, drain or maint");
	expect_error(MINIMAL "    steering: xdp\n", 7, 15,
		     "'steering' must be userspace or kernel");
	expect_error(MINIMAL "    seed: 1.5\n", 7, 11, "'seed' must be an integer");
}

/* <p> holds the lengths <v4> and <v6>. */
static void assert_prefix(const struct hashlb_src_prefix *p, unsigned v4, unsigned v6)
{
	assert_int_equal(p->v4, v4);
	assert_int_equal(p->v6, v6);
}

/* hash_prefix: the client prefix a src-ip key hashes; refused where it means nothing. */
static void test_hash_prefix(void **state)
{
	struct hashlb_config *c;

	c = load_ok(MINIMAL "    hash_prefix: {ipv6: 64}\n");
	assert_prefix(&c->services[0].hash_prefix, 32, 64);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    hash_key: src-ip\n"
			    "    hash_prefix:\n"
			    "      ipv4: 24\n"
			    "      ipv6: 56\n");
	assert_prefix(&c->services[0].hash_prefix, 24, 56);
	hashlb_config_free(c);

	expect_error(MINIMAL "    hash_key: src-ip-port\n    hash_prefix: {ipv4: 24}\n", 8, 5,
		     "'hash_prefix' applies to hash_key src-ip, but this service uses src-ip-port");
	expect_error(MINIMAL "    hash_prefix: {ipv4: 24}\n    hash_key: 4-tuple\n", 7, 5,
		     "'hash_prefix' applies to hash_key src-ip, but this service uses 4-tuple");
	expect_error(MINIMAL "    hash_prefix: {ipv4: 33}\n", 7, 25,
		     "'ipv4' 33 is out of range 1..32");
	expect_error(MINIMAL "    hash_prefix: {ipv6: 0}\n", 7, 25,
		     "'ipv6' 0 is out of range 1..128");
	expect_error(MINIMAL "    hash_prefix: {ipv6: /64}\n", 7, 25, "'ipv6' must be an integer");
	expect_error(MINIMAL "    hash_prefix: 64\n", 7, 18, "'hash_prefix' must be a mapping");
	expect_error(MINIMAL "    hash_prefix: {v6: 64}\n", 7, 19, "v6");
	expect_error(MINIMAL "    ipv6: 64\n", 7, 5, "in a service's 'hash_prefix'");
}

/*
 * client_prefix: the client prefix max_connections_per_client counts by;
 * whole addresses by default, refused without the limit it applies to.
 */
static void test_client_prefix(void **state)
{
	struct hashlb_config *c;

	(void)state;
	c = load_ok(MINIMAL);
	assert_prefix(&c->services[0].client_prefix, 32, 128);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    max_connections_per_client: 2\n"
			    "    client_prefix: {ipv6: 64}\n");
	assert_prefix(&c->services[0].client_prefix, 32, 64);
	/* each prefix its own: hash_prefix stays whole */
	assert_int_equal(c->services[0].hash_prefix.v6, 128);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    client_prefix:\n"
			    "      ipv4: 24\n"
			    "      ipv6: 56\n"
			    "    hash_key: 4-tuple\n" /* unlike hash_prefix: any key */
			    "    max_connections_per_client: 10\n");
	assert_prefix(&c->services[0].client_prefix, 24, 56);
	hashlb_config_free(c);

	expect_error(MINIMAL "    client_prefix: {ipv6: 64}\n", 7, 5,
		     "'client_prefix' applies to max_connections_per_client, which this service "
		     "does not set");
	expect_error(MINIMAL "    max_connections_per_client: 0\n    client_prefix: {ipv4: 24}\n",
		     8, 5, "'client_prefix' applies to max_connections_per_client");
	expect_error(MINIMAL "    max_connections_per_client: 2\n    client_prefix: {ipv4: 33}\n",
		     8, 27, "'ipv4' 33 is out of range 1..32");
	expect_error(MINIMAL "    max_connections_per_client: 2\n    client_prefix: {ipv6: 0}\n", 8,
		     27, "'ipv6' 0 is out of range 1..128");
	expect_error(MINIMAL "    max_connections_per_client: 2\n    client_prefix: {ipv6: 129}\n",
		     8, 27, "'ipv6' 129 is out of range 1..128");
	expect_error(MINIMAL "    max_connections_per_client: 2\n    client_prefix: 64\n", 8, 20,
		     "'client_prefix' must be a mapping");
	expect_error(MINIMAL "    max_connections_per_client: 2\n    client_prefix: {v6: 64}\n", 8,
		     21, "v6");
	expect_error(MINIMAL "    max_connections_per_client: 2\n"
			     "    steering: kernel\n    interface: lo\n"
			     "    client_prefix: {ipv6: 64}\n",
		     7, 33, "max_connections_per_client");
}

/* --- ranges -------------------------------------------------------------- */

static void test_ranges(void **state)
{
	expect_error(MINIMAL "        weight: 10001\n", 7, 17,
		     "'weight' 10001 is out of range 0..10000");
	expect_error(MINIMAL "    scheme: ring\n    vnodes: 0\n", 8, 13,
		     "'vnodes' 0 is out of range 1..100000");
	expect_error(MINIMAL "    table_size: 2\n", 7, 17, "out of range 3..16777259");
	expect_error(MINIMAL "    table_size: 16777260\n", 7, 17, "out of range");
	expect_error(
		MINIMAL "    table_size: 65536\n", 7, 17,
		"'table_size' 65536 is not prime (Maglev needs a prime; nearest: 65521 or 65537)");
	expect_error(MINIMAL "    timeouts:\n      connect: 0\n", 8, 16,
		     "'connect' 0 is out of range 1ms..10m");
	expect_error(MINIMAL "    timeouts:\n      idle: 8d\n", 8, 13, "'idle' must be a duration");
	/* a number alone out of range as milliseconds says how it was read, where seconds fit */
	expect_error(MINIMAL "    health:\n      interval: 5\n", 8, 17,
		     "'interval' 5 is out of range 10ms..1h: a number alone counts milliseconds, 5 "
		     "read as 5ms: write 5s for seconds");
	expect_error(MINIMAL "    health:\n      interval: 5000000\n", 8, 17,
		     "'interval' 5000000 is out of range 10ms..1h");
	/* a fraction is refused by its name (it was called "a number with a unit" and refused) */
	expect_error(MINIMAL "    timeouts:\n      connect: 1.5s\n", 8, 16,
		     "'connect' 1.5s: a duration is a whole number of its unit");
	expect_error(MINIMAL "    timeouts:\n      idle: 169h\n", 8, 13,
		     "'idle' 169h is out of range 0ms..168h");
	expect_error(MINIMAL "    timeouts:\n      drain: \"30\"\n", 8, 14, "has no unit");
	expect_error(MINIMAL "    timeouts:\n      drain: -1s\n", 8, 14,
		     "'drain' -1s is out of range 0ms..1h");
	expect_error(MINIMAL "    max_connections: 99999999\n", 7, 22, "out of range");
	expect_error(MINIMAL "    connect_retries: 33\n", 7, 22,
		     "'connect_retries' 33 is out of range 0..32");
	expect_error(MINIMAL "    balance_factor: 0.5\n", 7, 21,
		     "'balance_factor' 0.5 is out of range");
	expect_error(MINIMAL "    health:\n      rise: 0\n", 8, 13,
		     "'rise' 0 is out of range 1..100");
	expect_error(MINIMAL "    health:\n      interval: 1s\n      timeout: 2s\n", 9, 16,
		     "timeout 2s is longer than its interval 1s");
	expect_error("workers: 0\n" MINIMAL, 1, 10, "'workers' 0 is out of range 1..256");
	expect_error("workers: 257\n" MINIMAL, 1, 10, "out of range 1..256");
	expect_error(MINIMAL "    seed: 18446744073709551616\n", 7, 11,
		     "'seed' 18446744073709551616 is out of range 0..18446744073709551615");
}

/*
 * A number past its range however far, negative or past 64 bits, is refused
 * with the range, as one just past it is: it was "must not be negative" or
 * "is too large", which said nothing of what the key takes.
 */
static void test_past_the_range_says_the_range(void **state)
{
	static const struct {
		const char *line, *what;
	} bad[] = {
		{ "seed: -1", "'seed' -1 is out of range 0..18446744073709551615" },
		{ "connect_retries: 18446744073709551616",
		  "'connect_retries' 18446744073709551616 is out of range 0..32" },
		{ "connect_retries: 0x10000000000000000",
		  "'connect_retries' 0x10000000000000000 is out of range 0..32" },
		{ "connect_retries: -5", "'connect_retries' -5 is out of range 0..32" },
		{ "slow_start: 99999999999999999999999s",
		  "'slow_start' 99999999999999999999999s is out of range 0ms..1h" },
		{ "slow_start: 18446744073709551615ms",
		  "'slow_start' 18446744073709551615ms is out of range 0ms..1h" },
		{ "slow_start: -1", "'slow_start' -1 is out of range 0ms..1h" },
		/* not numbers: said so, as before */
		{ "connect_retries: -1x", "'connect_retries' must be an integer, found '-1x'" },
		{ "slow_start: -s", "'slow_start' must be a duration" },
	};
	char yaml[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), MINIMAL "    %s\n", bad[i].line);
		expect_error(yaml, 7, (int)(strchr(bad[i].line, ' ') - bad[i].line) + 6,
			     bad[i].what);
	}
	/* -0 is 0 */
	hashlb_config_free(load_ok(MINIMAL "    connect_retries: -0\n    slow_start: -0\n"));
	expect_error("workers: 18446744073709551616\n" MINIMAL, 1, 10,
		     "'workers' 18446744073709551616 is out of range 1..256");
}

/*
 * Integers read as YAML 1.2's core schema reads them: "010" is ten (not C's
 * eight), "+5" five, "0o17" fifteen, "0x1F" thirty-one. "0X10" was read as
 * 16, "+0x10" and "-0x0" were taken too, and "workers: +4" and
 * "slow_start: +5" were refused: YAML reads the first three as strings, the
 * others as 4 and 5. What YAML 1.2 does
 * not read as an integer is refused, saying why where it looks like one
 * (YAML 1.1's "1_000" and "0b101").
 */
static void test_integers_are_yaml_1_2s(void **state)
{
	static const struct {
		const char *text;
		uint64_t val;
	} good[] = {
		{ "010", 10 },
		{ "007", 7 },
		{ "+5", 5 },
		{ "-0", 0 },
		{ "+0", 0 },
		{ "0o17", 15 },
		{ "0o0", 0 },
		{ "0x1F", 31 },
		{ "0xff", 255 },
		{ "0x0", 0 },
		{ "18446744073709551615", UINT64_MAX },
		{ "0xffffffffffffffff", UINT64_MAX },
	};
	static const struct {
		const char *text, *what;
	} bad[] = {
		{ "0X10", "found '0X10' (YAML writes hexadecimal and octal with a lowercase 0x and "
			  "0o)" },
		{ "0O17", "found '0O17' (YAML writes hexadecimal and octal with a lowercase" },
		{ "+0x10", "found '+0x10' (YAML's hexadecimal and octal take no sign)" },
		{ "-0x0", "found '-0x0' (YAML's hexadecimal and octal take no sign)" },
		{ "-0o7", "found '-0o7' (YAML's hexadecimal and octal take no sign)" },
		{ "1_000", "found '1_000' (YAML 1.2 integers have no '_' between digits" },
		{ "0b101", "found '0b101' (YAML 1.2 has no binary integers" },
		{ "0x", "must be an integer, found '0x'" },
		{ "0o8", "must be an integer, found '0o8'" },
		{ "0xfg", "must be an integer, found '0xfg'" },
		{ "1f", "must be an integer, found '1f'" },
		{ "++1", "must be an integer, found '++1'" },
	};
	struct hashlb_config *c;
	char yaml[512];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(yaml, sizeof(yaml), MINIMAL "    seed: %s\n", good[i].text);
		c = load_ok(yaml);
		if (c->services[0].table.seed != good[i].val)
			fail_msg("seed: %s read as %" PRIu64 ", not %" PRIu64, good[i].text,
				 c->services[0].table.seed, good[i].val);
		hashlb_config_free(c);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), MINIMAL "    seed: %s\n", bad[i].text);
		expect_error(yaml, 7, 11, bad[i].what);
	}
	c = load_ok("workers: +4\n" MINIMAL);
	assert_int_equal(c->workers, 4);
	hashlb_config_free(c);
	expect_error("workers: -1\n" MINIMAL, 1, 10, "'workers' -1 is out of range 1..256");
	expect_error("workers: 0X4\n" MINIMAL, 1, 10, "lowercase 0x");
	/* a duration or a size is a decimal integer, "+5" as YAML reads it too */
	c = load_ok(MINIMAL "    slow_start: +5\n    timeouts: {idle: +2s}\ntable_memory: +2MiB\n");
	assert_int_equal(c->services[0].slow_start_ms, 5);
	assert_int_equal(c->services[0].idle_timeout_ms, 2000);
	assert_int_equal(c->table_memory, 2u << 20);
	hashlb_config_free(c);
	/* a number that may be a fraction takes YAML's integers too, and only them */
	c = load_ok(MINIMAL "    balance_factor: 0x10\n");
	assert_true(c->services[0].balance_factor == 16.0);
	hashlb_config_free(c);
	expect_error(MINIMAL "    balance_factor: 0X10\n", 7, 21,
		     "'balance_factor' must be a number, found '0X10' (YAML writes hexadecimal");
	expect_error(MINIMAL "    balance_factor: +0x10\n", 7, 21, "take no sign");
}

static void test_host_names(void **state)
{
	static const char *const good[] = {
		"db1:5432", "db-1.example.com:80", "db1.example.com.:80",
		"a:1",	    "10.x1:65535",	   "A.B-C.d9:8",
	};
	static const char *const bad[] = {
		"db1",	  "db1:",	   "db1:0",	   "db1:65536", "db1:http",
		"db1:-1", "-db:80",	   "db-:80",	   "a..b:80",	".a:80",
		"a_b:80", "10.0.0.300:80", "1.2.3.4.5:80", "a.1:80",	"x1.10:80",
		":80",	  "db 1:80",	   "[db1]:80",	   "a:b:80",
	};
	char host[HASHLB_HOST_MAX + 1], label[70], name[300];
	uint16_t port = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (hashlb_name_addr_parse(good[i], host, &port) != 0)
			fail_msg("'%s' should parse as name:port", good[i]);
		assert_int_equal(strncmp(good[i], host, strlen(host)), 0);
		assert_int_equal(good[i][strlen(host)], ':');
		assert_int_equal(port, atoi(strrchr(good[i], ':') + 1));
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (hashlb_name_addr_parse(bad[i], host, &port) == 0)
			fail_msg("'%s' should not parse as name:port", bad[i]);
	}
	/* labels of up to 63 bytes, names of up to 253 */
	memset(label, 'a', 63);
	snprintf(name, sizeof(name), "%.63s:1", label);
	assert_int_equal(hashlb_name_addr_parse(name, host, &port), 0);
	snprintf(name, sizeof(name), "%.63sa:1", label);
	assert_int_equal(hashlb_name_addr_parse(name, host, &port), -EINVAL);
	snprintf(name, sizeof(name), "%.63s.%.63s.%.63s.%.61s:1", label, label, label, label);
	assert_int_equal(strlen(name), 253 + 2);
	assert_int_equal(hashlb_name_addr_parse(name, host, &port), 0);
	snprintf(name, sizeof(name), "%.63s.%.63s.%.63s.%.62s:1", label, label, label, label);
	assert_int_equal(hashlb_name_addr_parse(name, host, &port), -EINVAL);
}

/* Parsing resolves nothing: a named backend keeps its text, no address yet, and
 * where it is written (for the resolver's errors). */
static void test_named_backend_parsed(void **state)
{
	struct hashlb_config *c = load_ok("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
					  "    backends:\n      - name: a\n"
					  "        address: db1.example:5432\n"
					  "      - name: b\n        address: 127.0.0.1:9\n");
	const struct hashlb_backend_cfg *a = &c->services[0].backends[0];
	const struct hashlb_backend_cfg *b = &c->services[0].backends[1];

	(void)state;
	assert_string_equal(a->address, "db1.example:5432");
	assert_int_equal(a->addr_len, 0);
	assert_int_equal(a->address_pos.line, 6);
	assert_int_equal(a->address_pos.column, 18);
	assert_int_not_equal(b->addr_len, 0);
	hashlb_config_free(c);
}

static int resolve_text(const char *yaml, struct hashlb_config **ret_c, struct hashlb_error *err)
{
	int r = hashlb_config_parse(yaml, strlen(yaml), "t.yaml", ret_c, err);

	assert_int_equal(r, 0);
	return hashlb_config_resolve(*ret_c, HASHLB_RESOLVE_TIMEOUT_MS, err);
}

/* each_address: refused on a numeric address, on a name too long for the names it
 * gives; resolved, one backend per address named NAME@ADDRESS with the entry's
 * settings, where it was written. */
static void test_each_address(void **state)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	const struct hashlb_backend_cfg *b;
	char yaml[1024], name[300];

	(void)state;
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: 127.0.0.1:9\n        each_address: true\n",
		     7, 23, "'each_address' is for an address that names a host");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: db:9\n        each_address: 3\n",
		     7, 23, "each_address");
	memset(name, 'n', 220);
	name[220] = '\0';
	snprintf(yaml, sizeof(yaml),
		 "services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		 "      - name: %s\n        address: db:9\n        each_address: true\n",
		 name);
	expect_error(yaml, 5, 15, "too long for 'each_address'");

	/* Not resolved yet: the entry as written. */
	c = load_ok(
		"services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		"      - name: pool\n        address: localhost:9\n        each_address: true\n");
	assert_int_equal(c->services[0].n_backends, 1);
	assert_true(c->services[0].backends[0].each_address);
	hashlb_config_free(c);

	memset(&err, 0, sizeof(err));
	assert_int_equal(resolve_text("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
				      "    source: 127.0.0.1\n    backends:\n"
				      "      - name: a\n        address: 127.0.0.2:9\n"
				      "      - name: pool\n        address: localhost:5432\n"
				      "        each_address: true\n        weight: 3\n"
				      "        max_connections: 7\n",
				      &c, &err),
			 0);
	assert_int_equal(c->services[0].n_backends, 2);
	assert_string_equal(c->services[0].backends[0].name, "a");
	assert_null(c->services[0].backends[0].from_name);
	b = &c->services[0].backends[1];
	assert_string_equal(b->name, "pool@127.0.0.1");
	assert_string_equal(b->from_name, "pool");
	assert_string_equal(b->address, "localhost:5432");
	assert_false(b->each_address);
	assert_int_equal(b->weight, 3);
	assert_int_equal(b->max_connections, 7);
	assert_int_equal(b->address_pos.line, 9);
	hashlb_config_free(c);

	/* A name it gives that another backend has: refused where the name is written. */
	memset(&err, 0, sizeof(err));
	assert_int_equal(resolve_text("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
				      "    source: 127.0.0.1\n    backends:\n"
				      "      - name: pool@127.0.0.1\n        address: 127.0.0.2:9\n"
				      "      - name: pool\n        address: localhost:5432\n"
				      "        each_address: true\n",
				      &c, &err),
			 -EINVAL);
	assert_int_equal(err.line, 9);
	assert_int_equal(err.column, 18);
	if (!strstr(err.msg, "backend 'pool' (each_address) gives the name 'pool@127.0.0.1'"))
		fail_msg("got: %s", err.msg);
	hashlb_config_free(c);
}

/* "localhost" is in this machine's /etc/hosts: resolved from files, no DNS asked. */
static void test_resolve_localhost(void **state)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	char text[HASHLB_ADDR_STRLEN];
	const struct hashlb_backend_cfg *b;

	(void)state;
	memset(&err, 0, sizeof(err));
	assert_int_equal(resolve_text("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
				      "    backends:\n      - name: a\n"
				      "        address: localhost:5432\n"
				      "      - name: b\n        address: 127.0.0.2:9\n",
				      &c, &err),
			 0);
	b = &c->services[0].backends[0];
	assert_true(b->addr_len > 0);
	hashlb_addr_format(&b->addr, text, sizeof(text));
	if (strcmp(text, "127.0.0.1:5432") != 0 && strcmp(text, "[::1]:5432") != 0)
		fail_msg("localhost:5432 resolved to %s", text);
	assert_string_equal(c->services[0].backends[0].address, "localhost:5432");
	hashlb_addr_format(&c->services[0].backends[1].addr, text, sizeof(text));
	assert_string_equal(text, "127.0.0.2:9"); /* a numeric one is left as it is */
	hashlb_config_free(c);

	/* With an IPv4 source, the name's IPv4 address. */
	assert_int_equal(resolve_text("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
				      "    source: 127.0.0.1\n"
				      "    backends:\n      - name: a\n"
				      "        address: localhost:5432\n",
				      &c, &err),
			 0);
	hashlb_addr_format(&c->services[0].backends[0].addr, text, sizeof(text));
	assert_string_equal(text, "127.0.0.1:5432");
	hashlb_config_free(c);

	/* Resolved to the service itself: the loop is refused where the name is written. */
	memset(&err, 0, sizeof(err));
	assert_int_equal(resolve_text("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
				      "    source: 127.0.0.1\n"
				      "    backends:\n      - name: a\n"
				      "        address: 127.0.0.1:81\n"
				      "      - name: b\n"
				      "        address: localhost:80\n",
				      &c, &err),
			 -EINVAL);
	assert_int_equal(err.line, 9);
	assert_int_equal(err.column, 18);
	assert_string_equal(err.file, "t.yaml");
	if (!strstr(err.msg, "backend 'b' at localhost:80 is service 'web' itself (listen "
			     "127.0.0.1:80): connections would loop (the name resolved to "
			     "127.0.0.1:80)"))
		fail_msg("message: %s", err.msg);
	hashlb_config_free(c);

	/* Resolved to another service that forwards back: the ring is refused too. */
	memset(&err, 0, sizeof(err));
	assert_int_equal(resolve_text("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
				      "    source: 127.0.0.1\n"
				      "    backends:\n      - name: a\n"
				      "        address: localhost:81\n"
				      "  - name: api\n    listen: 127.0.0.1:81\n"
				      "    backends:\n      - name: b\n"
				      "        address: 127.0.0.1:80\n",
				      &c, &err),
			 -EINVAL);
	assert_int_equal(err.line, 12);
	assert_int_equal(err.column, 18);
	if (!strstr(err.msg, "backend 'b' at 127.0.0.1:80 is service 'web' (listen "
			     "127.0.0.1:80), which forwards back to service 'api': connections "
			     "would loop (web -> api -> web)"))
		fail_msg("message: %s", err.msg);
	/* not a name's failure (HASHLB_ERR_CONFIG): a round of resolve_every logged it as
	 * "names not resolved", though each had resolved and the ring was refused */
	assert_int_equal(err.reason, HASHLB_ERR_LOOP);
	hashlb_config_free(c);

	/* Resolved to the unspecified address (0x0 is a name getaddrinfo() reads as
	 * 0.0.0.0): refused as 0.0.0.0 written is. */
	c = NULL;
	memset(&err, 0, sizeof(err));
	assert_int_equal(resolve_text("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
				      "    backends:\n      - name: a\n"
				      "        address: 0x0:81\n",
				      &c, &err),
			 -EINVAL);
	assert_int_equal(err.line, 6);
	if (!strstr(err.msg, "backend 'a' at 0x0:81 is the unspecified address, which a connect "
			     "takes for this host: write 127.0.0.1 for this host, or the backend's "
			     "own address (the name resolved to 0.0.0.0:81)"))
		fail_msg("message: %s", err.msg);
	hashlb_config_free(c);
}

static void test_client_lists(void **state)
{
	struct hashlb_config *c =
		load_ok(MINIMAL "    allow_clients: [10.0.0.0/8, \"2001:db8::/32\"]\n"
				"    deny_clients: [10.1.2.3]\n");
	const struct hashlb_service_cfg *s = &c->services[0];

	(void)state;
	assert_int_equal(s->n_allow_clients, 2);
	assert_int_equal(s->allow_clients[0].len, 8);
	assert_int_equal(s->allow_clients[1].family, AF_INET6);
	assert_int_equal(s->n_deny_clients, 1);
	assert_int_equal(s->deny_clients[0].len, 32);
	hashlb_config_free(c);
	expect_error(MINIMAL "    deny_clients: [10.0.0.1/8]\n", 7, 20, "network's first address");
	expect_error(MINIMAL "    allow_clients: []\n", 7, 20, "1..4096");
	c = load_ok(MINIMAL "    max_connections_per_client: 12\n");
	assert_int_equal(c->services[0].max_connections_per_client, 12);
	hashlb_config_free(c);
	expect_error(MINIMAL "    steering: kernel\n    interface: lo\n"
			     "    max_connections_per_client: 5\n",
		     9, 33, "'max_connections_per_client' needs steering: userspace");
	expect_error(MINIMAL
		     "    steering: kernel\n    interface: lo\n    allow_clients: [10.0.0.0/8]\n",
		     9, 20, "'allow_clients' needs steering: userspace");
	/* Applied per connection by the forwarder: the kernel path would ignore them. */
	expect_error(MINIMAL "    steering: kernel\n    interface: lo\n    max_connections: 5\n", 9,
		     22, "'max_connections' needs steering: userspace");
	expect_error(MINIMAL "    steering: kernel\n    interface: lo\n    slow_start: 5s\n", 9, 17,
		     "'slow_start' needs steering: userspace");
	expect_error(MINIMAL "    steering: kernel\n    interface: lo\n    balance_factor: 1.5\n",
		     9, 21, "'balance_factor' needs steering: userspace");
	expect_error("services:\n  - name: s\n    listen: 127.0.0.1:1\n    steering: kernel\n"
		     "    interface: lo\n    backends:\n      - name: a\n"
		     "        address: 127.0.0.1:2\n        max_connections: 3\n",
		     9, 26, "'max_connections' needs steering: userspace");
	/* 0 is what the kernel path does anyway: accepted */
	c = load_ok(MINIMAL "    steering: kernel\n    interface: lo\n    max_connections: 0\n"
			    "    slow_start: 0\n    balance_factor: 0\n");
	hashlb_config_free(c);
	/* The listen address is the kernel path's VIP: packets are matched by their destination,
	 * which a wildcard never is. Before, such a service loaded, was attached and steered
	 * nothing. */
	expect_error(
		"services:\n  - {name: s, listen: 0.0.0.0:80, steering: kernel, interface: lo,\n"
		"     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n",
		2, 23,
		"steering: kernel needs a listen address that clients connect to (the "
		"VIP), not a wildcard address");
	expect_error(
		"services:\n  - {name: s, listen: \"[::]:80\", steering: kernel, interface: lo,\n"
		"     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n",
		2, 23, "not a wildcard address");
}

/* The backup takes no client while a backend that is not one can take some. */
static void test_backup(void **state)
{
	static const struct {
		const char *a_extra; /* backend a's state or weight */
		bool backup_down;
	} cases[] = {
		{ "", true },
		{ "        state: drain\n", false },
		{ "        state: maint\n", false },
		{ "        weight: 0\n", false },
	};
	char yaml[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hashlb_config *c;
		struct hashlb_table *t = NULL;
		struct hashlb_error err;

		snprintf(yaml, sizeof(yaml),
			 "services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
			 "      - name: a\n        address: 127.0.0.1:9001\n%s"
			 "      - name: b\n        address: 127.0.0.1:9002\n        backup: true\n",
			 cases[i].a_extra);
		c = load_ok(yaml);
		assert_true(c->services[0].backends[1].backup);
		assert_false(c->services[0].backends[0].backup);
		assert_int_equal(hashlb_service_cfg_build_table(&c->services[0], NULL, &t, &err),
				 0);
		assert_int_equal(hashlb_table_backend_down(t, 1), cases[i].backup_down);
		hashlb_table_free(t);
		hashlb_config_free(c);
	}
	expect_error(MINIMAL "        backup: maybe\n", 7, 17, "'backup'");

	/* close_on_return: a backup's, off by default, userspace only */
	struct hashlb_config *c =
		load_ok(MINIMAL "        backup: true\n        close_on_return: true\n");
	assert_true(c->services[0].backends[0].close_on_return);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "        backup: true\n");
	assert_false(c->services[0].backends[0].close_on_return);
	hashlb_config_free(c);
	expect_error(MINIMAL "        close_on_return: true\n", 7, 26,
		     "'close_on_return' is for a backup (backup: true)");
	expect_error(MINIMAL "        backup: true\n        close_on_return: 2\n", 8, 26,
		     "'close_on_return' must be true or false");
	expect_error("services:\n  - name: s\n    listen: 127.0.0.1:1\n    steering: kernel\n"
		     "    interface: lo\n    backends:\n      - name: a\n        address: "
		     "127.0.0.1:2\n        backup: true\n        close_on_return: true\n",
		     10, 26, "'close_on_return' needs steering: userspace");
}

static void test_resolve_every(void **state)
{
	static const char named[] = "resolve_every: 30s\n" MINIMAL "      - name: b\n"
				    "        address: db:9002\n";
	struct hashlb_config *c = load_ok(MINIMAL);

	(void)state;
	assert_int_equal(c->resolve_every_ms, 0); /* off unless asked */
	assert_null(c->text); /* nothing to parse again */
	hashlb_config_free(c);
	c = load_ok("resolve_every: 30s\n" MINIMAL);
	assert_int_equal(c->resolve_every_ms, 30000);
	assert_null(c->text); /* no host name to resolve again */
	hashlb_config_free(c);
	c = load_ok(named);
	assert_true(hashlb_config_names_hosts(c));
	assert_int_equal(c->text_len, strlen(named));
	assert_string_equal(c->text, named); /* kept, to be parsed again */
	hashlb_config_free(c);
	expect_error("resolve_every: 500ms\n" MINIMAL, 1, 16,
		     "'resolve_every' 500ms is shorter than 1s (0 = off)");
	expect_error("resolve_every: 25h\n" MINIMAL, 1, 16, "out of range");
}

static void test_addr_format(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char text[HASHLB_ADDR_STRLEN];

	(void)state;
	assert_int_equal(hashlb_addr_parse("10.1.2.3:443", false, &ss, &len), 0);
	hashlb_addr_format(&ss, text, sizeof(text));
	assert_string_equal(text, "10.1.2.3:443");
	assert_int_equal(hashlb_addr_parse("[2001:db8::1]:65535", false, &ss, &len), 0);
	hashlb_addr_format(&ss, text, sizeof(text));
	assert_string_equal(text, "[2001:db8::1]:65535");
	memset(&ss, 0, sizeof(ss));
	hashlb_addr_format(&ss, text, sizeof(text));
	assert_string_equal(text, "-");
}

/* The idle timeout, in ms, of a service that writes it <text>. */
static uint32_t idle_timeout_of(const char *text)
{
	char yaml[256];
	struct hashlb_config *c;
	uint32_t ms;

	snprintf(yaml, sizeof(yaml),
		 "services: [{name: web, listen: 127.0.0.1:80, timeouts: {idle: %s},"
		 " backends: [{name: a, address: 127.0.0.1:81}]}]\n",
		 text);
	c = load_ok(yaml);
	ms = c->services[0].idle_timeout_ms;
	hashlb_config_free(c);
	return ms;
}

/* A duration is printed in the largest unit that writes it exactly, in a form the config
 * takes back to the same value: what hashlb check prints of each. */
static void test_duration_format(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "300000", "5m" }, { "5m", "5m" }, { "1500ms", "1500ms" }, { "90s", "90s" },
		{ "3600s", "1h" },  { "0", "0ms" }, { "61000", "61s" },	    { "120m", "2h" }
	};
	char text[HASHLB_DURATION_STRLEN];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t ms = idle_timeout_of(cases[i].in);

		hashlb_duration_format(ms, text, sizeof(text));
		assert_string_equal(text, cases[i].out);
		assert_int_equal(idle_timeout_of(text), ms);
	}
}

/* Sizes for people (the tables' memory, table_memory): whole where they are a whole unit, as
 * the default 1 GiB ("1024.0 MiB" before), else to one decimal, cut, not rounded: a byte
 * short of 1 MiB is no "1024.0 KiB" (a unit's worth of the one below), and tables a byte
 * short of a table_memory of 1 GiB do not read as "1.0 GiB" held of it; bytes under 1 KiB. */
static void test_bytes_format(void **state)
{
	static const struct {
		uint64_t in;
		const char *out;
	} cases[] = { { 0, "0 bytes" },
		      { 1023, "1023 bytes" },
		      { 1024, "1 KiB" },
		      { 393570, "384.3 KiB" },
		      { 1u << 20, "1 MiB" },
		      { 1ull << 30, "1 GiB" },
		      { 1536ull << 20, "1.5 GiB" },
		      { 1000ull << 20, "1000 MiB" },
		      { 2ull << 40, "2 TiB" },
		      { (1u << 20) - 1, "1023.9 KiB" },
		      { 1025, "1.0 KiB" },
		      { (1ull << 30) - 1, "1023.9 MiB" },
		      { (1ull << 40) - 1, "1023.9 GiB" },
		      { 1996, "1.9 KiB" },
		      { UINT64_MAX, "16777215.9 TiB" } };
	char text[HASHLB_BYTES_STRLEN];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		hashlb_bytes_format(cases[i].in, text, sizeof(text));
		assert_string_equal(text, cases[i].out);
	}
}

static void test_addresses(void **state)
{
	expect_error("services:\n  - name: web\n    listen: localhost:80\n", 3, 13,
		     "'localhost' is not a numeric IPv4 address (host names are not resolved here");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1\n", 3, 13, "missing ':PORT'");
	/* a port alone, as nginx's "listen 8080": the address is what is missing (it said
	 * "missing ':PORT'" of a port) */
	expect_error("services:\n  - name: web\n    listen: 8080\n", 3, 13,
		     "'8080' is not a valid address: a port alone: write ADDR:8080, as "
		     "127.0.0.1:8080");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:1\n    backends:\n"
		     "      - {name: a, address: 80}\n",
		     5, 28,
		     "'80' is not a valid address: a port alone: write ADDR:80, as 127.0.0.1:80");
	expect_error("services:\n  - name: web\n    listen: \"::1:80\"\n", 3, 13,
		     "an IPv6 address must be written in brackets");
	/* a URL, as an upstream is written elsewhere: it was blamed on IPv6 brackets */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:1\n    backends:\n"
		     "      - {name: a, address: \"http://10.0.0.1:8080\"}\n",
		     5, 28,
		     "'http://10.0.0.1:8080' is not a valid address: a URL: write it without "
		     "'http://', as HOST:PORT");
	expect_error("services:\n  - name: web\n    listen: \"tcp://0.0.0.0:80\"\n", 3, 13,
		     "a URL: write it without 'tcp://', as ADDR:PORT");
	expect_error("services:\n  - name: web\n    listen: \"[::1]\"\n", 3, 13,
		     "missing ':PORT' after the IPv6");
	expect_error("services:\n  - name: web\n    listen: \"[::g]:80\"\n", 3, 13,
		     "'::g' is not a numeric IPv6");
	/* a link-local address with its zone is numeric: the zone is what is refused */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: \"[fe80::1%eth0]:80\"\n",
		     6, 18,
		     "'fe80::1%eth0' has a zone ('%' and an interface): zones are not supported");
	/* and without it, it is no address a socket takes (EINVAL): refused as well */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: \"[fe80::1]:80\"\n",
		     6, 18, "'[fe80::1]:80' is a link-local address, usable only with a zone");
	/* nor does a multicast or broadcast address: every connect fails (ENETUNREACH), the
	 * backend down for good, and check said nothing; nor the unspecified address, which
	 * a connect takes for this host, as a backend is almost never meant (a listen
	 * address copied): it was accepted */
	static const char group_msg[] =
		"is a multicast or broadcast address: no TCP connect reaches it";
	static const char any_msg[] = "is the unspecified address, which a connect takes for "
				      "this host: write 127.0.0.1 for this host, or the backend's "
				      "own address";
	static const struct {
		const char *addr, *want;
	} unreachable[] = {
		{ "224.0.0.1:80", group_msg },
		{ "239.1.2.3:80", group_msg },
		{ "255.255.255.255:80", group_msg },
		{ "\"[ff02::1]:80\"", group_msg },
		{ "\"[::ffff:224.0.0.1]:80\"", group_msg },
		{ "0.0.0.0:80", any_msg },
		{ "\"[::ffff:0.0.0.0]:80\"", any_msg },
		{ "\"[::]:80\"", "is the unspecified address, which a connect takes for this host: "
				 "write [::1] for this host" },
	};
	for (size_t i = 0; i < sizeof(unreachable) / sizeof(unreachable[0]); i++) {
		char yaml[256];

		snprintf(yaml, sizeof(yaml),
			 "services:\n  - name: web\n    listen: 127.0.0.1:81\n    backends:\n"
			 "      - name: a\n        address: %s\n",
			 unreachable[i].addr);
		expect_error(yaml, 6, 18, unreachable[i].want);
	}
	expect_error("services:\n  - name: web\n    listen: \"[febf::1]:80\"\n", 3, 13,
		     "'listen': '[febf::1]:80' is a link-local address");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    source: fe80::2\n", 4,
		     13, "'source': 'fe80::2' is a link-local address");
	expect_error(
		"admin: \"[fe80::1]:9901\"\nservices:\n  - name: web\n    listen: 127.0.0.1:80\n",
		1, 8, "'admin': '[fe80::1]:9901' is a link-local address");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:65536\n", 3, 13,
		     "port 65536 is out of range 0..65535");
	expect_error("services:\n  - name: web\n    listen: 1.2.3:80\n", 3, 13,
		     "not a numeric IPv4");
	/* the port is what is wrong, not the address (which was said to be) */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:000080\n", 3, 13,
		     "'127.0.0.1:000080' is not a valid address: port 000080 has more than 5 "
		     "digits");
	expect_error("services:\n  - name: web\n    listen: \"[::1]:0000443\"\n", 3, 13,
		     "port 0000443 has more than 5 digits");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: db1:000080\n",
		     6, 18, "port 000080 has more than 5 digits");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: 127.0.0.1:0\n",
		     6, 18, "port 0 is out of range 1..65535");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: 127.0.0.1:http\n",
		     6, 18, "the port must be a number");
	/* a backend's address may name a host; a listen, source or admin may not */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: bad_name:80\n",
		     6, 18, "'bad_name' is neither a numeric IPv4 address nor a host name");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: 10.0.0.300:80\n",
		     6, 18, "'10.0.0.300' is neither a numeric IPv4 address nor a host name");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: db1:0\n",
		     6, 18, "port 0 is out of range 1..65535");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: db1\n",
		     6, 18, "missing ':PORT'");
	expect_error("admin: 127.0.0.1\n" MINIMAL, 1, 8, "'admin'");
	/* the one condition it fails, not both ("must be absolute and shorter than 108 bytes") */
	expect_error("admin: unix:relative.sock\n" MINIMAL, 1, 8,
		     "'admin': the Unix socket path 'relative.sock' is relative: it must be "
		     "absolute (unix:/PATH)");
	/* a socket path without its unix: said "missing ':PORT'" */
	expect_error("admin: /run/hashlb/admin.sock\n" MINIMAL, 1, 8,
		     "'admin': '/run/hashlb/admin.sock' is a path: a Unix socket is written "
		     "unix:/run/hashlb/admin.sock");
	/* and no path at all is said so, not "the path '' is relative" */
	expect_error("admin: \"unix:\"\n" MINIMAL, 1, 8,
		     "'admin': 'unix:' names no socket path: write unix:/PATH");
	{
		char yaml[256];

		snprintf(yaml, sizeof(yaml), "admin: unix:/%0120d\n" MINIMAL, 0);
		expect_error(yaml, 1, 8,
			     "'admin': the Unix socket path has 121 bytes: it must be shorter "
			     "than 108");
	}
	/* ":PORT" (nginx's, Go's every address): what to write, not "'' is not a numeric IPv4
	 * address" */
	expect_error("services:\n  - name: web\n    listen: :26100\n", 3, 13,
		     "':26100' is not a valid address: no address before ':26100': write one, as "
		     "127.0.0.1:26100, or 0.0.0.0:26100 for every IPv4 address, [::]:26100 for "
		     "every address (IPv4 too)");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: :80\n",
		     6, 18,
		     "':80' is not a valid address: no host before ':80': write one, as "
		     "127.0.0.1:80");
}

/* --- duplicates and the core build --------------------------------------- */

/* <yaml> loads, with no warning. */
static void assert_no_warning(const char *yaml)
{
	struct hashlb_config *c = load_ok(yaml);
	struct hashlb_error w[8];

	assert_int_equal(hashlb_config_warnings(c, w, 8), 0);
	hashlb_config_free(c);
}

/*
 * Two backends of a service at one address load (a weight written twice, two names of a DNS
 * answer meeting) but are said, at the later one's address, naming both; an IPv4-mapped
 * address is the IPv4 address it maps. Another port, or another service, is another backend.
 */
static void test_shared_address_warned(void **state)
{
	struct hashlb_error w[4];
	struct hashlb_config *c;

	(void)state;
	c = load_ok("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		    "      - {name: a, address: \"127.0.0.1:1\"}\n"
		    "      - {name: b, address: \"127.0.0.1:2\"}\n"
		    "      - {name: c, address: \"[::ffff:127.0.0.1]:1\"}\n"
		    "      - {name: d, address: \"127.0.0.1:1\"}\n"
		    "  - name: api\n    listen: 127.0.0.1:81\n    backends:\n"
		    "      - {name: a, address: \"127.0.0.1:1\"}\n"
		    "      - {name: b, address: \"[::1]:2\"}\n"
		    "      - {name: c, address: \"[0::1]:2\"}\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 3);
	assert_string_equal(w[0].file, "t.yaml");
	assert_int_equal(w[0].line, 7);
	assert_int_equal(w[0].column, 28);
	assert_string_equal(w[0].msg,
			    "service 'web': backend 'c' has the address of backend 'a' (line 5, "
			    "column 28), 127.0.0.1:1: that host takes both names' shares; to give "
			    "it more, write it once with a weight");
	assert_int_equal(w[1].line, 8);
	assert_non_null(strstr(w[1].msg, "backend 'd' has the address of backend 'a' (line 5"));
	assert_int_equal(w[2].line, 14);
	assert_non_null(strstr(w[2].msg, "service 'api': backend 'c' has the address of "
					 "backend 'b' (line 13, column 28), [::1]:2"));
	/* <max> bounds what is filled, not what is counted */
	assert_int_equal(hashlb_config_warnings(c, w, 1), 3);
	hashlb_config_free(c);

	assert_no_warning(MINIMAL "      - name: b\n        address: 127.0.0.1:9002\n");

	/* Not a backend of weight 0 (a rename: the new name added, the old one weighed 0), nor a
	 * backup beside one that is none (it serves only while the other cannot); two backups
	 * do share. */
	c = load_ok("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		    "      - {name: a, address: \"127.0.0.1:1\", weight: 0}\n"
		    "      - {name: b, address: \"127.0.0.1:1\"}\n"
		    "      - {name: c, address: \"127.0.0.1:1\", backup: true}\n"
		    "      - {name: d, address: \"127.0.0.1:1\", backup: true}\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 1);
	assert_non_null(strstr(w[0].msg, "backend 'd' has the address of backend 'c' (line 7"));
	hashlb_config_free(c);
}

/*
 * A backend at the admin endpoint, behind a service that listens beyond loopback, opens the
 * endpoint (no authentication: drain, reload, upgrade) to every client of the service: said
 * at the backend's address (it loaded without a word). Not behind a loopback service, whose
 * clients reach the endpoint anyway, nor with the endpoint off or on a Unix socket.
 */
static void test_backend_at_admin_warned(void **state)
{
	struct hashlb_error w[4];
	struct hashlb_config *c;

	(void)state;
	c = load_ok("admin: 0.0.0.0:9901\nservices:\n"
		    "  - name: web\n    listen: 0.0.0.0:80\n    backends:\n"
		    "      - {name: a, address: \"127.0.0.1:1\"}\n"
		    "      - {name: m, address: \"127.0.0.2:9901\"}\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 1);
	assert_int_equal(w[0].line, 7);
	assert_int_equal(w[0].column, 28);
	assert_string_equal(w[0].msg,
			    "service 'web': backend 'm' at 127.0.0.2:9901 is the admin endpoint "
			    "(admin 0.0.0.0:9901), which takes no authentication: the service's "
			    "clients (listen 0.0.0.0:80) reach it, and can drain backends, reload "
			    "and upgrade");
	hashlb_config_free(c);
	/* the default address, behind a host's address */
	c = load_ok("services:\n  - name: web\n    listen: 192.0.2.1:80\n    backends:\n"
		    "      - {name: m, address: \"[::ffff:127.0.0.1]:9901\"}\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 1);
	hashlb_config_free(c);
	assert_no_warning("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
			  "      - {name: m, address: \"127.0.0.1:9901\"}\n");
	assert_no_warning("admin: off\nservices:\n  - name: web\n    listen: 0.0.0.0:80\n"
			  "    backends:\n      - {name: m, address: \"127.0.0.1:9901\"}\n");
	assert_no_warning("admin: 127.0.0.1:9901\nservices:\n  - name: web\n"
			  "    listen: 0.0.0.0:80\n    backends:\n"
			  "      - {name: m, address: \"127.0.0.2:9901\"}\n");
}

/*
 * health.passive_hold written with checks on holds nothing (the checks bring a backend back):
 * hashlb check warns of it, at the key. Not with checks off, where it is read, nor unwritten.
 */
static void test_passive_hold_with_checks_on_warns(void **state)
{
	struct hashlb_error w[4];
	struct hashlb_config *c;

	(void)state;
	c = load_ok(MINIMAL "    health:\n      interval: 1s\n      passive_hold: 5s\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 1);
	assert_int_equal(w[0].line, 9);
	assert_int_equal(w[0].column, 7); /* the key's */
	assert_non_null(strstr(w[0].msg, "service 'web': health.passive_hold holds a backend only "
					 "with checks off"));
	hashlb_config_free(c);
	assert_no_warning(MINIMAL "    health: {enabled: false, passive_hold: 5s}\n");
	assert_no_warning(MINIMAL "    health: {interval: 1s}\n");
}

/*
 * health.passive_hold written with passive off holds nothing either (no failed connect takes a
 * backend down): warned of at the key, checks on or off, a lone backend too. Not with passive on
 * and checks off, where it is read, a lone backend's included (a reload or a host name's answer
 * may give the service more).
 */
static void test_passive_hold_with_passive_off_warns(void **state)
{
	struct hashlb_error w[4];
	struct hashlb_config *c;

	(void)state;
	c = load_ok(MINIMAL "      - {name: b, address: \"127.0.0.1:9002\"}\n"
			    "    health:\n      enabled: false\n      passive: false\n"
			    "      passive_hold: 5s\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 1);
	assert_int_equal(w[0].line, 11);
	assert_int_equal(w[0].column, 7); /* the key's */
	assert_non_null(strstr(w[0].msg, "service 'web': health.passive_hold holds a backend only "
					 "with passive on; with health.passive: false"));
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    health: {enabled: false, passive: false, passive_hold: 5s}\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 1);
	assert_non_null(strstr(w[0].msg, "with passive on"));
	hashlb_config_free(c);
	assert_no_warning(MINIMAL
			  "      - {name: b, address: \"127.0.0.1:9002\"}\n"
			  "    health: {enabled: false, passive: true, passive_hold: 5s}\n");
}

/*
 * health.port, send and expect written with checks off are read by nothing (only a check
 * connects there or sends them; passive-only backends are tried again by clients): each is
 * warned of at its key. Not with checks on, where the checks use them.
 */
static void test_check_keys_with_checks_off_warn(void **state)
{
	struct hashlb_error w[4];
	struct hashlb_config *c;

	(void)state;
	c = load_ok(MINIMAL "    health:\n      enabled: false\n      port: 8008\n"
			    "      send: \"PING\\r\\n\"\n      expect: \"+PONG\"\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 3);
	assert_int_equal(w[0].line, 9);
	assert_int_equal(w[0].column, 7); /* the key's */
	assert_string_equal(w[0].msg,
			    "service 'web': health.port is used only by the health checks, "
			    "which are off (health.enabled: false): the setting does "
			    "nothing here");
	assert_int_equal(w[1].line, 10);
	assert_non_null(strstr(w[1].msg, "health.send is used only by the health checks"));
	assert_int_equal(w[2].line, 11);
	assert_non_null(strstr(w[2].msg, "health.expect is used only by the health checks"));
	hashlb_config_free(c);
	assert_no_warning(MINIMAL "    health: {port: 8008, send: \"PING\", expect: \"+PONG\"}\n");
	assert_no_warning(MINIMAL "    health: {enabled: false}\n");
}

/*
 * health.close_on_down: true with checks off and passive off never closes anything: no check
 * and no failed connect takes a backend down. Warned of at its key; not where a backend can go
 * down (checks on, or passive on, its default), nor when it is false.
 */
static void test_close_on_down_that_never_acts_warns(void **state)
{
	struct hashlb_error w[2];
	struct hashlb_config *c;

	(void)state;
	c = load_ok(MINIMAL "    health:\n      enabled: false\n      passive: false\n"
			    "      close_on_down: true\n");
	assert_int_equal(hashlb_config_warnings(c, w, 2), 1);
	assert_int_equal(w[0].line, 10);
	assert_int_equal(w[0].column, 7); /* the key's */
	assert_string_equal(w[0].msg,
			    "service 'web': health.close_on_down acts when a backend goes down, "
			    "which none does with checks off (health.enabled: false) and passive "
			    "off (health.passive: false): the setting does nothing here");
	hashlb_config_free(c);
	assert_no_warning(MINIMAL "    health: {enabled: false, close_on_down: true}\n");
	assert_no_warning(MINIMAL "    health: {passive: false, close_on_down: true}\n");
	assert_no_warning(MINIMAL "    health: {enabled: false, passive: false, "
				  "close_on_down: false}\n");
}

/*
 * A duration written as a number alone loads as milliseconds (old files keep loading) but is
 * warned of at its place, with what it was read as and how to write it: "connect: 5" meant
 * 5s more likely than 5ms. Seconds are suggested only where they are in range and a day at
 * most; 0 (0 in any unit) and a number with its unit say nothing; an anchor's value read
 * through two aliases is one warning, at the anchor; the warnings come in file order.
 */
static void test_bare_duration_warned(void **state)
{
	struct hashlb_error w[8];
	struct hashlb_config *c;

	(void)state;
	c = load_ok("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
		    "    health: {interval: 2000, timeout: 300ms}\n"
		    "    timeouts: &t {connect: 5, idle: 0, drain: 10s}\n"
		    "    backends:\n      - {name: a, address: \"127.0.0.1:1\"}\n"
		    "  - name: api\n    listen: 127.0.0.1:81\n    timeouts: *t\n"
		    "    slow_start: 300000\n"
		    "    backends:\n      - {name: a, address: \"127.0.0.1:1\"}\n"
		    "      - {name: b, address: \"127.0.0.1:1\"}\n");
	assert_int_equal(c->services[0].connect_timeout_ms, 5);
	assert_int_equal(c->services[1].slow_start_ms, 300000);
	assert_int_equal(hashlb_config_warnings(c, w, 8), 4);
	assert_string_equal(w[0].file, "t.yaml");
	assert_int_equal(w[0].line, 4);
	assert_int_equal(w[0].column, 24);
	/* 2000s (33m20s) is no likely meaning of 2000, a whole number of thousands */
	assert_string_equal(w[0].msg, "'interval' has no unit: a number alone counts milliseconds, "
				      "2000 read as 2s: write 2s to keep it");
	assert_int_equal(w[1].line, 5);
	assert_int_equal(w[1].column, 28);
	assert_string_equal(w[1].msg, "'connect' has no unit: a number alone counts milliseconds, "
				      "5 read as 5ms: write 5ms to keep it, or 5s");
	assert_int_equal(w[2].line, 11);
	assert_string_equal(w[2].msg,
			    "'slow_start' has no unit: a number alone counts milliseconds, "
			    "300000 read as 5m: write 5m to keep it");
	/* then the address shared, after them */
	assert_int_equal(w[3].line, 14);
	assert_non_null(strstr(w[3].msg, "backend 'b' has the address of backend 'a'"));
	hashlb_config_free(c);

	assert_no_warning(MINIMAL "    timeouts: {connect: 5s, idle: 0, queue: 250ms}\n");
}

/* A warning about a number alone suggests what is in range and plausible (bare_hints()). */
static void expect_bare_warning(const char *yaml, const char *msg)
{
	struct hashlb_error w[2];
	struct hashlb_config *c = load_ok(yaml);

	assert_int_equal(hashlb_config_warnings(c, w, 2), 1);
	assert_string_equal(w[0].msg, msg);
	hashlb_config_free(c);
}

/*
 * Every path that says how a number alone was read suggests only sane values: the
 * number in seconds where it is in range, a day at most, and no whole number of
 * thousands ("5", "300", "3600"; "1000" counts milliseconds), never "30000s"
 * (8h20m) for keepalive's "idle: 30000", which read as 30s and meant it; the number in
 * milliseconds where that is in range. The refusals that did not say a number alone
 * counts milliseconds (shorter than 1s, not whole seconds, shorter than the probes) say
 * so now.
 */
static void test_bare_duration_suggestions(void **state)
{
	(void)state;
	/* in range, warned */
	expect_bare_warning(MINIMAL "    keepalive: {idle: 30000}\n",
			    "'idle' has no unit: a number alone counts milliseconds, 30000 read as "
			    "30s: write 30s to keep it");
	expect_bare_warning(MINIMAL "    timeouts: {idle: 300}\n",
			    "'idle' has no unit: a number alone counts milliseconds, 300 read as "
			    "300ms: write 300ms to keep it, or 300s");
	expect_bare_warning(MINIMAL "    timeouts: {idle: 999}\n",
			    "'idle' has no unit: a number alone counts milliseconds, 999 read as "
			    "999ms: write 999ms to keep it, or 999s");
	expect_bare_warning(MINIMAL "    timeouts: {idle: 3600}\n",
			    "'idle' has no unit: a number alone counts milliseconds, 3600 read as "
			    "3600ms: write 3600ms to keep it, or 3600s");
	expect_bare_warning(MINIMAL "    timeouts: {idle: 1000}\n",
			    "'idle' has no unit: a number alone counts milliseconds, 1000 read as "
			    "1s: write 1s to keep it");
	/* 900s is past connect's range: not suggested */
	expect_bare_warning(
		MINIMAL "    timeouts: {connect: 900}\n",
		"'connect' has no unit: a number alone counts milliseconds, 900 read as "
		"900ms: write 900ms to keep it");
	/* a health check's timeout no longer than its interval: 5s suggested only where the
	 * interval takes it (it was under the default 2s too, and refused once written) */
	expect_bare_warning(MINIMAL "    health: {timeout: 5}\n",
			    "'timeout' has no unit: a number alone counts milliseconds, 5 read as "
			    "5ms: write 5ms to keep it");
	expect_bare_warning(MINIMAL "    health: {interval: 10s, timeout: 5}\n",
			    "'timeout' has no unit: a number alone counts milliseconds, 5 read as "
			    "5ms: write 5ms to keep it, or 5s");
	/* quoted: each suggestion in range, the seconds below 1000 only */
	expect_error(MINIMAL "    keepalive: {idle: \"30000\"}\n", 7, 23,
		     "'idle' \"30000\" has no unit: write 30000ms, or the number without quotes "
		     "(milliseconds)");
	/* each one the setting takes: the number without quotes, 30ms, is out of range;
	 * 1500ms is not whole seconds; resolve_every's 500ms is shorter than 1s (all three
	 * offered before, refused once written) */
	expect_error(MINIMAL "    keepalive: {idle: \"30\"}\n", 7, 23,
		     "'idle' \"30\" has no unit: write 30s");
	expect_error(MINIMAL "    keepalive: {idle: \"1500\"}\n", 7, 23,
		     "'idle' \"1500\" has no unit: write 1500s");
	expect_error("resolve_every: \"500\"\n" MINIMAL, 1, 16,
		     "'resolve_every' \"500\" has no unit: write 500s");
	/* the user_timeout past the probes (65s): 3000s, though a whole number of
	 * thousands, as nothing else is taken; none for 30 (30s is shorter too) */
	expect_error(MINIMAL "    keepalive: {idle: 5s, user_timeout: \"3000\"}\n", 7, 41,
		     "'user_timeout' \"3000\" has no unit: write 3000s");
	expect_error(MINIMAL "    keepalive: {idle: 5s, user_timeout: \"30\"}\n", 7, 41,
		     "'user_timeout' \"30\" has no unit, and neither 30ms nor 30s is in range "
		     "65s..32767s: write a duration with its unit");
	/* a health check's timeout no longer than its interval: 5s is longer than 2s (the
	 * default); 3000 is neither 3000ms nor 3000s (offered before: 5s, 3000ms) */
	expect_error(MINIMAL "    health: {timeout: \"5\"}\n", 7, 23,
		     "'timeout' \"5\" has no unit: write 5ms, or the number without quotes "
		     "(milliseconds)");
	expect_error(MINIMAL "    health: {interval: 10s, timeout: \"5\"}\n", 7, 38,
		     "'timeout' \"5\" has no unit: write 5ms, 5s, or the number without quotes "
		     "(milliseconds)");
	expect_error(MINIMAL "    health: {timeout: \"3000\"}\n", 7, 23,
		     "'timeout' \"3000\" has no unit, and neither 3000ms nor 3000s is in range "
		     "1ms..2s: write a duration with its unit");
	/* 0 out of range: neither 0ms nor 0s (offered before, both refused) */
	expect_error(MINIMAL "    timeouts: {connect: \"0\"}\n", 7, 25,
		     "'connect' \"0\" has no unit, and neither 0ms nor 0s is in range 1ms..10m: "
		     "write a duration with its unit");
	/* past 15 digits: the range, not Nms and Ns, both out of it (offered before) */
	expect_error(MINIMAL "    timeouts: {connect: \"9999999999999999\"}\n", 7, 25,
		     "'connect' \"9999999999999999\" has no unit, and neither 9999999999999999ms "
		     "nor 9999999999999999s is in range 1ms..10m: write a duration with its unit");
	expect_error(MINIMAL "    timeouts: {connect: \"99999999999999999999999\"}\n", 7, 25,
		     "'connect' \"99999999999999999999999\" has no unit, and neither "
		     "99999999999999999999999ms nor 99999999999999999999999s is in range 1ms..10m");
	expect_error(MINIMAL "    keepalive: {idle: \"0\"}\n", 7, 23,
		     "'idle' \"0\" has no unit, and neither 0ms nor 0s is whole seconds in range "
		     "1s..32767s: write a duration with its unit");
	/* 40500ms is in 1s..32767s, but not whole seconds: not said out of range, as it was */
	expect_error(
		MINIMAL "    keepalive: {idle: \"40500\"}\n", 7, 23,
		"'idle' \"40500\" has no unit, and neither 40500ms nor 40500s is whole seconds "
		"in range 1s..32767s: write a duration with its unit");
	expect_error(MINIMAL "    keepalive: {interval: \"32768\"}\n", 7, 27,
		     "'interval' \"32768\" has no unit, and neither 32768ms nor 32768s is whole "
		     "seconds in range 1s..32767s: write a duration with its unit");
	/* 0 is 0 in any unit */
	expect_error(
		"resolve_every: \"0\"\n" MINIMAL, 1, 16,
		"'resolve_every' \"0\" has no unit: write 0ms, 0s, or the number without quotes "
		"(milliseconds)");
	expect_error(MINIMAL "    timeouts: {drain: \"30\"}\n", 7, 23,
		     "'drain' \"30\" has no unit: write 30ms, 30s, or the number without quotes "
		     "(milliseconds)");
	/* out of range */
	expect_error(MINIMAL "    keepalive: {idle: 30}\n", 7, 23,
		     "'idle' 30 is out of range 1s..32767s: a number alone counts milliseconds, "
		     "30 read as 30ms: write 30s for seconds");
	expect_error(MINIMAL "    health: {interval: 5}\n", 7, 24,
		     "'interval' 5 is out of range 10ms..1h: a number alone counts milliseconds, "
		     "5 read as 5ms: write 5s for seconds");
	expect_error(MINIMAL "    keepalive: {idle: 40000000}\n", 7, 23,
		     "'idle' 40000000 is out of range 1s..32767s");
	/* refusals after the range */
	expect_error(MINIMAL "    keepalive: {idle: 1500}\n", 7, 23,
		     "keepalive 'idle' 1500 is not whole seconds (TCP counts them): a number "
		     "alone counts milliseconds, 1500 read as 1500ms");
	expect_error(MINIMAL "    keepalive: {idle: 5s, user_timeout: 300}\n", 7, 41,
		     "keepalive 'user_timeout' 300 is shorter than idle + interval x count (65s): "
		     "a quiet connection would end at its first unanswered probe: a number alone "
		     "counts milliseconds, 300 read as 300ms: write 300s for seconds");
	/* 30s is shorter too: not suggested */
	expect_error(MINIMAL "    keepalive: {idle: 5s, user_timeout: 30}\n", 7, 41,
		     "probe: a number alone counts milliseconds, 30 read as 30ms");
	expect_error(MINIMAL "    keepalive: {idle: 5s, user_timeout: 30000}\n", 7, 41,
		     "unanswered probe: a number alone counts milliseconds, 30000 read as 30000ms");
	expect_error("resolve_every: 30\n" MINIMAL, 1, 16,
		     "'resolve_every' 30 is shorter than 1s (0 = off): a number alone counts "
		     "milliseconds, 30 read as 30ms: write 30s for seconds");
}

/*
 * One anchored value read for two settings of one name (health's interval and
 * keepalive's) is warned of once for each, at the anchor, the key named with its
 * section, the second with the alias it is read through; before, one warning named
 * either, with that one's suggestions. Read through a second alias for the same
 * setting, it is still one warning.
 */
static void test_bare_duration_anchor_two_settings(void **state)
{
	struct hashlb_error w[4];
	struct hashlb_config *c;

	(void)state;
	c = load_ok("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
		    "    health: &h {interval: 5000}\n    keepalive: *h\n"
		    "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n"
		    "  - name: api\n    listen: 127.0.0.1:81\n    health: *h\n"
		    "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n");
	assert_int_equal(hashlb_config_warnings(c, w, 4), 2);
	assert_int_equal(w[0].line, 4);
	assert_int_equal(w[0].column, 27);
	assert_string_equal(w[0].msg, "'health.interval' (an anchor's value, read for another key "
				      "too) has no unit: a number alone counts milliseconds, 5000 "
				      "read as 5s: write 5s to keep it");
	assert_int_equal(w[1].line, 4);
	assert_int_equal(w[1].column, 27);
	assert_string_equal(w[1].msg, "'keepalive.interval' (an anchor's value, read through the "
				      "alias at line 5, column 16) has no unit: a number alone "
				      "counts milliseconds, 5000 read as 5s: write 5s to keep it");
	hashlb_config_free(c);
}

static void test_duplicates(void **state)
{
	expect_error(MINIMAL "      - name: a\n        address: 127.0.0.1:9002\n", 7, 15,
		     "duplicate backend name 'a' in service 'web' (first at line 5)");
	/* With several duplicates, the first one in file order is named. */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: a, address: \"127.0.0.1:1\"}\n"
		     "      - {name: b, address: \"127.0.0.1:2\"}\n"
		     "      - {name: c, address: \"127.0.0.1:3\"}\n"
		     "      - {name: b, address: \"127.0.0.1:4\"}\n"
		     "      - {name: a, address: \"127.0.0.1:5\"}\n",
		     8, 16, "duplicate backend name 'b' in service 'web' (first at line 6)");
	expect_error(MINIMAL "  - name: web\n    listen: 127.0.0.1:8081\n"
			     "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n",
		     7, 11, "duplicate service name 'web' (first at line 2)");
	expect_error(MINIMAL "  - name: api\n    listen: 127.0.0.1:8080\n"
			     "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n",
		     8, 13,
		     "listen address 127.0.0.1:8080 clashes with 127.0.0.1:8080 of service 'web'");
	/* The wildcard takes the port on every address of its family. */
	expect_error(MINIMAL "  - name: api\n    listen: 0.0.0.0:8080\n"
			     "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n",
		     8, 13, "clashes with");
	/* An IPv4-mapped address is the IPv4 address it maps; [::] is dual-stack. */
	expect_error(MINIMAL "  - name: api\n    listen: \"[::ffff:127.0.0.1]:8080\"\n"
			     "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n",
		     8, 13, "listen address [::ffff:127.0.0.1]:8080 clashes with 127.0.0.1:8080");
	expect_error(MINIMAL "  - name: api\n    listen: \"[::]:8080\"\n"
			     "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n",
		     8, 13, "clashes with 127.0.0.1:8080");
	/* Several clash: the first in the file is named. 0.0.0.0 takes every IPv4 address
	 * and [::], [::] every address; the name goes before the address of the same
	 * service; an earlier service goes before a later one, whatever they share. */
#define SVC(name, listen, more)                                                      \
	"  - {name: " name ", listen: \"" listen "\"" more ", backends: [{name: a, " \
	"address: \"10.0.0.1:1\"}]}\n"
	expect_error("services:\n" SVC("v6", "[::1]:80", "") SVC("x", "127.0.0.9:81", "")
			     SVC("b", "127.0.0.2:80", "") SVC("a", "127.0.0.1:80", "")
				     SVC("w", "0.0.0.0:80", ""),
		     6, 23,
		     "listen address 0.0.0.0:80 clashes with 127.0.0.2:80 of service 'b' (line 4)");
	expect_error("services:\n" SVC("v6", "[::1]:80", "") SVC("b", "127.0.0.2:80", "")
			     SVC("w", "[::]:80", ""),
		     4, 23,
		     "listen address [::]:80 clashes with [::1]:80 of service 'v6' (line 2)");
	expect_error("services:\n" SVC("v6", "[::1]:80", "") SVC("w", "[::]:80", ""), 3, 23,
		     "clashes with [::1]:80 of service 'v6'");
	expect_error("services:\n" SVC("v6", "[::]:80", "") SVC("w", "0.0.0.0:80", ""), 3, 23,
		     "listen address 0.0.0.0:80 clashes with [::]:80 of service 'v6' (line 2)");
	expect_error("services:\n" SVC("a", "0.0.0.0:80", "") SVC("w", "[::ffff:127.0.0.1]:80", ""),
		     3, 23, "clashes with 0.0.0.0:80 of service 'a' (line 2)");
	hashlb_config_free(load_ok("services:\n" SVC("a", "0.0.0.0:80", "") SVC(
		"b", "[2001:db8::1]:80", "") SVC("c", "0.0.0.0:0", "") SVC("d", "[::]:0", "")
					   SVC("e", "127.0.0.1:0", "")));
	expect_error("services:\n" SVC("a", "127.0.0.1:80", "") SVC("b", "127.0.0.2:80", "")
			     SVC("a", "127.0.0.1:80", ""),
		     4, 12, "duplicate service name 'a' (first at line 2)");
	expect_error("services:\n" SVC("a", "127.0.0.1:80", "") SVC("b", "127.0.0.2:80", "")
			     SVC("b", "127.0.0.1:80", ""),
		     4, 23, "clashes with 127.0.0.1:80 of service 'a' (line 2)");
	/* two kernel-steered services on one interface share its program: only
	 * the listen address (the VIP) clashes */
	expect_error(
		"services:\n" SVC("a", "127.0.0.1:80", ", steering: kernel, interface: lo")
			SVC("b", "127.0.0.2:80", "")
				SVC("c", "127.0.0.2:80", ", steering: kernel, interface: lo"),
		4, 23,
		"listen address 127.0.0.2:80 clashes with 127.0.0.2:80 of service 'b' (line 3)");
	hashlb_config_free(load_ok(
		"services:\n" SVC("a", "127.0.0.1:80", ", steering: kernel, interface: lo")
			SVC("b", "127.0.0.2:80", ", interface: lo")
				SVC("c", "127.0.0.3:80", ", steering: kernel, interface: lo")));
#undef SVC
	hashlb_config_free(load_ok(MINIMAL
				   "  - name: api\n    listen: \"[::1]:8080\"\n"
				   "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n"));
	/* Where the admin endpoint listens, the kernel would share the clients out. */
	expect_error("admin: 127.0.0.1:8080\n" MINIMAL, 4, 13,
		     "listen address 127.0.0.1:8080 clashes with the admin endpoint's "
		     "127.0.0.1:8080: clients would reach the admin endpoint");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:9901\n    backends:\n"
		     "      - {name: a, address: \"127.0.0.1:1\"}\n",
		     3, 13, "admin endpoint's 127.0.0.1:9901 (the default)");
	{
		/* hashlb run --admin elsewhere: the file's default is not in force */
		static const char yaml[] =
			"services:\n  - name: web\n    listen: 127.0.0.1:9901\n"
			"    backends:\n      - {name: a, address: \"127.0.0.1:1\"}\n";
		struct hashlb_config *c = NULL;
		struct hashlb_error err = { 0 };

		assert_int_equal(hashlb_config_parse_flags(yaml, strlen(yaml), "t.yaml",
							   HASHLB_LOAD_ADMIN_GIVEN, &c, &err),
				 0);
		hashlb_config_free(c);
	}
	hashlb_config_free(load_ok("admin: unix:/run/x.sock\n" MINIMAL));
	/* Several kernel-steered services on one interface, a table each in its program (before,
	 * refused: one per interface); one VIP twice is still an error, where the second is. */
	hashlb_config_free(load_ok("services:\n"
				   "  - {name: web, listen: 127.0.0.1:80, steering: kernel, "
				   "interface: lo,\n"
				   "     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n"
				   "  - {name: api, listen: 127.0.0.1:81, steering: kernel, "
				   "interface: lo,\n"
				   "     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n"
				   "  - {name: api6, listen: \"[::1]:81\", steering: kernel, "
				   "interface: lo,\n"
				   "     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n"));
	expect_error("services:\n"
		     "  - {name: web, listen: 127.0.0.1:80, steering: kernel, interface: lo,\n"
		     "     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n"
		     "  - {name: api, listen: 127.0.0.1:80, steering: kernel, interface: lo,\n"
		     "     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n",
		     4, 25,
		     "listen address 127.0.0.1:80 clashes with 127.0.0.1:80 of service 'web' "
		     "(line 2)");
	hashlb_config_free(load_ok("services:\n"
				   "  - {name: web, listen: 127.0.0.1:80, steering: kernel, "
				   "interface: lo,\n"
				   "     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n"
				   "  - {name: api, listen: 127.0.0.1:81, steering: kernel, "
				   "interface: eth0,\n"
				   "     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n"
				   "  - {name: ui, listen: 127.0.0.1:82, interface: lo,\n"
				   "     backends: [{name: a, address: \"127.0.0.1:1\"}]}\n"));
}

static void test_loop(void **state)
{
	/* A backend that is the service's own listen address forwards to itself. */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: a, address: \"127.0.0.1:80\"}\n",
		     5, 28, "backend 'a' at 127.0.0.1:80 is service 'web' itself");
	expect_error("services:\n  - name: web\n    listen: \"[::]:80\"\n    backends:\n"
		     "      - {name: a, address: \"[::1]:80\"}\n",
		     5, 28, "connections would loop");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: a, address: \"[::ffff:127.0.0.1]:80\"}\n",
		     5, 28, "connections would loop");
	/* The wildcard with another host on the same port is the usual set-up. */
	hashlb_config_free(
		load_ok("services:\n  - name: web\n    listen: 0.0.0.0:80\n    backends:\n"
			"      - {name: a, address: \"10.0.0.1:80\"}\n"));
	/* written IPv4-mapped, the same wildcard (it was taken for one address, looping) */
	hashlb_config_free(load_ok("services:\n  - name: web\n    listen: \"[::ffff:0.0.0.0]:80\"\n"
				   "    backends:\n      - {name: a, address: \"10.0.0.1:80\"}\n"));
	expect_error("services:\n  - name: web\n    listen: \"[::ffff:0.0.0.0]:80\"\n"
		     "    backends:\n      - {name: a, address: \"127.0.0.1:80\"}\n",
		     5, 28, "connections would loop");
}

/* Services that forward to one another in a ring: one client's connection opens the
 * next, and the next, until the fd limit (it filled the connection cap of every service
 * of the process; the config was taken). */
static void test_services_loop(void **state)
{
	expect_error("services:\n"
		     "  - {name: a, listen: 127.0.0.1:80, backends: [{name: x, address: "
		     "\"127.0.0.1:81\"}]}\n"
		     "  - {name: b, listen: 127.0.0.1:81, backends: [{name: y, address: "
		     "\"127.0.0.1:80\"}]}\n",
		     3, 67,
		     "backend 'y' at 127.0.0.1:80 is service 'a' (listen 127.0.0.1:80), which "
		     "forwards back to service 'b': connections would loop (a -> b -> a)");
	/* through a wildcard, a backend among others, and a service outside the ring */
	expect_error("services:\n"
		     "  - {name: in, listen: 127.0.0.1:79, backends: [{name: x, address: "
		     "\"127.0.0.1:80\"}]}\n"
		     "  - {name: a, listen: 127.0.0.1:80, backends: [{name: x, address: "
		     "\"127.0.0.2:81\"}]}\n"
		     "  - {name: b, listen: 0.0.0.0:81, backends: [{name: y, address: "
		     "\"127.0.0.1:82\"}]}\n"
		     "  - name: c\n    listen: \"[::]:82\"\n    backends:\n"
		     "      - {name: z, address: \"10.0.0.1:80\"}\n"
		     "      - {name: w, address: \"[::ffff:127.0.0.1]:80\"}\n",
		     9, 28, "connections would loop (a -> b -> c -> a)");
	/* closed by a backend list given by an alias, the anchor's in a service outside the
	 * ring: the alias is said (the error pointed at that other service alone) */
	expect_error("services:\n"
		     "  - {name: a, listen: 127.0.0.1:80, backends: &l [{name: x, address: "
		     "\"127.0.0.1:81\"}]}\n"
		     "  - {name: b, listen: 127.0.0.1:81, backends: [{name: y, address: "
		     "\"127.0.0.1:82\"}]}\n"
		     "  - {name: c, listen: 127.0.0.1:82, backends: *l}\n",
		     2, 70,
		     "connections would loop (b -> c -> b) (through the alias at line 4, "
		     "column 47)");
	/* A chain without a way back is served: one service in front of another. */
	hashlb_config_free(
		load_ok("services:\n"
			"  - {name: a, listen: 127.0.0.1:80, backends: [{name: x, "
			"address: \"127.0.0.1:81\"}]}\n"
			"  - {name: b, listen: 0.0.0.0:81, backends: [{name: y, address: "
			"\"10.0.0.1:80\"}, {name: z, address: \"127.0.0.1:82\"}]}\n"
			"  - {name: c, listen: 127.0.0.1:82, backends: [{name: y, "
			"address: \"10.0.0.1:81\"}]}\n"));
	/* A wildcard's port on another address may be another host's: no loop known. */
	hashlb_config_free(
		load_ok("services:\n"
			"  - {name: a, listen: 0.0.0.0:80, backends: [{name: x, address: "
			"\"10.0.0.1:81\"}]}\n"
			"  - {name: b, listen: 0.0.0.0:81, backends: [{name: y, address: "
			"\"10.0.0.2:80\"}]}\n"));
}

static void test_other_scheme_params(void **state)
{
	expect_error(MINIMAL "    vnodes: 100\n", 7, 5,
		     "'vnodes' applies to scheme ring, but this service uses maglev");
	expect_error(MINIMAL "    scheme: ring\n    table_size: 65537\n", 8, 5,
		     "'table_size' applies to scheme maglev, but this service uses ring");
}

static void test_core_errors(void **state)
{
	/* Maglev M must be at least the number of backends: the core says so, at table_size. */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    table_size: 3\n"
		     "    backends:\n"
		     "      - {name: a, address: \"127.0.0.1:1\"}\n"
		     "      - {name: b, address: \"127.0.0.1:2\"}\n"
		     "      - {name: c, address: \"127.0.0.1:3\"}\n"
		     "      - {name: d, address: \"127.0.0.1:4\"}\n",
		     4, 17, "service 'web': Maglev table size 3 is smaller than the 4 backends");
	/* No backend with a positive weight: at the first backend's weight, what to change. */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: a, address: \"127.0.0.1:1\", weight: 0}\n",
		     5, 51, "service 'web': the only backend has weight 0");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - name: a\n        address: 127.0.0.1:1\n        weight: 0\n"
		     "      - {name: b, address: \"127.0.0.1:2\", weight: 0}\n",
		     7, 17, "service 'web': all 2 backends have weight 0");
	/* A ring that would exceed the table memory cap: at vnodes, saying what makes its size
	 * and what the cap is (it said "table needs N bytes, above the cap of C" alone) */
	expect_error(
		"services:\n  - name: web\n    listen: 127.0.0.1:80\n    scheme: ring\n    vnodes: 100000\n"
		"    backends:\n"
		"      - {name: a, address: \"127.0.0.1:1\", weight: 10000}\n"
		"      - {name: b, address: \"127.0.0.1:2\", weight: 10000}\n",
		5, 13,
		"service 'web': ring of 2000000000 points (vnodes 100000 x weights summed 20000) "
		"needs ");
	expect_error(
		"services:\n  - name: web\n    listen: 127.0.0.1:80\n    scheme: ring\n    vnodes: 100000\n"
		"    backends:\n"
		"      - {name: a, address: \"127.0.0.1:1\", weight: 10000}\n"
		"      - {name: b, address: \"127.0.0.1:2\", weight: 10000}\n",
		5, 13, "above the cap of 268435456 (256 MiB, the most a service's table may take)");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: \"has space\", address: \"127.0.0.1:1\"}\n",
		     5, 16, "backend name 'has space'");
	/* Nor "-", what the connection log (backend=-) and hashlb lookup write
	 * for no backend: one so named read as a client no backend served. */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: a, address: \"127.0.0.1:1\"}\n"
		     "      - {name: \"-\", address: \"127.0.0.1:2\"}\n",
		     6, 16, "backend name '-' must be");
	/* Nor a space or control character beyond ASCII, nor one that shows as
	 * nothing: "a\u00a0" and "a" would be two backends that read alike in
	 * every status, log line and metric. The message shows them escaped. */
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: a, address: \"127.0.0.1:1\"}\n"
		     "      - {name: \"a\xc2\xa0\", address: \"127.0.0.1:2\"}\n",
		     6, 16, "backend name 'a\\u00a0' must be");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: \"a\xe2\x80\x8b"
		     "b\", address: \"127.0.0.1:1\"}\n",
		     5, 16, "backend name 'a\\u200bb' must be");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: \"\\u202eab\", address: \"127.0.0.1:1\"}\n",
		     5, 16, "backend name '\\u202eab' must be");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:80\n    backends:\n"
		     "      - {name: \"a\\x85\", address: \"127.0.0.1:1\"}\n",
		     5, 16, "backend name 'a\\u0085' must be");
	/* letters beyond ASCII are names like any other */
	hashlb_config_free(
		load_ok("services:\n  - name: web\n    listen: 127.0.0.1:80\n"
			"    backends:\n      - {name: caf\xc3\xa9-\xe6\xbc\xa2, address: "
			"\"127.0.0.1:1\"}\n"));
	/* a key with an invisible character says so, not "unknown key 'scheme'" */
	expect_error(MINIMAL "    scheme\xe2\x80\x8b: ring\n", 7, 5,
		     "unknown key 'scheme\\u200b' in service");
	expect_error("services:\n  - name: \"web/1\"\n", 2, 11, "service name 'web/1'");
}

/* --- successful loads ------------------------------------------------------ */

static void test_defaults(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL);
	const struct hashlb_service_cfg *s = &c->services[0];
	const struct hashlb_backend_cfg *b = &s->backends[0];
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&s->listen_addr;

	assert_string_equal(c->path, "t.yaml");
	assert_int_equal(c->workers, 0);
	assert_string_equal(c->admin, "127.0.0.1:9901");
	assert_int_equal(c->admin_addr.ss_family, AF_INET);
	assert_int_equal(c->n_services, 1);
	assert_string_equal(s->name, "web");
	assert_string_equal(s->listen, "127.0.0.1:8080");
	assert_int_equal(s->listen_addr.ss_family, AF_INET);
	assert_int_equal(s->listen_addr_len, sizeof(struct sockaddr_in));
	assert_int_equal(ntohs(sin->sin_port), 8080);
	assert_int_equal(ntohl(sin->sin_addr.s_addr), 0x7f000001);
	assert_int_equal(s->table.scheme, HASHLB_SCHEME_MAGLEV);
	assert_int_equal(s->table.maglev_m, HASHLB_MAGLEV_M_DEFAULT);
	assert_int_equal(s->table.ring_v, HASHLB_RING_V_DEFAULT);
	assert_int_equal(s->table.seed, 0);
	assert_int_equal(s->table.max_bytes, HASHLB_TABLE_MEM_DEFAULT);
	assert_int_equal(s->key, HASHLB_KEY_SRC_IP);
	assert_int_equal(s->connect_timeout_ms, 3000);
	assert_int_equal(s->idle_timeout_ms, 300000);
	assert_int_equal(s->drain_timeout_ms, 30000);
	assert_int_equal(s->max_connections, 10000);
	assert_int_equal(s->connect_retries, 2);
	assert_int_equal(s->slow_start_ms, 0);
	assert_true(s->balance_factor == 0.0);
	assert_int_equal(s->steering, HASHLB_STEERING_USERSPACE);
	assert_null(s->steer_interface);
	assert_int_equal(s->steer_flows, 65536);
	assert_int_equal(s->proxy_protocol, HASHLB_PROXY_OFF);
	assert_true(s->health.enabled);
	assert_int_equal(s->health.interval_ms, 2000);
	assert_int_equal(s->health.timeout_ms, 1000);
	assert_int_equal(s->health.rise, 2);
	assert_int_equal(s->health.fall, 3);
	assert_int_equal(s->pos.line, 2);
	assert_int_equal(s->pos.column, 5);
	assert_int_equal(s->n_backends, 1);
	assert_string_equal(b->name, "a");
	assert_string_equal(b->address, "127.0.0.1:9001");
	assert_int_equal(b->addr_len, sizeof(struct sockaddr_in));
	assert_int_equal(b->weight, 1);
	assert_int_equal(b->admin, HASHLB_ADMIN_READY);
	assert_int_equal(b->pos.line, 5);
	assert_int_equal(b->pos.column, 9);
	hashlb_config_free(c);
}

/*
 * A mapping of settings whose keys are all commented out is null in YAML: read as the empty
 * mapping, the defaults ("health:" was refused: "'health' must be a mapping of its
 * settings ..., found nothing (null)"). What an empty mapping refuses, null refuses at the
 * same place. keepalive, off by default and turned on by a mapping, is not guessed: its null
 * stays refused (test_keepalive).
 */
static void test_null_settings_are_the_defaults(void **state)
{
	struct hashlb_config *d = load_ok(MINIMAL), *c;
	const struct hashlb_service_cfg *s;

	(void)state;
	c = load_ok(MINIMAL "    health:\n      # interval: 1s\n      # fall: 2\n"
			    "    timeouts: ~\n    hash_prefix: null\n"
			    "    max_connections_per_client: 4\n    client_prefix:\n");
	s = &c->services[0];
	assert_true(s->health.enabled);
	assert_int_equal(s->health.interval_ms, d->services[0].health.interval_ms);
	assert_int_equal(s->health.timeout_ms, d->services[0].health.timeout_ms);
	assert_int_equal(s->health.rise, d->services[0].health.rise);
	assert_int_equal(s->health.fall, d->services[0].health.fall);
	assert_int_equal(s->connect_timeout_ms, d->services[0].connect_timeout_ms);
	assert_int_equal(s->idle_timeout_ms, d->services[0].idle_timeout_ms);
	assert_int_equal(s->drain_timeout_ms, d->services[0].drain_timeout_ms);
	assert_true(hashlb_src_prefix_is_whole(&s->hash_prefix));
	assert_true(hashlb_src_prefix_is_whole(&s->client_prefix));
	hashlb_config_free(c);
	hashlb_config_free(d);
	/* as {} is: a hash_prefix means nothing to a key that hashes the port */
	expect_error(MINIMAL "    hash_key: 4-tuple\n    hash_prefix:\n", 8, 5, "hash_prefix");
	expect_error(MINIMAL "    hash_key: 4-tuple\n    hash_prefix: {}\n", 8, 5, "hash_prefix");
	/* and a client_prefix without the limit it applies to */
	expect_error(MINIMAL "    client_prefix: ~\n", 7, 5, "'client_prefix' applies to");
	/* a quoted empty string is a string, not null */
	expect_error(MINIMAL "    health: ''\n", 7, 13,
		     "'health' must be a mapping of its settings");
}

/* proxy_protocol: off, v1 or v2; only where hashlb opens the backend connection. Off as a
 * boolean's off too (false, no), as admin: takes it: "proxy_protocol: false" was refused. */
static void test_proxy_protocol(void **state)
{
	static const struct {
		const char *text;
		enum hashlb_proxy_protocol want;
	} ok[] = { { "off", HASHLB_PROXY_OFF }, { "v1", HASHLB_PROXY_V1 },
		   { "v2", HASHLB_PROXY_V2 },	{ "false", HASHLB_PROXY_OFF },
		   { "no", HASHLB_PROXY_OFF },	{ "False", HASHLB_PROXY_OFF },
		   { "OFF", HASHLB_PROXY_OFF }, { "\"off\"", HASHLB_PROXY_OFF } };
	char yaml[512];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct hashlb_config *c;

		snprintf(yaml, sizeof(yaml), MINIMAL "    proxy_protocol: %s\n", ok[i].text);
		c = load_ok(yaml);
		assert_int_equal(c->services[0].proxy_protocol, ok[i].want);
		hashlb_config_free(c);
	}
	expect_error(MINIMAL "    proxy_protocol: v3\n", 7, 21,
		     "'proxy_protocol' must be off, v1 or v2, found 'v3'");
	expect_error(MINIMAL "    proxy_protocol: true\n", 7, 21,
		     "'proxy_protocol' must be off, v1 or v2, found 'true'");
	expect_error(MINIMAL "    proxy_protocol: \"false\"\n", 7, 21,
		     "'proxy_protocol' must be off, v1 or v2, found the quoted string \"false\": "
		     "write false unquoted, or off");
	expect_error(MINIMAL "    proxy_protocol: ~\n", 7, 21,
		     "'proxy_protocol' must be off, v1 or v2, found nothing (null)");
	expect_error(MINIMAL "    proxy_protocol: [v1]\n", 7, 21,
		     "'proxy_protocol' must be off, v1 or v2, found a list");
	expect_error(MINIMAL "    steering: kernel\n    proxy_protocol: v2\n", 8, 21,
		     "'proxy_protocol' needs steering: userspace");
}

/* accept_proxy: a boolean, default false; only where hashlb reads the connections. */
static void test_accept_proxy(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL "    accept_proxy: true\n");

	assert_true(c->services[0].accept_proxy);
	hashlb_config_free(c);
	c = load_ok(MINIMAL);
	assert_false(c->services[0].accept_proxy);
	hashlb_config_free(c);
	expect_error(MINIMAL "    accept_proxy: v2\n", 7, 19,
		     "'accept_proxy' must be true or false, found 'v2'");
	expect_error(MINIMAL "    steering: kernel\n    accept_proxy: yes\n", 8, 19,
		     "'accept_proxy' needs steering: userspace");
}

/* source: a numeric address without a port, of the backends' family. */
static void test_source(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL "    source: 127.0.0.7\n");
	const struct sockaddr_in *in = (const struct sockaddr_in *)&c->services[0].source;

	assert_int_equal(c->services[0].source_len, sizeof(*in));
	assert_int_equal(in->sin_family, AF_INET);
	assert_int_equal(ntohl(in->sin_addr.s_addr), 0x7f000007);
	assert_int_equal(in->sin_port, 0);
	hashlb_config_free(c);
	c = load_ok(MINIMAL);
	assert_int_equal(c->services[0].source_len, 0);
	hashlb_config_free(c);
	expect_error(MINIMAL "    source: 127.0.0.7:80\n", 7, 13,
		     "'source' '127.0.0.7:80' is not an IPv4 or IPv6 address");
	expect_error(MINIMAL "    source: localhost\n", 7, 13, "is not an IPv4 or IPv6 address");
	expect_error(MINIMAL "    source: \"::1\"\n", 6, 18,
		     "backend 'a' at 127.0.0.1:9001 is IPv4 but the service's source is IPv6");
	expect_error(MINIMAL "    steering: kernel\n    source: 127.0.0.7\n", 8, 13,
		     "'source' needs steering: userspace");
	/* client: transparent, from each client's address; no address of its own */
	c = load_ok(MINIMAL "    source: client\n");
	assert_true(c->services[0].source_client);
	assert_int_equal(c->services[0].source_len, 0);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    source: 127.0.0.7\n");
	assert_false(c->services[0].source_client);
	hashlb_config_free(c);
	expect_error(MINIMAL "    source: clients\n", 7, 13, "nor client");
	/* client: each backend connection leaves from its client's address, of the listener's
	 * family: a backend of the other family could serve no client (EAFNOSUPPORT each) */
	expect_error(MINIMAL "      - {name: b, address: \"[::1]:9002\"}\n    source: client\n", 7,
		     28,
		     "backend 'b' at [::1]:9002 is IPv6 but the service's clients are IPv4 (listen "
		     "127.0.0.1:8080), and source: client connects from each one's own address");
	expect_error("services:\n  - name: web\n    listen: \"[::1]:8080\"\n    source: client\n"
		     "    backends:\n      - {name: a, address: 127.0.0.1:9001}\n",
		     6, 28,
		     "backend 'a' at 127.0.0.1:9001 is IPv4 but the service's clients are IPv6");
	/* a dual-stack listener takes both families, and PROXY headers may name either */
	c = load_ok("services:\n  - name: web\n    listen: \"[::]:8080\"\n    source: client\n"
		    "    backends:\n      - {name: a, address: 127.0.0.1:9001}\n"
		    "      - {name: b, address: \"[::1]:9002\"}\n");
	hashlb_config_free(c);
	c = load_ok(MINIMAL "      - {name: b, address: \"[::1]:9002\"}\n    source: client\n"
			    "    accept_proxy: true\n");
	hashlb_config_free(c);
	expect_error(MINIMAL "    steering: kernel\n    source: client\n", 8, 13,
		     "'source' needs steering: userspace");
}

/* health send/expect: bytes (escapes, NULs) with their lengths; 1..1024 each. */
static void test_health_payload(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL);

	assert_null(c->services[0].health.send);
	assert_null(c->services[0].health.expect);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    health: {send: \"PING\\r\\n\\0x\", expect: +PONG}\n");
	assert_int_equal(c->services[0].health.send_len, 8);
	assert_memory_equal(c->services[0].health.send, "PING\r\n\0x", 8);
	assert_int_equal(c->services[0].health.expect_len, 5);
	assert_memory_equal(c->services[0].health.expect, "+PONG", 5);
	hashlb_config_free(c);
	expect_error(MINIMAL "    health: {expect: \"\"}\n", 7, 22,
		     "'expect' must be 1..1024 bytes");
	expect_error(MINIMAL "    health: {send: [a]}\n", 7, 20, "'send' must be a string");
}

/* A backend's max_connections: default 0 (no cap), up to 2^24. */
static void test_backend_max_connections(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL);

	assert_int_equal(c->services[0].backends[0].max_connections, 0);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "        max_connections: 500\n");
	assert_int_equal(c->services[0].backends[0].max_connections, 500);
	hashlb_config_free(c);
	expect_error(MINIMAL "        max_connections: 16777217\n", 7, 26, "'max_connections'");
	expect_error(MINIMAL "        max_connections: many\n", 7, 26, "'max_connections'");
}

/* keepalive: a boolean or a mapping (which turns it on), whole seconds, kernel ranges. */
static void test_keepalive(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL);
	const struct hashlb_keepalive_cfg *k = &c->services[0].keepalive;

	assert_false(k->enabled);
	assert_int_equal(k->idle_s, 60);
	assert_int_equal(k->interval_s, 10);
	assert_int_equal(k->count, 6);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    keepalive: true\n");
	k = &c->services[0].keepalive;
	assert_true(k->enabled);
	assert_int_equal(k->idle_s, 60);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    keepalive: {idle: 2m, interval: 5s, count: 3}\n");
	k = &c->services[0].keepalive;
	assert_true(k->enabled); /* the mapping turns it on */
	assert_int_equal(k->idle_s, 120);
	assert_int_equal(k->interval_s, 5);
	assert_int_equal(k->count, 3);
	assert_int_equal(k->user_timeout_ms, 0); /* off unless written */
	hashlb_config_free(c);
	/* user_timeout: no shorter than the probes take, or the kernel ends a
	 * quiet connection at its first unanswered probe */
	c = load_ok(MINIMAL
		    "    keepalive: {idle: 1s, interval: 1s, count: 2, user_timeout: 3s}\n");
	assert_int_equal(c->services[0].keepalive.user_timeout_ms, 3000);
	hashlb_config_free(c);
	expect_error(MINIMAL "    keepalive: {user_timeout: 30s}\n", 7, 31,
		     "keepalive 'user_timeout' 30s is shorter than idle + interval x count (120s)");
	expect_error(MINIMAL "    keepalive: {user_timeout: 10h}\n", 7, 31, "'user_timeout'");
	c = load_ok(MINIMAL "    keepalive: {enabled: false, idle: 1s}\n");
	assert_false(c->services[0].keepalive.enabled);
	hashlb_config_free(c);

	/* Either form said, whichever is wrong: "keepalive: 60s" (meant as idle) was told
	 * "must be true or false", and "keepalive: [1s]" "must be a mapping". */
	expect_error(MINIMAL "    keepalive: 60s\n", 7, 16,
		     "'keepalive' must be true, false or a mapping of its settings (enabled, idle, "
		     "interval, count, user_timeout), found the value '60s'");
	expect_error(MINIMAL "    keepalive: [1s]\n", 7, 16,
		     "'keepalive' must be true, false or a mapping of its settings (enabled, idle, "
		     "interval, count, user_timeout), found a list");
	expect_error(MINIMAL "    keepalive:\n", 7, 14, "found nothing (null)");
	expect_error(MINIMAL "    keepalive: \"true\"\n", 7, 16, "found the string 'true'");
	expect_error(MINIMAL "    keepalive: {idle: 1500ms}\n", 7, 23,
		     "keepalive 'idle' 1500ms is not whole seconds");
	expect_error(MINIMAL "    keepalive: {interval: 500}\n", 7, 27, "'interval'");
	expect_error(MINIMAL "    keepalive: {idle: 10h}\n", 7, 23, "'idle'");
	expect_error(MINIMAL "    keepalive: {count: 0}\n", 7, 24, "'count'");
	expect_error(MINIMAL "    keepalive: {count: 128}\n", 7, 24, "'count'");
	expect_error(MINIMAL "    keepalive: {probes: 3}\n", 7, 17,
		     "unknown key 'probes' in keepalive");
	expect_error(MINIMAL "    steering: kernel\n    keepalive: true\n", 8, 5,
		     "'keepalive' needs steering: userspace");
}

/* max_connection_rate: connections per second, 0 (default) = none, up to 1,000,000. */
static void test_max_connection_rate(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL);

	assert_int_equal(c->services[0].max_connection_rate, 0);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    max_connection_rate: 500\n");
	assert_int_equal(c->services[0].max_connection_rate, 500);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    max_connection_rate: 1000000\n");
	assert_int_equal(c->services[0].max_connection_rate, 1000000);
	hashlb_config_free(c);
	expect_error(MINIMAL "    max_connection_rate: 1000001\n", 7, 26, "'max_connection_rate'");
	expect_error(MINIMAL "    max_connection_rate: -1\n", 7, 26, "'max_connection_rate'");
	expect_error(MINIMAL "    max_connection_rate: 10/s\n", 7, 26, "'max_connection_rate'");
	expect_error(MINIMAL "    max_conection_rate: 10\n", 7, 5,
		     "did you mean 'max_connection_rate'?");
	expect_error(MINIMAL
		     "    steering: kernel\n    interface: lo\n    max_connection_rate: 5\n",
		     9, 26, "'max_connection_rate' needs steering: userspace");
}

/* health.port: 1..65535, default 0 (the backend's own port). */
static void test_health_port(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL);

	assert_int_equal(c->services[0].health.port, 0);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    health: {port: 8008}\n");
	assert_int_equal(c->services[0].health.port, 8008);
	hashlb_config_free(c);
	expect_error(MINIMAL "    health: {port: 0}\n", 7, 20, "'port'");
	expect_error(MINIMAL "    health: {port: 65536}\n", 7, 20, "'port'");
	expect_error(MINIMAL "    health: {port: http}\n", 7, 20, "'port'");
}

/* health.close_on_down: a boolean, default false; only where hashlb holds the connections. */
static void test_close_on_down(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL);

	assert_false(c->services[0].health.close_on_down);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    health: {close_on_down: true}\n");
	assert_true(c->services[0].health.close_on_down);
	assert_true(c->services[0].health.enabled); /* nothing else changes */
	hashlb_config_free(c);
	expect_error(MINIMAL "    health: {close_on_down: soon}\n", 7, 29,
		     "'close_on_down' must be true or false, found 'soon'");
	expect_error(MINIMAL "    close_on_down: true\n", 7, 5,
		     "it belongs in a service's 'health'");
	expect_error(MINIMAL "    steering: kernel\n    interface: lo\n"
			     "    health: {close_on_down: true}\n",
		     9, 29, "'health.close_on_down' needs steering: userspace");
	/* false is what kernel steering does anyway: accepted */
	c = load_ok(MINIMAL "    steering: kernel\n    interface: lo\n"
			    "    health: {close_on_down: false}\n");
	hashlb_config_free(c);
}

/* health.passive: a boolean, default true; passive_hold: a duration, default 10s (nginx's
 * fail_timeout), 10ms..1h. */
static void test_passive(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL);

	assert_true(c->services[0].health.passive);
	assert_int_equal(c->services[0].health.passive_hold_ms, 10000);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    health: {enabled: false, passive: false, passive_hold: 30s}\n");
	assert_false(c->services[0].health.passive);
	assert_int_equal(c->services[0].health.passive_hold_ms, 30000);
	assert_false(c->services[0].health.enabled);
	hashlb_config_free(c);
	expect_error(MINIMAL "    health: {passive: sometimes}\n", 7, 23,
		     "'passive' must be true or false, found 'sometimes'");
	expect_error(MINIMAL "    health: {passive_hold: 2h}\n", 7, 28, "'passive_hold'");
	expect_error(MINIMAL "    health: {passive_hold: 5ms}\n", 7, 28, "'passive_hold'");
	expect_error(MINIMAL "    passive_hold: 10s\n", 7, 5, "it belongs in a service's 'health'");
}

/* log_connections: a boolean, default false; only where hashlb sees connections end. */
static void test_log_connections(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL "    log_connections: true\n");

	assert_true(c->services[0].log_connections);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    log_connections: off\n");
	assert_false(c->services[0].log_connections);
	hashlb_config_free(c);
	/* any letter case, as configs/full.yaml says */
	c = load_ok(MINIMAL "    log_connections: YES\n    health: {enabled: Off}\n");
	assert_true(c->services[0].log_connections);
	assert_false(c->services[0].health.enabled);
	hashlb_config_free(c);
	c = load_ok(MINIMAL);
	assert_false(c->services[0].log_connections);
	hashlb_config_free(c);
	expect_error(MINIMAL "    log_connections: 1\n", 7, 22,
		     "'log_connections' must be true or false, found '1'");
	/* not "found 'true'": the message says the quotes are what is wrong */
	expect_error(MINIMAL "    log_connections: \"true\"\n", 7, 22,
		     "'log_connections' must be true or false, found the quoted string \"true\"");
	expect_error(MINIMAL "    log_connections: [true]\n", 7, 22,
		     "'log_connections' must be true or false, found a list");
	expect_error(MINIMAL "    steering: kernel\n    log_connections: yes\n", 8, 22,
		     "'log_connections' needs steering: userspace");
	expect_error(MINIMAL "    timeouts: {log_connections: true}\n", 7, 16,
		     "it belongs in a service");
}

/* timeouts.queue: a duration, default 0 (no queue), up to 10m; only the forwarder queues. */
/* An error is one line: a value quoted back from a block scalar has its line break escaped. */
static void test_one_line_errors(void **state)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err = { 0 };
	static const char text[] = "services:\n  - name: web\n    listen: |\n      127.0.0.1:80\n"
				   "    backends: [{name: a, address: \"127.0.0.1:1\"}]\n";

	assert_int_equal(hashlb_config_parse(text, sizeof(text) - 1, "t.yaml", &c, &err), -EINVAL);
	assert_null(strchr(err.msg, '\n'));
	if (!strstr(err.msg, "'127.0.0.1:80\\n' is not a valid address"))
		fail_msg("got '%s'", err.msg);
}

/*
 * A long value quoted back is cut at a character, not inside one: cut at its 37th byte,
 * "workers: " and 30 'é' showed "...\xc3...", a byte the file does not hold.
 */
static void test_a_long_value_is_cut_at_a_character(void **state)
{
	char yaml[512] = "workers: ";

	(void)state;
	for (int i = 0; i < 30; i++)
		strcat(yaml, "\xc3\xa9");
	strcat(yaml, "\n" MINIMAL);
	expect_error(yaml, 1, 10,
		     "found the value '\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
		     "\xc3\xa9\xc3\xa9...'");
}

/*
 * A block scalar is placed at its '|' or '>', where the reader sees it start:
 * it was placed at column 1 of the line after, whatever that line held.
 */
static void test_block_scalar_position(void **state)
{
	expect_error(MINIMAL "    scheme: |\n      ring\n", 7, 13, "found 'ring\\n'");
	expect_error(MINIMAL "    scheme: &s >-  # a '|' or '>' in a comment\n\n      rin\n", 7, 16,
		     "found '\\nrin'");
	expect_error(MINIMAL "    scheme: |2\r\n      ring\r\n", 7, 13, "found 'ring\\n'");
	expect_error("services:\n  - name: web\n    listen: 127.0.0.1:8080\n    backends:\n"
		     "      - name: \xc3\xa9\n        address: >\n          127.0.0.1:0\n",
		     6, 18, "'127.0.0.1:0\\n' is not a valid address");
	expect_error("services:\n  - |\n    x\n", 2, 5, "service must be a mapping");
	/* the last value of the text, no line after it */
	expect_error(MINIMAL "    scheme: |", 7, 13, "'scheme' must be ring or maglev");
}

/*
 * A mapping of one pair in a flow list ("[name: a]", a key and its value without braces)
 * starts at its key, where the reader sees it: libfyaml marks it at its ':', so an error about
 * the mapping pointed past the key ("backends: [name: a, address: ...]" is two backends, the
 * first with no address, placed at the ':' after name).
 */
static void test_flow_pair_position(void **state)
{
	(void)state;
	expect_error(MINIMAL "  - name: b\n    listen: 127.0.0.1:81\n"
			     "    backends: [name: a, address: \"127.0.0.1:1\"]\n",
		     9, 16, "backend 'a' has no 'address'");
	expect_error(MINIMAL "  - name: b\n    listen: 127.0.0.1:81\n"
			     "    backends: [ \"name\" : a ]\n",
		     9, 17, "backend 'a' has no 'address'");
	/* the others as they were: at '{', at '?', at the key */
	expect_error(MINIMAL "  - name: b\n    listen: 127.0.0.1:81\n    backends: [{name: a}]\n",
		     9, 16, "backend 'a' has no 'address'");
	expect_error(MINIMAL "  - name: b\n    listen: 127.0.0.1:81\n    backends: [? name : a]\n",
		     9, 16, "backend 'a' has no 'address'");
	expect_error(MINIMAL
		     "  - name: b\n    listen: 127.0.0.1:81\n    backends:\n      - name: a\n",
		     10, 9, "backend 'a' has no 'address'");
}

/*
 * An empty block scalar that ends the text is empty: libfyaml gave it as one NUL
 * byte, which a health check then sent as its payload ("\0"), and other keys
 * refused as "must not contain NUL characters", a NUL nobody wrote.
 */
static void test_empty_block_scalar_last(void **state)
{
	expect_error(MINIMAL "    health:\n      send: |\n", 8, 13,
		     "'send' must be 1..1024 bytes, found 0");
	expect_error(MINIMAL "    health:\n      expect: >+\n", 8, 15,
		     "'expect' must be 1..1024 bytes, found 0");
	expect_error(MINIMAL "    scheme: >\r\n", 7, 13,
		     "'scheme' must be ring or maglev, found ''");
}

/*
 * A tag would change what a value is; the loader reads text, so a tag is
 * refused, at the tag itself (it was placed at the value after it, on the
 * next line for a block collection, where the reader saw no tag).
 */
static void test_tags(void **state)
{
	expect_error(MINIMAL "        weight: !!str 7\n", 7, 17, "a YAML tag ('!!str')");
	expect_error(MINIMAL "    log_connections: !!bool \"true\"\n", 7, 22, "('!!bool')");
	expect_error("services: !foo\n  - name: x\n", 1, 11, "a YAML tag ('!foo')");
	expect_error(MINIMAL "    health: &h !!map\n      rise: 2\n", 7, 16, "('!!map')");
}

static void test_steering_interface(void **state)
{
	/* run would only log "kernel steering not started": a config error instead */
	expect_error(MINIMAL "    steering: kernel\n", 7, 15, "steering: kernel needs 'interface'");
	/* kept while steering: userspace, so that a reload can switch back and forth */
	hashlb_config_free(load_ok(MINIMAL "    interface: eth0\n"));
	hashlb_config_free(load_ok(MINIMAL "    interface: br-1.100_x@y\n"));
	/* What no interface can be called (the kernel's dev_valid_name()). "lo:1" was taken,
	 * and the kernel's SIOCGIFINDEX reads it as lo (an address label's name): a service
	 * with "lo" and one with "lo:1" passed the one-service-per-interface check, and the
	 * second took the first's program over at start ("taken over ... from=orphan"). */
	expect_error(MINIMAL "    steering: kernel\n    interface: \"lo:1\"\n", 8, 16,
		     "'interface' 'lo:1' is not a valid interface name: ':' names an address "
		     "label, not an interface (give 'lo')");
	expect_error(MINIMAL "    interface: eth0:0\n", 7, 16, "(give 'eth0')");
	static const char *const bad[] = { ".",		"..",  "\"lo\\n\"", "\"a\\vb\"",
					   "\"a\\fb\"", "a/b", "\"\"",	    "0123456789abcdef" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char yaml[256];

		snprintf(yaml, sizeof(yaml), MINIMAL "    interface: %s\n", bad[i]);
		expect_error(yaml, 7, 16, "is not a valid interface name");
	}
	hashlb_config_free(load_ok(MINIMAL "    interface: 0123456789abcde\n"));
}

/* steering_flows: the conntrack entries of the kernel path (hashlb steer --flows), with
 * --flows' range; before, no such key (always 65,536). */
static uint32_t steer_flows_of(const char *yaml)
{
	struct hashlb_config *c = load_ok(yaml);
	uint32_t flows = c->services[0].steer_flows;

	hashlb_config_free(c);
	return flows;
}

static void test_steering_flows(void **state)
{
	assert_int_equal(steer_flows_of(MINIMAL "    steering: kernel\n    interface: lo\n"
						"    steering_flows: 1000000\n"),
			 1000000);
	assert_int_equal(steer_flows_of(MINIMAL "    steering_flows: 402653184\n"), 402653184);
	assert_int_equal(steer_flows_of(MINIMAL), 65536);
	expect_error(MINIMAL "    steering_flows: 0\n", 7, 21,
		     "'steering_flows' 0 is out of range 1..402653184");
	expect_error(MINIMAL "    steering_flows: 402653185\n", 7, 21,
		     "'steering_flows' 402653185 is out of range 1..402653184");
	expect_error(MINIMAL "    steering_flows: 64k\n", 7, 21, "'steering_flows' must be");
	expect_error(MINIMAL "    steering_flows: -1\n", 7, 21, "'steering_flows'");
}

static void test_queue_timeout(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL "    timeouts: {queue: 2s}\n");

	assert_int_equal(c->services[0].queue_timeout_ms, 2000);
	hashlb_config_free(c);
	c = load_ok(MINIMAL);
	assert_int_equal(c->services[0].queue_timeout_ms, 0);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    steering: kernel\n    interface: lo\n    timeouts: {queue: 0}\n");
	assert_int_equal(c->services[0].queue_timeout_ms, 0);
	hashlb_config_free(c);
	expect_error(MINIMAL "    timeouts: {queue: 11m}\n", 7, 23,
		     "'queue' 11m is out of range 0ms..10m");
	expect_error(MINIMAL "    timeouts: {queue: \"5\"}\n", 7, 23, "has no unit");
	expect_error(MINIMAL "    steering: kernel\n    timeouts: {queue: 1s}\n", 8, 23,
		     "'timeouts.queue' needs steering: userspace");

	/* abort_on_close: a client's FIN takes it out of the queue; off by default */
	c = load_ok(MINIMAL "    timeouts: {queue: 2s}\n    abort_on_close: true\n");
	assert_true(c->services[0].abort_on_close);
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    timeouts: {queue: 2s}\n");
	assert_false(c->services[0].abort_on_close);
	hashlb_config_free(c);
	expect_error(MINIMAL "    abort_on_close: true\n", 7, 5,
		     "'abort_on_close' needs timeouts.queue (it applies to clients waiting in the "
		     "queue)");
	expect_error(MINIMAL "    timeouts: {queue: 2s}\n    abort_on_close: 1\n", 8, 21,
		     "'abort_on_close' must be");
}

/* accept_proxy_from: who may send a PROXY header; each bad item named at its position. */
static void test_accept_proxy_from(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL "    accept_proxy: true\n"
						  "    accept_proxy_from: [10.0.0.0/8, 127.0.0.2, "
						  "\"2001:db8::/32\", \"::1\"]\n");
	const struct hashlb_service_cfg *s = &c->services[0];
	char buf[HASHLB_PREFIX_STRLEN];

	assert_int_equal(s->n_proxy_from, 4);
	assert_int_equal(s->proxy_from[0].family, AF_INET);
	assert_int_equal(s->proxy_from[0].len, 8);
	assert_int_equal(s->proxy_from[1].len, 32);
	assert_int_equal(s->proxy_from[2].family, AF_INET6);
	assert_int_equal(s->proxy_from[2].len, 32);
	assert_int_equal(s->proxy_from[3].len, 128);
	hashlb_prefix_format(&s->proxy_from[1], buf, sizeof(buf));
	assert_string_equal(buf, "127.0.0.2/32");
	hashlb_prefix_format(&s->proxy_from[2], buf, sizeof(buf));
	assert_string_equal(buf, "2001:db8::/32");
	hashlb_config_free(c);
	c = load_ok(MINIMAL "    accept_proxy: true\n");
	assert_int_equal(c->services[0].n_proxy_from, 0); /* anyone */
	hashlb_config_free(c);

	expect_error(MINIMAL "    accept_proxy_from: [127.0.0.1]\n", 7, 5,
		     "'accept_proxy_from' needs accept_proxy: true");
	expect_error(MINIMAL "    accept_proxy: false\n    accept_proxy_from: [127.0.0.1]\n", 8, 5,
		     "'accept_proxy_from' needs accept_proxy: true");
	expect_error(MINIMAL "    accept_proxy: true\n    accept_proxy_from: 10.0.0.0/8\n", 8, 24,
		     "'accept_proxy_from' must be a list of addresses or prefixes");
	expect_error(MINIMAL "    accept_proxy: true\n    accept_proxy_from: []\n", 8, 24,
		     "must list 1..4096 addresses or prefixes, found 0");
	expect_error(MINIMAL
		     "    accept_proxy: true\n    accept_proxy_from: [10.0.0.0/8, 10.0.0.1/8]\n",
		     8, 37, "'10.0.0.1/8' has bits set past its prefix length");
	expect_error(MINIMAL "    accept_proxy: true\n    accept_proxy_from: [10.0.0.0/33]\n", 8,
		     25, "'10.0.0.0/33' is not an address or prefix");
	expect_error(MINIMAL "    accept_proxy: true\n    accept_proxy_from: [127.0.0.1:80]\n", 8,
		     25, "'127.0.0.1:80' is not an address or prefix");
	expect_error(MINIMAL "    accept_proxy: true\n    accept_proxy_from: [localhost]\n", 8, 25,
		     "is not an address or prefix");
	expect_error(MINIMAL "    accept_proxy: true\n    accept_proxy_from: [{a: 1}]\n", 8, 25,
		     "'accept_proxy_from' must be an address or prefix");
}

static void sa4(struct sockaddr_storage *ss, const char *a)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	in->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, a, &in->sin_addr), 1);
}

static void sa6(struct sockaddr_storage *ss, const char *a)
{
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	in6->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, a, &in6->sin6_addr), 1);
}

/* Whether <sa> is in the set of the <n> prefixes <p>. */
static bool set_match(const struct hashlb_prefix *p, uint32_t n, const struct sockaddr_storage *ss)
{
	struct hashlb_prefix_set *set;
	bool in;

	assert_int_equal(hashlb_prefix_set_new(p, n, &set), 0);
	in = hashlb_prefix_set_match(set, (const struct sockaddr *)ss);
	hashlb_prefix_set_free(set);
	return in;
}

/* Whether <addr> (IPv4 or IPv6 text) is in the one prefix <prefix>. */
static bool in_prefix(const char *prefix, const char *addr)
{
	struct sockaddr_storage ss;
	struct hashlb_prefix p;

	assert_int_equal(hashlb_prefix_parse(prefix, &p), 0);
	if (strchr(addr, ':'))
		sa6(&ss, addr);
	else
		sa4(&ss, addr);
	return set_match(&p, 1, &ss);
}

/* Whether <addr> is in the set of the space-separated prefixes <list>. */
static bool in_list(const char *list, const char *addr)
{
	struct hashlb_prefix p[4];
	struct sockaddr_storage ss;
	char buf[256], *save = NULL;
	uint32_t n = 0;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		assert_true(n < 4);
		assert_int_equal(hashlb_prefix_parse(t, &p[n++]), 0);
	}
	if (strchr(addr, ':'))
		sa6(&ss, addr);
	else
		sa4(&ss, addr);
	return set_match(p, n, &ss);
}

static void test_prefix_match(void **state)
{
	struct hashlb_prefix p[2];
	struct sockaddr_storage ss;

	assert_true(in_prefix("10.0.0.0/8", "10.255.1.2"));
	assert_false(in_prefix("10.0.0.0/8", "11.0.0.0"));
	assert_true(in_prefix("192.168.1.128/25", "192.168.1.255"));
	assert_false(in_prefix("192.168.1.128/25", "192.168.1.127"));
	assert_true(in_prefix("127.0.0.2", "127.0.0.2"));
	assert_false(in_prefix("127.0.0.2", "127.0.0.3"));
	assert_true(in_prefix("0.0.0.0/0", "203.0.113.9"));
	assert_false(in_prefix("0.0.0.0/0", "2001:db8::1")); /* a v4 prefix: v4 clients only */
	assert_true(in_prefix("2001:db8::/33", "2001:db8:7fff::1"));
	assert_false(in_prefix("2001:db8::/33", "2001:db8:8000::1"));
	assert_true(in_prefix("::1", "::1"));
	/* a v4 client of a [::] listener is seen as ::ffff:a.b.c.d */
	assert_true(in_prefix("127.0.0.0/8", "::ffff:127.0.0.9"));
	assert_false(in_prefix("127.0.0.0/8", "::ffff:10.0.0.1"));
	assert_false(in_prefix("::1", "127.0.0.1"));
	/* an IPv4-mapped prefix is the IPv4 prefix it maps, for clients of either form */
	assert_true(in_prefix("::ffff:203.0.113.0/120", "203.0.113.5"));
	assert_true(in_prefix("::ffff:203.0.113.0/120", "::ffff:203.0.113.5"));
	assert_false(in_prefix("::ffff:203.0.113.0/120", "203.0.114.5"));
	assert_true(in_prefix("::ffff:127.0.0.2", "127.0.0.2"));
	assert_int_equal(hashlb_prefix_parse("::ffff:10.0.0.0/104", &p[0]), 0);
	assert_true(p[0].family == AF_INET && p[0].len == 8 && p[0].addr[0] == 10);

	/* any of a list */
	assert_int_equal(hashlb_prefix_parse("10.0.0.0/8", &p[0]), 0);
	assert_int_equal(hashlb_prefix_parse("fd00::/8", &p[1]), 0);
	sa6(&ss, "fd12::1");
	assert_true(set_match(p, 2, &ss));
	assert_false(set_match(p, 1, &ss));
	assert_false(set_match(p, 0, &ss));
	assert_false(in_list("10.0.0.0 10.0.0.2", "10.0.0.1")); /* a gap of one address */
	assert_true(in_list("10.0.0.0 10.0.0.2", "10.0.0.2"));
	assert_true(in_list("10.0.0.128/25 10.0.0.0/25", "10.0.0.127")); /* adjacent */
	assert_true(in_list("10.0.0.128/25 10.0.0.0/25", "10.0.0.128"));
	assert_false(in_list("10.0.0.128/25 10.0.0.0/25", "10.0.1.0"));
	assert_true(in_list("10.0.0.0/8 10.1.0.0/16", "10.200.0.1")); /* nested */
	assert_false(in_list("255.255.255.255 0.0.0.0", "255.255.255.254")); /* the ends */
	assert_true(in_list("255.255.255.255 0.0.0.0", "255.255.255.255"));
	assert_true(in_list("255.255.255.255 0.0.0.0", "0.0.0.0"));
	assert_true(
		in_list("0.0.0.0/0 10.0.0.1", "10.0.0.2")); /* inside one that ends at the top */
	assert_true(in_prefix("::/0", "2001:db8::1"));
	assert_false(in_prefix("::/0", "10.0.0.1")); /* a v6 prefix: v6 clients only */
	assert_false(in_prefix("::/0", "::ffff:10.0.0.1")); /* through a [::] listener too */
	assert_false(in_prefix("::/80", "::ffff:10.0.0.1"));
	assert_true(in_list("::/1 8000::/1", "ffff::1"));
	assert_true(in_list("8000::/1 ffff::1", "ffff::2"));
	assert_false(in_list("::2 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::1"));

	assert_int_equal(hashlb_prefix_parse("10.0.0.1/8", &p[0]), -EDOM);
	assert_int_equal(hashlb_prefix_parse("::1/0", &p[0]), -EDOM);
	assert_int_equal(hashlb_prefix_parse("10.0.0.0/", &p[0]), -EINVAL);
	assert_int_equal(hashlb_prefix_parse("10.0.0.0/+8", &p[0]), -EINVAL);
	assert_int_equal(hashlb_prefix_parse("/8", &p[0]), -EINVAL);
	assert_int_equal(hashlb_prefix_parse("::/129", &p[0]), -EINVAL);
	assert_int_equal(hashlb_prefix_parse("10.1/16", &p[0]), -EINVAL);
	assert_int_equal(hashlb_prefix_parse("::/128", &p[0]), 0);
}

/* The reference: whether the first <len> bits of <a> and <b> agree. */
static bool ref_covers(const uint8_t *a, const uint8_t *b, unsigned len)
{
	for (unsigned bit = 0; bit < len; bit++) {
		unsigned m = 0x80u >> (bit % 8);

		if ((a[bit / 8] & m) != (b[bit / 8] & m))
			return false;
	}
	return true;
}

/* Bits near <base>: a few random low bits flipped, so addresses fall both
 * inside and just outside the prefixes drawn around the same bases. */
static void near(uint8_t *out, const uint8_t *base, unsigned bytes, unsigned *seed)
{
	memcpy(out, base, bytes);
	for (int k = rand_r(seed) % 3; k >= 0; k--) {
		unsigned bit = bytes * 8 - 1 - (unsigned)(rand_r(seed) % (int)(bytes * 8));

		if (rand_r(seed) % 2)
			bit = bytes * 8 - 1 - (unsigned)(rand_r(seed) % 12); /* mostly low bits */
		out[bit / 8] ^= (uint8_t)(0x80u >> (bit % 8));
	}
}

/*
 * The compiled set (sorted, merged ranges, binary search) answers as a scan
 * of the list does, for random lists of overlapping, nested and adjacent
 * prefixes of both families, from 1 prefix to the 4,096 a config allows,
 * and for addresses at and around their edges, IPv4-mapped ones included.
 */
static void test_prefix_set_random(void **state)
{
	static const uint8_t bases[4][16] = {
		{ 10, 0, 0, 0 },
		{ 192, 168, 1, 128 },
		{ 0x20, 0x01, 0x0d, 0xb8 },
		{ 0xfd, 0x00, [15] = 1 },
	};
	static const uint32_t sizes[] = { 1, 2, 3, 7, 64, 4096 };
	struct hashlb_prefix *p = calloc(4096, sizeof(*p));
	unsigned seed = 20261201;

	assert_non_null(p);
	for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
		uint32_t n = sizes[t];
		struct hashlb_prefix_set *set;

		for (uint32_t i = 0; i < n; i++) {
			const uint8_t *base = bases[rand_r(&seed) % 4];
			bool v4 = base == bases[0] || base == bases[1];
			unsigned bits = v4 ? 32 : 128;

			p[i].family = v4 ? AF_INET : AF_INET6;
			/* mostly long prefixes, so that long lists do not cover everything */
			if (n <= 64 && rand_r(&seed) % 8 == 0)
				p[i].len = (uint8_t)(rand_r(&seed) % (int)(bits + 1));
			else
				p[i].len = (uint8_t)(bits - (unsigned)(rand_r(&seed) % 16));
			near(p[i].addr, base, bits / 8, &seed);
			for (unsigned bit = p[i].len; bit < bits; bit++)
				p[i].addr[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
		}
		assert_int_equal(hashlb_prefix_set_new(p, n, &set), 0);
		for (int k = 0; k < 20000; k++) {
			struct sockaddr_storage ss;
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;
			int form = rand_r(&seed) % 3; /* v4, v4-mapped v6, v6 */
			const uint8_t *base =
				bases[form == 2 ? 2 + rand_r(&seed) % 2 : rand_r(&seed) % 2];
			uint8_t a[16] = { 0 };
			bool want = false;

			memset(&ss, 0, sizeof(ss));
			near(a, base, form == 2 ? 16 : 4, &seed);
			if (form == 0) {
				in->sin_family = AF_INET;
				memcpy(&in->sin_addr, a, 4);
			} else {
				in6->sin6_family = AF_INET6;
				if (form == 1) {
					in6->sin6_addr.s6_addr[10] = in6->sin6_addr.s6_addr[11] =
						0xff;
					memcpy(in6->sin6_addr.s6_addr + 12, a, 4);
				} else {
					memcpy(in6->sin6_addr.s6_addr, a, 16);
				}
			}
			for (uint32_t i = 0; i < n && !want; i++) {
				if (p[i].family == AF_INET && form != 2)
					want = ref_covers(p[i].addr, a, p[i].len);
				else if (p[i].family == AF_INET6 && form != 0)
					want = ref_covers(p[i].addr, in6->sin6_addr.s6_addr,
							  p[i].len);
			}
			if (hashlb_prefix_set_match(set, (const struct sockaddr *)&ss) != want)
				fail_msg(
					"list of %u prefixes, form %d, address %02x%02x%02x%02x...: want %d",
					n, form, a[0], a[1], a[2], a[3], want);
		}
		hashlb_prefix_set_free(set);
	}
	free(p);
}

static void test_every_key(void **state)
{
	struct hashlb_config *c = load_ok(
		"workers: 4\n"
		"admin: unix:/run/hashlb.sock\n"
		"services:\n"
		"  - name: cache\n"
		"    listen: \"[::1]:0\"\n"
		"    scheme: ring\n"
		"    vnodes: 40\n"
		"    hash_key: 4-tuple\n"
		"    seed: 0xdeadbeefcafe\n"
		"    timeouts: {connect: 250ms, idle: 0, drain: 1m}\n"
		"    max_connections: 0\n"
		"    connect_retries: 0\n"
		"    slow_start: 1h\n"
		"    balance_factor: 1.25\n"
		"    steering: userspace\n"
		"    interface: veth0\n"
		"    health: {enabled: no, interval: 500, timeout: 100ms, rise: 1, fall: 5}\n"
		"    backends:\n"
		"      - name: x\n"
		"        address: \"[2001:db8::1]:443\"\n"
		"        weight: 0\n"
		"        state: maint\n"
		"      - name: y\n"
		"        address: 10.0.0.2:443\n"
		"        weight: 10000\n"
		"        state: drain\n"
		"      - name: z\n"
		"        address: 10.0.0.3:443\n");
	const struct hashlb_service_cfg *s = &c->services[0];
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&c->admin_addr;

	assert_int_equal(c->workers, 4);
	assert_string_equal(c->admin, "unix:/run/hashlb.sock");
	assert_int_equal(sun->sun_family, AF_UNIX);
	assert_string_equal(sun->sun_path, "/run/hashlb.sock");
	assert_int_equal(s->listen_addr.ss_family, AF_INET6);
	assert_int_equal(s->table.scheme, HASHLB_SCHEME_RING);
	assert_int_equal(s->table.ring_v, 40);
	assert_int_equal(s->key, HASHLB_KEY_4TUPLE);
	assert_true(s->table.seed == 0xdeadbeefcafeull);
	assert_int_equal(s->connect_timeout_ms, 250);
	assert_int_equal(s->idle_timeout_ms, 0);
	assert_int_equal(s->drain_timeout_ms, 60000);
	assert_int_equal(s->max_connections, 0);
	assert_int_equal(s->connect_retries, 0);
	assert_int_equal(s->slow_start_ms, 3600000);
	assert_true(s->balance_factor == 1.25);
	/* interface is kept with steering: userspace, for a reload to switch */
	assert_int_equal(s->steering, HASHLB_STEERING_USERSPACE);
	assert_string_equal(s->steer_interface, "veth0");
	assert_false(s->health.enabled);
	assert_int_equal(s->health.interval_ms, 500);
	assert_int_equal(s->health.timeout_ms, 100);
	assert_int_equal(s->health.rise, 1);
	assert_int_equal(s->health.fall, 5);
	assert_int_equal(s->n_backends, 3);
	assert_int_equal(s->backends[0].addr.ss_family, AF_INET6);
	assert_int_equal(s->backends[0].weight, 0);
	assert_int_equal(s->backends[0].admin, HASHLB_ADMIN_MAINT);
	assert_int_equal(s->backends[1].weight, 10000);
	assert_int_equal(s->backends[1].admin, HASHLB_ADMIN_DRAIN);
	assert_int_equal(s->backends[2].admin, HASHLB_ADMIN_READY);
	hashlb_config_free(c);
}

static void test_durations(void **state)
{
	static const struct {
		const char *text;
		uint32_t ms;
	} cases[] = {
		{ "1500", 1500 }, { "500ms", 500 },  { "2s", 2000 }, { "\"2s\"", 2000 },
		{ "1m", 60000 },  { "1h", 3600000 }, { "0s", 0 },    { "0", 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char y[512];
		struct hashlb_config *c;

		snprintf(y, sizeof(y), MINIMAL "    timeouts: {drain: %s}\n", cases[i].text);
		c = load_ok(y);
		assert_int_equal(c->services[0].drain_timeout_ms, cases[i].ms);
		hashlb_config_free(c);
	}
}

/*
 * timeouts.drain: never keeps a stop's and a removal's connections until they end, written
 * bare or quoted, and formats back as "never"; the default stays 30s. A word that is not it
 * ("forever", "Never"), or a duration past 1h, is refused at its place, saying never is taken.
 */
static void test_drain_never(void **state)
{
	static const char *const nevers[] = { "never", "\"never\"", "'never'" };
	struct hashlb_config *c = load_ok(MINIMAL);
	char buf[HASHLB_DURATION_STRLEN], ms[HASHLB_DRAIN_MS_STRLEN];

	(void)state;
	assert_int_equal(c->services[0].drain_timeout_ms, 30000);
	hashlb_config_free(c);
	for (size_t i = 0; i < sizeof(nevers) / sizeof(nevers[0]); i++) {
		char y[512];

		snprintf(y, sizeof(y), MINIMAL "    timeouts: {drain: %s}\n", nevers[i]);
		c = load_ok(y);
		assert_int_equal(c->services[0].drain_timeout_ms, HASHLB_DRAIN_NEVER);
		hashlb_drain_format(c->services[0].drain_timeout_ms, buf, sizeof(buf));
		assert_string_equal(buf, "never");
		hashlb_config_free(c);
	}
	hashlb_drain_format(30000, buf, sizeof(buf));
	assert_string_equal(buf, "30s");
	hashlb_drain_format(0, buf, sizeof(buf));
	assert_string_equal(buf, "0ms");
	/* a log line's drain_timeout_ms: never, not a deadline overflowed to a number */
	assert_string_equal(hashlb_drain_ms_text(HASHLB_DRAIN_NEVER, ms), "never");
	assert_string_equal(hashlb_drain_ms_text(1500, ms), "1500");
	assert_int_equal(hashlb_drain_end(1000, HASHLB_DRAIN_NEVER), UINT64_MAX);
	assert_int_equal(hashlb_drain_end(1000, 2000), 3000);
	assert_int_equal(hashlb_drain_left(UINT64_MAX, 5000), HASHLB_DRAIN_NEVER);
	assert_int_equal(hashlb_drain_left(3000, 2500), 500);
	assert_int_equal(hashlb_drain_left(3000, 4000), 0);

	expect_error(MINIMAL "    timeouts:\n      drain: forever\n", 8, 14,
		     "'drain' must be a duration up to 1h (0 = close them at once) or never "
		     "(keep them until they end), found 'forever'");
	expect_error(MINIMAL "    timeouts:\n      drain: Never\n", 8, 14, "or never");
	expect_error(MINIMAL "    timeouts:\n      drain: 2h\n", 8, 14,
		     "'drain' 2h is out of range 0ms..1h (0 = close them at once; never = keep "
		     "them until they end)");
	expect_error(MINIMAL "    timeouts:\n      drain: [never]\n", 8, 14,
		     "'drain' must be a duration");
	/* never is drain's alone: idle's "never" is 0 */
	expect_error(MINIMAL "    timeouts:\n      idle: never\n", 8, 13,
		     "'idle' must be a duration");
}

static void test_health_timeout_default(void **state)
{
	struct hashlb_config *c = load_ok(MINIMAL "    health: {interval: 500ms}\n");

	/* The default timeout (1s) never exceeds an interval set alone. */
	assert_int_equal(c->services[0].health.interval_ms, 500);
	assert_int_equal(c->services[0].health.timeout_ms, 500);
	hashlb_config_free(c);
}

/*
 * A mapping of settings written as a value is told which keys it takes, and
 * "health: false" how checks are turned off: before, "'health' must be a mapping of
 * keys to values, found the value 'false'" and nothing of what to write.
 */
static void test_settings_written_as_a_value(void **state)
{
	struct hashlb_config *c;

	expect_error(MINIMAL "    health: false\n", 7, 13,
		     "'health' must be a mapping of its settings (enabled, interval, timeout, "
		     "rise, fall, port, send, expect, close_on_down, passive, passive_hold), found "
		     "the value 'false': "
		     "to turn the checks off, write health: {enabled: false}");
	expect_error(MINIMAL "    health: Off\n", 7, 13, "write health: {enabled: false}");
	expect_error(MINIMAL "    health: yes\n", 7, 13,
		     "checks are on by default, leave 'health' out or write health: "
		     "{enabled: true}");
	expect_error(MINIMAL "    timeouts: 5s\n", 7, 15,
		     "'timeouts' must be a mapping of its settings (connect, idle, drain, "
		     "queue), found the value '5s'");
	expect_error(MINIMAL "    hash_prefix: 24\n", 7, 18,
		     "'hash_prefix' must be a mapping of its settings (ipv4, ipv6), found the "
		     "value '24'");
	expect_error(MINIMAL "    max_connections_per_client: 2\n    client_prefix: [24]\n", 8, 20,
		     "'client_prefix' must be a mapping of its settings (ipv4, ipv6), found a "
		     "list");
	/* the hint is health's alone: another mapping of settings written false says its keys */
	{
		static const char yaml[] = MINIMAL "    timeouts: false\n";
		struct hashlb_error err = { 0 };

		c = NULL;
		assert_int_equal(hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &err),
				 -EINVAL);
		assert_string_equal(err.msg,
				    "'timeouts' must be a mapping of its settings "
				    "(connect, idle, drain, queue), found the value 'false'");
	}
	/* the checks themselves are turned off as the message says */
	c = load_ok(MINIMAL "    health: {enabled: false}\n");
	assert_false(c->services[0].health.enabled);
	hashlb_config_free(c);
}

static void test_admin_off_and_v6(void **state)
{
	struct hashlb_config *c = load_ok("admin: off\n" MINIMAL);

	assert_null(c->admin);
	assert_int_equal(c->admin_addr_len, 0);
	hashlb_config_free(c);
	c = load_ok("admin: \"[::1]:9901\"\n" MINIMAL);
	assert_int_equal(c->admin_addr.ss_family, AF_INET6);
	hashlb_config_free(c);
	c = load_ok("admin: ~\n" MINIMAL);
	assert_null(c->admin);
	hashlb_config_free(c);
	/* off quoted is off, as proxy_protocol's (full.yaml); a quoted boolean is a string,
	 * said so, not "missing ':PORT'" */
	c = load_ok("admin: \"off\"\n" MINIMAL);
	assert_null(c->admin);
	assert_int_equal(c->admin_addr_len, 0);
	hashlb_config_free(c);
	expect_error("admin: 'no'\n" MINIMAL, 1, 8,
		     "found the quoted string \"no\": write no unquoted to turn the endpoint off");
	expect_error("admin: 'False'\n" MINIMAL, 1, 8, "the quoted string \"False\": write False");
}

/*
 * admin with no value (its address commented out) is off, as documented, but warned of where
 * it is written, first: hashlb ctl and /metrics go without a word otherwise. Not off written
 * as a word, nor with --admin (HASHLB_LOAD_ADMIN_GIVEN), whose address is the one in force.
 */
static void test_admin_empty_warns(void **state)
{
	const char *yaml = "admin:   # 127.0.0.1:9901\n" MINIMAL "    timeouts: {idle: 300}\n";
	struct hashlb_config *c = load_ok(yaml);
	struct hashlb_error w[4], err;

	(void)state;
	assert_null(c->admin);
	assert_int_equal(hashlb_config_warnings(c, w, 4), 2);
	assert_int_equal(w[0].line, 1);
	assert_int_equal(w[0].column, 6); /* at its ':', where no value follows */
	assert_string_equal(w[0].msg, "'admin' has no value, which turns the admin endpoint off "
				      "(no hashlb ctl, no /metrics): write off to mean that, or an "
				      "address");
	assert_non_null(strstr(w[1].msg, "'idle' has no unit"));
	/* counted when there is no room for it */
	assert_int_equal(hashlb_config_warnings(c, NULL, 0), 2);
	hashlb_config_free(c);
	assert_no_warning("admin: off\n" MINIMAL);
	assert_no_warning("admin: ~\n" MINIMAL);
	memset(&err, 0, sizeof(err));
	assert_int_equal(hashlb_config_parse_flags("admin:\n" MINIMAL, strlen("admin:\n" MINIMAL),
						   "t.yaml", HASHLB_LOAD_ADMIN_GIVEN, &c, &err),
			 0);
	assert_int_equal(hashlb_config_warnings(c, w, 4), 0);
	hashlb_config_free(c);
}

static void test_anchors(void **state)
{
	/* Two services sharing one backend list through an anchor. */
	struct hashlb_config *c = load_ok("services:\n"
					  "  - name: a\n"
					  "    listen: 127.0.0.1:1000\n"
					  "    backends: &pool\n"
					  "      - {name: x, address: \"127.0.0.1:1\"}\n"
					  "      - {name: y, address: \"127.0.0.1:2\"}\n"
					  "  - name: b\n"
					  "    listen: 127.0.0.1:1001\n"
					  "    backends: *pool\n");

	assert_int_equal(c->n_services, 2);
	assert_int_equal(c->services[1].n_backends, 2);
	assert_string_equal(c->services[1].backends[1].name, "y");
	assert_non_null(hashlb_config_service(c, "b"));
	assert_null(hashlb_config_service(c, "nope"));
	hashlb_config_free(c);

	/* A value used through an alias is wrong where it is used: the error is at the
	 * alias, not at the anchor, which holds a valid value for its own key. */
	expect_error("services:\n"
		     "  - name: &n web\n"
		     "    listen: 127.0.0.1:1000\n"
		     "    scheme: *n\n"
		     "    backends: [{name: x, address: \"127.0.0.1:1\"}]\n",
		     4, 13, "'scheme' must be ring or maglev, found 'web'");
	expect_error(MINIMAL "    health: &h {rise: 2}\n    timeouts:\n      connect: *h\n", 9, 16,
		     "'connect' must be a duration, found a mapping");
	expect_error("services:\n"
		     "  - name: a\n"
		     "    listen: 127.0.0.1:1000\n"
		     "    backends: &pool\n"
		     "      - {name: x, address: \"127.0.0.1:1\"}\n"
		     "  - *pool\n",
		     6, 5, "service must be a mapping of keys to values, found a list");
	/* a redefined anchor stands for its latest node */
	expect_error("services:\n"
		     "  - name: &n web\n"
		     "    listen: 127.0.0.1:1000\n"
		     "    scheme: &n maglev\n"
		     "    hash_key: *n\n"
		     "    backends: [{name: x, address: \"127.0.0.1:1\"}]\n",
		     5, 15, "'hash_key' must be src-ip, src-ip-port or 4-tuple, found 'maglev'");
	/* an alias inside its own anchor: the node is shared, still refused */
	expect_error("services: &a [*a]\n", 1, 14, "service must be a mapping");
}

/*
 * The keymap slots hashlb_config_parse() of <len> bytes of <yaml> looked
 * at (keymap_looks), which must return <want> (and an error naming
 * <want_msg>, if not NULL): a count, the same at every run, not a CPU
 * time. Frees <yaml>.
 */
static uint64_t parse_looks(char *yaml, size_t len, int want, const char *want_msg)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	uint64_t looks = keymap_looks;

	assert_int_equal(hashlb_config_parse(yaml, len, "t.yaml", &c, &err), want);
	looks = keymap_looks - looks;
	if (want_msg)
		assert_non_null(strstr(err.msg, want_msg));
	hashlb_config_free(c);
	free(yaml);
	return looks;
}

/*
 * <looks> keymap slots for <n> <what>: 1 to <most> each, or the test fails
 * (fewer than one each: they did not go through the maps at all).
 */
static void expect_looks_each(uint64_t looks, unsigned int n, const char *what, double most)
{
	double each = (double)looks / n;

	print_message("    %u %s: %.2f keymap looks each\n", n, what, each);
	if (each < 1 || each > most)
		fail_msg("%u %s looked at %" PRIu64 " keymap slots, %.2f each: not 1 to %.0f", n,
			 what, looks, each, most);
}

/*
 * The keymap slots looked at to parse <n> anchors, then <n> aliases of the
 * first (the config is refused for its unknown keys, after the whole
 * document is parsed).
 */
static uint64_t anchors_parse_looks(unsigned int n)
{
	size_t cap = (size_t)n * 24 + 64, len = 0;
	char *yaml = malloc(cap);

	assert_non_null(yaml);
	len += (size_t)snprintf(yaml + len, cap - len, "x: [");
	for (unsigned int i = 0; i < n; i++)
		len += (size_t)snprintf(yaml + len, cap - len, "&a%u 1, ", i);
	len += (size_t)snprintf(yaml + len, cap - len, "0]\ny: [");
	for (unsigned int i = 0; i < n; i++)
		len += (size_t)snprintf(yaml + len, cap - len, "*a0, ");
	len += (size_t)snprintf(yaml + len, cap - len, "0]\n");
	return parse_looks(yaml, len, -EINVAL, "unknown key 'x'");
}

/*
 * Aliases cost what the anchors they name cost, not the number of anchors
 * before them: each alias searched a list of every anchor, and 40,000
 * anchors and aliases (a 550 kB file) took 8 s of CPU to parse, the
 * largest file hours, on a reload's control thread too. Counted in the
 * slots of the anchors' map looked at (keymap_looks), not in CPU time:
 * each anchor and alias costs a few, as many with 40,000 of each as with
 * 5,000 (2.33 and 2.34). The map's hash unspread (every key in one probe
 * run) is quadratic again: 2,370 looks each with 5,000. An anchor or alias
 * that does not go through the map (a list searched again) is not counted
 * at all: refused too, by the least of one look each.
 */
static void test_anchors_cost_follows_their_number(void **state)
{
	unsigned int n[] = { 5000, 40000 };

	(void)state;
	for (unsigned int i = 0; i < 2; i++)
		expect_looks_each(anchors_parse_looks(n[i]), 2 * n[i], "anchors and aliases", 4);
}

/*
 * The keymap slots looked at to load <n> services on one port, each on its
 * own loopback address (a VIP per tenant on :443), one backend and a
 * 3-slot table each.
 */
static uint64_t services_load_looks(unsigned int n)
{
	size_t cap = (size_t)n * 120 + 64, len = 0;
	char *yaml = malloc(cap);

	assert_non_null(yaml);
	len += (size_t)snprintf(yaml + len, cap - len, "services:\n");
	for (unsigned int i = 0; i < n; i++)
		len += (size_t)snprintf(
			yaml + len, cap - len,
			"  - {name: s%u, listen: \"127.%u.%u.%u:443\", table_size: 3, "
			"backends: [{name: a, address: \"10.0.0.1:1\"}]}\n",
			i, (i + 1) >> 16, ((i + 1) >> 8) & 255, (i + 1) & 255);
	return parse_looks(yaml, len, 0, NULL);
}

/*
 * Services cost what they are, not the square of their number: the loader
 * compared each service's name and listen address with every one before
 * it, a few integer compares a pair, and 100,000 services took 5.7 CPU s
 * to load (180,000, what a 16 MiB file holds, about 14), at every start,
 * check and reload, where health checks and the admin endpoint wait. Each
 * service is now checked against those before it through maps (by name,
 * by listen address, by port's first of each family): counted in the
 * slots looked at (keymap_looks), not in CPU time: 16.8 each with 5,000
 * services, 14.2 with 80,000. The maps' hash unspread: 19,500 each with
 * 5,000. A service not checked through the maps (each pair compared
 * again) is not counted at all: refused too, by the least of one look
 * each; pairs compared besides the maps would not be seen.
 */
static void test_services_cost_follows_their_number(void **state)
{
	unsigned int n[] = { 5000, 80000 };

	(void)state;
	for (unsigned int i = 0; i < 2; i++)
		expect_looks_each(services_load_looks(n[i]), n[i], "services", 32);
}

/*
 * A config of a list of 1,000 backends, then <n> services besides the first
 * that name it by an alias; in <ret_len> its length.
 */
static char *shared_backends_yaml(unsigned int n, size_t *ret_len)
{
	size_t cap = 64000 + (size_t)n * 80, len = 0;
	char *yaml = malloc(cap);

	assert_non_null(yaml);
	len += (size_t)snprintf(yaml + len, cap - len,
				"services:\n  - name: s0\n    listen: 127.0.0.1:0\n"
				"    backends: &b\n");
	for (unsigned int i = 0; i < 1000; i++)
		len += (size_t)snprintf(yaml + len, cap - len,
					"      - {name: b%04u, address: \"127.0.0.1:1\"}\n", i);
	for (unsigned int i = 1; i <= n; i++)
		len += (size_t)snprintf(
			yaml + len, cap - len,
			"  - {name: s%04u, listen: \"127.0.0.1:0\", backends: *b}\n", i);
	*ret_len = len;
	return yaml;
}

/*
 * Aliases may share a value, not multiply the config past what a file may
 * hold (16 MiB): the loader copies what it reads, and 2,000 services naming
 * one list of 1,000 backends by an alias (a 130 kB file) were 2,000,000
 * backends, and aliases of aliases grow tenfold a line ("billion laughs").
 * Refused at the alias that goes past it; 100 services sharing the list load.
 */
static void test_aliases_cannot_multiply_the_config(void **state)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	size_t len;
	char *yaml = shared_backends_yaml(100, &len);

	assert_int_equal(hashlb_config_parse(yaml, len, "t.yaml", &c, &err), 0);
	assert_int_equal(c->n_services, 101);
	assert_int_equal(c->services[100].n_backends, 1000);
	hashlb_config_free(c);
	free(yaml);

	yaml = shared_backends_yaml(2000, &len);
	memset(&err, 0, sizeof(err));
	assert_int_equal(hashlb_config_parse(yaml, len, "t.yaml", &c, &err), -EINVAL);
	assert_int_equal(err.reason, HASHLB_ERR_CONFIG);
	if (!strstr(err.msg, "alias '*b'") || !strstr(err.msg, "16 MiB") || err.line < 1006 ||
	    err.line > 3005 || err.column != 52)
		fail_msg("expected an error at an alias '*b' (a line 1006..3005, column 52), got "
			 "%d:%d: %s",
			 err.line, err.column, err.msg);
	free(yaml);

	/* each list ten of the one before: 70 million addresses in the last */
	expect_error("services:\n"
		     "  - name: web\n"
		     "    listen: 127.0.0.1:1000\n"
		     "    backends: [{name: x, address: \"127.0.0.1:1\"}]\n"
		     "    allow_clients:\n"
		     "      - &a [\"::1\", \"::1\", \"::1\", \"::1\", \"::1\", \"::1\", \"::1\"]\n"
		     "      - &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
		     "      - &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
		     "      - &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
		     "      - &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
		     "      - &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
		     "      - &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
		     "      - &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n",
		     12, 29, "alias '*f'");
}

/* The process's resident memory now, in MiB. */
static long rss_mib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld %ld", &pages, &resident), 2);
	fclose(f);
	return resident * sysconf(_SC_PAGESIZE) / (1024 * 1024);
}

/*
 * Whether the peak memory of a parse can be bounded in this build: not under
 * a sanitizer, whose allocator keeps what earlier tests freed resident and
 * whose shadow grows with what the process touched, not with what the parser
 * holds. Under ASan the 16 MiB flat list "rose" by -1 MiB (the child reused
 * its parent's resident memory); under TSan by 86 MiB in one run and 131 MiB
 * in another, same code. The plain build bounds it; sanitizer builds print it.
 */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define PEAK_BOUNDED 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define PEAK_BOUNDED 0
#endif
#endif
#ifndef PEAK_BOUNDED
#define PEAK_BOUNDED 1
#endif

/*
 * What hashlb_config_parse() of <yaml> adds to the peak resident memory, in
 * MiB: measured in a child, so that earlier tests' peaks do not hide it.
 * The error it gives is written to *<ret_err>.
 */
static long parse_peak_mib(const char *yaml, size_t len, struct hashlb_error *ret_err)
{
	struct hashlb_error *shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
					   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct rusage ru;
	long before;
	int status;
	pid_t pid;

	/* what earlier tests freed and malloc kept would be reused unseen */
	malloc_trim(0);
	before = rss_mib();

	assert_true(shared != MAP_FAILED);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct hashlb_config *c = NULL;
		struct hashlb_error err;

		memset(&err, 0, sizeof(err));
		if (hashlb_config_parse(yaml, len, "t.yaml", &c, &err) != -EINVAL)
			_exit(1);
		*shared = err;
		_exit(0);
	}
	assert_int_equal(wait4(pid, &status, 0, &ru), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	*ret_err = *shared;
	munmap(shared, sizeof(*shared));
	return ru.ru_maxrss / 1024 - before;
}

/*
 * Nesting deeper than 64 levels is refused at the 65th, in bounded memory:
 * libfyaml turned a line of nested flow collections into tokens before its
 * first event, and "x: [[[[..." with 1,000,000 '[' (2 MB) took 540 MB (a
 * 16 MiB file 4.4 GB), in hashlb check and in a running daemon's reload.
 */
static void test_deep_flow_nesting_is_refused_in_bounded_memory(void **state)
{
	static const char *const opens[] = { "[", "{", "{a: [", "[&x " };
	size_t n = 1000000;

	for (size_t k = 0; k < sizeof(opens) / sizeof(opens[0]); k++) {
		size_t w = strlen(opens[k]), len = 3 + n * w, col = 0;
		char *yaml = malloc(len + 1);
		struct hashlb_error err;
		long rose;

		assert_non_null(yaml);
		memcpy(yaml, "x: ", 3);
		for (size_t i = 0; i < n; i++)
			memcpy(yaml + 3 + i * w, opens[k], w);
		yaml[len] = '\0';
		/* the 65th level: the mapping of x, then the 64th '[' or '{' */
		for (int open = 0; open < 64; col++)
			open += yaml[col] == '[' || yaml[col] == '{';
		rose = parse_peak_mib(yaml, len, &err);
		if (!strstr(err.msg, "nesting deeper than 64 levels") || err.line != 1 ||
		    err.column != (int)col)
			fail_msg("'%s' x %zu: expected 1:%zu nesting deeper, got %d:%d: %s",
				 opens[k], n, col, err.line, err.column, err.msg);
		if (PEAK_BOUNDED && rose > 64)
			fail_msg("'%s' x %zu (%zu bytes): peak memory rose by %ld MiB", opens[k], n,
				 len, rose);
		free(yaml);
	}
}

/* "x: [a,a,...]" with <n> (> 0) items, in <ret_len> its length. */
static char *flat_list_yaml(size_t n, size_t *ret_len)
{
	size_t len = 2 * n + 5;
	char *yaml = malloc(len + 1);

	assert_non_null(yaml);
	memcpy(yaml, "x: [", 4);
	for (size_t i = 0; i < n; i++)
		memcpy(yaml + 4 + 2 * i, "a,", 2);
	memcpy(yaml + 2 * n + 3, "]\n", 3); /* over the last ',' */
	*ret_len = len;
	return yaml;
}

/*
 * A config of more than 2,000,000 YAML nodes (keys, values, collections) is
 * refused at the first node past them, in bounded memory: the parser's tree
 * took about 130 bytes a node, and a 16 MiB flat list ("x: [a,a,...]",
 * 8,388,600 nodes, the most a file holds) peaked at 1.0 GB (1.6 GB under
 * ASan), in hashlb check and in a running daemon's reload. Now under
 * 128 MiB (62-76 MiB; bounded in the plain build, see PEAK_BOUNDED). A
 * document of exactly 2,000,000 nodes is read whole (refused for its key,
 * not its size): 100,000 backends with every key written are 1,700,000.
 */
/*
 * A text handed to hashlb_config_parse() has the file's cap too (the tree
 * keeps lengths in 32 bits): 16 MiB loads, a byte more is refused as a file
 * is. Before, the string API parsed any length.
 */
static void test_parse_takes_what_a_file_may_hold(void **state)
{
	size_t cap = 16u << 20, head = strlen(MINIMAL "#");
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	char *yaml = malloc(cap + 2);

	(void)state;
	assert_non_null(yaml);
	memcpy(yaml, MINIMAL "#", head);
	memset(yaml + head, 'x', cap + 1 - head); /* one comment to the end */
	yaml[cap] = '\n';
	yaml[cap + 1] = '\0';
	assert_int_equal(hashlb_config_parse(yaml, cap, "t.yaml", &c, &err), 0);
	hashlb_config_free(c);
	c = NULL;
	memset(&err, 0, sizeof(err));
	assert_int_equal(hashlb_config_parse(yaml, cap + 1, "t.yaml", &c, &err), -EFBIG);
	if (!strstr(err.msg, "larger than 16 MiB") || !err.file || strcmp(err.file, "t.yaml"))
		fail_msg("16 MiB + 1: expected t.yaml: larger than 16 MiB, got %s: %s",
			 err.file ? err.file : "(none)", err.msg);
	assert_null(c);
	free(yaml);
}

static void test_long_flat_lists_are_refused_in_bounded_memory(void **state)
{
	/* the mapping, x and the list are 3 nodes: items 2,000,000 - 3 and on */
	size_t n = 2000000 - 3, len;
	struct hashlb_config *c = NULL;
	struct hashlb_error err;
	char *yaml;
	long rose;

	(void)state;
	/* a whole file of it, 16 MiB: first, before this process's heap holds a tree */
	yaml = flat_list_yaml(((16u << 20) - 6) / 2, &len);
	rose = parse_peak_mib(yaml, len, &err);
	print_message("    16 MiB flat list: peak rose by %ld MiB\n", rose);
	if (!strstr(err.msg, "more than 2000000 YAML nodes") || err.column != (int)(5 + 2 * n))
		fail_msg("16 MiB flat list: expected 1:%zu more than 2000000 YAML nodes, got "
			 "%d:%d: %s",
			 5 + 2 * n, err.line, err.column, err.msg);
	if (PEAK_BOUNDED && rose > 128)
		fail_msg("16 MiB flat list: peak memory rose by %ld MiB", rose);
	free(yaml);

	yaml = flat_list_yaml(n, &len);
	memset(&err, 0, sizeof(err));
	assert_int_equal(hashlb_config_parse(yaml, len, "t.yaml", &c, &err), -EINVAL);
	if (!strstr(err.msg, "unknown key 'x'") || err.line != 1 || err.column != 1)
		fail_msg("2,000,000 nodes: expected 1:1 unknown key 'x', got %d:%d: %s", err.line,
			 err.column, err.msg);
	free(yaml);

	/* one more: refused at it, item n + 1, column 5 + 2 n */
	yaml = flat_list_yaml(n + 1, &len);
	memset(&err, 0, sizeof(err));
	assert_int_equal(hashlb_config_parse(yaml, len, "t.yaml", &c, &err), -EINVAL);
	if (!strstr(err.msg, "more than 2000000 YAML nodes") || err.line != 1 ||
	    err.column != (int)(5 + 2 * n))
		fail_msg("2,000,001 nodes: expected 1:%zu more than 2000000 YAML nodes, got "
			 "%d:%d: %s",
			 5 + 2 * n, err.line, err.column, err.msg);
	free(yaml);
}

/*
 * What looks like deep nesting and is not (a plain scalar's next line may
 * start with '[') loads as before.
 */
static void test_brackets_in_a_plain_scalar_are_not_nesting(void **state)
{
	char yaml[1024], *p = yaml;
	struct hashlb_config *c;

	p += sprintf(p, MINIMAL "    health:\n      send: GET\n        ");
	for (int i = 0; i < 200; i++)
		*p++ = '[';
	strcpy(p, "\n");
	c = load_ok(yaml);
	assert_int_equal(c->services[0].health.send_len, 204);
	assert_memory_equal(c->services[0].health.send, "GET [[[", 7);
	hashlb_config_free(c);
}

/*
 * An error inside a value given by an alias points at the value, where its
 * text is, and says where the alias is: the key that refused it is the
 * alias's. Before, "keepalive: *h" with the health mapping anchored &h was
 * refused at the health line alone, saying 'interval' 100ms is out of range
 * 1s..32767s, which health's interval is not.
 */
static void test_an_error_through_an_alias_says_where_the_alias_is(void **state)
{
	expect_error("services:\n"
		     "  - name: web\n"
		     "    listen: 127.0.0.1:1\n"
		     "    health: &h {enabled: true, interval: 100ms}\n"
		     "    backends: &b\n"
		     "      - {name: a, address: \"127.0.0.1:9\"}\n"
		     "  - name: web2\n"
		     "    listen: 127.0.0.1:2\n"
		     "    keepalive: *h\n"
		     "    backends: *b\n",
		     4, 42,
		     "'interval' 100ms is out of range 1s..32767s (through the alias at line 9, "
		     "column 16)");
	expect_error("services:\n"
		     "  - name: web\n"
		     "    listen: 127.0.0.1:1\n"
		     "    timeouts: &t {connect: 1s}\n"
		     "    backends: [{name: a, address: \"127.0.0.1:9\"}]\n"
		     "  - name: web2\n"
		     "    listen: 127.0.0.1:2\n"
		     "    health: *t\n"
		     "    backends: [{name: a, address: \"127.0.0.1:9\"}]\n",
		     4, 19, "unknown key 'connect' in health");
	expect_error("services:\n"
		     "  - name: web\n"
		     "    listen: 127.0.0.1:1\n"
		     "    backends:\n"
		     "      - &a {name: a, address: \"127.0.0.1:9\", max_connections: 5}\n"
		     "  - name: web2\n"
		     "    listen: 127.0.0.1:2\n"
		     "    steering: kernel\n"
		     "    interface: lo\n"
		     "    backends: [*a]\n",
		     5, 63, "(through the alias at line 10, column 16)");
	/* a whole service again by an alias: its name, with where the alias is */
	expect_error("services:\n"
		     "  - &s\n"
		     "    name: web\n"
		     "    listen: 127.0.0.1:1\n"
		     "    backends: [{name: a, address: \"127.0.0.1:9\"}]\n"
		     "  - *s\n",
		     3, 11,
		     "duplicate service name 'web' (first at line 3) (through the alias at line 6, "
		     "column 5)");
	/* one backend twice by its alias */
	expect_error("services:\n"
		     "  - name: web\n"
		     "    listen: 127.0.0.1:1\n"
		     "    backends:\n"
		     "      - &a {name: a, address: \"127.0.0.1:9\"}\n"
		     "  - name: web2\n"
		     "    listen: 127.0.0.1:2\n"
		     "    backends: [*a, *a]\n",
		     5, 19,
		     "duplicate backend name 'a' in service 'web2' (first at line 8) (through the "
		     "alias at line 8, column 20)");
	/* the alias itself refused: no note, it is where the error points */
	expect_error("services:\n"
		     "  - name: web\n"
		     "    listen: 127.0.0.1:1\n"
		     "    backends: &b [{name: a, address: \"127.0.0.1:9\"}]\n"
		     "  - name: web2\n"
		     "    listen: 127.0.0.1:2\n"
		     "    backends: [*b]\n",
		     7, 16, "backend must be a mapping of keys to values, found a list");
}

static void test_build_table(void **state)
{
	struct hashlb_config *c =
		load_ok(MINIMAL "      - name: b\n        address: 127.0.0.1:9002\n"
				"        state: drain\n");
	struct hashlb_table *t = NULL;

	assert_int_equal(hashlb_service_cfg_build_table(&c->services[0], NULL, &t, NULL), 0);
	assert_int_equal(hashlb_table_backend_count(t), 2);
	assert_int_equal(hashlb_table_up_count(t), 1);
	assert_false(hashlb_table_backend_down(t, 0));
	assert_true(hashlb_table_backend_down(t, 1));
	hashlb_table_free(t);
	hashlb_config_free(c);
}

/* --- helpers --------------------------------------------------------------- */

static void test_addr_parse(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;

	assert_int_equal(hashlb_addr_parse("10.1.2.3:443", false, &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(hashlb_addr_parse("[fe80::1]:1", false, &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_int_equal(hashlb_addr_parse("1.2.3.4:0", true, &ss, &len), 0);
	assert_int_equal(hashlb_addr_parse("1.2.3.4:0", false, &ss, &len), -EINVAL);
	assert_int_equal(hashlb_addr_parse("1.2.3.4", false, &ss, &len), -EINVAL);
	assert_int_equal(hashlb_addr_parse("::1", false, &ss, &len), -EINVAL);
	assert_int_equal(hashlb_addr_parse("[::1]", false, &ss, &len), -EINVAL);
	assert_int_equal(hashlb_addr_parse("example.com:80", false, &ss, &len), -EINVAL);
	assert_int_equal(hashlb_addr_parse("1.2.3.4:123456", false, &ss, &len), -EINVAL);
	assert_int_equal(hashlb_addr_parse("1.2.3.4:-1", false, &ss, &len), -EINVAL);
	assert_int_equal(hashlb_addr_parse("01.2.3.4:80", false, &ss, &len), -EINVAL);
}

/* Whether <was> to <now> (listen addresses, port 0 allowed) moves the 4-tuple's destination. */
static bool listen_moves(const char *was, const char *now)
{
	struct sockaddr_storage a, b;
	socklen_t al = 0, bl = 0;

	assert_int_equal(hashlb_addr_parse(was, true, &a, &al), 0);
	assert_int_equal(hashlb_addr_parse(now, true, &b, &bl), 0);
	return hashlb_listen_moves_destination(&a, al, &b, bl);
}

/* The 4-tuple hashes the address a connection reached: another port or another specific
 * address changes it, a wildcard to one of its addresses on the same port (or back) not, nor
 * an IPv4 address to its IPv4-mapped form; a port-0 listener that moves gets another port. */
static void test_listen_moves_destination(void **state)
{
	assert_false(listen_moves("127.0.0.1:80", "127.0.0.1:80"));
	assert_true(listen_moves("127.0.0.1:80", "127.0.0.2:80"));
	assert_true(listen_moves("127.0.0.1:80", "127.0.0.1:81"));
	assert_false(listen_moves("0.0.0.0:80", "127.0.0.1:80"));
	assert_false(listen_moves("127.0.0.1:80", "0.0.0.0:80"));
	assert_false(listen_moves("[::]:80", "[::1]:80"));
	/* a dual-stack [::]'s IPv4 clients hash IPv4-mapped, as 127.0.0.1:80's; and an IPv4
	 * address written IPv4-mapped is that address */
	assert_false(listen_moves("[::]:80", "127.0.0.1:80"));
	assert_false(listen_moves("127.0.0.1:80", "[::ffff:127.0.0.1]:80"));
	assert_true(listen_moves("[::ffff:127.0.0.1]:80", "127.0.0.2:80"));
	assert_true(listen_moves("[::1]:80", "127.0.0.1:80"));
	assert_true(listen_moves("0.0.0.0:80", "127.0.0.1:81"));
	assert_false(listen_moves("127.0.0.1:0", "127.0.0.1:0"));
	assert_true(listen_moves("0.0.0.0:0", "127.0.0.1:0"));
}

static void test_admin_state_names(void **state)
{
	enum hashlb_admin_state s;

	for (int i = 0; i < HASHLB_ADMIN_MAX; i++) {
		assert_int_equal(hashlb_admin_state_parse(hashlb_admin_state_name(i), &s), 0);
		assert_int_equal(s, i);
	}
	assert_int_equal(hashlb_admin_state_parse("maintenance", &s), 0);
	assert_int_equal(s, HASHLB_ADMIN_MAINT);
	/* the other spellings configs/full.yaml and docs/control.md give, any case */
	assert_int_equal(hashlb_admin_state_parse("Up", &s), 0);
	assert_int_equal(s, HASHLB_ADMIN_READY);
	assert_int_equal(hashlb_admin_state_parse("DRAINING", &s), 0);
	assert_int_equal(s, HASHLB_ADMIN_DRAIN);
	assert_int_equal(hashlb_admin_state_parse("Maint", &s), 0);
	assert_int_equal(s, HASHLB_ADMIN_MAINT);
	assert_int_equal(hashlb_admin_state_parse("bogus", &s), -EINVAL);
	assert_null(hashlb_admin_state_name(HASHLB_ADMIN_MAX));
	assert_string_equal(hashlb_steering_name(HASHLB_STEERING_KERNEL), "kernel");
}

/* An error hashlb_config_parse_list() must list: where, and what its message holds. */
struct want_error {
	int line, col;
	const char *what;
};

/*
 * <yaml> refused with every error of <want> (<n>), in file order, each at its line:column
 * with its message, and no other; the first found is the one hashlb_config_parse() says.
 */
static void expect_errors(const char *yaml, const struct want_error *want, size_t n)
{
	struct hashlb_error_list l = { 0 };
	struct hashlb_config *c = NULL;
	struct hashlb_error err, one;
	bool first_listed = false;
	int r;

	memset(&err, 0, sizeof(err));
	r = hashlb_config_parse_list(yaml, strlen(yaml), "t.yaml", 0, &c, &err, &l);
	assert_int_equal(r, -EINVAL);
	assert_null(c);
	for (size_t i = 0; i < l.n; i++)
		print_message("listed %d:%d %s\n", l.v[i].line, l.v[i].column, l.v[i].msg);
	assert_int_equal(l.total, n);
	assert_int_equal(l.n, n);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(l.v[i].file, "t.yaml");
		assert_int_equal(l.v[i].reason, HASHLB_ERR_CONFIG);
		if (l.v[i].line != want[i].line || l.v[i].column != want[i].col ||
		    !strstr(l.v[i].msg, want[i].what))
			fail_msg("error %zu: expected %d:%d '%s', got %d:%d '%s'", i, want[i].line,
				 want[i].col, want[i].what, l.v[i].line, l.v[i].column, l.v[i].msg);
	}
	/* the load that stops at the first error (a reload's) says the first found */
	assert_int_equal(hashlb_config_parse(yaml, strlen(yaml), "t.yaml", &c, &one), -EINVAL);
	assert_int_equal(err.line, one.line);
	assert_int_equal(err.column, one.column);
	assert_string_equal(err.msg, one.msg);
	for (size_t i = 0; i < n; i++)
		first_listed |= l.v[i].line == one.line && l.v[i].column == one.column &&
				!strcmp(l.v[i].msg, one.msg);
	assert_true(first_listed);
	hashlb_error_list_free(&l);
	assert_null(l.v);
	assert_int_equal(l.total, 0);
}

/*
 * A config with a mistake in each of several places is refused with each one, not with the
 * first alone: an operator fixing five mistakes ran hashlb check five times. Top-level keys,
 * a service's unknown key, a section's value, each backend, another service's backend and a
 * clash between two services that are right on their own.
 */
static void test_every_independent_error_is_listed(void **state)
{
	static const char yaml[] = "workers: 0\n"
				   "services:\n"
				   "  - name: web\n"
				   "    listen: 127.0.0.1:8080\n"
				   "    tabel_size: 101\n"
				   "    timeouts: {connect: 5x, idle: 1m}\n"
				   "    health:\n"
				   "      rise: 0\n"
				   "    backends:\n"
				   "      - name: a\n"
				   "        address: 127.0.0.1:99999\n"
				   "      - name: b\n"
				   "        address: 127.0.0.1:9002\n"
				   "        weight: -3\n"
				   "  - name: api\n"
				   "    listen: 127.0.0.1:8081\n"
				   "    backends:\n"
				   "      - {name: c, address: 127.0.0.1:9003, state: sleeping}\n"
				   "  - name: db\n"
				   "    listen: 127.0.0.1:8082\n"
				   "    backends:\n"
				   "      - {name: d, address: 127.0.0.1:9004}\n"
				   "  - name: db\n"
				   "    listen: 127.0.0.1:8083\n"
				   "    backends:\n"
				   "      - {name: e, address: 127.0.0.1:9005}\n";
	static const struct want_error want[] = {
		{ 1, 10, "'workers' 0 is out of range 1..256" },
		{ 5, 5, "unknown key 'tabel_size' in service (did you mean 'table_size'?)" },
		{ 6, 25, "'connect' must be a duration" },
		{ 8, 13, "'rise' 0 is out of range 1..100" },
		{ 11, 18, "'127.0.0.1:99999' is not a valid address" },
		{ 14, 17, "'weight' -3 is out of range" },
		{ 18, 51, "'state' must be ready, drain or maint, found 'sleeping'" },
		{ 23, 11, "duplicate service name 'db' (first at line 19)" },
	};
	struct hashlb_error_list l = { 0 };
	struct hashlb_config *c = NULL;
	struct hashlb_error err;

	expect_errors(yaml, want, sizeof(want) / sizeof(want[0]));
	/* a config that loads lists nothing */
	assert_int_equal(
		hashlb_config_parse_list(MINIMAL, strlen(MINIMAL), "t.yaml", 0, &c, &err, &l), 0);
	assert_int_equal(l.total, 0);
	hashlb_config_free(c);
	hashlb_error_list_free(&l);
}

/*
 * What is checked against a value that was refused is not checked: the refused value is left
 * at its default, and an error about that default would be none of the file's (a cascade).
 * Each of these configs has one mistake and gets one error.
 */
static void test_a_dependent_error_does_not_cascade(void **state)
{
#define WEB "services:\n  - name: web\n    listen: 127.0.0.1:8080\n"
#define ONE_BACKEND "    backends: [{name: a, address: 127.0.0.1:9001}]\n"
	static const struct {
		const char *yaml;
		struct want_error want;
	} cases[] = {
		/* the list misspelt: not also "has no 'services' list" */
		{ "servics:\n  - name: web\n",
		  { 1, 1, "unknown key 'servics' in the configuration" } },
		/* the interval refused: the timeout not checked against the default 2s */
		{ WEB "    health: {interval: 1x, timeout: 5s}\n" ONE_BACKEND,
		  { 4, 24, "'interval' must be a duration" } },
		/* the scheme refused: vnodes not said to need ring */
		{ WEB "    scheme: rnig\n    vnodes: 100\n" ONE_BACKEND,
		  { 4, 13, "'scheme' must be ring or maglev" } },
		/* a backend's name misspelt: not also "backend has no 'name'" */
		{ WEB "    backends: [{nmae: a, address: 127.0.0.1:9001}]\n",
		  { 4, 17, "unknown key 'nmae' in backend" } },
		/* the limit misspelt: client_prefix not said to lack it */
		{ WEB
		  "    max_conections_per_client: 5\n    client_prefix: {ipv4: 24}\n" ONE_BACKEND,
		  { 4, 5, "unknown key 'max_conections_per_client' in service" } },
		/* accept_proxy refused: accept_proxy_from not said to need it */
		{ WEB "    accept_proxy: maybe\n    accept_proxy_from: [10.0.0.0/8]\n" ONE_BACKEND,
		  { 4, 19, "'accept_proxy' must be true or false" } },
		/* a source of the wrong family: said of the first backend, not of each */
		{ WEB "    source: \"::1\"\n    backends: [{name: a, address: 127.0.0.1:9001},\n"
		      "               {name: b, address: 127.0.0.1:9002}]\n",
		  { 5, 35, "is IPv4 but the service's source is IPv6" } },
		/* a backend that failed to load (weight 0, calloc's): the list is not then said
		 * to have every weight 0, nor checked as a table */
		{ WEB "    backends: [oops, {name: b, address: 127.0.0.1:9002, weight: 0}]\n",
		  { 4, 16, "backend must be a mapping" } },
		/* the admin address written twice: the service not also said to clash with the
		 * first, which deleting it (the one meant to go) makes vanish */
		{ "admin: 127.0.0.1:8080\nadmin: 127.0.0.1:9000\n" WEB ONE_BACKEND,
		  { 2, 1, "duplicate key 'admin' in the configuration" } },
		/* admin misspelt: the service not also said to clash with the default admin
		 * address, which the address meant would not */
		{ "admn: 127.0.0.1:9000\nservices:\n  - name: web\n"
		  "    listen: 127.0.0.1:9901\n" ONE_BACKEND,
		  { 1, 1, "unknown key 'admn' in the configuration" } },
		/* table_memory written twice: the tables not summed against the first */
		{ "table_memory: 1MiB\ntable_memory: 1GiB\n" WEB
		  "    table_size: 1000003\n" ONE_BACKEND,
		  { 2, 1, "duplicate key 'table_memory' in the configuration" } },
		/* a value wrong in an anchor, read again through an alias: one mistake, said
		 * once (it was said again, "through the alias at line 8", at the same place) */
		{ WEB "    health: &h {interval: 1x}\n" ONE_BACKEND
		      "  - name: api\n    listen: 127.0.0.1:8081\n    health: *h\n" ONE_BACKEND,
		  { 4, 27, "'interval' must be a duration" } },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		print_message("case %zu\n", i);
		expect_errors(cases[i].yaml, &cases[i].want, 1);
	}
#undef WEB
#undef ONE_BACKEND
}

/*
 * The first HASHLB_ERRORS_KEPT errors are kept and every one counted: 16 MiB of mistakes
 * must not take a list of a million.
 */
static void test_error_list_is_bounded(void **state)
{
	size_t n = HASHLB_ERRORS_KEPT + 500, len = 0;
	char *yaml = malloc(64 + n * 32);
	struct hashlb_error_list l = { 0 };
	struct hashlb_config *c = NULL;
	struct hashlb_error err;

	assert_non_null(yaml);
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(yaml + len, "bad%zu: 1\n", i);
	len += (size_t)sprintf(yaml + len, MINIMAL);
	assert_int_equal(hashlb_config_parse_list(yaml, len, "t.yaml", 0, &c, &err, &l), -EINVAL);
	assert_int_equal(l.total, n);
	assert_int_equal(l.n, HASHLB_ERRORS_KEPT);
	assert_int_equal(l.v[0].line, 1);
	assert_int_equal(l.v[HASHLB_ERRORS_KEPT - 1].line, HASHLB_ERRORS_KEPT);
	hashlb_error_list_free(&l);
	free(yaml);
}

static void test_load_file_errors(void **state)
{
	struct hashlb_config *c = NULL;
	struct hashlb_error err;

	assert_int_equal(hashlb_config_load("/nonexistent/hashlb.yaml", &c, &err), -ENOENT);
	assert_null(c);
	assert_int_equal(err.reason, HASHLB_ERR_SYSTEM);
	assert_string_equal(err.file, "/nonexistent/hashlb.yaml");
	assert_int_equal(err.line, 0);
	assert_int_equal(hashlb_config_load("/", &c, &err), -EINVAL);
	{
		/* A FIFO is refused at once, not waited on for a writer (which
		 * hung hashlb check, and a reload's control thread with it). */
		char dir[] = "/tmp/hashlb-test-XXXXXX", fifo[64];

		assert_non_null(mkdtemp(dir));
		snprintf(fifo, sizeof(fifo), "%s/fifo.yaml", dir);
		assert_int_equal(mkfifo(fifo, 0600), 0);
		assert_int_equal(hashlb_config_load(fifo, &c, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "not a regular file"));
		unlink(fifo);
		rmdir(dir);
	}
	/* Read to its end, not to the size fstat() gives: procfs says 0 of a file
	 * that has text, and it was read as an empty config. */
	assert_int_equal(hashlb_config_load("/proc/self/status", &c, &err), -EINVAL);
	assert_int_equal(err.reason, HASHLB_ERR_CONFIG);
	assert_string_equal(err.msg, "unknown key 'Name' in the configuration");
	/* A NULL error is allowed. */
	assert_int_equal(hashlb_config_parse("", 0, "t.yaml", &c, NULL), -EINVAL);
	hashlb_config_free(NULL);
}

/*
 * Whatever the bytes, the loader either loads or refuses with a position
 * inside the text and a message, and never crashes or leaks (CI runs this
 * under ASan): thousands of deterministic random edits of a config that uses
 * every construct, with YAML's special characters as the material.
 */
static void test_mutations(void **state)
{
	static const char base[] = "workers: 2\n"
				   "admin: \"[::1]:9901\"\n"
				   "services:\n"
				   "  - name: web\n"
				   "    listen: 127.0.0.1:8080\n"
				   "    scheme: maglev\n"
				   "    table_size: 101\n"
				   "    hash_key: src-ip\n"
				   "    timeouts: {connect: 1s, idle: 5m}\n"
				   "    health:\n"
				   "      interval: 2s\n"
				   "    backends: &pool\n"
				   "      - name: a\n"
				   "        address: 127.0.0.1:9001\n"
				   "        weight: 2\n"
				   "      - {name: b, address: \"[::1]:9002\", state: drain}\n"
				   "  - name: api\n"
				   "    listen: 127.0.0.1:8081\n"
				   "    scheme: ring\n"
				   "    vnodes: 8\n"
				   "    backends: *pool\n";
	static const char *const bits[] = { ":",
					    "- ",
					    "[",
					    "]",
					    "{",
					    "}",
					    "&x ",
					    "*x",
					    "*pool",
					    "\"",
					    "'",
					    "\n",
					    "  ",
					    "\t",
					    "#",
					    "~",
					    "0x",
					    "-1",
					    "99999999999999999999",
					    "---\n",
					    "<<: ",
					    "!!str ",
					    "|\n",
					    "? ",
					    ",",
					    "\xc3\xa9",
					    "\xff",
					    "%YAML 1.2\n" };
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	size_t loaded = 0;
	char text[4096];

	for (int round = 0; round < 3000; round++) {
		size_t len = sizeof(base) - 1;
		struct hashlb_config *c = NULL;
		struct hashlb_error err;
		int edits, r;

		memcpy(text, base, len);
#define NEXT() (rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17, rng)
		edits = 1 + (int)(NEXT() % 4);
		for (int e = 0; e < edits; e++) {
			size_t pos = NEXT() % (len + 1), n;
			const char *ins;

			switch (NEXT() % 3) {
			case 0: /* insert a YAML special */
				ins = bits[NEXT() % (sizeof(bits) / sizeof(bits[0]))];
				n = strlen(ins);
				if (len + n >= sizeof(text))
					break;
				memmove(text + pos + n, text + pos, len - pos);
				memcpy(text + pos, ins, n);
				len += n;
				break;
			case 1: /* delete a few bytes */
				n = 1 + NEXT() % 10;
				if (pos + n > len)
					n = len - pos;
				memmove(text + pos, text + pos + n, len - pos - n);
				len -= n;
				break;
			default: /* overwrite one byte */
				if (pos < len)
					text[pos] = (char)(NEXT() % 256);
				break;
			}
		}
#undef NEXT
		memset(&err, 0, sizeof(err));
		r = hashlb_config_parse(text, len, "m.yaml", &c, &err);
		if (r == 0) {
			assert_non_null(c);
			loaded++;
			hashlb_config_free(c);
			continue;
		}
		assert_int_equal(r, -EINVAL);
		assert_null(c);
		assert_int_equal(err.reason, HASHLB_ERR_CONFIG);
		assert_string_equal(err.file, "m.yaml");
		assert_true(err.line >= 1 && err.column >= 1);
		assert_true(err.msg[0] != '\0');
	}
	/* Some edits are harmless (in a comment, a value): both outcomes happen. */
	assert_true(loaded > 0 && loaded < 3000);
}

/* Every configs/ *.yaml loads and builds: the examples stay true. */
static void test_example_configs(void **state)
{
	const char *dir = getenv("HASHLB_CONFIGS");
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	if (!dir)
		fail_msg("HASHLB_CONFIGS is not set (meson sets it to the source tree's configs/)");
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		struct hashlb_config *c = NULL;
		struct hashlb_error err;
		char path[4096];

		if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (hashlb_config_load(path, &c, &err) < 0)
			fail_msg("%s:%d:%d: %s", path, err.line, err.column, err.msg);
		assert_true(c->n_services >= 1);
		/* an example says nothing hashlb check would warn of */
		if (hashlb_config_warnings(c, &err, 1) != 0)
			fail_msg("%s:%d:%d: warning: %s", path, err.line, err.column, err.msg);
		if (strcmp(de->d_name, "demo.yaml") == 0) {
			const struct hashlb_service_cfg *s = &c->services[0];

			/* The README demo depends on these. */
			assert_string_equal(s->listen, "127.0.0.1:18080");
			assert_int_equal(s->table.scheme, HASHLB_SCHEME_MAGLEV);
			assert_int_equal(s->key, HASHLB_KEY_SRC_IP);
			assert_int_equal(s->n_backends, 3);
			for (uint32_t i = 0; i < 3; i++) {
				char want[32];

				snprintf(want, sizeof(want), "127.0.0.1:%u", 18081 + i);
				assert_string_equal(s->backends[i].address, want);
			}
		}
		hashlb_config_free(c);
		n++;
	}
	closedir(d);
	assert_true(n >= 4); /* demo, ring, ipv6, full */
}

/*
 * configs/full.yaml says every key in it is set to its default: its service
 * "web" loads to what the same service with only its required keys does.
 */
static void test_full_yaml_defaults(void **state)
{
	const char *dir = getenv("HASHLB_CONFIGS");
	struct hashlb_config *f = NULL, *m;
	const struct hashlb_service_cfg *fs, *ms;
	struct hashlb_error err;
	char path[4096];

	if (!dir)
		fail_msg("HASHLB_CONFIGS is not set (meson sets it to the source tree's configs/)");
	snprintf(path, sizeof(path), "%s/full.yaml", dir);
	if (hashlb_config_load(path, &f, &err) < 0)
		fail_msg("%s:%d:%d: %s", path, err.line, err.column, err.msg);
	m = load_ok("services:\n"
		    "  - name: web\n"
		    "    listen: 127.0.0.1:18380\n"
		    "    backends:\n"
		    "      - name: web-1\n"
		    "        address: 127.0.0.1:18381\n");
	assert_int_equal(f->workers, m->workers);
	assert_string_equal(f->admin, m->admin);
	assert_int_equal(f->resolve_every_ms, m->resolve_every_ms);
	assert_true(f->table_memory == m->table_memory);
	fs = &f->services[0];
	ms = &m->services[0];
	assert_string_equal(fs->name, "web");
	assert_int_equal(fs->table.scheme, ms->table.scheme);
	assert_int_equal(fs->table.maglev_m, ms->table.maglev_m);
	assert_int_equal(f->services[1].table.ring_v, ms->table.ring_v); /* ring-example's */
	assert_true(fs->table.seed == ms->table.seed);
	assert_true(fs->table.max_bytes == ms->table.max_bytes);
	assert_int_equal(fs->key, ms->key);
	assert_int_equal(fs->hash_prefix.v4, ms->hash_prefix.v4);
	assert_int_equal(fs->hash_prefix.v6, ms->hash_prefix.v6);
	assert_int_equal(ms->hash_prefix.v4, 32);
	assert_int_equal(ms->hash_prefix.v6, 128);
	assert_int_equal(fs->client_prefix.v4, ms->client_prefix.v4);
	assert_int_equal(fs->client_prefix.v6, ms->client_prefix.v6);
	assert_int_equal(ms->client_prefix.v4, 32);
	assert_int_equal(ms->client_prefix.v6, 128);
	assert_int_equal(fs->connect_timeout_ms, ms->connect_timeout_ms);
	assert_int_equal(fs->idle_timeout_ms, ms->idle_timeout_ms);
	assert_int_equal(fs->drain_timeout_ms, ms->drain_timeout_ms);
	assert_int_equal(fs->queue_timeout_ms, ms->queue_timeout_ms);
	assert_int_equal(fs->abort_on_close, ms->abort_on_close);
	assert_int_equal(fs->max_connections, ms->max_connections);
	assert_int_equal(fs->max_connections_per_client, ms->max_connections_per_client);
	assert_int_equal(fs->max_connection_rate, ms->max_connection_rate);
	assert_int_equal(fs->connect_retries, ms->connect_retries);
	assert_int_equal(fs->slow_start_ms, ms->slow_start_ms);
	assert_true(fs->balance_factor == ms->balance_factor);
	assert_int_equal(fs->steering, ms->steering);
	assert_int_equal(fs->steer_flows, ms->steer_flows);
	assert_int_equal(fs->proxy_protocol, ms->proxy_protocol);
	assert_int_equal(fs->accept_proxy, ms->accept_proxy);
	assert_int_equal(fs->keepalive.enabled, ms->keepalive.enabled);
	assert_int_equal(fs->keepalive.idle_s, ms->keepalive.idle_s);
	assert_int_equal(fs->keepalive.interval_s, ms->keepalive.interval_s);
	assert_int_equal(fs->keepalive.count, ms->keepalive.count);
	assert_int_equal(fs->keepalive.user_timeout_ms, ms->keepalive.user_timeout_ms);
	assert_int_equal(fs->log_connections, ms->log_connections);
	assert_int_equal(fs->health.enabled, ms->health.enabled);
	assert_int_equal(fs->health.interval_ms, ms->health.interval_ms);
	assert_int_equal(fs->health.timeout_ms, ms->health.timeout_ms);
	assert_int_equal(fs->health.rise, ms->health.rise);
	assert_int_equal(fs->health.fall, ms->health.fall);
	assert_int_equal(fs->health.close_on_down, ms->health.close_on_down);
	assert_int_equal(fs->health.passive, ms->health.passive);
	assert_int_equal(fs->health.passive_hold_ms, ms->health.passive_hold_ms);
	assert_int_equal(fs->backends[0].weight, ms->backends[0].weight);
	assert_int_equal(fs->backends[0].max_connections, ms->backends[0].max_connections);
	assert_int_equal(fs->backends[0].admin, ms->backends[0].admin);
	assert_int_equal(fs->backends[0].backup, ms->backends[0].backup);
	assert_int_equal(fs->backends[0].close_on_return, ms->backends[0].close_on_return);
	assert_int_equal(fs->backends[0].each_address, ms->backends[0].each_address);
	hashlb_config_free(f);
	hashlb_config_free(m);
}

/*
 * <top> then three Maglev services of 131071 slots (768 KiB each with a
 * backend down), a, b, c (lines 3, 9, 15; c's backend each_address of
 * localhost when <each>).
 */
static void three_maglev(char *yaml, size_t len, const char *top, bool each)
{
	snprintf(yaml, len,
		 "%s\nservices:\n"
		 "  - name: a\n    listen: 127.0.0.1:81\n    table_size: 131071\n    backends:\n"
		 "      - name: x\n        address: 127.0.0.2:9\n"
		 "  - name: b\n    listen: 127.0.0.1:82\n    table_size: 131071\n    backends:\n"
		 "      - name: x\n        address: 127.0.0.2:9\n"
		 "  - name: c\n    listen: 127.0.0.1:83\n    table_size: 131071\n    backends:\n"
		 "      - name: x\n        address: %s\n",
		 top, each ? "localhost:9\n        each_address: true" : "127.0.0.2:9");
}

/*
 * table_memory caps what all services' tables may hold together, each
 * counted at its size with a backend down (a default Maglev table: 384 KiB,
 * three arrays of 65537 slots), nothing built: the service that passes it
 * is refused, at its line, with the sum, the cap and the key to raise. A
 * 16 MiB file could name ~180,000 services and run the daemon out of
 * memory rather than be refused. At the cap loads; 0 is no cap; 1 GiB by
 * default; a size in bytes or KiB..TiB, 0 or 1MiB..1TiB.
 */
static void test_table_memory(void **state)
{
	struct hashlb_config *c;
	struct hashlb_error err;
	char yaml[2048], top[64];
	uint64_t two, three, one_table;
	size_t len, cap;
	char *big;

	(void)state;
	c = load_ok(MINIMAL);
	assert_true(c->table_memory == HASHLB_TABLE_MEMORY_DEFAULT);
	assert_int_equal(c->table_memory_pos.line, 0);
	one_table = hashlb_service_cfg_table_bytes_max(&c->services[0]);
	/* three arrays of the default table size, and a little for the backend */
	assert_true(one_table >= 3ull * 2 * HASHLB_MAGLEV_M_DEFAULT &&
		    one_table < 3ull * 2 * HASHLB_MAGLEV_M_DEFAULT + 4096);
	assert_true(c->table_bytes == one_table);
	hashlb_config_free(c);

	three_maglev(yaml, sizeof(yaml), "table_memory: 0", false);
	c = load_ok(yaml);
	assert_true(c->table_memory == 0);
	three = c->table_bytes;
	two = three - hashlb_service_cfg_table_bytes_max(&c->services[2]);
	assert_true(three == 3 * hashlb_service_cfg_table_bytes_max(&c->services[0]));
	hashlb_config_free(c);

	/* the third passes 2 MiB; refused at its mapping */
	three_maglev(yaml, sizeof(yaml), "table_memory: 2MiB", false);
	expect_table_memory_error(yaml, 15, 5, "service 'c': with its table");
	snprintf(top, sizeof(top),
		 "over table_memory 2 MiB (2097152 bytes): raise it (0 = no cap)");
	expect_table_memory_error(yaml, 15, 5, top);
	snprintf(top, sizeof(top), "may take %llu bytes", (unsigned long long)three);
	expect_table_memory_error(yaml, 15, 5, top);
	/* exactly at the cap loads; a byte less, refused at the third */
	snprintf(top, sizeof(top), "table_memory: %llu", (unsigned long long)three);
	three_maglev(yaml, sizeof(yaml), top, false);
	c = load_ok(yaml);
	assert_true(c->table_memory == three && c->table_bytes == three);
	hashlb_config_free(c);
	snprintf(top, sizeof(top), "table_memory: %llu", (unsigned long long)three - 1);
	three_maglev(yaml, sizeof(yaml), top, false);
	expect_table_memory_error(yaml, 15, 5, "service 'c'");
	/* at the second's sum, refused at the third too; a byte less, at the second */
	snprintf(top, sizeof(top), "table_memory: %llu", (unsigned long long)two);
	three_maglev(yaml, sizeof(yaml), top, false);
	expect_table_memory_error(yaml, 15, 5, "service 'c'");
	snprintf(top, sizeof(top), "table_memory: %llu", (unsigned long long)two - 1);
	three_maglev(yaml, sizeof(yaml), top, false);
	expect_table_memory_error(yaml, 9, 5, "service 'b'");

	/* Counted again once names resolve: an each_address entry is as many
	 * backends as addresses, here one whose name grew by "@127.0.0.1". */
	snprintf(top, sizeof(top), "table_memory: %llu", (unsigned long long)three);
	three_maglev(yaml, sizeof(yaml), top, true);
	memset(&err, 0, sizeof(err));
	c = NULL;
	assert_int_equal(resolve_text(yaml, &c, &err), -E2BIG);
	assert_int_equal(err.reason, HASHLB_ERR_MEMORY_CAP);
	assert_int_equal(err.line, 15);
	assert_int_equal(err.column, 5);
	if (!strstr(err.msg, "service 'c', its names resolved: with its table") ||
	    !strstr(err.msg, "over table_memory"))
		fail_msg("got: %s", err.msg);
	hashlb_config_free(c);

	/* the default: 1 GiB, which 3,000 default Maglev services pass; 0 lifts it */
	cap = 3000 * 96 + 64;
	big = malloc(cap);
	assert_non_null(big);
	for (int off = 0; off < 2; off++) {
		len = (size_t)snprintf(big, cap, "%sservices:\n", off ? "table_memory: 0\n" : "");
		for (unsigned int i = 0; i < 3000; i++)
			len += (size_t)snprintf(big + len, cap - len,
						"  - {name: s%u, listen: \"127.0.%u.%u:80\", "
						"backends: [{name: x, address: \"10.0.0.1:1\"}]}\n",
						i, i / 256, i % 256);
		c = NULL;
		memset(&err, 0, sizeof(err));
		if (off) {
			assert_int_equal(hashlb_config_parse(big, len, "t.yaml", &c, &err), 0);
			assert_int_equal(c->n_services, 3000);
			assert_true(c->table_bytes == 3000 * one_table);
			hashlb_config_free(c);
			continue;
		}
		assert_int_equal(hashlb_config_parse(big, len, "t.yaml", &c, &err), -E2BIG);
		assert_int_equal(err.reason, HASHLB_ERR_MEMORY_CAP);
		/* the first service whose table passes 1 GiB, on its own line */
		snprintf(top, sizeof(top), "service 's%llu'",
			 (unsigned long long)(HASHLB_TABLE_MEMORY_DEFAULT / one_table));
		assert_int_equal(err.line, (int)(HASHLB_TABLE_MEMORY_DEFAULT / one_table) + 2);
		if (!strstr(err.msg, top) ||
		    !strstr(err.msg, "over table_memory 1 GiB (1073741824 bytes, the default)"))
			fail_msg("got: %s", err.msg);
	}
	free(big);

	/* sizes */
	static const struct {
		const char *v;
		uint64_t want;
	} ok[] = { { "1048576", 1ull << 20 },
		   { "512MiB", 512ull << 20 },
		   { "2GiB", 2ull << 30 },
		   { "1TiB", 1ull << 40 },
		   { "2048KiB", 2ull << 20 },
		   { "0", 0 },
		   { "0GiB", 0 },
		   { "\"3GiB\"", 3ull << 30 } };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(yaml, sizeof(yaml), "table_memory: %s\n" MINIMAL, ok[i].v);
		c = load_ok(yaml);
		if (c->table_memory != ok[i].want)
			fail_msg("table_memory: %s gave %llu", ok[i].v,
				 (unsigned long long)c->table_memory);
		assert_int_equal(c->table_memory_pos.line, 1);
		hashlb_config_free(c);
	}
	static const struct {
		const char *v, *what;
	} bad[] = {
		{ "512", "'table_memory' 512 is out of range 1MiB..1TiB (0 = no cap)" },
		{ "1023KiB", "out of range 1MiB..1TiB" },
		{ "1025GiB", "'table_memory' 1025GiB is out of range 1MiB..1TiB" },
		{ "512MB", "'table_memory' must be a size: bytes as an integer, or an integer "
			   "with a unit KiB, MiB, GiB or TiB" },
		{ "512 MiB", "found '512 MiB'" },
		{ "1.5GiB", "a size is a whole number of its unit (\"1536MiB\", not \"1.5GiB\")" },
		{ "-1", "'table_memory' -1 is out of range 1MiB..1TiB (0 = no cap)" },
		{ "\"512\"",
		  "'table_memory' \"512\" has no unit: write 512MiB, 512GiB, or the number without quotes (bytes)" },
		{ "99999999999999999999",
		  "'table_memory' 99999999999999999999 is out of range 1MiB..1TiB (0 = no cap)" },
		{ "20000000000TiB", "'table_memory' 20000000000TiB is out of range 1MiB..1TiB" },
		{ "[1]", "'table_memory' must be a size, found a list" },
		{ "", "'table_memory' must be a size, found nothing" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml), "table_memory: %s\n" MINIMAL, bad[i].v);
		expect_error(yaml, 1, bad[i].v[0] ? 15 : 13, bad[i].what);
	}
}

/*
 * A name pads to the columns a terminal gives it: a wide (CJK) character two,
 * a combining one none, a byte that is no UTF-8 one. Before, one column a
 * character: "中文" (6 bytes, 4 columns) padded as 2 and pushed the columns
 * after it 2 right; "e\u0301" (3 bytes, 1 column) as 2, 1 left; a lone
 * continuation byte as none.
 */
static void test_text_extra_bytes(void **state)
{
	static const struct {
		const char *s;
		int columns;
	} cases[] = {
		{ "abc", 3 },
		{ "\xc3\xa9t\xc3\xa9", 3 }, /* été */
		{ "\xe4\xb8\xad\xe6\x96\x87", 4 }, /* 中文 */
		{ "e\xcc\x81x", 2 }, /* e, U+0301 COMBINING ACUTE ACCENT, x */
		{ "\xf0\x9f\x98\x80", 2 }, /* U+1F600, wide */
		{ "a\x80\xff", 3 }, /* no UTF-8: a column a byte */
		{ "\xe4\xb8", 2 }, /* cut short */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int columns = (int)strlen(cases[i].s) - hashlb_text_extra_bytes(cases[i].s);

		if (columns != cases[i].columns)
			fail_msg("case %zu: %d columns, want %d", i, columns, cases[i].columns);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_not_a_mapping),
		cmocka_unit_test(test_yaml_syntax),
		cmocka_unit_test(test_invisible_character_in_syntax),
		cmocka_unit_test(test_bom_line_one_same_error),
		cmocka_unit_test(test_tab_after_complex_key),
		cmocka_unit_test(test_not_utf8),
		cmocka_unit_test(test_lone_cr),
		cmocka_unit_test(test_control_chars),
		cmocka_unit_test(test_blank_runs),
		cmocka_unit_test(test_steering_interface),
		cmocka_unit_test(test_steering_flows),
		cmocka_unit_test(test_tags),
		cmocka_unit_test(test_block_scalar_position),
		cmocka_unit_test(test_flow_pair_position),
		cmocka_unit_test(test_empty_block_scalar_last),
		cmocka_unit_test(test_one_line_errors),
		cmocka_unit_test(test_a_long_value_is_cut_at_a_character),
		cmocka_unit_test(test_nul_refused),
		cmocka_unit_test(test_no_services),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_long_quote_keeps_the_end),
		cmocka_unit_test(test_long_name_keeps_the_rule),
		cmocka_unit_test(test_cut_keeps_escapes_whole),
		cmocka_unit_test(test_admin_only),
		cmocka_unit_test(test_admin_only_before_a_syntax_error),
		cmocka_unit_test(test_admin_only_before_a_bad_byte),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_missing_keys),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_host_names),
		cmocka_unit_test(test_named_backend_parsed),
		cmocka_unit_test(test_resolve_localhost),
		cmocka_unit_test(test_each_address),
		cmocka_unit_test(test_table_memory),
		cmocka_unit_test(test_addr_format),
		cmocka_unit_test(test_resolve_every),
		cmocka_unit_test(test_client_lists),
		cmocka_unit_test(test_backup),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_shared_address_warned),
		cmocka_unit_test(test_backend_at_admin_warned),
		cmocka_unit_test(test_bare_duration_warned),
		cmocka_unit_test(test_passive_hold_with_checks_on_warns),
		cmocka_unit_test(test_passive_hold_with_passive_off_warns),
		cmocka_unit_test(test_check_keys_with_checks_off_warn),
		cmocka_unit_test(test_close_on_down_that_never_acts_warns),
		cmocka_unit_test(test_bare_duration_suggestions),
		cmocka_unit_test(test_bare_duration_anchor_two_settings),
		cmocka_unit_test(test_loop),
		cmocka_unit_test(test_services_loop),
		cmocka_unit_test(test_other_scheme_params),
		cmocka_unit_test(test_core_errors),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_null_settings_are_the_defaults),
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_proxy_protocol),
		cmocka_unit_test(test_accept_proxy),
		cmocka_unit_test(test_accept_proxy_from),
		cmocka_unit_test(test_keepalive),
		cmocka_unit_test(test_backend_max_connections),
		cmocka_unit_test(test_health_payload),
		cmocka_unit_test(test_close_on_down),
		cmocka_unit_test(test_passive),
		cmocka_unit_test(test_health_port),
		cmocka_unit_test(test_max_connection_rate),
		cmocka_unit_test(test_log_connections),
		cmocka_unit_test(test_queue_timeout),
		cmocka_unit_test(test_source),
		cmocka_unit_test(test_prefix_match),
		cmocka_unit_test(test_prefix_set_random),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_drain_never),
		cmocka_unit_test(test_health_timeout_default),
		cmocka_unit_test(test_settings_written_as_a_value),
		cmocka_unit_test(test_admin_off_and_v6),
		cmocka_unit_test(test_admin_empty_warns),
		cmocka_unit_test(test_anchors),
		cmocka_unit_test(test_anchors_cost_follows_their_number),
		cmocka_unit_test(test_services_cost_follows_their_number),
		cmocka_unit_test(test_aliases_cannot_multiply_the_config),
		cmocka_unit_test(test_deep_flow_nesting_is_refused_in_bounded_memory),
		cmocka_unit_test(test_long_flat_lists_are_refused_in_bounded_memory),
		cmocka_unit_test(test_parse_takes_what_a_file_may_hold),
		cmocka_unit_test(test_past_the_range_says_the_range),
		cmocka_unit_test(test_integers_are_yaml_1_2s),
		cmocka_unit_test(test_an_error_through_an_alias_says_where_the_alias_is),
		cmocka_unit_test(test_brackets_in_a_plain_scalar_are_not_nesting),
		cmocka_unit_test(test_build_table),
		cmocka_unit_test(test_addr_parse),
		cmocka_unit_test(test_listen_moves_destination),
		cmocka_unit_test(test_admin_state_names),
		cmocka_unit_test(test_load_file_errors),
		cmocka_unit_test(test_every_independent_error_is_listed),
		cmocka_unit_test(test_a_dependent_error_does_not_cascade),
		cmocka_unit_test(test_error_list_is_bounded),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_example_configs),
		cmocka_unit_test(test_full_yaml_defaults),
		cmocka_unit_test(test_hash_prefix),
		cmocka_unit_test(test_client_prefix),
		cmocka_unit_test(test_text_extra_bytes),
		cmocka_unit_test(test_duration_format),
		cmocka_unit_test(test_bytes_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
