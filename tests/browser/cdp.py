#!/usr/bin/env python3
"""A small Chrome DevTools Protocol client over --remote-debugging-pipe
(standard library only).

Chromium started with --remote-debugging-pipe reads commands from its fd 3
and writes replies and events to its fd 4, each message one JSON text
followed by a NUL byte. This module starts a headless Chromium that way,
opens pages (Target.createTarget, then attachToTarget with flatten: one
session id per page on the same pipe), sends commands with ids and waits for
their replies or for events, always with a deadline: nothing here waits
forever, a wait that runs out raises CDPTimeout naming what it waited for.

Each page collects what the page said: console calls, uncaught exceptions,
log entries and JavaScript dialogs (which are dismissed so that the page
does not block). Page.errors() lists those that a test counts as failures.

Library use:
    with Browser() as b:
        p = b.new_page()
        p.navigate("file:///path/page.html")
        print(p.evaluate("document.title"))
        p.screenshot("x.png")
        assert not p.errors(), p.errors()

Command line:
    python3 cdp.py URL_OR_FILE [--shot x.png] [--dark] [--size 1280x900]
        [--eval EXPR] [--timeout S]
prints the page's console messages and EXPR's value; exit 1 when the page
logged an error, threw, or opened a dialog; 2 when the browser failed.
"""
import argparse
import base64
import collections
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


class CDPError(Exception):
    """A command failed, the browser went away, or a wait ran out."""


class CDPTimeout(CDPError):
    pass


class JSError(CDPError):
    """Runtime.evaluate threw (or its promise rejected)."""


def find_chromium():
    """The first of the usual Chromium names on PATH (CHROMIUM overrides), or None."""
    env = os.environ.get("CHROMIUM")
    if env:
        return shutil.which(env) or (env if os.access(env, os.X_OK) else None)
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def file_url(path):
    return "file://" + urllib.parse.quote(os.path.abspath(path))


