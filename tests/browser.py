"""A page loaded in headless Chromium, driven over the DevTools protocol through a pipe
(``--remote-debugging-pipe``: no port, no extra package): what the page logged and
what a script evaluated in it returned."""

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--remote-debugging-pipe"]


class _Pipe:
    """Chromium's end of the pipe: NUL-terminated JSON messages."""

    def __init__(self, to_browser, from_browser):
        self.to_browser, self.from_browser, self.buffer = to_browser, from_browser, b""
        self.next_id, self.events = 0, []

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise TimeoutError(method)

    def wait_for(self, method, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(e.get("method") == method for e in self.events):
                return
            self.events.append(self._read())
        raise TimeoutError(method)

    def _read(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise EOFError("Chromium closed the pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)


def _high(fd):
    """``fd`` moved to 10 or above: the shell's redirections onto 3 and 4 cannot then
    overwrite the other end before it is moved."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


def load(url, script):
    """Load ``url``; returns (console and log entries at level error or warning, the
    value of ``script`` evaluated in the loaded page)."""
    commands_read, commands_write = (_high(fd) for fd in os.pipe())
    replies_read, replies_write = (_high(fd) for fd in os.pipe())
    profile = tempfile.mkdtemp(prefix="saspa-chromium-")
    # Chromium reads commands on fd 3 and writes replies on fd 4: a shell puts the
    # pipe's ends there (bash: dash takes single-digit descriptors only)
    proc = subprocess.Popen(
        ["bash", "-c", f'exec "$0" "$@" 3<&{commands_read} 4>&{replies_write}', CHROMIUM,
         *_FLAGS, f"--user-data-dir={profile}"], stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        pass_fds=(commands_read, replies_write))
    os.close(commands_read)
    os.close(replies_write)
    pipe = _Pipe(commands_write, replies_read)
    try:
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            pipe.send(f"{domain}.enable", session=session)
        pipe.send("Page.navigate", {"url": url}, session=session)
        pipe.wait_for("Page.loadEventFired")
        value = pipe.send("Runtime.evaluate", {"expression": script, "returnByValue": True},
                          session=session)["result"].get("value")
        problems = [e["params"] for e in pipe.events
                    if (e.get("method") == "Runtime.consoleAPICalled"
                        and e["params"]["type"] in ("error", "warning"))
                    or (e.get("method") == "Log.entryAdded"
                        and e["params"]["entry"]["level"] in ("error", "warning"))
                    or e.get("method") == "Runtime.exceptionThrown"]
        return problems, value
    finally:
        proc.kill()
        proc.wait(timeout=30)
        os.close(commands_write)
        os.close(replies_read)
        shutil.rmtree(profile, ignore_errors=True)
