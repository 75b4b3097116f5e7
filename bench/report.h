/* SPDX-License-Identifier: MIT */
/*
 * Tables printed by hashlb-bench as Markdown, CSV or JSON. Rows stream out
 * as they are measured, so a long run shows progress. Cells are numbers
 * (printed with a printf format, unquoted in JSON) or strings.
 */
#ifndef HASHLB_BENCH_REPORT_H
#define HASHLB_BENCH_REPORT_H

#include <stdio.h>

enum report_format { REPORT_MD = 0, REPORT_CSV, REPORT_JSON, REPORT_FORMAT_MAX };

struct report {
	enum report_format format;
	FILE *out;
	int n_tables; /* tables begun */
	int n_items; /* JSON: notes and tables written */
	int n_rows; /* rows of the current table */
	int n_cells; /* cells of the current row */
	int n_cols;
	const char *table_id;
	const char *cols[32];
};

/* -1 if <s> is not md, csv or json. */
int report_format_parse(const char *s);

/* Starts the document; <command> is the command line that reproduces it. */
void report_begin(struct report *r, enum report_format f, FILE *out, const char *command);
/* A free line of text: a Markdown paragraph, a CSV comment, a JSON note. */
void report_note(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Starts a table; <cols> is a NULL-terminated list of column names. */
void report_table(struct report *r, const char *id, const char *title, const char *const *cols);
void report_str(struct report *r, const char *s);
void report_num(struct report *r, const char *fmt, double v);
/* A number with no meaning here (JSON null, "-" elsewhere). */
void report_none(struct report *r);
void report_end_row(struct report *r);
void report_end_table(struct report *r);
void report_end(struct report *r);

#endif
