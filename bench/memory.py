#!/usr/bin/env python3
"""Resident memory of a server holding N znodes: creates N children of /m with 100-byte values
(or --value-bytes; pipelined through kazoo) and prints the server process's RSS before, after,
and after a restart (the tree rebuilt from its snapshot and log, without the garbage of the
load), with the restarted process's peak RSS. Apache's RSS
includes the JVM's heap slack. A standalone server's restart also reports how long it took to
load the tree, by the server's own count (mntr's dbinittime, which both servers keep).

A standalone server starts through tests/zk-server. With --ensemble, a 3-member ensemble starts
through tests/ensemble/ensemble.py, the load goes through the leader, and one follower is
restarted: a member keeps the entries since its last snapshot in memory, so its restart shows
what recovery holds on to as well. With --catch-up N, N more znodes are created while the
follower is down, and it catches up by snapshot (the peak shows what installing one takes).

    python3 bench/memory.py zoolog 200000
    python3 bench/memory.py apache 200000
    python3 bench/memory.py zoolog 200000 --ensemble
    python3 bench/memory.py zoolog 4000 --value-bytes 100000
    python3 bench/memory.py zoolog 2000 --value-bytes 100000 --ensemble --catch-up 1000
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "tests" / "zk-server"
PIPELINE_DEPTH = 2000

sys.path.insert(0, str(ROOT / "tests" / "ensemble"))
from ensemble import Ensemble  # noqa: E402


def rss_mib(pid: int, key: str = "VmRSS") -> int:
    """The process's resident memory, or with key="VmHWM" its peak."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"no {key}")


def load(hosts: str, count: int, value: bytes, parent: str = "/m") -> None:
    client = KazooClient(hosts=hosts, timeout=30)
    # Enough requests in flight to load quickly, few enough to stay within the servers' limits.
    depth = max(1, min(PIPELINE_DEPTH, (64 << 20) // max(1, len(value))))
    client.start()
    client.create(parent)
    pending = []
    for i in range(count):
        pending.append(client.create_async(f"{parent}/n{i:07d}", value))
        if len(pending) >= depth:
            [p.get() for p in pending]
            pending = []
    [p.get() for p in pending]
    client.stop()
    time.sleep(2)


def dbinittime_ms(port: int) -> str:
    """The server's own time to load its tree at start-up (ZooKeeper's dbinittime, from mntr),
    once it serves: Apache answers mntr only then."""
    for _ in range(100):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"mntr")
            sock.shutdown(socket.SHUT_WR)
            text = sock.makefile().read()
        values = dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)
        if "zk_sum_dbinittime" in values:
            return values["zk_sum_dbinittime"]
        time.sleep(0.1)
    raise RuntimeError(f"no dbinittime in mntr: {text!r}")


def launcher(env, *args) -> str:
    return subprocess.run([str(LAUNCHER), *args], env=env, capture_output=True, text=True, check=True).stdout.strip()


def standalone(kind: str, count: int, value: bytes) -> str:
    env = dict(os.environ, ZK_KIND=kind)
    directory = Path(tempfile.mkdtemp(prefix=f"memory-{kind}-"))
    port = launcher(env, "start", str(directory))
    pid = lambda: int((directory / "pid").read_text())  # noqa: E731 (the pid changes on restart)
    before = rss_mib(pid())
    load(f"127.0.0.1:{port}", count, value)
    after = rss_mib(pid())
    launcher(env, "stop", str(directory))
    port = launcher(env, "restart", str(directory))
    load_ms = dbinittime_ms(int(port))
    time.sleep(1)
    recovered, peak = rss_mib(pid()), rss_mib(pid(), "VmHWM")
    launcher(env, "stop", str(directory))
    return (f"RSS {before} MiB empty, {after} MiB loaded, {recovered} MiB after a restart "
            f"(peak {peak} MiB), which loaded the tree in {load_ms} ms (dbinittime)")


def ensemble(kind: str, count: int, value: bytes, catch_up: int) -> str:
    directory = tempfile.mkdtemp(prefix=f"memory-ensemble-{kind}-")
    # With catch-up writes, snapshots every 200 entries leave the leader no history old
    # enough for the follower, which then catches up by snapshot.
    settings = {"snapCount": "200"} if catch_up else {}
    members = Ensemble.create(directory, 3, kind=kind, settings=settings)
    try:
        members.up(timeout_s=90)
        follower = members.followers()[0]
        before = rss_mib(members.pid(follower))
        load(members.hosts(members.leader()), count, value)
        after = {sid: rss_mib(members.pid(sid)) for sid in members.ids}
        members.stop(follower)
        if catch_up:
            load(members.hosts(members.leader()), catch_up, value, parent="/catch-up")
        members.start(follower)
        members.wait_quorum()
        time.sleep(1)
        recovered = rss_mib(members.pid(follower))
        peak = rss_mib(members.pid(follower), "VmHWM")
    finally:
        members.destroy()
        shutil.rmtree(directory, ignore_errors=True)
    loaded = ", ".join(f"server {sid} {mib}" for sid, mib in sorted(after.items()))
    restart = f"a restart after {catch_up} more znodes" if catch_up else "a restart"
    return (f"loaded RSS {loaded} MiB; follower {follower}: {before} MiB empty, "
            f"{after[follower]} MiB loaded, {recovered} MiB after {restart} (peak {peak} MiB)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["zoolog", "apache"])
    parser.add_argument("count", type=int, help="znodes to create")
    parser.add_argument("--ensemble", action="store_true", help="a 3-member ensemble, one follower restarted")
    parser.add_argument("--value-bytes", type=int, default=100, help="bytes of each znode's value (default 100)")
    parser.add_argument("--catch-up", type=int, default=0, metavar="N",
                        help="with --ensemble: create N more znodes while the follower is down, with "
                             "snapCount=200, so that it catches up by snapshot")
    args = parser.parse_args()
    value = b"x" * args.value_bytes
    if args.ensemble:
        result = ensemble(args.kind, args.count, value, args.catch_up)
    else:
        result = standalone(args.kind, args.count, value)
    print(f"{args.kind}: {args.count} znodes of {args.value_bytes} bytes: {result}")
