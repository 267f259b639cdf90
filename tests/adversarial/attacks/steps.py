def step(label, fn):
    try:
        r = fn()
        say(f"OK {label}" + (f" {r}" if r else ""))
        return True
    except OSError as e:
        say(f"ERR {label}: {ename(e.errno)}")
    except Exception as e:
        say(f"ERR {label}: {type(e).__name__} {e}")
    return False


def w(path, data, mode="w", label=None):
    def f():
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        b = data if isinstance(data, bytes) else data.encode()
        with open(path, mode + "b") as fh:
            fh.write(b)
    return step(label or f"write {path!r}", f)


def sh(label, cmd):
    rc, out = run(cmd)
    say(f"{'OK' if rc == 0 else 'ERR'} {label}: rc={rc} {out.strip()[:300]!r}")
    return rc == 0


def mkexec(path, body):
    if w(path, body):
        step(f"chmod {path!r}", lambda: os.chmod(path, 0o755))


MARK = ARGS[0] if ARGS else "/tmp/PWN-" + N
PAY = f"touch {MARK}; false"
HOOK = f"#!/bin/sh\ntouch {MARK}\n"
