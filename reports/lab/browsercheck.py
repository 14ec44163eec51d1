"""A report page as a reader sees it: loaded in headless Chromium.

    /usr/bin/python3 -m reports.lab.browsercheck PAGE.html [--width 1280 --height 800]

Drives Debian's chromium over the DevTools protocol on a pipe
(--remote-debugging-pipe: NUL-terminated JSON on fds 3 and 4, no network,
no third-party client), with a viewport of WIDTH x HEIGHT, and checks:

  - every image loaded (complete, with a natural width) and every local
    link resolves: a file that exists, and for #fragment links an element
    with that id;
  - no console errors, no uncaught exceptions, no error log entries (a
    missing image, for one, is logged as a failed resource load);
  - the main verdict (the first item of the list after the "Verdicts"
    heading) is visible in the first screen, without scrolling.

Prints one line per check ("ok ..." or "FAIL ...") and exits 0 when all
pass, 1 when one fails, 2 when the browser cannot be driven.
"""

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

TIMEOUT_S = 60

# Runs in the page after the load event; returns what the checks need.
PAGE_FACTS_JS = r"""
(() => {
  const imgs = Array.from(document.images).map(i => ({
    src: i.getAttribute("src"), url: i.src, ok: i.complete && i.naturalWidth > 0}));
  const links = Array.from(document.querySelectorAll("a[href]")).map(a => ({
    href: a.getAttribute("href"), url: a.href}));
  const ids = Array.from(document.querySelectorAll("[id]")).map(e => e.id);
  const h = Array.from(document.querySelectorAll("h2")).find(
    e => e.textContent.trim() === "Verdicts");
  let verdict = null;
  if (h) {
    let e = h.nextElementSibling;
    while (e && e.tagName !== "UL" && !/^H[1-6]$/.test(e.tagName))
      e = e.nextElementSibling;
    const li = e && e.tagName === "UL" ? e.querySelector("li") : null;
    if (li) {
      const r = li.getBoundingClientRect();
      const s = getComputedStyle(li);
      verdict = {text: li.textContent.trim(), top: r.top, bottom: r.bottom,
                 width: r.width, height: r.height,
                 hidden: s.visibility === "hidden" || s.display === "none"};
    }
  }
  return {imgs, links, ids, verdict, innerHeight: window.innerHeight,
          innerWidth: window.innerWidth, scrollY: window.scrollY};
})()
"""


class BrowserError(Exception):
    """Chromium could not be started or driven (exit 2)."""


class Chromium:
    """One headless Chromium, driven over --remote-debugging-pipe."""

    def __init__(self, width, height):
        exe = shutil.which("chromium")
        if not exe:
            raise BrowserError("no chromium in PATH (apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="lab-chromium-")
        # the browser reads commands on its fd 3 and writes on its fd 4
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def fds():
            # via high numbers, in case the pipe ends are 3 or 4 already
            r, w = os.dup(to_r), os.dup(from_w)
            os.dup2(r, 3)
            os.dup2(w, 4)
            os.close(r)
            os.close(w)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, preexec_fn=fds, close_fds=False)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        return self.wait(lambda m: m.get("id") == self.next_id, method)

    def wait(self, match, what):
        """Read messages until match(msg); keep events on the way."""
        end = time.monotonic() + TIMEOUT_S
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "method" in msg:
                    self.events.append(msg)
                if match(msg):
                    if "error" in msg:
                        raise BrowserError(f"{what}: {msg['error']}")
                    return msg
            left = end - time.monotonic()
            if left <= 0:
                raise BrowserError(f"timed out waiting for {what}")
            r, _, _ = select.select([self.from_r], [], [], left)
            if r:
                chunk = os.read(self.from_r, 1 << 16)
                if not chunk:
                    raise BrowserError(f"chromium exited while waiting for "
                                       f"{what} (status {self.proc.poll()})")
                self.buf += chunk

    def open(self, url, width, height):
        targets = self.send("Target.getTargets", session=False)
        page = next((t for t in targets["result"]["targetInfos"]
                     if t["type"] == "page"), None)
        if page is None:
            page = self.send("Target.createTarget", {"url": "about:blank"},
                             session=False)["result"]
        att = self.send("Target.attachToTarget",
                        {"targetId": page["targetId"], "flatten": True},
                        session=False)
        self.session = att["result"]["sessionId"]
        for m in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.send(m)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1,
                   "mobile": False})
        self.send("Page.navigate", {"url": url})
        self.wait(lambda m: m.get("method") == "Page.loadEventFired" and
                  m.get("sessionId") == self.session, "the load event")
        # images decode after the load event in some cases: give them time
        time.sleep(0.5)

    def evaluate(self, js):
        r = self.send("Runtime.evaluate", {"expression": js,
                                           "returnByValue": True})
        res = r["result"]
        if "exceptionDetails" in res:
            raise BrowserError(f"evaluate: {res['exceptionDetails']}")
        return res["result"]["value"]

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", session=False)
                except (BrowserError, OSError):
                    pass
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            for fd in (self.to_w, self.from_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)


