"""Both ends of the kernel-steering end-to-end test, run inside a namespace.

  peer.py serve NAME PORT
      a backend: to every connection it says "NAME\\n", then answers each line
      L with "NAME:L\\n"; for `sink` it reads and discards everything.
  peer.py client VIP PORT N
      opens N connections and prints one JSON line [[sport, name], ...]; then,
      for each line read on stdin ("again" or "quit"), sends a line on every
      connection and prints [[sport, name-that-answered], ...], and with
      "again" also opens N new connections and prints them likewise.
"""
import json
import socket
import socketserver
import sys


def serve(name, port):
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            self.wfile.write(f"{name}\n".encode())
            for line in self.rfile:
                self.wfile.write(f"{name}:".encode() + line)

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer(("0.0.0.0", port), Handler) as srv:
        print("ready", flush=True)
        srv.serve_forever()


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


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
