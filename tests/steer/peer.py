"""Both ends of the kernel-steering end-to-end test, run inside a namespace.

  peer.py serve NAME PORT
      a backend: to every connection it says "NAME\\n", then answers each line
      L with "NAME:L\\n" (a line "sleep S" after S seconds: a slow server).
  peer.py sink PORT
      reads and discards; at EOF answers with the byte count.
  peer.py blast HOST PORT CONNS SECONDS
      CONNS connections send as fast as they can for SECONDS, then print
      the bytes/s the sinks confirmed receiving.
  peer.py client VIP PORT N
      opens N connections and prints one JSON line [[sport, name], ...]; then,
      for each line read on stdin ("again" or "quit"), sends a line on every
      connection and prints [[sport, name-that-answered], ...], and with
      "again" also opens N new connections and prints them likewise.
  peer.py halfclose VIP PORT SECONDS
      opens a connection and prints one JSON line [sport, name]; then, at a
      line on stdin, sends "sleep SECONDS", half-closes (shutdown(SHUT_WR)),
      reads the answer and prints [answer, time.time() when it came].
"""
import json
import socket
import socketserver
import sys
import time


def serve(name, port):
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            try:
                self.wfile.write(f"{name}\n".encode())
                for line in self.rfile:
                    if line.startswith(b"sleep "):
                        time.sleep(float(line.split()[1]))
                    self.wfile.write(f"{name}:".encode() + line)
            except OSError:
                pass  # health checks connect and reset

    with DualStack(("::", port), Handler) as srv:
        print("ready", flush=True)
        srv.serve_forever()


class DualStack(socketserver.ThreadingTCPServer):
    """IPv6 socket that takes IPv4 too (bindv6only is 0 by default)."""
    address_family = socket.AF_INET6
    allow_reuse_address = True
    daemon_threads = True


def connect(vip, port, n):
    conns = []
    for _ in range(n):
        s = socket.create_connection((vip, port), timeout=5)
        f = s.makefile("rwb")
        name = f.readline().decode().strip()
        conns.append((s, f, s.getsockname()[1], name))
    return conns


def client(vip, port, n):
    conns = connect(vip, port, n)
    print(json.dumps([[c[2], c[3]] for c in conns]), flush=True)
    for cmd in sys.stdin:
        cmd = cmd.strip()
        answers = []
        for s, f, sport, _ in conns:
            try:
                f.write(b"ping\n")
                f.flush()
                answers.append([sport, f.readline().decode().strip().split(":")[0]])
            except OSError as e:
                answers.append([sport, f"error: {e}"])
        print(json.dumps(answers), flush=True)
        if cmd == "quit":
            break
        fresh = connect(vip, port, n)
        print(json.dumps([[c[2], c[3]] for c in fresh]), flush=True)
        conns += fresh


def halfclose(vip, port, seconds):
    s = socket.create_connection((vip, port), timeout=float(seconds) + 20)
    f = s.makefile("rwb")
    print(json.dumps([s.getsockname()[1], f.readline().decode().strip()]), flush=True)
    sys.stdin.readline()
    f.write(f"sleep {seconds}\n".encode())
    f.flush()
    s.shutdown(socket.SHUT_WR)
    try:
        answer = f.readline().decode().strip()
    except OSError as e:
        answer = f"error: {e}"
    print(json.dumps([answer, time.time()]), flush=True)
    try:
        f.read()  # the server's FIN, ACKed through the LB
    except OSError:
        pass


def sink(port):
    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            buf = bytearray(1 << 20)
            total = 0
            while True:
                n = self.request.recv_into(buf)
                if n == 0:
                    break
                total += n
            self.request.sendall(f"{total}\n".encode())

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer(("0.0.0.0", port), Handler) as srv:
        print("ready", flush=True)
        srv.serve_forever()


def blast(host, port, conns, seconds):
    import threading
    import time

    chunk = b"x" * (1 << 20)
    got = []

    def one():
        s = socket.create_connection((host, port), timeout=10)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            s.sendall(chunk)
        s.shutdown(socket.SHUT_WR)
        got.append(int(s.makefile().readline() or 0))
        s.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=one) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(sum(got) / (time.monotonic() - t0), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "sink":
        sink(int(sys.argv[2]))
    elif sys.argv[1] == "blast":
        blast(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif sys.argv[1] == "halfclose":
        halfclose(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
