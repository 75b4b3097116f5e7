// SPDX-License-Identifier: MIT
/*
 * The worker's provided-buffer ring (group 0), shared by all its
 * connections: a connection holds at most two buffers per direction (one
 * being sent, one received and waiting), and none while idle, so memory per
 * idle connection does not include any buffer.
 *
 * liburing 2.3 has no io_uring_setup_buf_ring(): the ring is mmap()ed here
 * and registered with io_uring_register_buf_ring(). The buffers themselves
 * are one anonymous mapping, touched only when used.
 *
 * The kernel takes buffers from the ring's head in the order they were
 * added, so a ring that held every free buffer would hand each one out in
 * turn: a few connections would touch, over time, the whole pool (16 MiB a
 * worker by default) and keep it resident, and small messages would land in
 * a cold buffer each time. So the ring holds only <ring_want> of the free
 * buffers; the others wait in a stash, the last one given back on top, and
 * the ring is topped up from that top once a turn, before the worker enters
 * the kernel, where buffers are filled. The buffers in use go round the few
 * that were in use last, and what is resident follows the most buffers in
 * use at once, not the pool's size. <ring_want> is twice the most buffers a
 * turn took or wanted (a recv that found the ring empty while the stash was
 * not: it waits for the turn's end), at least RING_WANT_MIN; it grows at the
 * end of such a turn and comes back down by halves, a step a second, once
 * that is not needed.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "worker.h"

#define RING_WANT_MIN 32u

int bufring_setup(struct worker *w)
{
	struct io_uring_buf_reg reg = { 0 };
	int r;

	w->br_size = (size_t)w->buf_count * sizeof(struct io_uring_buf);
	w->br = mmap(NULL, w->br_size, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (w->br == MAP_FAILED) {
		w->br = NULL;
		return -errno;
	}
	w->bufs_size = (size_t)w->buf_count * w->buf_size;
	w->bufs = mmap(NULL, w->bufs_size, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1,
		       0);
	if (w->bufs == MAP_FAILED) {
		w->bufs = NULL;
		r = -errno;
		goto err_unmap_ring;
	}
	/* before the registration, which a failure here would leave on unmapped memory */
	w->stash = malloc(w->buf_count * sizeof(*w->stash));
	if (!w->stash) {
		r = -ENOMEM;
		goto err_unmap_bufs;
	}
	reg.ring_addr = (uint64_t)(uintptr_t)w->br;
	reg.ring_entries = w->buf_count;
	reg.bgid = 0;
	r = io_uring_register_buf_ring(&w->ring, &reg, 0);
	if (r < 0)
		goto err_free_stash;
	io_uring_buf_ring_init(w->br);
	w->buf_mask = io_uring_buf_ring_mask(w->buf_count);
	/* buffer 0 first, the stash's top next: the pool is touched from its start */
	w->ring_want = w->buf_count < RING_WANT_MIN ? w->buf_count : RING_WANT_MIN;
	for (uint32_t i = w->buf_count; i-- > w->ring_want;)
		w->stash[w->stash_n++] = (uint16_t)i;
	for (uint32_t i = 0; i < w->ring_want; i++)
		io_uring_buf_ring_add(w->br, bufring_addr(w, i), w->buf_size, i, w->buf_mask, i);
	io_uring_buf_ring_advance(w->br, w->ring_want);
	return 0;

err_free_stash:
	free(w->stash);
	w->stash = NULL;
err_unmap_bufs:
	munmap(w->bufs, w->bufs_size);
	w->bufs = NULL;
err_unmap_ring:
	munmap(w->br, w->br_size);
	w->br = NULL;
	return r;
}

void bufring_free(struct worker *w)
{
	free(w->stash);
	w->stash = NULL;
	w->stash_n = 0;
	if (w->bufs)
		munmap(w->bufs, w->bufs_size);
	if (w->br)
		munmap(w->br, w->br_size);
	w->bufs = NULL;
	w->br = NULL;
}

void bufring_put(struct worker *w, uint16_t bid)
{
	w->stash[w->stash_n++] = bid;
	w->bufs_out--;
}

/* Move buffers from the stash's top into the ring until it holds <ring_want>. */
void bufring_refill(struct worker *w)
{
	uint32_t in_ring = w->buf_count - w->bufs_out - w->stash_n;
	int n = 0;

	while (in_ring + (uint32_t)n < w->ring_want && w->stash_n) {
		uint16_t bid = w->stash[--w->stash_n];

		io_uring_buf_ring_add(w->br, bufring_addr(w, bid), w->buf_size, bid, w->buf_mask,
				      n++);
	}
	if (n)
		io_uring_buf_ring_advance(w->br, n);
}

static void ring_want_at_least(struct worker *w, uint32_t want)
{
	if (want > w->buf_count)
		want = w->buf_count;
	if (want > w->ring_want)
		w->ring_want = want;
}

void bufring_turn_end(struct worker *w)
{
	if (w->turn_bufs > w->turn_bufs_max) {
		w->turn_bufs_max = w->turn_bufs;
		ring_want_at_least(w, 2 * w->turn_bufs);
	}
	w->turn_bufs = 0;
	bufring_refill(w);
}

void bufring_starved(struct worker *w)
{
	/* a recv that found the ring empty while the stash was not: it wanted one this turn */
	if (w->stash_n)
		w->turn_bufs++;
}

void bufring_shrink(struct worker *w)
{
	uint32_t want = 2 * w->turn_bufs_max;

	if (want < RING_WANT_MIN)
		want = RING_WANT_MIN;
	if (want < w->ring_want / 2)
		want = w->ring_want / 2;
	if (want < w->ring_want)
		w->ring_want = want;
	w->turn_bufs_max = 0;
}
