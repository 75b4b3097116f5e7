#!/usr/bin/env bash
# Install, idempotently, every Debian 12 package that hashlb's build, tests and
# benchmarks need, then configure and build in ./build (or $HASHLB_BUILD).
# Run as root. Packages already installed are not touched.
set -euo pipefail

cd "$(dirname "$0")/.."

PACKAGES=(
	# build
	gcc pkg-config meson ninja-build
	libxxhash-dev liburing-dev libcmocka-dev libfyaml-dev
	# kernel steering: BPF programs, skeletons, libbpf
	clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
	# tests: processes, namespaces, sanitizer runtime
	python3 iproute2 procps util-linux curl libclang-rt-14-dev systemd
	# tests: the shipped unit files under a real systemd, in a container
	systemd-container
	# tests: a worker's io_uring failure, injected from outside (test_worker_fail.py)
	gdb
	# tests: the system calls a healthy forwarder makes, counted (test_forward.py)
	strace
	# benchmarks: peers and load generators
	haproxy nginx-light libnginx-mod-stream wrk iperf3
)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [ "${#missing[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: these packages are missing and installing them needs root: ${missing[*]}" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# Debian's nginx and haproxy packages start system services on install;
	# hashlb's benchmarks run their own instances, so keep the services off.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build=${HASHLB_BUILD:-build}
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$@"
elif [ "$#" -gt 0 ]; then
	meson configure "$build" "$@"
fi
ninja -C "$build"
