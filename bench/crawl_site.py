#!/usr/bin/env python3
"""The crawl benchmark's page server: a static gallery on loopback, every response delayed.

  python3 bench/crawl_site.py [--port 0] [--pages 2000] [--delay-ms 50] [--port-file F]
                              [--listing-links 25] [--detail-delay-ms MS] [--new K]

Python 3.11 stdlib only: a raw asyncio HTTP/1.1 server (keep-alive, responses prebuilt at
start), so one core serves well over 1,000 delayed pages/s. Listens on 127.0.0.1 only; port 0
picks a free port. Prints its base URL (http://127.0.0.1:PORT) on stdout, and to --port-file.

  /t/{n}.html     n = 1..N: 25 <img src="/img/{n}-{k}.jpg"> in <main>, <a class="next"> to n+1
                  (not on page N); /t/{N+1}.html answers 404
  /l/{n}.html     n = 1..N/K: K (--listing-links, 25) <a class="detail" href="/d/{id}.html">
                  thumbnails, a.next
  /d/{id}.html    id = 1..N: one <img class="full" src="/full/{id}.jpg">
  /api/items?cursor=C
                  a JSON feed of N x 25 items, newest first, 25 a page from offset C (default 0):
                  {"items": [{"id": "...", "image": "/img/api-{id}.jpg"}], "next_cursor": C+25 or
                  null on the last page}
  --new K         K items published since: /t/1.html shows K more images /img/new-{k}.jpg
                  first, /l/1.html links K more details /d/{N+k}.html first (served too), and the
                  feed starts with K new items (every page after shifts by K)
  /stats          JSON: requests by kind, pages served (200), 404s, max in flight, connections,
                  the server's own CPU seconds; /stats/reset zeroes them (not delayed, not counted)
  anything else   404 (images too: the crawl never needs their bytes), unless --images:
                  then /img/, /thumb/ and /full/ answer a small PNG whose pixels depend on the path

Every response but /stats is delayed by --delay-ms (detail pages by --detail-delay-ms if given).
Above 100,000 pages the responses are made on demand instead of at start. The totals are also printed on stderr when
the server stops (SIGTERM/SIGINT).
"""
import argparse
import asyncio
import json
import struct
import zlib
import resource
import signal
import sys
import time

IMAGES_PER_PAGE = 25


def gallery_page(n, last, new=0):
    fresh = [f'<img src="/img/new-{k}.jpg" alt="new photo {k}">' for k in range(1, new + 1)] if n == 1 else []
    imgs = "\n".join(fresh + [f'<img src="/img/{n}-{k}.jpg" alt="photo {n}-{k}">' for k in range(1, IMAGES_PER_PAGE + 1)])
    nxt = f'<a class="next" href="/t/{n + 1}.html">next</a>' if n < last else ""
    return (f"<!doctype html><html><head><meta charset=utf-8><title>Gallery page {n}</title></head>"
            f"<body><h1>Page {n}</h1><main>\n{imgs}\n</main><nav>{nxt}</nav></body></html>\n")


def listing_page(n, last, per=IMAGES_PER_PAGE, new_ids=()):
    ids = (list(new_ids) if n == 1 else []) + list(range((n - 1) * per + 1, n * per + 1))
    links = "\n".join(
        f'<a class="detail" href="/d/{i}.html"><img class="thumb" src="/thumb/{i}.jpg" alt="item {i}"></a>'
        for i in ids)
    nxt = f'<a class="next" href="/l/{n + 1}.html">next</a>' if n < last else ""
    return (f"<!doctype html><html><head><meta charset=utf-8><title>Listing {n}</title></head>"
            f"<body><main>\n{links}\n</main><nav>{nxt}</nav></body></html>\n")


def detail_page(i):
    return (f"<!doctype html><html><head><meta charset=utf-8><title>Item {i}</title></head>"
            f'<body><main><h1>Item {i}</h1><img class="full" src="/full/{i}.jpg" alt="item {i}"></main></body></html>\n')


