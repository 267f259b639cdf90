#!/usr/bin/python3
# NET-09: IP literal encodings of loopback, private and metadata addresses
# Guarantee: no private, link-local or metadata addresses unless listed
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

proxy_ok("n09-ok")
HOSTS = ["127.0.0.1", "127.1", "0", "0.0.0.0", "2130706433", "0x7f000001", "0177.0.0.1",
         "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "10.77.0.5", "169.254.169.254",
         "2852039166", "0xa9fea9fe", "[::ffff:169.254.169.254]", "[fd00:77::10]",
         "[fd00:ec2::254]", "[fe80::1%25lo]", "[64:ff9b::a9fe:a9fe]", "[2002:a9fe:a9fe::]",
         "169.254.169.254.", "[::]", "[0:0:0:0:0:ffff:a9fe:a9fe]", "0251.0376.0251.0376"]
for i, h in enumerate(HOSTS):
    st, code, data = get(f"{h}:80", f"/latest/meta-data/n09-{i}-{N}")
    refused(f"GET {h}:80", st, code, data)
t = f"GET /n09-tunnel-{N} HTTP/1.0\r\n\r\n".encode()
for a in ("127.0.0.1:3128", "127.0.0.1:8080", "127.0.0.1:80", "169.254.169.254:80",
          "10.77.0.5:80", "[fd00:ec2::254]:80", "[::1]:3128", "localhost:3128",
          "localhost:8080"):
    refused(f"CONNECT {a}", *preq(f"CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n", after=t))
