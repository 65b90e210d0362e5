"""Crash tests: kill -9 the server in the middle of a concurrent write load, restart it on the
same data directory, and check durability and atomicity of what was acknowledged:

  * every acknowledged write is present with its value;
  * a multi (two creates) is entirely present or entirely absent;
  * per session, the applied writes are a prefix of what the session sent (FIFO), at least as
    long as the acknowledged ones; nothing beyond what was sent exists;
  * the zxid a client saw last is not ahead of the restarted server (clients reconnect with it);
  * sessions survive a restart: reconnecting with id+password keeps the session and its ephemerals.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Optional

import pytest

import zkwire as z
from zkwire import Connection

WRITERS = 4
WINDOW = 4  # requests in flight per writer (pipelined)
MAX_OPS_PER_WRITER = 20000
KILL_AFTER_ACKS = [40, 400, 1500]  # one round each: kill at different moments of the load
WAIT_S = 60.0  # bound on every wait in this file


def op_kind(j: int) -> str:
    return ("create", "multi", "set")[j % 3]


@dataclass
class Writer:
    """One session writing a deterministic sequence of ops under its own directory."""
    hosts: str
    base: str
    sent: int = 0  # ops 0..sent-1 were written to the socket
    acked: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # non-zero error codes (a test failure)
    max_zxid: int = 0
    thread: Optional[threading.Thread] = None

    def value(self, j: int) -> bytes:
        return f"{self.base}:{j}".encode()

    def request(self, j: int) -> tuple[int, bytes]:
        kind = op_kind(j)
        if kind == "create":
            return z.CREATE, z.create_body(f"{self.base}/n{j}", self.value(j), z.OPEN_ACL_UNSAFE, 0)
        if kind == "multi":
            return z.MULTI, z.multi_body([
                (z.CREATE, z.create_body(f"{self.base}/m{j}a", self.value(j), z.OPEN_ACL_UNSAFE, 0)),
                (z.CREATE, z.create_body(f"{self.base}/m{j}b", self.value(j), z.OPEN_ACL_UNSAFE, 0))])
        return z.SET_DATA, z.set_data_body(self.base, self.value(j), -1)

    def run(self, conn: Connection) -> None:
        in_flight: deque[tuple[int, int, int]] = deque()  # (op index, xid, opcode)
        try:
            while self.sent < MAX_OPS_PER_WRITER or in_flight:
                while len(in_flight) < WINDOW and self.sent < MAX_OPS_PER_WRITER:
                    op, body = self.request(self.sent)
                    in_flight.append((self.sent, conn.send(op, body), op))
                    self.sent += 1
                j, xid, op = in_flight.popleft()
                res = conn.result(op, xid)
                failed = [e for _, e, _ in res.value] if op == z.MULTI and res.err == 0 else []
                if res.err != 0 or any(failed):
                    self.failures.append(f"op {j}: err {res.err} {failed}")
                    return
                self.acked.append(j)
                self.max_zxid = max(self.max_zxid, res.zxid)
        except (OSError, z.ConnectionClosed, ValueError):
            return  # the server was killed
        finally:
            conn.close_socket()


def applied_prefix(w: Writer, children: set[str], data: bytes, version: int) -> Optional[int]:
    """The length k of the prefix of w's ops that explains the state found, or None."""
    for k in range(w.sent + 1):
        creates_ok = all(
            (f"n{j}" in children) == (j < k) if op_kind(j) == "create" else
            ({f"m{j}a", f"m{j}b"} <= children) == (j < k) if op_kind(j) == "multi" else True
            for j in range(w.sent))
        sets = [j for j in range(k) if op_kind(j) == "set"]
        if creates_ok and version == len(sets) and data == (w.value(sets[-1]) if sets else b""):
            return k
    return None


def expected_children(w: Writer, k: int) -> set[str]:
    names: set[str] = set()
    for j in range(k):
        if op_kind(j) == "create":
            names.add(f"n{j}")
        elif op_kind(j) == "multi":
            names |= {f"m{j}a", f"m{j}b"}
    return names