class Browser:
    """A headless Chromium driven over the DevTools pipe.

    timeout: the default deadline in seconds of every command and wait."""

    def __init__(self, chromium=None, width=1280, height=900, timeout=30.0, extra_args=(), log=None):
        self.chromium = chromium or find_chromium()
        if not self.chromium:
            raise CDPError("Chromium is not installed (looked for chromium, chromium-browser, google-chrome)")
        self.timeout = timeout
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="sd-chromium-")
        self._next_id = 0
        self._replies = {}
        self._events = collections.defaultdict(list)  # session id ("" = browser) -> [message]
        self._cond = threading.Condition()
        self._closed = None  # why the pipe closed, once it has
        self._pages = {}
        self._stderr = open(log, "wb") if log else subprocess.DEVNULL
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def child_fds():
            # Move both ends above 4 first, so that placing one at 3 or 4 cannot
            # overwrite the other, then put them where Chromium looks.
            a = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)
            # The browser dies with the process that started it (a test killed on its timeout
            # leaves no Chromium behind).
            try:
                ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            except (OSError, AttributeError):
                pass

        args = [self.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--user-data-dir=" + self.profile, "--window-size=%d,%d" % (width, height),
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--mute-audio", "--hide-scrollbars", "--password-store=basic",
                "--use-mock-keychain", *extra_args, "about:blank"]
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
                                         pass_fds=(3, 4), preexec_fn=child_fds)
        except BaseException:
            for fd in (to_child_r, self._to_child, self._from_child, from_child_w):
                os.close(fd)
            shutil.rmtree(self.profile, ignore_errors=True)
            raise
        os.close(to_child_r)
        os.close(from_child_w)
        self._reader = threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True)
        self._reader.start()
        try:
            self.version = self.send("Browser.getVersion", timeout=timeout)
        except BaseException:
            self.close()
            raise

    # --- the pipe ---------------------------------------------------------
    def _read_loop(self):
        buf = bytearray()
        scanned = 0  # buf[:scanned] holds no NUL (a large reply, a screenshot, comes in many reads)
        why = "Chromium closed the DevTools pipe"
        try:
            while True:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    break
                buf += chunk
                while True:
                    end = buf.find(b"\0", scanned)
                    if end < 0:
                        scanned = len(buf)
                        break
                    raw = bytes(buf[:end])
                    del buf[:end + 1]
                    scanned = 0
                    try:
                        msg = json.loads(raw)
                    except ValueError:
                        continue
                    self._dispatch(msg)
        except OSError as e:
            why = "reading the DevTools pipe failed: %s" % e
        with self._cond:
            self._closed = why
            self._cond.notify_all()

    def _dispatch(self, msg):
        with self._cond:
            if "id" in msg:
                self._replies[msg["id"]] = msg
            else:
                sid = msg.get("sessionId", "")
                page = self._pages.get(sid)
                if page is not None:
                    page._note(msg)
                self._events[sid].append(msg)
            self._cond.notify_all()
        # A dialog blocks the page's script: dismiss it (outside the lock, and
        # from another thread: this one must keep reading replies).
        if msg.get("method") == "Page.javascriptDialogOpening" and msg.get("sessionId"):
            threading.Thread(target=self._dismiss, args=(msg["sessionId"],), daemon=True).start()

    def _dismiss(self, sid):
        try:
            self.send("Page.handleJavaScriptDialog", {"accept": False}, session=sid, timeout=5)
        except CDPError:
            pass

    def _wait(self, ready, what, timeout):
        """Wait under the lock until ready() returns something not None."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._cond:
            while True:
                v = ready()
                if v is not None:
                    return v
                if self._closed:
                    raise CDPError("%s while waiting for %s" % (self._closed, what))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CDPTimeout("timed out after %.1f s waiting for %s" %
                                     (self.timeout if timeout is None else timeout, what))
                self._cond.wait(min(left, 0.5))

    def send(self, method, params=None, session=None, timeout=None):
        """Send one command and return its result (raises CDPError on an error reply)."""
        with self._cond:
            if self._closed:
                raise CDPError("%s; cannot send %s" % (self._closed, method))
            self._next_id += 1
            mid = self._next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        try:
            while data:
                n = os.write(self._to_child, data)
                data = data[n:]
        except OSError as e:
            raise CDPError("writing %s to Chromium failed: %s" % (method, e))
        reply = self._wait(lambda: self._replies.pop(mid, None), "the reply to " + method, timeout)
        if "error" in reply:
            raise CDPError("%s failed: %s" % (method, reply["error"].get("message", reply["error"])))
        return reply.get("result", {})

    def event_mark(self, session=None):
        """A position in a session's event list: wait_event(after=mark) sees only later events."""
        with self._cond:
            return len(self._events[session or ""])

    def wait_event(self, method, session=None, after=0, where=None, timeout=None):
        """The first event `method` of the session at or after position `after`
        (for which where(params) is true, if given)."""
        sid = session or ""

        def ready():
            for m in self._events[sid][after:]:
                if m.get("method") == method and (where is None or where(m.get("params", {}))):
                    return m.get("params", {})
            return None
        return self._wait(ready, "event " + method, timeout)

    # --- pages ------------------------------------------------------------
    def new_page(self, url="about:blank"):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, sid)
        with self._cond:
            self._pages[sid] = page
        page._enable()
        if url != "about:blank":
            page.navigate(url)
        return page

    def close(self, timeout=10.0):
        """Browser.close, then kill after `timeout`; the temporary profile is removed."""
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            try:
                if not self._closed:
                    self.send("Browser.close", timeout=min(timeout, 5.0))
            except CDPError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        for fd in ("_to_child", "_from_child"):
            f = getattr(self, fd, None)
            if f is not None:
                try:
                    os.close(f)
                except OSError:
                    pass
                setattr(self, fd, None)
        if self._stderr not in (subprocess.DEVNULL, None):
            self._stderr.close()
            self._stderr = None
        # Chromium's helpers may still be writing into the profile for a moment.
        for _ in range(20):
            shutil.rmtree(self.profile, ignore_errors=True)
            if not os.path.exists(self.profile):
                break
            time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _remote_value(obj):
    """A printable value of a Runtime.RemoteObject."""
    if "value" in obj:
        return obj["value"]
    if "unserializableValue" in obj:
        return obj["unserializableValue"]
    return obj.get("description", obj.get("type"))


