// SPDX-License-Identifier: MIT
/* Markdown, CSV and JSON output of hashlb-bench (see report.h). */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "report.h"

static const char *const format_names[REPORT_FORMAT_MAX] = { "md", "csv", "json" };

int report_format_parse(const char *s)
{
	for (int i = 0; i < REPORT_FORMAT_MAX; i++)
		if (strcmp(s, format_names[i]) == 0)
			return i;
	return -1;
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", *s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static void csv_str(FILE *out, const char *s)
{
	if (!strpbrk(s, ",\"\n")) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

void report_begin(struct report *r, enum report_format f, FILE *out, const char *command)
{
	memset(r, 0, sizeof(*r));
	r->format = f;
	r->out = out;
	switch (f) {
	case REPORT_MD:
		fprintf(out, "Reproduce with: `%s`\n\n", command);
		break;
	case REPORT_CSV:
		fprintf(out, "# reproduce with: %s\n", command);
		break;
	default:
		fputs("{\"command\": ", out);
		json_str(out, command);
		fputs(",\n\"items\": [", out);
		break;
	}
}

void report_note(struct report *r, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	switch (r->format) {
	case REPORT_MD:
		fprintf(r->out, "%s\n\n", buf);
		break;
	case REPORT_CSV:
		fprintf(r->out, "# %s\n", buf);
		break;
	default:
		fputs(r->n_items++ ? ",\n {\"note\": " : "\n {\"note\": ", r->out);
		json_str(r->out, buf);
		fputc('}', r->out);
		break;
	}
	fflush(r->out);
}

void report_table(struct report *r, const char *id, const char *title, const char *const *cols)
{
	FILE *out = r->out;

	r->n_cols = 0;
	while (cols[r->n_cols] && r->n_cols < 32) {
		r->cols[r->n_cols] = cols[r->n_cols];
		r->n_cols++;
	}
	r->table_id = id;
	switch (r->format) {
	case REPORT_MD:
		fprintf(out, "### %s\n\n|", title);
		for (int i = 0; i < r->n_cols; i++)
			fprintf(out, " %s |", cols[i]);
		fputs("\n|", out);
		for (int i = 0; i < r->n_cols; i++)
			fputs(i ? "---:|" : "---|", out);
		fputc('\n', out);
		break;
	case REPORT_CSV:
		fprintf(out, "\n# %s\ntable", title);
		for (int i = 0; i < r->n_cols; i++) {
			fputc(',', out);
			csv_str(out, cols[i]);
		}
		fputc('\n', out);
		break;
	default:
		fputs(r->n_items++ ? ",\n {\"table\": " : "\n {\"table\": ", out);
		json_str(out, id);
		fputs(", \"title\": ", out);
		json_str(out, title);
		fputs(", \"rows\": [", out);
		break;
	}
	r->n_tables++;
	r->n_rows = 0;
	r->n_cells = 0;
}

static void cell_begin(struct report *r)
{
	FILE *out = r->out;

	switch (r->format) {
	case REPORT_MD:
		fputs(r->n_cells ? " " : "| ", out);
		break;
	case REPORT_CSV:
		if (!r->n_cells)
			csv_str(out, r->table_id);
		fputc(',', out);
		break;
	default:
		if (!r->n_cells)
			fputs(r->n_rows ? ",\n  {" : "\n  {", out);
		else
			fputs(", ", out);
		json_str(out, r->n_cells < r->n_cols ? r->cols[r->n_cells] : "?");
		fputs(": ", out);
		break;
	}
}

static void cell_end(struct report *r)
{
	if (r->format == REPORT_MD)
		fputs(" |", r->out);
	r->n_cells++;
}

void report_str(struct report *r, const char *s)
{
	cell_begin(r);
	if (r->format == REPORT_JSON)
		json_str(r->out, s);
	else if (r->format == REPORT_CSV)
		csv_str(r->out, s);
	else
		fputs(s, r->out);
	cell_end(r);
}

void report_num(struct report *r, const char *fmt, double v)
{
	if (!isfinite(v)) {
		report_none(r);
		return;
	}
	cell_begin(r);
	/* JSON and CSV get full precision (15 digits: a byte count of 7 digits or more was
	 * rounded at 6, 1311580 written 1.31158e+06), Markdown the column's format */
	if (r->format != REPORT_MD)
		fprintf(r->out, "%.15g", v);
	else
		fprintf(r->out, fmt, v);
	cell_end(r);
}

void report_none(struct report *r)
{
	cell_begin(r);
	fputs(r->format == REPORT_JSON ? "null" : "-", r->out);
	cell_end(r);
}

void report_end_row(struct report *r)
{
	if (r->format == REPORT_JSON)
		fputc('}', r->out);
	else
		fputc('\n', r->out);
	r->n_rows++;
	r->n_cells = 0;
	fflush(r->out);
}

void report_end_table(struct report *r)
{
	if (r->format == REPORT_JSON)
		fputs("]}", r->out);
	else if (r->format == REPORT_MD)
		fputc('\n', r->out);
}

void report_end(struct report *r)
{
	if (r->format == REPORT_JSON)
		fputs("\n]}\n", r->out);
	fflush(r->out);
}
