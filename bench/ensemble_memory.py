#!/usr/bin/env python3
"""Resident memory of the members of a 3-server zoolog ensemble after large values: starts one
through tests/ensemble/ensemble.py, writes N values of V bytes through the leader, and prints each
member's resident and peak memory and how many snapshots it saved. A member holds the entries since
its last snapshot in memory besides the tree, so this shows what snapSizeLimitInKb bounds.

    python3 bench/ensemble_memory.py 1500 1000000
    ZOOLOG_BIN=/path/to/other/zoolog python3 bench/ensemble_memory.py 1500 1000000 snapSizeLimitInKb=0

(Only zoolog: the harness gives Apache ZooKeeper a 256 MiB heap, too small for this.)
"""
import shutil
import sys
import tempfile
from pathlib import Path

from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "ensemble"))
from ensemble import Ensemble  # noqa: E402


def memory_mib(pid: int) -> dict:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) // 1024
    return fields


def main(count: int, value_bytes: int, settings: dict) -> None:
    directory = tempfile.mkdtemp(prefix="ensemble-memory-")
    ensemble = Ensemble.create(directory, 3, settings=settings, kind="zoolog")
    try:
        ensemble.up(timeout_s=90)
        writer = KazooClient(hosts=ensemble.hosts(ensemble.leader()), timeout=30)
        writer.start(timeout=30)
        value = b"m" * value_bytes
        for i in range(count):
            writer.create(f"/m{i}", value)
        writer.sync("/")
        writer.stop()
        writer.close()
        print(f"{count} values of {value_bytes} bytes, settings {settings or 'default'}")
        for sid in ensemble.ids:
            memory = memory_mib(ensemble.pid(sid))
            log = (Path(ensemble.servers[sid]["dir"]) / "server.log").read_text(errors="replace")
            print(f"server {sid}: resident {memory['VmRSS']} MiB, peak {memory['VmHWM']} MiB, "
                  f"snapshots saved {log.count('snapshot saved')}")
    finally:
        ensemble.destroy()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    extra = dict(arg.split("=", 1) for arg in sys.argv[3:])
    main(int(sys.argv[1]), int(sys.argv[2]), extra)