class Page:
    """One tab, attached with its own session id."""

    def __init__(self, browser, target, session):
        self.browser, self.target, self.session = browser, target, session
        self.messages = []   # (kind, text): console calls, exceptions, log entries, dialogs
        self.dialogs = []

    def _note(self, msg):  # called by the reader thread, under the browser's lock
        m, p = msg.get("method"), msg.get("params", {})
        if m == "Runtime.consoleAPICalled":
            text = " ".join(str(_remote_value(a)) for a in p.get("args", []))
            self.messages.append(("console." + p.get("type", "log"), text))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            exc = d.get("exception", {})
            text = exc.get("description") or d.get("text", "exception")
            self.messages.append(("exception", "%s (%s:%s)" % (text, d.get("url", ""), d.get("lineNumber", ""))))
        elif m == "Log.entryAdded":
            e = p.get("entry", {})
            self.messages.append(("log." + e.get("level", "info"), "%s %s" % (e.get("text", ""), e.get("url", ""))))
        elif m == "Page.javascriptDialogOpening":
            self.dialogs.append(p)
            self.messages.append(("dialog." + p.get("type", ""), p.get("message", "")))

    def _enable(self):
        for m in ("Runtime.enable", "Page.enable", "Log.enable", "Network.enable"):
            self.send(m)

    def requests(self, after=0):
        """The URLs the page asked for (Network.requestWillBeSent), the page itself included."""
        return [e.get("request", {}).get("url", "") for e in self.events("Network.requestWillBeSent", after)]

    def send(self, method, params=None, timeout=None):
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def mark(self):
        return self.browser.event_mark(self.session)

    def wait_event(self, method, after=0, where=None, timeout=None):
        return self.browser.wait_event(method, self.session, after, where, timeout)

    def events(self, method, after=0):
        with self.browser._cond:
            return [m.get("params", {}) for m in self.browser._events[self.session][after:]
                    if m.get("method") == method]

    def errors(self):
        """What a test counts as a failure: console errors and assertions, uncaught
        exceptions, error log entries, and any dialog."""
        with self.browser._cond:
            return [(k, t) for k, t in self.messages
                    if k in ("console.error", "console.assert", "exception", "log.error") or k.startswith("dialog.")]

    def navigate(self, url, timeout=None):
        """Open url and wait for its load event."""
        if os.path.exists(url):
            url = file_url(url)
        mark = self.mark()
        r = self.send("Page.navigate", {"url": url}, timeout=timeout)
        if r.get("errorText"):
            raise CDPError("navigating to %s failed: %s" % (url, r["errorText"]))
        self.wait_event("Page.loadEventFired", after=mark, timeout=timeout)

    def evaluate(self, expr, await_promise=True, timeout=None):
        """The value of a JavaScript expression (returned by value: JSON-able)."""
        r = self.send("Runtime.evaluate", {"expression": expr, "awaitPromise": await_promise,
                                            "returnByValue": True, "userGesture": True}, timeout=timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            text = d.get("exception", {}).get("description") or d.get("text")
            raise JSError("%s threw: %s" % (expr if len(expr) < 200 else expr[:200] + "...", text))
        res = r.get("result", {})
        if res.get("type") == "undefined":
            return None
        return _remote_value(res)

    def wait_for(self, expr, timeout=None, interval=0.05):
        """Poll expr until it is truthy; returns its value."""
        limit = self.browser.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            v = self.evaluate(expr, timeout=limit)
            if v:
                return v
            if time.monotonic() > deadline:
                raise CDPTimeout("timed out after %.1f s waiting for %s" % (limit, expr))
            time.sleep(interval)

    # --- input --------------------------------------------------------------
    def mouse_move(self, x, y):
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def click(self, x, y, button="left", count=1):
        self.mouse_move(x, y)
        for t in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": t, "x": x, "y": y, "button": button,
                                                   "buttons": 1 if t == "mousePressed" else 0,
                                                   "clickCount": count})

    def drag(self, x0, y0, x1, y1, steps=5):
        self.mouse_move(x0, y0)
        self.send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0, "y": y0, "button": "left",
                                               "buttons": 1, "clickCount": 1})
        for i in range(1, steps + 1):
            x, y = x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps
            self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y, "button": "left",
                                                   "buttons": 1})
        self.send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x1, "y": y1, "button": "left",
                                               "buttons": 0, "clickCount": 1})

    def wheel(self, x, y, delta_y, delta_x=0, modifiers=0):
        """A wheel turn at (x, y): delta_y < 0 scrolls up (zooms in, in most viewers)."""
        self.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x, "y": y, "deltaX": delta_x,
                                               "deltaY": delta_y, "modifiers": modifiers})

    # key -> (code, windowsVirtualKeyCode, text)
    KEYS = {"Enter": ("Enter", 13, "\r"), "Tab": ("Tab", 9, ""), "Escape": ("Escape", 27, ""),
            "Backspace": ("Backspace", 8, ""), "ArrowLeft": ("ArrowLeft", 37, ""), "ArrowUp": ("ArrowUp", 38, ""),
            "ArrowRight": ("ArrowRight", 39, ""), "ArrowDown": ("ArrowDown", 40, ""), "Home": ("Home", 36, ""),
            "End": ("End", 35, ""), " ": ("Space", 32, " "), "+": ("Equal", 187, "+"), "-": ("Minus", 189, "-")}

    def key(self, key, modifiers=0):
        """Press and release one key (a name of KEYS, or one printable character)."""
        if key in self.KEYS:
            code, vk, text = self.KEYS[key]
        elif len(key) == 1:
            code, vk, text = ("Key" + key.upper() if key.isalpha() else ""), ord(key.upper()), key
        else:
            raise ValueError("unknown key %r" % key)
        down = {"type": "keyDown" if text else "rawKeyDown", "key": key, "code": code,
                "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk, "modifiers": modifiers}
        if text:
            down["text"] = down["unmodifiedText"] = text
        self.send("Input.dispatchKeyEvent", down)
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code,
                                             "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk,
                                             "modifiers": modifiers})

    def insert_text(self, text):
        """Type text into the focused element (one input event)."""
        self.send("Input.insertText", {"text": text})

    # --- looks --------------------------------------------------------------
    def screenshot(self, path, full_page=False):
        params = {"format": "png"}
        if full_page:
            m = self.send("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m.get("contentSize")
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
            params["captureBeyondViewport"] = True
        data = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        with open(path, "wb") as f:
            f.write(data)
        return len(data)

    def color_scheme(self, scheme):
        """Emulate prefers-color-scheme: 'dark', 'light' or '' (the default)."""
        self.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})

    def close(self):
        try:
            self.browser.send("Target.closeTarget", {"targetId": self.target}, timeout=5)
        except CDPError:
            pass


