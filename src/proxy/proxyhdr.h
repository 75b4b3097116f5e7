// SPDX-License-Identifier: MIT
/*
 * The PROXY protocol header (HAProxy's "PROXY protocol", versions 1 and 2):
 * what hashlb sends a backend first, so that the backend learns the client's
 * address and port and the address the client connected to.
 */
#ifndef HASHLB_PROXYHDR_H
#define HASHLB_PROXYHDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hashlb/config.h"

/* The longest header: v1 with two full IPv6 addresses is 104 bytes. */
#define HLB_PROXY_HDR_MAX 108

/*
 * Write the <version> header for a TCP connection from <src> to <dst> (both
 * AF_INET, or both AF_INET6; IPv4-mapped IPv6 addresses are written as IPv4,
 * unless the other address is plain IPv6: then both go as IPv6)
 * into <buf>, HLB_PROXY_HDR_MAX bytes. Returns its length, or -EAFNOSUPPORT
 * for another family and -EINVAL for HASHLB_PROXY_OFF.
 */
int hlb_proxy_header(enum hashlb_proxy_protocol version, const struct sockaddr *src,
		     const struct sockaddr *dst, uint8_t *buf);

/*
 * The header of a connection hashlb makes on its own behalf, a health check:
 * "PROXY UNKNOWN\r\n" (v1) or the v2 LOCAL command, which tell the backend
 * to use the connection's own addresses. Returns its length, or -EINVAL.
 */
int hlb_proxy_local_header(enum hashlb_proxy_protocol version, uint8_t *buf);

/* The longest header hlb_proxy_parse() accepts: v2 with up to ~4,000 bytes of TLVs
 * (a TLS-terminating front proxy's client certificate details fit). */
#define HLB_PROXY_IN_MAX 4096

/*
 * Parse a PROXY protocol header (v1 or v2) at the start of <buf>, <len>
 * bytes received so far. Returns the header's length once it is complete:
 * then <ret_src> and <ret_dst> hold the client's address and the one it
 * connected to, or have family AF_UNSPEC when the header carries none
 * (v1 UNKNOWN, v2 LOCAL or a family other than TCP over IPv4/IPv6: use the
 * connection's own). Returns 0 when more bytes are needed, *ret_need then
 * being how many in all; -EPROTO when <buf> does not start a valid header
 * (or one longer than HLB_PROXY_IN_MAX).
 */
int hlb_proxy_parse(const uint8_t *buf, size_t len, struct sockaddr_storage *ret_src,
		    struct sockaddr_storage *ret_dst, size_t *ret_need);

#endif
