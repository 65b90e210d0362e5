"""zkwire: a small raw-protocol ZooKeeper client written from the protocol fact sheet
(/work/shared/reference/zookeeper-protocol.md). Unlike kazoo it exposes every field of every
reply: the error code, the reply zxid, each Stat field, null vs empty data and per-op multi
results. It speaks exactly the bytes we ask it to, so tests can also send malformed input.

All integers are big-endian; see §1 (jute), §2 (frames), §3 (handshake), §4 (opcodes), §9 (multi).
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

# Opcodes (§4)
CREATE, DELETE, EXISTS, GET_DATA, SET_DATA, GET_ACL, SET_ACL = 1, 2, 3, 4, 5, 6, 7
GET_CHILDREN, SYNC, PING, GET_CHILDREN2, CHECK, MULTI, CREATE2 = 8, 9, 11, 12, 13, 14, 15
CREATE_CONTAINER, CREATE_TTL, MULTI_READ = 19, 21, 22
AUTH, GET_EPHEMERALS, GET_ALL_CHILDREN_NUMBER, WHO_AM_I, CLOSE_SESSION = 100, 103, 104, 107, -11

# Error codes (§6)
OK, RUNTIMEINCONSISTENCY, MARSHALLINGERROR, UNIMPLEMENTED, BADARGUMENTS = 0, -2, -5, -6, -8
NONODE, NOAUTH, BADVERSION, NOCHILDRENFOREPHEMERALS = -101, -102, -103, -108
NODEEXISTS, NOTEMPTY, SESSIONEXPIRED, INVALIDACL, AUTHFAILED = -110, -111, -112, -114, -115

# Create flags (§5.1)
PERSISTENT, EPHEMERAL, PERSISTENT_SEQUENTIAL, EPHEMERAL_SEQUENTIAL = 0, 1, 2, 3
CONTAINER, PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL = 4, 5, 6

PERM_READ, PERM_WRITE, PERM_CREATE, PERM_DELETE, PERM_ADMIN, PERM_ALL = 1, 2, 4, 8, 16, 31
NOTIFICATION_XID, PING_XID, AUTH_XID = -1, -2, -4


class ConnectionClosed(Exception):
    """The server closed the connection (EOF) before a whole frame arrived."""


# ---------------------------------------------------------------- jute encoding (§1)

class Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def int(self, v: int) -> "Writer":
        self.buf += struct.pack(">i", v)
        return self

    def long(self, v: int) -> "Writer":
        self.buf += struct.pack(">q", v)
        return self

    def bool(self, v: bool) -> "Writer":
        self.buf.append(1 if v else 0)
        return self

    def buffer(self, v: Optional[bytes]) -> "Writer":
        if v is None:
            return self.int(-1)
        self.int(len(v))
        self.buf += v
        return self

    def ustring(self, v: Optional[str]) -> "Writer":
        return self.buffer(None if v is None else v.encode("utf-8", "surrogatepass"))

    def acls(self, acl: Optional[Sequence["ACL"]]) -> "Writer":
        if acl is None:
            return self.int(-1)
        self.int(len(acl))
        for a in acl:
            self.int(a.perms).ustring(a.scheme).ustring(a.id)
        return self

    def bytes(self) -> bytes:
        return bytes(self.buf)


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"record truncated: need {n} bytes at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def long(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def bool(self) -> bool:
        return self._take(1) != b"\0"

    def buffer(self) -> Optional[bytes]:
        n = self.int()
        return None if n < 0 else self._take(n)

    def ustring(self) -> Optional[str]:
        b = self.buffer()
        return None if b is None else b.decode("utf-8", "surrogatepass")

    def strings(self) -> Optional[list[str]]:
        n = self.int()
        return None if n < 0 else [self.ustring() for _ in range(n)]  # type: ignore[misc]

    def acls(self) -> Optional[list["ACL"]]:
        n = self.int()
        if n < 0:
            return None
        out = []
        for _ in range(n):
            perms = self.int()
            out.append(ACL(perms, self.ustring() or "", self.ustring() or ""))
        return out

    def stat(self) -> "Stat":
        return Stat(*(f() for f in (self.long, self.long, self.long, self.long, self.int, self.int,
                                    self.int, self.long, self.int, self.int, self.long)))

    def remaining(self) -> int:
        return len(self.data) - self.pos


@dataclass(frozen=True)
class ACL:
    perms: int
    scheme: str
    id: str


OPEN_ACL_UNSAFE = [ACL(PERM_ALL, "world", "anyone")]


@dataclass(frozen=True)
class Stat:  # §1.2: 68 bytes, pzxid last
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int
    dataLength: int
    numChildren: int
    pzxid: int


@dataclass
class Reply:
    xid: int
    zxid: int
    err: int
    body: Reader


@dataclass
class Handshake:
    protocol_version: int
    timeout_ms: int
    session_id: int
    passwd: bytes
    read_only: Optional[bool]  # None: the response had no readOnly byte (old form, §3.2)
    size: int


@dataclass
class Event:  # watch notification, xid -1 (§8.1)
    zxid: int
    type: int
    state: int
    path: str


# ---------------------------------------------------------------- request records (§1.3)

def create_body(path: str, data: Optional[bytes], acl: Optional[Sequence[ACL]], flags: int,
                ttl: Optional[int] = None) -> bytes:
    w = Writer().ustring(path).buffer(data).acls(acl).int(flags)
    if ttl is not None:
        w.long(ttl)
    return w.bytes()


def path_body(path: str, watch: Optional[bool] = None) -> bytes:
    w = Writer().ustring(path)
    if watch is not None:
        w.bool(watch)
    return w.bytes()


def path_version_body(path: str, version: int) -> bytes:
    return Writer().ustring(path).int(version).bytes()


def set_data_body(path: str, data: Optional[bytes], version: int) -> bytes:
    return Writer().ustring(path).buffer(data).int(version).bytes()


def set_acl_body(path: str, acl: Optional[Sequence[ACL]], version: int) -> bytes:
    return Writer().ustring(path).acls(acl).int(version).bytes()


def multi_body(ops: Sequence[tuple[int, bytes]]) -> bytes:
    """ops: (opcode, request record) pairs; §9.1 encoding with the 9-byte terminator."""
    w = Writer()
    for op, record in ops:
        w.int(op).bool(False).int(-1)
        w.buf += record
    return w.int(-1).bool(True).int(-1).bytes()


def connect_request(session_id: int = 0, passwd: bytes = b"\0" * 16, timeout_ms: int = 30000,
                    last_zxid: int = 0, read_only: Optional[bool] = False) -> bytes:
    """A ConnectRequest payload; read_only=None gives the old 44-byte form (§3.1)."""
    w = Writer().int(0).long(last_zxid).int(timeout_ms).long(session_id).buffer(passwd)
    if read_only is not None:
        w.bool(read_only)
    return w.bytes()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# ---------------------------------------------------------------- response records

def decode_result(op: int, r: Reader) -> Any:
    """Decode a successful response body for opcode `op` into plain Python values."""
    if op == CREATE:
        return r.ustring()
    if op in (CREATE2, CREATE_CONTAINER, CREATE_TTL):
        return (r.ustring(), r.stat())
    if op in (EXISTS, SET_DATA, SET_ACL):
        return r.stat()
    if op == GET_DATA:
        return (r.buffer(), r.stat())
    if op == GET_ACL:
        return (r.acls(), r.stat())
    if op in (GET_CHILDREN, GET_EPHEMERALS):
        return r.strings()
    if op == GET_CHILDREN2:
        return (r.strings(), r.stat())
    if op == GET_ALL_CHILDREN_NUMBER:
        return r.int()
    if op == SYNC:
        return r.ustring()
    if op in (MULTI, MULTI_READ):
        return decode_multi(r)
    if op == WHO_AM_I:
        return [(r.ustring(), r.ustring()) for _ in range(r.int())]
    return None  # delete, check, auth, closeSession, ping: header only


def decode_multi(r: Reader) -> list[tuple[int, int, Any]]:
    """Per-op results as (type, err, value); type -1 entries carry the ErrorResponse code (§9.2)."""
    results = []
    while True:
        typ, done, err = r.int(), r.bool(), r.int()
        if done:
            return results
        if typ == -1:
            results.append((typ, err, r.int()))
        else:
            results.append((typ, err, decode_result(typ, r)))


# ---------------------------------------------------------------- connection

class Connection:
    """One TCP connection to a server. Use connect() for the handshake, then call() for
    request/response, or send()+recv_reply() to pipeline several requests."""

    def __init__(self, host: str, port: int, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.next_xid = 1
        self.events: list[Event] = []
        self.handshake: Optional[Handshake] = None

    @classmethod
    def open(cls, hosts: str, **connect_args: Any) -> "Connection":
        host, port = hosts.split(",")[0].rsplit(":", 1)
        conn = cls(host, int(port))
        conn.connect(**connect_args)
        return conn

    # --- raw bytes
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exact(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise ConnectionClosed(f"EOF after {got} of {n} bytes")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        (length,) = struct.unpack(">i", self.recv_exact(4))
        if length < 0:
            raise ValueError(f"negative frame length {length} from server")
        return self.recv_exact(length)

    def is_closed_by_peer(self, timeout_s: float = 10.0) -> bool:
        """Drain whatever the server still sends; True if it then closes within timeout_s."""
        self.sock.settimeout(timeout_s)
        try:
            while self.sock.recv(65536):
                pass
            return True
        except (socket.timeout, TimeoutError):
            return False
        except OSError:  # connection reset also means closed
            return True

    def close_socket(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # --- handshake (§3)
    def connect(self, **kwargs: Any) -> Handshake:
        self.send_raw(frame(connect_request(**kwargs)))
        data = self.recv_frame()
        r = Reader(data)
        hs = Handshake(r.int(), r.int(), r.long(), r.buffer() or b"",
                       r.bool() if r.remaining() > 0 else None, len(data))
        self.handshake = hs
        return hs

    # --- requests
    def send(self, op: int, body: bytes = b"", xid: Optional[int] = None) -> int:
        if xid is None:
            xid = self.next_xid
            self.next_xid += 1
        self.send_raw(frame(struct.pack(">ii", xid, op) + body))
        return xid

    def recv_reply(self) -> Reply:
        """Next non-notification reply; notifications (xid -1) are stored in self.events."""
        while True:
            r = Reader(self.recv_frame())
            xid, zxid, err = r.int(), r.long(), r.int()
            if xid == NOTIFICATION_XID:
                self.events.append(Event(zxid, r.int(), r.int(), r.ustring() or ""))
                continue
            return Reply(xid, zxid, err, r)

    def call(self, op: int, body: bytes = b"") -> "Result":
        xid = self.send(op, body)
        return self.result(op, xid)

    def result(self, op: int, xid: int) -> "Result":
        reply = self.recv_reply()
        if reply.xid != xid:
            raise AssertionError(f"reply xid {reply.xid} != request xid {xid} (FIFO order, §2.4)")
        value = decode_result(op, reply.body) if reply.err == OK else None
        return Result(reply.err, reply.zxid, value)

    def pipeline(self, requests: Sequence[tuple[int, bytes]]) -> list["Result"]:
        """Send all requests back to back, then read all replies (in order)."""
        xids = [self.send(op, body) for op, body in requests]
        return [self.result(op, xid) for (op, _), xid in zip(requests, xids)]

    # --- convenience wrappers
    def create(self, path: str, data: Optional[bytes] = b"", acl: Optional[Sequence[ACL]] = None,
               flags: int = PERSISTENT, op: int = CREATE, ttl: Optional[int] = None) -> "Result":
        return self.call(op, create_body(path, data, OPEN_ACL_UNSAFE if acl is None else acl,
                                         flags, ttl))

    def delete(self, path: str, version: int = -1) -> "Result":
        return self.call(DELETE, path_version_body(path, version))

    def exists(self, path: str, watch: bool = False) -> "Result":
        return self.call(EXISTS, path_body(path, watch))

    def get_data(self, path: str, watch: bool = False) -> "Result":
        return self.call(GET_DATA, path_body(path, watch))

    def set_data(self, path: str, data: Optional[bytes], version: int = -1) -> "Result":
        return self.call(SET_DATA, set_data_body(path, data, version))

    def get_children(self, path: str, watch: bool = False) -> "Result":
        return self.call(GET_CHILDREN, path_body(path, watch))

    def multi(self, ops: Sequence[tuple[int, bytes]]) -> "Result":
        return self.call(MULTI, multi_body(ops))

    def add_auth(self, scheme: str, auth: bytes) -> "Result":
        xid = self.send(AUTH, Writer().int(0).ustring(scheme).buffer(auth).bytes(), xid=AUTH_XID)
        return self.result(AUTH, xid)

    def ping(self) -> "Result":
        return self.result(PING, self.send(PING, xid=PING_XID))

    def close_session(self) -> "Result":
        res = self.call(CLOSE_SESSION)
        self.close_socket()
        return res

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close_socket()


@dataclass
class Result:
    err: int
    zxid: int
    value: Any = field(default=None)


def wait_until_serving(hosts: str, timeout_s: float = 30.0) -> None:
    """Bounded wait until a handshake succeeds. Apache answers `ruok` (what tests/zk-server
    waits for) a moment before it accepts sessions, so tests call this after start/restart."""
    import time
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = Connection.open(hosts)
            conn.close_session()
            return
        except (OSError, ConnectionClosed, ValueError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
