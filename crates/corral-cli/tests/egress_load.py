"""The worker of egress_load.rs (issue 17, item 5), run inside one sandbox.

argv: UPSTREAM BURST SLOW BIG PINGS. Every connection goes through corral's egress proxy
(127.0.0.1:3128 inside the sandbox) as a CONNECT tunnel to UPSTREAM, the test's own server
on the host's loopback, which answers one command line per connection. It:
1. opens BURST connections at once and reads each one's status (200 or 503), then closes them
   (the test's IDLE answer, asked over one of their own tunnels, tells it when the proxy has
   let the others go);
2. starts SLOW half-open clients that trickle a request head that never ends, one BIG-byte
   download, and meanwhile PINGS ordinary requests one after another;
3. sends the tally to UPSTREAM (RESULT ...) and writes src/load.txt (so the run has a change).
"""
import json
import socket
import sys
import threading
import time

UPSTREAM = sys.argv[1]
BURST, SLOW, BIG, PINGS = (int(a) for a in sys.argv[2:6])
PROXY = ("127.0.0.1", 3128)
CONNECT = f"CONNECT {UPSTREAM} HTTP/1.1\r\nHost: {UPSTREAM}\r\n\r\n".encode()


def status_line(s):
    """Reads a response head byte by byte (nothing after it); returns its first line."""
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            break
        head += c
    return head.split(b"\r\n")[0].decode(errors="replace"), head


def code_of(head):
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"x-corral-egress:"):
            return line.split(b":", 1)[1].strip().decode(errors="replace")
    return ""


def command(s, line):
    """Sends one command line over an open tunnel; returns the whole answer and closes it."""
    s.sendall(line.encode() + b"\n")
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    s.close()
    return data.decode(errors="replace").strip()


def ask(line):
    """One command through a fresh tunnel; returns the whole answer, or the refusal."""
    s = socket.create_connection(PROXY)
    s.sendall(CONNECT)
    first, _ = status_line(s)
    if " 200 " not in first:
        s.close()
        return "refused: " + first
    return command(s, line)


tally = {"start": ask("MARK start")}

# 1. The burst: all connected before any status is read. IDLE answers once the proxy serves
# nothing but that request, so each phase starts with every slot free.
tally["before_burst"] = ask("IDLE")
burst = [socket.create_connection(PROXY) for _ in range(BURST)]
for s in burst:
    s.sendall(CONNECT)
statuses, codes, served = {}, {}, []
for s in burst:
    first, head = status_line(s)
    key = first.split(" ")[1] if first.count(" ") >= 1 else first
    served.append(key == "200")
    statuses[key] = statuses.get(key, 0) + 1
    if key != "200":
        c = code_of(head)
        codes[c] = codes.get(c, 0) + 1
# The barrier is asked over one of the burst's own tunnels: a fresh connection would need a
# slot, and the proxy frees a slot only after it has seen its client go (a race it can lose).
barrier = next((s for s, ok in zip(burst, served) if ok), None)
for s in burst:
    if s is not barrier:
        s.close()
tally["burst"] = {"statuses": statuses, "codes": codes}
if barrier is None:
    tally["after_burst"] = "no burst tunnel was served"
else:
    tally["after_burst"] = command(barrier, "IDLE")

# 2. Half-open clients, one big download and ordinary requests, all at once.
slow_result = []


def slowloris():
    socks = []
    for _ in range(SLOW):
        s = socket.create_connection(PROXY)
        s.sendall(f"CONNECT {UPSTREAM} HTTP/1.1\r\nX-Slow: ".encode())
        s.setblocking(False)
        socks.append(s)
    t0 = time.monotonic()
    heads = {i: b"" for i in range(SLOW)}
    ended = {}
    # One more header byte to each every 0.2 s: never idle, never a whole head. Bounded by
    # 120 s of trickling (the proxy's head deadline is 10 s).
    while len(ended) < SLOW and time.monotonic() - t0 < 120:
        for i, s in enumerate(socks):
            if i in ended:
                continue
            try:
                c = s.recv(4096)
                if c:
                    heads[i] += c
                else:
                    ended[i] = time.monotonic() - t0
                    continue
            except BlockingIOError:
                pass
            except OSError:
                ended[i] = time.monotonic() - t0
                continue
            try:
                s.send(b"a")
            except OSError:
                ended[i] = time.monotonic() - t0
        time.sleep(0.2)
    for i, s in enumerate(socks):
        s.close()
        first = heads[i].split(b"\r\n")[0].decode(errors="replace")
        slow_result.append({"status": first, "code": code_of(heads[i]),
                            "after_s": round(ended.get(i, -1), 1)})


big_result = {}


def download():
    s = socket.create_connection(PROXY)
    s.sendall(CONNECT)
    first, _ = status_line(s)
    big_result["status"] = first
    s.sendall(f"BIG {BIG}\n".encode())
    buf = bytearray(1 << 20)
    got = 0
    while True:
        n = s.recv_into(buf)
        if n == 0:
            break
        got += n
    s.close()
    big_result["bytes"] = got


threads = [threading.Thread(target=slowloris), threading.Thread(target=download)]
for t in threads:
    t.start()
# Ordinary requests, paced, for as long as the slow heads or the download last (and at least
# PINGS of them): each must be served while those hold their connections.
pings, during = [], {"slow": 0, "big": 0}
while len(pings) < PINGS or any(t.is_alive() for t in threads):
    slow_alive, big_alive = threads[0].is_alive(), threads[1].is_alive()
    pings.append(ask("PING"))
    during["slow"] += slow_alive and threads[0].is_alive()
    during["big"] += big_alive and threads[1].is_alive()
    time.sleep(0.05)
tally["pings"] = {"sent": len(pings), "pong": pings.count("PONG"), "during": during,
                  "other": [p for p in pings if p != "PONG"][:3]}
for t in threads:
    t.join()
tally["slow"] = slow_result
tally["big"] = big_result
tally["end"] = ask("MARK end")
summary = json.dumps(tally, sort_keys=True)
print(ask("RESULT " + summary))
with open("src/load.txt", "w") as f:
    f.write(summary + "\n")