def verify(conn: Connection, w: Writer) -> None:
    dir_data = conn.get_data(w.base)
    assert dir_data.err == z.OK, f"{w.base} lost: err {dir_data.err}"
    data, stat = dir_data.value
    kids = conn.get_children(w.base)
    children = set(kids.value)
    k = applied_prefix(w, children, data or b"", stat.version)
    assert k is not None, (f"{w.base}: state is not a prefix of the sent ops (sent {w.sent}, "
                           f"acked {len(w.acked)}, version {stat.version}, data {data!r}, "
                           f"{len(children)} children)")
    acked_needed = max(w.acked) + 1 if w.acked else 0
    assert k >= acked_needed, f"{w.base}: only {k} ops applied but {acked_needed} acknowledged"
    assert children == expected_children(w, k), f"{w.base}: unexpected children"
    for name in sorted(children):  # values of everything present
        got = conn.get_data(f"{w.base}/{name}")
        j = int(name[1:].rstrip("ab"))
        assert got.err == z.OK and got.value[0] == w.value(j), f"{w.base}/{name}: {got}"


def wait_for(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_kill_during_concurrent_writes_loses_nothing_acknowledged(server) -> None:
    z.wait_until_serving(server.hosts)
    with Connection.open(server.hosts) as setup:
        assert setup.create("/crash").err == z.OK
    done: list[Writer] = []
    for round_no, kill_after in enumerate(KILL_AFTER_ACKS):
        with Connection.open(server.hosts) as setup:
            assert setup.create(f"/crash/r{round_no}").err == z.OK
            writers = [Writer(server.hosts, f"/crash/r{round_no}/w{i}") for i in range(WRITERS)]
            for w in writers:
                assert setup.create(w.base, b"").err == z.OK
        for w in writers:
            conn = Connection.open(server.hosts)
            w.thread = threading.Thread(target=w.run, args=(conn,), daemon=True)
            w.thread.start()
        wait_for(lambda: sum(len(w.acked) for w in writers) >= kill_after
                 or not any(w.thread.is_alive() for w in writers), f"{kill_after} acks")
        server.kill()
        for w in writers:
            w.thread.join(WAIT_S)
            assert not w.thread.is_alive(), "writer did not notice the crash"
            assert not w.failures, f"{w.base}: write failed before the crash: {w.failures}"
        assert sum(len(w.acked) for w in writers) >= kill_after, "writers stopped early"

        server.restart()
        z.wait_until_serving(server.hosts)
        done += writers
        last_zxid = max(w.max_zxid for w in done)
        # A client that saw last_zxid must be able to reconnect (§3.3: else closed silently).
        with Connection.open(server.hosts, last_zxid=last_zxid) as check:
            assert check.handshake is not None and check.handshake.session_id != 0
            for w in done:  # this round, and all earlier rounds again
                verify(check, w)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_session_survives_restart(server, how: str) -> None:
    z.wait_until_serving(server.hosts)
    conn = Connection.open(server.hosts, timeout_ms=30000)
    hs = conn.handshake
    assert hs is not None
    assert conn.create("/owner-data", b"persistent").err == z.OK
    created = conn.create("/eph", b"mine", flags=z.EPHEMERAL)
    assert created.err == z.OK
    conn.close_socket()  # the session stays open on the server

    server.kill() if how == "kill" else server.stop()
    server.restart()
    z.wait_until_serving(server.hosts)

    # A wrong password is refused after the restart: expired-style handshake (§3.3 step 7).
    with Connection("127.0.0.1", server.port) as thief:
        denied = thief.connect(session_id=hs.session_id, passwd=b"\1" * 16)
        assert (denied.timeout_ms, denied.session_id) == (0, 0)
        assert thief.is_closed_by_peer()

    # Reconnect with id and password (and the zxid seen), as every client does.
    again = Connection.open(server.hosts, session_id=hs.session_id, passwd=hs.passwd,
                            last_zxid=created.zxid, timeout_ms=30000)
    assert again.handshake is not None
    assert again.handshake.session_id == hs.session_id
    assert again.handshake.passwd == hs.passwd
    assert again.handshake.timeout_ms > 0
    got = again.get_data("/eph")
    assert got.err == z.OK, f"ephemeral lost over restart: {got}"
    assert got.value[0] == b"mine" and got.value[1].ephemeralOwner == hs.session_id
    assert again.call(z.GET_EPHEMERALS, z.path_body("/")).value == ["/eph"]

    # Closing the session now removes its ephemeral, seen from another session.
    assert again.close_session().err == z.OK
    with Connection.open(server.hosts) as other:
        assert other.exists("/eph").err == z.NONODE
        assert other.get_data("/owner-data").value[0] == b"persistent"