def feed_page(pages, new, offset):
    """The feed's page from `offset`: newest first, the K new items before the N x 25 old ones."""
    old = pages * IMAGES_PER_PAGE
    total = new + old
    ids = [f"new-{i + 1}" if i < new else str(old - (i - new)) for i in range(offset, min(offset + IMAGES_PER_PAGE, total))]
    nxt = offset + IMAGES_PER_PAGE if offset + IMAGES_PER_PAGE < total else None
    items = [{"id": i, "image": f"/img/api-{i}.jpg"} for i in ids]
    return json.dumps({"items": items, "next_cursor": None if nxt is None else str(nxt)})


def response(status, body, ctype="text/html; charset=utf-8"):
    reason = {200: "OK", 404: "Not Found", 400: "Bad Request"}[status]
    body = body.encode() if isinstance(body, str) else body
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            f"Cache-Control: no-store\r\n\r\n").encode()
    return head + body


def png_for(path, size=16):
    """A small PNG of its own for `path` (pure stdlib), so every image URL has other bytes."""
    seed = zlib.crc32(path.encode())
    rgb = bytes(((seed >> 16) & 255, (seed >> 8) & 255, seed & 255))
    raw = b"".join(b"\x00" + rgb * size for _ in range(size))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


class Stats:
    def __init__(self):
        self.reset()

    def reset(self):
        self.started = time.monotonic()
        self.cpu0 = self.cpu()
        self.by_kind = {"t": 0, "l": 0, "d": 0, "api": 0, "img": 0, "other": 0}
        self.ok_pages = 0
        self.not_found = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections = 0
        self.max_connections_open = 0

    @staticmethod
    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def json(self, open_connections):
        return json.dumps({
            "requests": sum(self.by_kind.values()), "by_kind": self.by_kind,
            "pages_ok": self.ok_pages, "not_found": self.not_found,
            "max_in_flight": self.max_in_flight, "connections": self.connections,
            "max_connections_open": self.max_connections_open, "open_connections": open_connections,
            "server_cpu_s": round(self.cpu() - self.cpu0, 3),
            "seconds": round(time.monotonic() - self.started, 3),
        })


LAZY_ABOVE = 100_000


