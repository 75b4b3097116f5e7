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
 */
#include <errno.h>
#include <sys/mman.h>

#include "worker.h"

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
	reg.ring_addr = (uint64_t)(uintptr_t)w->br;
	reg.ring_entries = w->buf_count;
	reg.bgid = 0;
	r = io_uring_register_buf_ring(&w->ring, &reg, 0);
	if (r < 0)
		goto err_unmap_bufs;
	io_uring_buf_ring_init(w->br);
	w->buf_mask = io_uring_buf_ring_mask(w->buf_count);
	for (uint32_t i = 0; i < w->buf_count; i++)
		io_uring_buf_ring_add(w->br, bufring_addr(w, i), w->buf_size, i, w->buf_mask, i);
	io_uring_buf_ring_advance(w->br, w->buf_count);
	return 0;

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
	if (w->bufs)
		munmap(w->bufs, w->bufs_size);
	if (w->br)
		munmap(w->br, w->br_size);
	w->bufs = NULL;
	w->br = NULL;
}

void bufring_put(struct worker *w, uint16_t bid)
{
	io_uring_buf_ring_add(w->br, bufring_addr(w, bid), w->buf_size, bid, w->buf_mask, 0);
	io_uring_buf_ring_advance(w->br, 1);
	w->bufs_out--;
}
