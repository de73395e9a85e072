#!/usr/bin/env python3
"""Measures an explorer page in headless Chromium, as a person would use it:
the first render (the page's 'sd-first-render' mark, ms from navigation
start), then 20 wheel zooms towards the peak, 20 drag pans and 20 wheel
zooms out, each step's time from the page's own 'sd-step' measures.

  explorer_steps.py PAGE.html [--chromium PATH] [--screenshot OUT.png] [--dark]

Prints one line per figure; exits 1 when the page logged a console error or
an exception, or when the explorer did not become ready. A figure, not a
test: nothing here compares a time with a limit. The DevTools protocol is
spoken directly (a websocket client written here), nothing is installed.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
class WS:
    def __init__(self, url):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.split(":")
        self.s = socket.create_connection((host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += self.s.recv(4096)
        self.buf = buf.split(b"\r\n\r\n", 1)[1]

    def send(self, text):
        data = text.encode()
        hdr = bytearray([0x81])
        n = len(data)
        if n < 126:
            hdr.append(0x80 | n)
        elif n < 65536:
            hdr.append(0x80 | 126); hdr += struct.pack(">H", n)
        else:
            hdr.append(0x80 | 127); hdr += struct.pack(">Q", n)
        mask = os.urandom(4)
        hdr += mask
        self.s.sendall(bytes(hdr) + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n):
        while len(self.buf) < n:
            d = self.s.recv(1 << 20)
            if not d:
                raise EOFError
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            msg += payload
            if b0 & 0x80:
                return msg.decode()


class Browser:
    def __init__(self, chromium, width=1400, height=1000, dark=False):
        self.prof = tempfile.mkdtemp(prefix="cdp")
        port = free_port()
        self.p = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=%d" % port,
                                   "--user-data-dir=" + self.prof, "--window-size=%d,%d" % (width, height), "about:blank"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                pages = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json" % port))
                pages = [p for p in pages if p["type"] == "page"]
                if pages:
                    break
            except Exception:
                pass
            time.sleep(0.1)
        self.ws = WS(pages[0]["webSocketDebuggerUrl"])
        self.id = 0
        self.events = []
        self.call("Runtime.enable")
        self.call("Log.enable")
        self.call("Page.enable")
        if dark:
            self.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "dark"}])

    def call(self, method, **params):
        self.id += 1
        my = self.id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == my:
                if "error" in m:
                    raise RuntimeError(m["error"])
                return m.get("result")
            self.events.append(m)

    def ev(self, expr, await_promise=True):
        r = self.call("Runtime.evaluate", expression=expr, awaitPromise=await_promise, returnByValue=True)
        if r.get("exceptionDetails"):
            raise RuntimeError(json.dumps(r["exceptionDetails"])[:2000])
        return r["result"].get("value")

    def goto(self, url):
        self.call("Page.navigate", url=url)
        for _ in range(600):
            if self.ev("document.readyState") == "complete":
                return
            time.sleep(0.05)

    def mouse(self, typ, x, y, **kw):
        self.call("Input.dispatchMouseEvent", type=typ, x=x, y=y, **kw)

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", clickCount=1)

    def shot(self, path):
        r = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        open(path, "wb").write(base64.b64decode(r["data"]))

    def console_errors(self):
        out = []
        for m in self.events:
            if m.get("method") == "Runtime.exceptionThrown":
                out.append(json.dumps(m["params"])[:500])
            if m.get("method") == "Runtime.consoleAPICalled":
                out.append(m["params"]["type"] + ": " + json.dumps(m["params"]["args"])[:300])
            if m.get("method") == "Log.entryAdded" and m["params"]["entry"]["level"] in ("error", "warning"):
                out.append("log: " + m["params"]["entry"]["text"][:300])
        return out

    def close(self):
        self.p.terminate()
        self.p.wait()
        shutil.rmtree(self.prof, ignore_errors=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


E = "window.snapdiffExplorer"
FRAME = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("page")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--screenshot")
    ap.add_argument("--dark", action="store_true")
    a = ap.parse_args()
    b = Browser(a.chromium, dark=a.dark)
    failed = False
    try:
        b.goto("file://" + os.path.abspath(a.page))
        state = b.ev(E + ".ready.then(() => 'ready', e => 'rejected: ' + e.message)")
        if state != "ready":
            print("explorer:", state)
            failed = True
            return
        print("first render: %.0f ms after navigation start" % b.ev("performance.getEntriesByName('sd-first-render')[0].startTime"))
        sel = b.ev("(() => { const s = document.getElementById('sd-jump'); return s.options.length > 1 ? s.options[1].value : ''; })()")
        target = int(sel.split(":")[1]) if sel else int(b.ev(E + ".view(0).e1") // 2)
        y = b.ev(E + ".yMid(0)")

        def steps(label, act):
            n0 = len(b.ev(E + ".stepTimes()"))
            act()
            st = b.ev(E + ".stepTimes()")[n0:]
            v = b.ev(E + ".view(0)")
            print("%s: %d steps, median %.1f ms, max %.1f ms (then events %.0f..%.0f, %d allocations drawn)" %
                  (label, len(st), statistics.median(st), max(st), v["e0"], v["e1"], b.ev(E + ".drawnAllocations(0)")))

        def wheel(dy):
            def act():
                for _ in range(20):
                    b.mouse("mouseWheel", b.ev(E + ".xOf(0, %d)" % target), y, deltaX=0, deltaY=dy)
                    b.ev(FRAME)
            return act

        def pan():
            x = b.ev(E + ".xOf(0, %d)" % target)
            b.mouse("mousePressed", x, y, button="left", clickCount=1)
            for k in range(20):
                b.mouse("mouseMoved", x - 15 * (k + 1), y, button="left")
                b.ev(FRAME)
            b.mouse("mouseReleased", x - 300, y, button="left", clickCount=1)

        steps("zoom in (wheel, towards event %d)" % target, wheel(-200))
        steps("pan (drag)", pan)
        if a.screenshot:
            b.shot(a.screenshot)
        steps("zoom out (wheel)", wheel(200))
        errors = b.console_errors()
        for e in errors:
            print("console:", e)
        failed = bool(errors)
    finally:
        b.close()
        if failed:
            sys.exit(1)


if __name__ == "__main__":
    main()