def main(argv=None):
    ap = argparse.ArgumentParser(description="Open a page in headless Chromium over the DevTools pipe.")
    ap.add_argument("url", help="a URL or a file")
    ap.add_argument("--shot", help="write a PNG screenshot here")
    ap.add_argument("--full", action="store_true", help="screenshot the whole page, not the window")
    ap.add_argument("--dark", action="store_true", help="prefers-color-scheme: dark")
    ap.add_argument("--size", default="1280x900", help="window size WxH (default 1280x900)")
    ap.add_argument("--eval", dest="expr", help="print this expression's value (promises awaited)")
    ap.add_argument("--timeout", type=float, default=30, help="seconds per step (default 30)")
    a = ap.parse_args(argv)
    w, h = (int(x) for x in a.size.lower().split("x"))
    try:
        with Browser(width=w, height=h, timeout=a.timeout) as b:
            p = b.new_page()
            if a.dark:
                p.color_scheme("dark")
            p.navigate(a.url)
            if a.expr:
                print(json.dumps(p.evaluate(a.expr)))
            if a.shot:
                n = p.screenshot(a.shot, full_page=a.full)
                print("screenshot: %s (%d bytes)" % (a.shot, n), file=sys.stderr)
            for k, t in p.messages:
                print("%s: %s" % (k, t), file=sys.stderr)
            return 1 if p.errors() else 0
    except CDPError as e:
        print("cdp: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
