// SPDX-License-Identifier: MIT
/* Kernel steering when built with -Dbpf=disabled: every entry point says so. */
#include <errno.h>
#include <stddef.h>

#include "hashlb/steer.h"

#define NO_BPF                                                                       \
	"hashlb was built without kernel steering (meson -Dbpf=disabled, or clang, " \
	"bpftool or libbpf missing); rebuild with -Dbpf=enabled"

bool hashlb_steer_supported(void)
{
	return false;
}

int hashlb_steer_open(const struct hashlb_steer_opts *o, const struct hashlb_table *first,
		      struct hashlb_steer **ret_steer, struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_find(const char *iface, enum hashlb_steer_mode mode,
		      struct hashlb_steer **ret_steer, struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_adopt(const char *iface, enum hashlb_steer_mode mode,
		       struct hashlb_steer **ret_steer, struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_find_driven(const char *iface, pid_t pid, struct hashlb_steer **ret_steer,
			     struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_other(struct hashlb_steer *s, const char *iface, enum hashlb_steer_mode *ret_mode,
		       uint32_t *ret_id, pid_t *ret_holder)
{
	return -ENOENT;
}

void hashlb_steer_tables_unknown(struct hashlb_steer *s)
{
}

void hashlb_steer_set_abort(struct hashlb_steer *s, bool (*abort)(void *arg), void *arg)
{
}

void hashlb_steer_set_keep(struct hashlb_steer *s, bool keep)
{
}

bool hashlb_steer_driven_elsewhere(struct hashlb_steer *s)
{
	return false;
}

int hashlb_steer_set_daemon(struct hashlb_steer *s, struct hashlb_error *err)
{
	return -EOPNOTSUPP;
}

bool hashlb_steer_daemon(struct hashlb_steer *s)
{
	return false;
}

const char *hashlb_steer_unlocked(const struct hashlb_steer *s)
{
	return NULL;
}

void hashlb_steer_set_lock_try(struct hashlb_steer *s, bool try_only)
{
}

int hashlb_steer_check_driver(struct hashlb_steer *s, const char *iface, const char *remedy,
			      struct hashlb_error *err)
{
	return 0;
}

void hashlb_steer_free(struct hashlb_steer *s)
{
}

int hashlb_steer_share(struct hashlb_steer *s, uint32_t table, struct hashlb_steer **ret_steer,
		       struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_grow(struct hashlb_steer *s, const struct hashlb_steer_opts *o,
		      struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

void hashlb_steer_caps(const struct hashlb_steer *s, uint32_t *ret_backends, uint32_t *ret_maglev_m,
		       uint32_t *ret_points)
{
	(void)s;
	*ret_backends = *ret_maglev_m = *ret_points = 0;
}

bool hashlb_steer_loaded(const struct hashlb_steer *s)
{
	(void)s;
	return false;
}

int hashlb_steer_rebind(struct hashlb_steer *h, const struct hashlb_steer *s,
			struct hashlb_error *err)
{
	(void)h;
	(void)s;
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

uint32_t hashlb_steer_tables(const struct hashlb_steer *s)
{
	return 1;
}

uint32_t hashlb_steer_table(const struct hashlb_steer *s)
{
	return 0;
}

int hashlb_steer_vip_table(struct hashlb_steer *s, const struct sockaddr_storage *vip)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_use_table(struct hashlb_steer *s, uint32_t table)
{
	return -EOPNOTSUPP;
}

bool hashlb_steer_table_serves(struct hashlb_steer *s, uint32_t table)
{
	return false;
}

bool hashlb_steer_kept(const struct hashlb_steer *s)
{
	return true;
}

int hashlb_steer_detach(const char *iface, enum hashlb_steer_mode mode, struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_set_vips(struct hashlb_steer *s, const struct sockaddr_storage *vips, uint32_t n,
			  struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_close_vips(struct hashlb_steer *s, const struct sockaddr_storage *vips, uint32_t n,
			    struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

bool hashlb_steer_reads_closed(const struct hashlb_steer *s)
{
	return false;
}

int hashlb_steer_set_table_holding(struct hashlb_steer *s, const struct hashlb_table *t,
				   enum hashlb_key key, const struct hashlb_src_prefix *prefix,
				   const struct hashlb_steer_dest *dests,
				   const char *const *held_names, uint32_t n_held,
				   struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_set_table(struct hashlb_steer *s, const struct hashlb_table *t,
			   enum hashlb_key key, const struct hashlb_src_prefix *prefix,
			   const struct hashlb_steer_dest *dests, struct hashlb_error *err)
{
	return hashlb_err(err, -EOPNOTSUPP, HASHLB_ERR_SYSTEM, NO_BPF);
}

int hashlb_steer_stats(struct hashlb_steer *s, struct hlb_steer_stats *ret_stats)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_tables_stats(struct hashlb_steer *s, struct hlb_steer_stats *ret_tstats)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_set_name(struct hashlb_steer *s, const char *name)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_set_name_unowned(struct hashlb_steer *s, const char *name, const char *iface,
				  const char *remedy, struct hashlb_error *err)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_table_name(struct hashlb_steer *s, uint32_t table, char *ret_name, size_t len)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_table_stats_clear(struct hashlb_steer *s)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_flows_clear(struct hashlb_steer *s)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_flows_count(struct hashlb_steer *s, uint32_t *ret_count)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_ct_age(struct hashlb_steer *s, uint32_t *ret_clamped)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_ct_age_at(struct hashlb_steer *s, uint16_t now, uint32_t *ret_clamped)
{
	return -EOPNOTSUPP;
}

uint64_t hashlb_steer_ct_age_period_ms(void)
{
	return 0;
}

int hashlb_steer_flows_table(struct hashlb_steer *s, uint32_t *ret_table, uint32_t *ret_all)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_flows_tables(struct hashlb_steer *s, uint32_t *ret_tables, uint32_t *ret_all)
{
	return -EOPNOTSUPP;
}

uint32_t hashlb_steer_prog_id(const struct hashlb_steer *s)
{
	return 0;
}

bool hashlb_steer_same_program(const struct hashlb_steer *a, const struct hashlb_steer *b)
{
	return false;
}

int hashlb_steer_flows_open_tables(struct hashlb_steer *s, struct hashlb_steer_flows *ret_flows)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_flows_open(struct hashlb_steer *s, struct hashlb_steer_flows *ret_flows)
{
	return -EOPNOTSUPP;
}

bool hashlb_steer_marks_closing(const struct hashlb_steer *s)
{
	return false;
}

uint64_t hashlb_steer_flows_max(const struct hashlb_steer *s)
{
	return 0;
}

uint64_t hashlb_steer_flows_capacity(uint32_t flows)
{
	return 0;
}

int hashlb_steer_table_fits(struct hashlb_steer *s, const struct hashlb_table_params *p,
			    const char *const *names, const uint32_t *weights, const bool *backup,
			    uint32_t n, struct hashlb_error *err)
{
	return 0;
}

int hashlb_steer_ct_fd(struct hashlb_steer *s)
{
	return -EOPNOTSUPP;
}

int hashlb_steer_prog_fd(struct hashlb_steer *s, enum hashlb_steer_prog prog)
{
	return -EOPNOTSUPP;
}

bool hashlb_steer_attached(struct hashlb_steer *s)
{
	return false;
}

uint64_t hashlb_steer_ct_seed(const struct hashlb_steer *s)
{
	return 0;
}

bool hashlb_steer_reads_ext(const struct hashlb_steer *s)
{
	return false;
}

enum hashlb_steer_mode hashlb_steer_mode(const struct hashlb_steer *s)
{
	return HASHLB_STEER_LOAD_ONLY;
}

int hashlb_steer_ifindex(const struct hashlb_steer *s)
{
	return 0;
}

bool hashlb_steer_on_veth(const struct hashlb_steer *s)
{
	return false;
}