def console_errors(events):
    """Console errors, uncaught exceptions and error log entries."""
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params") or {}
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error",
                                                                 "assert"):
            out.append("console." + p["type"] + ": " + " ".join(
                str(a.get("value", a.get("description", "")))
                for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails") or {}
            out.append("exception: " + str(
                (d.get("exception") or {}).get("description") or
                d.get("text")))
        elif m == "Log.entryAdded" and \
                (p.get("entry") or {}).get("level") == "error":
            ent = p["entry"]
            out.append(f"log: {ent.get('text')} ({ent.get('url', '')})")
    return out


def link_problems(facts, page):
    """Local links that do not resolve: a missing file or fragment."""
    bad = []
    ids = set(facts["ids"])
    base = urllib.parse.urlparse(page)
    for link in facts["links"]:
        u = urllib.parse.urlparse(link["url"])
        if u.scheme in ("http", "https", "mailto"):
            continue  # the lab's reports never link out; not fetched here
        if u.scheme != "file":
            bad.append(f"{link['href']}: scheme {u.scheme!r}")
            continue
        path = urllib.parse.unquote(u.path)
        if not os.path.exists(path):
            bad.append(f"{link['href']}: no such file {path}")
        elif u.fragment and path == urllib.parse.unquote(base.path) and \
                u.fragment not in ids:
            bad.append(f"{link['href']}: no element with id {u.fragment!r}")
    return bad


def check(page, width=1280, height=800, verdict=True):
    """Run the checks on PAGE; returns [(ok, text)]. verdict=False: a page
    without verdicts (the index), the first-screen check is left out."""
    url = "file://" + urllib.parse.quote(os.path.abspath(page))
    b = Chromium(width, height)
    try:
        b.open(url, width, height)
        facts = b.evaluate(PAGE_FACTS_JS)
        errors = console_errors(b.events)
    finally:
        b.close()
    res = []
    broken = [i["src"] for i in facts["imgs"] if not i["ok"]]
    res.append((not broken,
                f"images: {len(facts['imgs']) - len(broken)} of "
                f"{len(facts['imgs'])} loaded"
                + (f"; broken: {', '.join(broken)}" if broken else "")))
    bad = link_problems(facts, url)
    res.append((not bad, f"links: {len(facts['links']) - len(bad)} of "
                         f"{len(facts['links'])} resolve"
                + (f"; broken: {'; '.join(bad)}" if bad else "")))
    res.append((not errors, "console: no errors" if not errors else
                "console: " + " | ".join(errors)))
    v = facts["verdict"]
    if not verdict:
        pass
    elif v is None:
        res.append((False, "main verdict: no list after a 'Verdicts' "
                           "heading"))
    else:
        seen = (not v["hidden"] and v["height"] > 0 and v["top"] >= 0 and
                v["bottom"] <= facts["innerHeight"] and facts["scrollY"] == 0)
        res.append((seen, f"main verdict {'in' if seen else 'NOT in'} the "
                          f"first screen ({width}x{height}): top "
                          f"{v['top']:.0f}, bottom {v['bottom']:.0f} px: "
                          f"{v['text'][:200]}"))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check a report page in "
                                 "headless Chromium.")
    ap.add_argument("page")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=800)
    ap.add_argument("--no-verdict", action="store_true",
                    help="a page without verdicts (the reports index)")
    args = ap.parse_args(argv)
    if not os.path.isfile(args.page):
        print(f"browsercheck: error: no page {args.page}", file=sys.stderr)
        return 2
    try:
        res = check(args.page, args.width, args.height,
                    verdict=not args.no_verdict)
    except (BrowserError, OSError) as e:
        print(f"browsercheck: error: {e}", file=sys.stderr)
        return 2
    for ok, text in res:
        print(("ok   " if ok else "FAIL ") + text)
    return 0 if all(ok for ok, _ in res) else 1


if __name__ == "__main__":
    sys.exit(main())
