#!/usr/bin/env python3
"""The crawl benchmark's Scrapy peer (Scrapy from PyPI, in a venv under /tmp).

  python peer_scrapy.py BASE MODE N [FIRST] [--concurrency C]

  MODE starts   N independent start URLs BASE/t/{FIRST..FIRST+N-1}.html, no following
       next     from BASE/t/{FIRST}.html, follow `a.next` to the end of the chain
       detail   from BASE/l/1.html: follow `a.next` over the listings and every `a.detail`
               (N = the detail pages expected; images are `img.full`)

Extracts the `src` of `main img` (`img.full` on detail pages) as items, into no sink at all
(no pipeline, no feed export). Scrapy's default settings except LOG_LEVEL=WARNING,
ROBOTSTXT_OBEY=False and TELNETCONSOLE_ENABLED=False; --concurrency C also sets
CONCURRENT_REQUESTS and CONCURRENT_REQUESTS_PER_DOMAIN to C.
Prints `RESULT {"pages": P, "images": I, ...}` at the end (pages parsed with status 200,
listings included).
"""
import argparse
import json

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess


class Gallery(scrapy.Spider):
    name = "gallery"
    pages = 0
    images = 0
    listings = 0

    def __init__(self, base, mode, n, first, **kw):
        super().__init__(**kw)
        self.base, self.mode, self.n, self.first = base.rstrip("/"), mode, n, first

    async def start(self):  # Scrapy >= 2.13
        for r in self.start_requests():
            yield r

    def start_requests(self):
        if self.mode == "starts":
            for i in range(self.first, self.first + self.n):
                yield scrapy.Request(f"{self.base}/t/{i}.html", callback=self.parse_gallery)
        elif self.mode == "next":
            yield scrapy.Request(f"{self.base}/t/{self.first}.html", callback=self.parse_gallery)
        else:
            yield scrapy.Request(f"{self.base}/l/1.html", callback=self.parse_listing)

    def parse_gallery(self, response):
        self.pages += 1
        for src in response.css("main img::attr(src)").getall():
            self.images += 1
            yield {"url": response.urljoin(src), "page": response.url}
        if self.mode == "next":
            nxt = response.css("a.next::attr(href)").get()
            if nxt:
                yield response.follow(nxt, callback=self.parse_gallery)

    def parse_listing(self, response):
        self.pages += 1
        self.listings += 1
        for href in response.css("a.detail::attr(href)").getall():
            yield response.follow(href, callback=self.parse_detail)
        nxt = response.css("a.next::attr(href)").get()
        if nxt:
            yield response.follow(nxt, callback=self.parse_listing)

    def parse_detail(self, response):
        self.pages += 1
        for src in response.css("img.full::attr(src)").getall():
            self.images += 1
            yield {"url": response.urljoin(src), "page": response.url}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("mode", choices=["starts", "next", "detail"])
    ap.add_argument("n", type=int)
    ap.add_argument("first", type=int, nargs="?", default=1)
    ap.add_argument("--concurrency", type=int)
    a = ap.parse_args()
    settings = {"LOG_LEVEL": "WARNING", "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False}
    if a.concurrency:
        settings["CONCURRENT_REQUESTS"] = a.concurrency
        settings["CONCURRENT_REQUESTS_PER_DOMAIN"] = a.concurrency
    process = CrawlerProcess(settings=settings)
    crawler = process.create_crawler(Gallery)
    scraped = {"items": 0}

    def on_item(*_, **__):
        scraped["items"] += 1

    crawler.signals.connect(on_item, signal=signals.item_scraped)  # a weak reference: keep on_item
    process.crawl(crawler, base=a.base, mode=a.mode, n=a.n, first=a.first)
    process.start()
    spider = crawler.spider
    stats = crawler.stats.get_stats()
    print("RESULT " + json.dumps({
        "pages": spider.pages, "images": spider.images, "items": scraped["items"],
        "listings": spider.listings,
        "responses": stats.get("downloader/response_count", 0),
        "errors": stats.get("log_count/ERROR", 0),
    }), flush=True)


if __name__ == "__main__":
    main()
