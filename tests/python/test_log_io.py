"""What the server's write-ahead log asks of the disk, seen from outside the process.

A write into part of a page that the page cache no longer holds makes the kernel read that
page from the disk first, inside the write. Hosts drop cached pages under memory pressure, and
some VMs reclaim any page left unused for a minute, so a log that appends into such pages would
wait for a disk read ahead of its fsync. zoolog writes whole pages: these tests drop the log's
pages from the cache (posix_fadvise DONTNEED, which drops clean pages) between writes and count
the bytes the server process read from the disk (/proc/PID/io read_bytes).
"""
import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient

WRITES = 40
PAGE_BYTES = 4096


def read_bytes(pid):
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["read_bytes"])


def log_files(server):
    data = server.directory / "data"
    # zoolog's segments, or Apache's version-2/log.* files.
    return sorted(data.glob("segment-*.wal")) + sorted(data.glob("version-2/log.*"))


def drop_cached_pages(paths):
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/PID/io")
@pytest.mark.skipif(os.environ.get("ZK_KIND", "zoolog") != "zoolog",
                    reason="Apache 3.8's log reads the page back too (163840 bytes for 40 "
                           "writes, measured with this test)")
def test_log_appends_read_nothing_from_the_disk_when_the_cache_dropped_the_log(server_factory):
    server = server_factory()
    client = KazooClient(hosts=server.hosts, timeout=10)
    client.start()
    try:
        client.create("/log-io", b"")

        def write_after_dropping_the_log(index):
            drop_cached_pages(log_files(server))
            # Each answered write is durable, so each is its own write and sync of the log.
            client.set("/log-io", b"v" * (100 + index))

        # Once first, so that the code the measured writes run is already in memory.
        for index in range(5):
            write_after_dropping_the_log(index)
        before = read_bytes(server.pid)
        for index in range(WRITES):
            write_after_dropping_the_log(index)
        read = read_bytes(server.pid) - before
    finally:
        client.stop()
        client.close()
    assert log_files(server), "the server keeps a write-ahead log"
    # A log that read its last page back would have read WRITES pages.
    assert read < WRITES * PAGE_BYTES // 4, f"{read} bytes read from the disk for {WRITES} writes"
