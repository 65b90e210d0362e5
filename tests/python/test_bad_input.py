"""Hostile and malformed input. For each case the offending connection must get the answer a
ZooKeeper server gives (where the fact sheet states one exactly) or be closed; where a
reimplementation may legitimately choose between replying and closing, we only require: no
crash, no hang (every wait here is bounded), and a separate healthy client is still served.
Section numbers refer to /work/shared/reference/zookeeper-protocol.md.
"""
from __future__ import annotations

import itertools
import os
import random
import socket
import struct
import time

import pytest

import zkwire as z
from zkwire import Connection

WAIT_S = 10.0  # bound for "the server closes / answers"
MAXBUFFER = 0xFFFFF  # jute.maxbuffer default (§2.1, §14)
FOLLOW_UP_XID = 77777
_healthy_counter = itertools.count()


def assert_healthy(server) -> None:
    """The process is alive and a fresh session can write and read back (a real request)."""
    os.kill(server.pid, 0)  # raises if the server process is gone
    with Connection.open(server.hosts) as conn:
        path = f"/healthy-{next(_healthy_counter)}"
        created = conn.create(path, b"ok", flags=z.EPHEMERAL)
        assert created.err == z.OK, f"healthy client got {created}"
        got = conn.get_data(path)
        assert got.err == z.OK and got.value[0] == b"ok"
        assert conn.close_session().err == z.OK


def raw(server) -> Connection:
    """A TCP connection with no handshake yet."""
    return Connection("127.0.0.1", server.port, timeout_s=WAIT_S)


def session(server) -> Connection:
    conn = raw(server)
    conn.connect()
    return conn


def read_until_closed(conn: Connection) -> tuple[bool, list[z.Reply]]:
    """Read reply frames until the server closes (True) or WAIT_S passes (False)."""
    replies: list[z.Reply] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            conn.sock.settimeout(max(0.01, deadline - time.monotonic()))
            r = z.Reader(conn.recv_frame())
            replies.append(z.Reply(r.int(), r.long(), r.int(), r))
    except (z.ConnectionClosed, ConnectionResetError, ValueError, struct.error):
        return True, replies
    except (socket.timeout, TimeoutError):
        return False, replies
    return False, replies


