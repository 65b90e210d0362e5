#!/usr/bin/env python3
"""A fault-injecting TCP proxy for server-to-server links of a test ensemble (stdlib only).

One process serves every link. A link is named by the server that opens the connection (src), the
server it reaches (dst) and the port kind (quorum or election); it listens on 127.0.0.1:LISTEN and
forwards to 127.0.0.1:TARGET. Links come from a JSON file:

    {"links": [{"src": 1, "dst": 2, "kind": "quorum", "listen": 41001, "target": 40002}, ...]}

    faultproxy.py --links links.json --control /path/proxy.sock [--ready-file F]

Control: a unix socket taking one command per line, answering one line ("ok ..." or "error ...").

    block A B [hold|refuse]   cut the connections A opened to B (every kind) and keep new ones from
                              passing: `hold` (default) accepts and black-holes them like a lost
                              network would, `refuse` accepts and resets them at once
    unblock A B               let A reach B again (held connections are closed so A retries)
    delay A B MS              add MS milliseconds to every chunk in both directions of A->B links
    corrupt A B N             flip one random bit in every Nth chunk A sends on A->B links (0: stop)
    drop-all                  block every link
    heal                      unblock every link and clear every delay and corruption
    status                    one JSON line: blocked pairs, delays, corruptions (with the chunks
                              corrupted so far), open connection counts
    ping                      "ok pong"

A partition between groups G1 and G2 is `block a b` and `block b a` for every a in G1, b in G2:
every connection between two servers is opened by one of them, so blocking both directions cuts it.

Buffers are bounded: each direction of a connection holds at most MAX_QUEUED chunks of at most
CHUNK bytes (reads stop when the queue is full, so TCP backpressure reaches the sender), and at most
MAX_HELD black-holed connections are kept per link (the oldest is reset beyond that).
"""
import argparse
import asyncio
import json
import os
import random
import signal
import sys
import time

CHUNK = 65536
MAX_QUEUED = 64
MAX_HELD = 32


class Link:
    def __init__(self, src, dst, kind, listen, target):
        self.src, self.dst, self.kind = src, dst, kind
        self.listen, self.target = listen, target
        self.conns = set()  # Conn objects passing data
        self.held = []  # writers of black-holed connections
        self.server = None

    def __repr__(self):
        return f"{self.src}->{self.dst}/{self.kind}"


class Conn:
    """One proxied connection: client side (reader, writer) and upstream side."""

    def __init__(self, link, creader, cwriter, ureader, uwriter):
        self.link = link
        self.creader, self.cwriter = creader, cwriter
        self.ureader, self.uwriter = ureader, uwriter
        self.tasks = []

    def abort(self):
        for writer in (self.cwriter, self.uwriter):
            try:
                writer.transport.abort()  # RST rather than FIN: the peer sees the link break
            except Exception:
                pass
        for task in self.tasks:
            task.cancel()