class Site:
    def __init__(self, pages, delay, listing_links=IMAGES_PER_PAGE, detail_delay=None, images=False, new=0):
        self.images = images
        self.new = new
        self.new_ids = range(pages + 1, pages + new + 1)
        self.delay = delay
        self.detail_delay = delay if detail_delay is None else detail_delay
        self.pages = pages
        self.per = listing_links
        self.listings = max(1, pages // listing_links)
        self.lazy = pages > LAZY_ABOVE
        self.routes = {}
        if not self.lazy:
            for n in range(1, pages + 1):
                self.routes[f"/t/{n}.html"] = ("t", response(200, gallery_page(n, pages, new)))
                self.routes[f"/d/{n}.html"] = ("d", response(200, detail_page(n)))
            for i in self.new_ids:
                self.routes[f"/d/{i}.html"] = ("d", response(200, detail_page(i)))
            for n in range(1, self.listings + 1):
                self.routes[f"/l/{n}.html"] = ("l", response(200, listing_page(n, self.listings, self.per, self.new_ids)))
        self.not_found = response(404, "not found\n", "text/plain")
        self.stats = Stats()
        self.open = 0

    def route(self, path, query=""):
        """The prebuilt response for `path`, or one made now (large sites); None: 404."""
        if self.images and self.kind_of(path) == "img":
            return ("img", response(200, png_for(path), "image/png"))
        if path == "/api/items":
            params = dict(p.partition("=")[::2] for p in query.split("&") if p)
            try:
                offset = int(params.get("cursor") or 0)
            except ValueError:
                return None
            return ("api", response(200, feed_page(self.pages, self.new, offset), "application/json"))
        if not self.lazy:
            return self.routes.get(path)
        kind = self.kind_of(path)
        if kind not in ("t", "l", "d") or not path.endswith(".html"):
            return None
        try:
            n = int(path[3:-5])
        except ValueError:
            return None
        last = self.listings if kind == "l" else self.pages + (self.new if kind == "d" else 0)
        if not 1 <= n <= last:
            return None
        body = {"t": lambda: gallery_page(n, last, self.new), "d": lambda: detail_page(n),
                "l": lambda: listing_page(n, last, self.per, self.new_ids)}[kind]()
        return (kind, response(200, body))

    def delay_of(self, path):
        return self.detail_delay if path.startswith("/d/") else self.delay

    def kind_of(self, path):
        for prefix, kind in (("/t/", "t"), ("/l/", "l"), ("/d/", "d"), ("/api/", "api")):
            if path.startswith(prefix):
                return kind
        if path.startswith(("/img/", "/thumb/", "/full/")):
            return "img"
        return "other"


class Conn(asyncio.Protocol):
    """One keep-alive connection; requests are answered in order (pipelining is queued)."""

    def __init__(self, site):
        self.site = site
        self.buf = b""
        self.queue = []
        self.busy = False
        self.transport = None
        self.close_after = False

    def connection_made(self, transport):
        self.transport = transport
        s = self.site
        s.open += 1
        s.stats.connections += 1
        s.stats.max_connections_open = max(s.stats.max_connections_open, s.open)

    def connection_lost(self, exc):
        self.site.open -= 1
        # Requests accepted but never answered leave the in-flight count.
        pending = len(self.queue) + (1 if self.busy else 0)
        self.site.stats.in_flight -= pending
        self.queue.clear()
        self.transport = None

    def data_received(self, data):
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:
                    self.transport.close()
                return
            head, self.buf = self.buf[:end], self.buf[end + 4:]
            lines = head.split(b"\r\n")
            parts = lines[0].split(b" ")
            if len(parts) != 3:
                self.transport.write(response(400, "bad request\n", "text/plain"))
                self.transport.close()
                return
            target = parts[1].decode("latin-1")
            close = parts[2] == b"HTTP/1.0"
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"connection":
                    v = value.strip().lower()
                    close = v == b"close" or (close and v != b"keep-alive")
                elif name == b"content-length":
                    length = int(value.strip() or 0)
            if length:  # bodies are not expected; skip them if present
                if len(self.buf) < length:
                    self.buf = head + b"\r\n\r\n" + self.buf  # wait for the rest
                    return
                self.buf = self.buf[length:]
            self.queue.append((target, close))
            self.site.stats.in_flight += 1
            st = self.site.stats
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
            self.next()

    def next(self):
        if self.busy or not self.queue or self.transport is None:
            return
        target, close = self.queue[0]
        path, _, query = target.split("#", 1)[0].partition("?")
        if path in ("/stats", "/stats/reset"):
            self.queue.pop(0)
            self.site.stats.in_flight -= 1
            if path == "/stats/reset":
                self.site.stats.reset()
            body = self.site.stats.json(self.site.open - 1)
            self.transport.write(response(200, body + "\n", "application/json"))
            if close:
                self.transport.close()
            else:
                self.next()
            return
        self.busy = True
        asyncio.get_running_loop().call_later(self.site.delay_of(path), self.answer, path, query, close)

    def answer(self, path, query, close):
        if self.transport is None:
            return
        self.queue.pop(0)
        self.busy = False
        site, st = self.site, self.site.stats
        st.in_flight -= 1
        st.by_kind[site.kind_of(path)] += 1
        route = site.route(path, query)
        if route is None:
            st.not_found += 1
            self.transport.write(site.not_found)
        else:
            st.ok_pages += 1
            self.transport.write(route[1])
        if close:
            self.transport.close()
            self.transport = None
        else:
            self.next()


async def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--delay-ms", type=float, default=50)
    ap.add_argument("--port-file")
    ap.add_argument("--listing-links", type=int, default=IMAGES_PER_PAGE)
    ap.add_argument("--detail-delay-ms", type=float)
    ap.add_argument("--images", action="store_true", help="answer image paths with small PNGs")
    ap.add_argument("--new", type=int, default=0, help="items published since (see above)")
    args = ap.parse_args()
    detail_delay = None if args.detail_delay_ms is None else args.detail_delay_ms / 1000
    site = Site(args.pages, args.delay_ms / 1000, args.listing_links, detail_delay, args.images, args.new)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Conn(site), "127.0.0.1", args.port, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    print(base, flush=True)
    if args.port_file:
        with open(args.port_file, "w") as f:
            f.write(base + "\n")
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    print("crawl_site stats: " + site.stats.json(site.open), file=sys.stderr, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