def exchange(conn: Connection) -> tuple[bool, list[z.Reply]]:
    """After a bad request: send a good getData (xid FOLLOW_UP_XID) and read replies until its
    answer (False) or until the server closes (True). Bounded by the socket timeout."""
    try:
        conn.send(z.GET_DATA, z.path_body("/", False), xid=FOLLOW_UP_XID)
    except OSError:
        return True, []
    replies: list[z.Reply] = []
    conn.sock.settimeout(WAIT_S)
    try:
        while True:
            r = z.Reader(conn.recv_frame())
            reply = z.Reply(r.int(), r.long(), r.int(), r)
            if reply.xid == FOLLOW_UP_XID:
                assert reply.err == z.OK, f"follow-up getData failed: {reply}"
                return False, replies
            replies.append(reply)
    except (z.ConnectionClosed, ConnectionResetError, BrokenPipeError):
        return True, replies


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server takes all the abuse of this module (faster, and robustness is cumulative)."""
    from conftest import Server
    server = Server(tmp_path_factory.mktemp("bad-input") / "server").start()
    z.wait_until_serving(server.hosts)
    yield server
    server.stop()


@pytest.fixture
def healthy_server(shared_server):
    """After each test the server must still serve a separate client; if it does not, the test
    fails and the server is restarted so that later tests report their own results."""
    yield shared_server
    try:
        assert_healthy(shared_server)
    except BaseException:
        shared_server.kill()
        shared_server.restart()
        z.wait_until_serving(shared_server.hosts)
        raise


# ------------------------------------------------------------------ framing

@pytest.mark.parametrize("handshake", [False, True])
def test_truncated_frames_then_client_closes(healthy_server, handshake: bool) -> None:
    payloads = [b"\x00\x00",  # half a length prefix
                struct.pack(">i", 45) + b"\x00" * 10,  # length says 45, only 10 bytes follow
                z.frame(z.connect_request())[:-3] if not handshake else
                z.frame(struct.pack(">ii", 1, z.CREATE) + z.create_body("/t", b"x" * 50,
                                                                        z.OPEN_ACL_UNSAFE, 0))[:-20]]
    for payload in payloads:
        conn = session(healthy_server) if handshake else raw(healthy_server)
        conn.send_raw(payload)
        conn.close_socket()
        assert_healthy(healthy_server)
    with Connection.open(healthy_server.hosts) as check:  # the truncated create never happened
        assert check.exists("/t").err == z.NONODE


@pytest.mark.parametrize("length", [MAXBUFFER + 1, 0x7FFFFFFF, -1, -45, -0x80000000])
@pytest.mark.parametrize("handshake", [False, True])
def test_bad_frame_length_closes_connection(healthy_server, length: int, handshake: bool) -> None:
    """§2.1: length must be 0..jute.maxbuffer, else the server closes without replying."""
    conn = session(healthy_server) if handshake else raw(healthy_server)
    conn.send_raw(struct.pack(">i", length) + b"\x00" * 64)
    closed, replies = read_until_closed(conn)
    assert closed and replies == [], f"length {length}: closed={closed} replies={replies}"
    assert_healthy(healthy_server)


def test_large_but_legal_frame_is_accepted(healthy_server) -> None:
    with session(healthy_server) as conn:
        data = bytes(range(256)) * 3900  # ~1 MB: the frame stays under jute.maxbuffer
        assert conn.create("/big", data).err == z.OK
        got = conn.get_data("/big")
        assert got.err == z.OK and got.value[0] == data and got.value[1].dataLength == len(data)


def test_configured_smaller_maxbuffer(server_factory) -> None:
    server = server_factory("-Djute.maxbuffer=4096")
    z.wait_until_serving(server.hosts)
    with session(server) as conn:
        assert conn.create("/small", b"s" * 3000).err == z.OK  # 3 KB frame: under the limit
        conn.send(z.SET_DATA, z.set_data_body("/small", b"L" * 5000, -1))  # over the limit
        closed, replies = read_until_closed(conn)
        assert closed and replies == []
    assert_healthy(server)
    with session(server) as conn:
        got = conn.get_data("/small")
        assert got.err == z.OK and got.value[0] == b"s" * 3000  # the oversized write was not applied


# ------------------------------------------------------------------ garbage and wrong records

def test_garbage_after_handshake(healthy_server) -> None:
    rng = random.Random(7)
    garbage = [b"\xde\xad\xbe\xef" * 16,  # negative length
               b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # huge length (0x47455420)
               b"\x00\x00\x00\x08" + b"\xff" * 8]  # header with xid -1 and opcode -1
    garbage += [z.frame(rng.randbytes(rng.randint(8, 64))) for _ in range(10)]  # framed junk
    for junk in garbage:
        conn = session(healthy_server)
        conn.send_raw(junk)
        exchange(conn)  # answered or closed, within the bound; either is acceptable here
        conn.close_socket()
        assert_healthy(healthy_server)


@pytest.mark.parametrize("opcode", [0, 10, 13, 23, 99, 999, -100, 0x7FFFFFFF])
def test_invalid_opcode_is_unimplemented_then_closed(healthy_server, opcode: int) -> None:
    """§4: unknown opcode, standalone check (13), notification (0) => {xid, -1, -6}, close."""
    conn = session(healthy_server)
    xid = conn.send(opcode, z.path_version_body("/", -1))
    closed, replies = exchange(conn)
    conn.close_socket()
    got = [(r.xid, r.zxid, r.err) for r in replies]
    if opcode == z.CHECK and healthy_server.kind == "apache" and (closed, got) == (False, []):
        return  # Apache 3.8.0 silently drops a standalone check; 3.9.3 answers -6 (the sheet)
    assert got == [(xid, -1, z.UNIMPLEMENTED)]
    assert closed, "the connection must be closed after UNIMPLEMENTED"


def test_record_that_does_not_decode(healthy_server) -> None:
    """A body shorter than its own length fields, negative buffer lengths, absurd vector counts:
    MARSHALLINGERROR or close (§6), never a crash."""
    w = z.Writer
    bodies = [
        (z.GET_DATA, w().int(1_000_000).bytes() + b"/abc"),  # string longer than the frame
        (z.GET_DATA, w().int(-7).bytes() + b"\x00"),  # negative string length
        (z.CREATE, w().ustring("/bad").int(-5).bytes()),  # negative buffer length
        (z.CREATE, w().ustring("/bad").buffer(b"x").int(2**30).bytes()),  # 2^30 ACLs announced
        (z.SET_DATA, w().ustring("/").bytes()),  # record ends early
        (z.CREATE, b""),  # no record at all
        (z.MULTI, w().int(z.CREATE).bool(False).int(-1).bytes()),  # multi op without record
    ]
    for op, body in bodies:
        conn = session(healthy_server)
        xid = conn.send(op, body)
        closed, replies = exchange(conn)
        conn.close_socket()
        got = [(r.xid, r.err) for r in replies]
        if closed:
            assert got in ([], [(xid, z.MARSHALLINGERROR)]), f"op {op}: {got}"
        else:
            assert got == [(xid, z.MARSHALLINGERROR)], f"op {op}: {got}"
        assert_healthy(healthy_server)
    with Connection.open(healthy_server.hosts) as check:
        assert check.exists("/bad").err == z.NONODE


def test_frame_longer_or_shorter_than_its_record(healthy_server) -> None:
    # Frame shorter than a RequestHeader.
    conn = session(healthy_server)
    conn.send_raw(struct.pack(">i", 3) + b"\x00\x00\x01")
    closed, replies = read_until_closed(conn)
    conn.close_socket()
    assert closed or all(r.err == z.MARSHALLINGERROR for r in replies)
    assert_healthy(healthy_server)
    # Trailing bytes after a complete record: answered (normally or MARSHALLINGERROR) or closed;
    # if answered, the reply must not be mistaken for anything else.
    conn = session(healthy_server)
    conn.send_raw(z.frame(struct.pack(">ii", 5, z.GET_DATA) + z.path_body("/", False) + b"tail!!"))
    closed, replies = exchange(conn)
    conn.close_socket()
    assert closed or len(replies) == 1
    assert all(r.xid == 5 and r.err in (z.OK, z.MARSHALLINGERROR) for r in replies)
    assert_healthy(healthy_server)


def test_mixed_read_write_multi_is_marshalling_error(healthy_server) -> None:
    """§9.1: read and write ops in one multi => MARSHALLINGERROR for the whole request."""
    with session(healthy_server) as conn:
        res = conn.multi([(z.CREATE, z.create_body("/mixed", b"", z.OPEN_ACL_UNSAFE, 0)),
                          (z.GET_DATA, z.path_body("/", False))])
        assert res.err == z.MARSHALLINGERROR
    with Connection.open(healthy_server.hosts) as check:
        assert check.exists("/mixed").err == z.NONODE


# ------------------------------------------------------------------ handshake abuse

def test_last_zxid_ahead_of_server_closed_silently(healthy_server) -> None:
    """§3.3 step 1: a client that has seen a newer zxid is closed without a ConnectResponse."""
    conn = raw(healthy_server)
    conn.send_raw(z.frame(z.connect_request(last_zxid=1 << 40)))
    conn.sock.settimeout(WAIT_S)
    assert conn.sock.recv(100) == b""


def test_four_letter_words(healthy_server) -> None:
    assert healthy_server.four_letter("ruok") == "imok"
    for word in ["abcd", "zzzz", "RUOK", "ruo!"]:  # unknown => treated as a length => closed
        conn = raw(healthy_server)
        conn.send_raw(word.encode())
        closed, replies = read_until_closed(conn)
        assert closed and replies == [], word
    conn = raw(healthy_server)
    conn.send_raw(struct.pack(">I", 0xFFF4FFFD))  # telnet IAC close (§2.2)
    assert read_until_closed(conn) == (True, [])
    assert healthy_server.four_letter("ruok") == "imok"


def test_thousands_of_connections_opened_and_dropped(healthy_server) -> None:
    total, batch = 3000, 40  # 40 at a time: under the default listen backlog (50)
    connect_frame = z.frame(z.connect_request(timeout_ms=1))
    for start in range(0, total, batch):
        socks = [socket.create_connection(("127.0.0.1", healthy_server.port), timeout=WAIT_S)
                 for _ in range(batch)]
        for i, s in enumerate(socks):
            n = start + i
            if n % 3 == 1:
                s.sendall(connect_frame[:20])  # half a handshake
            elif n % 30 == 2:
                s.sendall(connect_frame)  # a whole handshake, then dropped
            if n % 2:  # abortive close (RST) for half of them
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
    assert healthy_server.four_letter("ruok") == "imok"


def test_slowloris_handshake(healthy_server) -> None:
    """Stalled handshakes do not block other clients, and the server drops them (§2.5, §14:
    handshake deadline 10 s in Apache; we allow up to 30 s)."""
    stalled = []
    for i in range(20):
        conn = raw(healthy_server)
        conn.send_raw(z.frame(z.connect_request())[: 2 + i])  # never finished
        stalled.append(conn)
    assert_healthy(healthy_server)
    deadline = time.monotonic() + 30
    for conn in stalled:
        conn.sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            assert conn.sock.recv(100) == b"", "a ConnectResponse to a half handshake"
        except (socket.timeout, TimeoutError):
            pytest.fail("a stalled handshake was kept open for more than 30 s")
        except ConnectionResetError:
            pass
        conn.close_socket()


def test_stalled_request_does_not_block_others(healthy_server) -> None:
    """A session that sends half a request frame and stops: other clients are still served."""
    conn = session(healthy_server)
    conn.send_raw(z.frame(struct.pack(">ii", 1, z.GET_DATA) + z.path_body("/", False))[:9])
    for _ in range(3):
        assert_healthy(healthy_server)
    conn.close_socket()
