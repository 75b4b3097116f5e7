#!/usr/bin/env bash
# hashlb's main job on a built-in default, in under 10 s once built (4 to 6 s on 2 busy
# CPUs; the first run installs packages and builds first, a minute or two):
#   three local backends (tests/tools/echo-backend, each answers with its name),
#   hashlb run on configs/demo.yaml (127.0.0.1:18080, maglev, src-ip),
#   1,000 clients, each from its own address on 127.0.0.0/8,
#   how they spread over the backends next to the table's shares,
#   then backend b is stopped: only b's clients move.
# Idempotent; every process it starts is stopped (by PID) when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${HASHLB_BUILD:-build}
if [ ! -x "$build/src/cli/hashlb" ]; then
	# setup.sh's own output is kept out of the demo's: say why nothing shows
	echo "demo: first run: installing the packages hashlb needs and building it (a minute or two)" >&2
fi
scripts/setup.sh >/dev/null
hashlb="$build/src/cli/hashlb"
config=configs/demo.yaml
work=$(mktemp -d /tmp/hashlb-demo.XXXXXX)
pids=()

cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for port in 18080 18081 18082 18083; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "demo: port $port is in use (another demo still running?)" >&2
		exit 1
	fi
done

declare -A backend_pid
for b in a:18081 b:18082 c:18083; do
	name=${b%%:*}
	port=${b##*:}
	tests/tools/echo-backend --name "$name" --port "$port" >"$work/$name.out" &
	pids+=($!)
	backend_pid[$name]=$!
done
# the backends first: hashlb checks them as it starts, and one not listening yet
# would show in its log as a failed check
for _ in $(seq 100); do
	ready=$(cat "$work"/?.out 2>/dev/null | grep -c '^ready' || true)
	[ "$ready" -eq 3 ] && break
	sleep 0.1
done
# --admin off: the demo needs no admin endpoint, and its port may be taken
"$hashlb" run -c "$config" --admin off 2>"$work/hashlb.log" &
pids+=($!)
hashlb_pid=$!

for _ in $(seq 100); do
	if grep -q 'msg=started' "$work/hashlb.log"; then
		break
	fi
	if ! kill -0 "$hashlb_pid" 2>/dev/null; then
		cat "$work/hashlb.log" >&2
		exit 1
	fi
	sleep 0.1
done

echo "== hashlb run -c $config --admin off (pid $hashlb_pid), log:"
sed 's/^/   /' "$work/hashlb.log"
echo

# 1,000 client addresses, and what the table says about each one.
python3 - "$work/clients" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write(",".join(f"127.{1 + i // 250}.{i % 250 // 50}.{1 + i % 50}" for i in range(1000)))
PY
"$hashlb" lookup -c "$config" "$(cat "$work/clients")" >"$work/table"

clients() { # PHASE: connect from every client address, record who answered
	python3 - "$work/clients" "$work/$1" <<'PY'
import socket, sys
clients = open(sys.argv[1]).read().split(",")
with open(sys.argv[2], "w") as out:
    for ip in clients:
        s = socket.socket()
        s.settimeout(5)
        s.bind((ip, 0))
        s.connect(("127.0.0.1", 18080))
        name = b""
        while not name.endswith(b"\n"):
            d = s.recv(1)
            if not d:
                break
            name += d
        s.close()
        out.write(f"{ip} {name.decode().strip() or '-'}\n")
PY
}

clients before
"$hashlb" check -c "$config" >"$work/check"
echo "== 1,000 clients from 127.1.0.1 .. 127.4.4.50, each connects once:"
python3 - "$work/before" "$work/table" "$work/check" <<'PY'
import collections, re, sys
got = dict(l.split() for l in open(sys.argv[1]))
want = {l.split()[0]: l.split()[1] for l in open(sys.argv[2])}
share = {m[1]: m[2] for m in re.finditer(r"^ +(\S+) +\S+ +\d+ +\S+ +([\d.]+%)", open(sys.argv[3]).read(), re.M)}
count = collections.Counter(got.values())
print(f"   {'backend':8} {'clients':>8} {'of 1,000':>9} {'table share':>12}  (hashlb check)")
for b in sorted(count):
    print(f"   {b:8} {count[b]:8} {count[b] / len(got):9.1%} {share.get(b, '?'):>12}")
same = sum(got[c] == want[c] for c in got)
print(f"   {same} of {len(got)} clients reached exactly the backend hashlb lookup names for them")
PY
echo
echo "== stopping backend b (pid ${backend_pid[b]}); the same 1,000 clients connect again:"
kill "${backend_pid[b]}"
wait "${backend_pid[b]}" 2>/dev/null || true
clients after
python3 - "$work/before" "$work/after" <<'PY'
import collections, sys
before = dict(l.split() for l in open(sys.argv[1]))
after = dict(l.split() for l in open(sys.argv[2]))
moves = collections.Counter((before[c], after[c]) for c in before if before[c] != after[c])
stay = collections.Counter(before[c] for c in before if before[c] == after[c])
for b in sorted(set(before.values())):
    n = sum(1 for c in before if before[c] == b)
    moved = {t: k for (f, t), k in moves.items() if f == b}
    where = ", ".join(f"{k} to {t}" for t, k in sorted(moved.items())) or "none"
    print(f"   clients of {b}: {n:4}, stayed {stay[b]:4}, moved: {where}")
others = sum(k for (f, t), k in moves.items() if f != "b")
print(f"   clients of a and c that moved: {others}" + ("  (only b's clients moved)" if others == 0 else ""))
unserved = sum(1 for c in after if after[c] == "-")
print(f"   clients not served: {unserved}")
PY
echo
echo "== stopping hashlb (SIGTERM: stop accepting, drain, exit)"
kill -TERM "$hashlb_pid"
wait "$hashlb_pid" && echo "   hashlb exited with status 0"
tail -n 3 "$work/hashlb.log" | sed 's/^/   /'
