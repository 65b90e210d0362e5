#!/usr/bin/env python3
"""Resident memory of a server holding N znodes: starts zoolog or Apache ZooKeeper through
tests/zk-server, creates N children of /m with 100-byte values (pipelined through kazoo), and
prints the server process's RSS before, after, and after a restart (the tree rebuilt from its
snapshot and log, without the garbage of the load). Apache's RSS includes the JVM's heap slack.

    python3 bench/memory.py zoolog 200000
    python3 bench/memory.py apache 200000
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "tests" / "zk-server"
PIPELINE_DEPTH = 2000


def rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no VmRSS")


def launcher(env, *args) -> str:
    return subprocess.run([str(LAUNCHER), *args], env=env, capture_output=True, text=True, check=True).stdout.strip()


def main(kind: str, count: int) -> None:
    env = dict(os.environ, ZK_KIND=kind)
    directory = Path(tempfile.mkdtemp(prefix=f"memory-{kind}-"))
    port = launcher(env, "start", str(directory))
    pid = lambda: int((directory / "pid").read_text())  # noqa: E731 (the pid changes on restart)
    before = rss_mib(pid())
    client = KazooClient(hosts=f"127.0.0.1:{port}", timeout=30)
    client.start()
    client.create("/m")
    pending = []
    for i in range(count):
        pending.append(client.create_async(f"/m/n{i:07d}", b"x" * 100))
        if len(pending) >= PIPELINE_DEPTH:
            [p.get() for p in pending]
            pending = []
    [p.get() for p in pending]
    time.sleep(2)
    after = rss_mib(pid())
    client.stop()
    launcher(env, "stop", str(directory))
    launcher(env, "restart", str(directory))
    time.sleep(1)
    recovered = rss_mib(pid())
    launcher(env, "stop", str(directory))
    print(f"{kind}: {count} znodes of 100 bytes: RSS {before} MiB empty, {after} MiB loaded, "
          f"{recovered} MiB after a restart")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