class Proxy:
    def __init__(self, links):
        self.links = links
        self.blocked = {}  # (src, dst) -> "hold" | "refuse"
        self.delays = {}  # (src, dst) -> seconds
        self.corruptions = {}  # (src, dst) -> [every Nth chunk, chunks seen, chunks corrupted]

    def pair_links(self, src, dst):
        return [l for l in self.links if l.src == src and l.dst == dst]

    async def start(self):
        for link in self.links:
            link.server = await asyncio.start_server(
                lambda r, w, link=link: self.accept(link, r, w), "127.0.0.1", link.listen,
                reuse_address=True)

    async def accept(self, link, reader, writer):
        mode = self.blocked.get((link.src, link.dst))
        if mode == "refuse":
            writer.transport.abort()
            return
        if mode == "hold":
            link.held.append(writer)
            while len(link.held) > MAX_HELD:
                link.held.pop(0).transport.abort()
            return
        try:
            ureader, uwriter = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", link.target), timeout=5)
        except (OSError, asyncio.TimeoutError):
            writer.transport.abort()
            return
        if (link.src, link.dst) in self.blocked:  # blocked while we were connecting
            writer.transport.abort()
            uwriter.transport.abort()
            return
        conn = Conn(link, reader, writer, ureader, uwriter)
        link.conns.add(conn)
        conn.tasks = [asyncio.ensure_future(self.pump(link, reader, uwriter, sent_by_src=True)),
                      asyncio.ensure_future(self.pump(link, ureader, writer, sent_by_src=False))]
        try:
            await asyncio.wait(conn.tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            conn.abort()
            link.conns.discard(conn)

    async def pump(self, link, reader, writer, sent_by_src):
        """Copies one direction through a bounded queue, applying the link's current delay (and,
        to what src sends, its corruption)."""
        queue = asyncio.Queue(MAX_QUEUED)

        async def read_side():
            try:
                while True:
                    data = await reader.read(CHUNK)
                    if not data:
                        break
                    if sent_by_src:
                        data = self.maybe_corrupt(link, data)
                    due = time.monotonic() + self.delays.get((link.src, link.dst), 0.0)
                    await queue.put((due, data))
            except (OSError, ConnectionError):
                pass
            await queue.put(None)

        reading = asyncio.ensure_future(read_side())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                due, data = item
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            return
        finally:
            reading.cancel()

    def maybe_corrupt(self, link, data):
        corruption = self.corruptions.get((link.src, link.dst))
        if corruption is None:
            return data
        corruption[1] += 1
        if corruption[1] % corruption[0]:
            return data
        corruption[2] += 1
        bit = random.randrange(len(data) * 8)
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        return bytes(flipped)

    def block(self, src, dst, mode):
        self.blocked[(src, dst)] = mode
        for link in self.pair_links(src, dst):
            for conn in list(link.conns):
                conn.abort()
            link.conns.clear()

    def unblock(self, src, dst):
        self.blocked.pop((src, dst), None)
        for link in self.pair_links(src, dst):
            for writer in link.held:
                writer.transport.abort()
            link.held.clear()

    def status(self):
        return {
            "blocked": [[s, d, m] for (s, d), m in sorted(self.blocked.items())],
            "delays_ms": [[s, d, int(v * 1000)] for (s, d), v in sorted(self.delays.items())],
            "corruptions": [[s, d, every, corrupted]
                            for (s, d), (every, _, corrupted) in sorted(self.corruptions.items())],
            "connections": {repr(l): len(l.conns) for l in self.links if l.conns},
            "held": {repr(l): len(l.held) for l in self.links if l.held},
        }

    def command(self, line):
        words = line.split()
        if not words:
            return "error empty command"
        op, args = words[0], words[1:]
        ids = sorted({l.src for l in self.links} | {l.dst for l in self.links})
        try:
            if op == "ping":
                return "ok pong"
            if op == "block" and len(args) in (2, 3):
                mode = args[2] if len(args) == 3 else "hold"
                if mode not in ("hold", "refuse"):
                    return "error mode must be hold or refuse"
                self.block(int(args[0]), int(args[1]), mode)
                return "ok"
            if op == "unblock" and len(args) == 2:
                self.unblock(int(args[0]), int(args[1]))
                return "ok"
            if op == "delay" and len(args) == 3:
                ms = float(args[2])
                if ms <= 0:
                    self.delays.pop((int(args[0]), int(args[1])), None)
                else:
                    self.delays[(int(args[0]), int(args[1]))] = ms / 1000.0
                return "ok"
            if op == "corrupt" and len(args) == 3:
                pair, every = (int(args[0]), int(args[1])), int(args[2])
                if every < 0:
                    return "error N must be 0 (stop) or more"
                if every == 0:
                    self.corruptions.pop(pair, None)
                else:
                    self.corruptions[pair] = [every, 0, 0]
                return "ok"
            if op == "drop-all" and not args:
                for a in ids:
                    for b in ids:
                        if a != b:
                            self.block(a, b, "hold")
                return "ok"
            if op == "heal" and not args:
                for (a, b) in list(self.blocked):
                    self.unblock(a, b)
                self.delays.clear()
                self.corruptions.clear()
                return "ok"
            if op == "status" and not args:
                return "ok " + json.dumps(self.status())
        except ValueError as e:
            return f"error {e}"
        return f"error unknown command {line.strip()!r}"

    async def control(self, reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                writer.write((self.command(line.decode(errors="replace")) + "\n").encode())
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            writer.close()


async def main_async(args):
    spec = json.loads(open(args.links).read())
    links = [Link(l["src"], l["dst"], l["kind"], l["listen"], l["target"]) for l in spec["links"]]
    proxy = Proxy(links)
    await proxy.start()
    if os.path.exists(args.control):
        os.unlink(args.control)
    await asyncio.start_unix_server(proxy.control, path=args.control)
    if args.ready_file:
        with open(args.ready_file, "w") as f:
            f.write(str(os.getpid()))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", required=True)
    parser.add_argument("--control", required=True, help="unix socket path")
    parser.add_argument("--ready-file", help="written with the pid once every port listens")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
