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
 * AF_INET, or both AF_INET6; IPv4-mapped IPv6 addresses are written as IPv4)
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

#endif
