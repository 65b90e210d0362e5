"""Differential test: one seeded random stream of operations is sent to the server under test
(ZK_KIND, default zoolog) and to a real Apache ZooKeeper side by side; every reply is compared
field by field (error code, path, data incl. null vs empty, sorted children, ACLs, Stat fields).

ctime/mtime are not compared. zxids (czxid, mzxid, pzxid, reply zxids) are compared by ORDER:
each side's zxids are mapped to labels as they are first seen; a new zxid must take the same
rank among that side's known zxids as its counterpart does on the other side, and a known zxid
must map to the same label. Session ids (ephemeralOwner) are mapped to logical session names.

Both servers run with extended types (TTL) on, the same super digest, and a container/TTL
reaper interval of one hour, so no background deletion races the stream.

Deliberately NOT generated, because Apache 3.8.0 (installed reference) and the 3.9 fact sheet
disagree, or the answer is not deterministic:
  * exists on a node the caller may not READ: 3.8.4+/3.9.2+ answer NOAUTH, 3.8.0 answers the
    Stat (ZOOKEEPER-2590). Every exists is pipelined behind a getData on the same path and its
    result is only compared when that getData was not NOAUTH.
  * watches: notification zxid is -1 up to 3.8 and the real zxid from 3.9; ACL filtering of
    events arrived in 3.8.4. No watch flags are set here.
  * reads with a NUL in the path (3.9 answers BADARGUMENTS for exists), and getAllChildrenNumber
    of "" (Java counts the root's second entry under "" there). Other reads of "" are compared:
    the Java DataTree stores the root under "" as well as "/", so they find the root.
  * writes to /zookeeper/config (reconfig-related special cases).
  * anything timing dependent: session expiry, container/TTL reaping, and requests pipelined
    behind a setACL (Apache checks them against the old ACL while the setACL is in flight).

With ZK_TOPOLOGY=ensemble both sides are 3-server ensembles (every session on the same member,
the leader or a follower) and two more things are not generated: sync (a zoolog ensemble's zxid
is a log position and a sync occupies one, so reply zxids after it no longer pair up with
Apache's, where sync takes no zxid; ordering is unaffected) and reads of /zookeeper/config
(an ensemble's holds its own, different, ports).
"""
from __future__ import annotations

import base64
import bisect
import hashlib
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import pytest

import zkwire as z
from zkwire import ACL, Connection, Result, Stat

SEEDS = [int(s) for s in os.environ.get("ZK_DIFF_SEEDS", "1,2,3,4,5").split(",")]
OPS_PER_SEED = int(os.environ.get("ZK_DIFF_OPS", "300"))
SLOTS = 3  # concurrent logical sessions
ENSEMBLE = os.environ.get("ZK_TOPOLOGY", "standalone") == "ensemble"

SETTINGS = (
    "-Dzookeeper.extendedTypesEnabled=true",
    "-Dzookeeper.DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=",
    "-Dznode.container.checkIntervalMs=3600000",
)


def digest_id(user: str, password: str) -> str:
    raw = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(raw).decode()}"


NAMES = ["a", "b", "c"]
BAD_WRITE_PATHS = ["", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/.", "/a\u0001",
                   "/\U0001F600", "/a\0b"]
BAD_READ_PATHS = ["", "a", "/a/", "//a", "/a/./b", "/.."]
SYSTEM_PATHS = ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"]
AUTHS = [("digest", "alice:secret"), ("digest", "bob:secret"), ("digest", "alice:wrong"),
         ("digest", "super:test")]
VALID_ACLS = [
    z.OPEN_ACL_UNSAFE,
    [ACL(z.PERM_READ, "world", "anyone")],
    [ACL(z.PERM_READ | z.PERM_ADMIN, "world", "anyone")],
    [ACL(z.PERM_READ | z.PERM_CREATE | z.PERM_DELETE, "world", "anyone")],
    [ACL(z.PERM_ALL, "digest", digest_id("alice", "secret"))],
    [ACL(z.PERM_READ, "world", "anyone"), ACL(z.PERM_ALL, "digest", digest_id("bob", "secret"))],
    [ACL(z.PERM_ALL, "auth", "")],  # INVALIDACL unless the connection has a digest id
    [ACL(z.PERM_ALL, "ip", "127.0.0.1")],
    [ACL(z.PERM_ALL, "ip", "127.0.0.0/8"), ACL(z.PERM_ALL, "ip", "127.0.0.0/8")],  # duplicate
    [ACL(z.PERM_WRITE, "ip", "10.1.2.3")],
]
INVALID_ACLS = [[], None, [ACL(z.PERM_ALL, "world", "nobody")], [ACL(z.PERM_ALL, "digest", "alice")],
                [ACL(z.PERM_ALL, "ip", "999.1.1.1")], [ACL(z.PERM_ALL, "bogus", "x")]]
DATAS = [None, b"", b"x", b"hello", b"\0\xff"]
VERSIONS = [-1, -1, 0, 0, 1, 2, 5]
TTL_OK = 10**9  # ms, far beyond the test; the reaper is off anyway
TTL_BAD = [0, -5, 2**40]


# ------------------------------------------------------------------ normalisation

@dataclass(frozen=True)
class Zx:
    """A zxid, compared by order across the two sides."""
    value: int


def norm_stat(s: Stat, sessions: dict[int, str]) -> dict[str, Any]:
    owner = s.ephemeralOwner
    return {"czxid": Zx(s.czxid), "mzxid": Zx(s.mzxid), "pzxid": Zx(s.pzxid),
            "version": s.version, "cversion": s.cversion, "aversion": s.aversion,
            "ephemeralOwner": 0 if owner == 0 else sessions.get(owner, f"unknown-session {owner:#x}"),
            "dataLength": s.dataLength, "numChildren": s.numChildren}


def norm_value(op: int, value: Any, sessions: dict[int, str]) -> Any:
    if value is None:
        return None
    if isinstance(value, Stat):
        return norm_stat(value, sessions)
    if op in (z.GET_CHILDREN, z.GET_EPHEMERALS):
        return sorted(value)
    if op == z.GET_CHILDREN2:
        return (sorted(value[0]), norm_stat(value[1], sessions))
    if op in (z.MULTI, z.MULTI_READ):
        return [(typ, err, norm_value(typ, v, sessions)) for typ, err, v in value]
    if isinstance(value, tuple):
        return tuple(norm_value(op, v, sessions) for v in value)
    if isinstance(value, list) and all(isinstance(a, ACL) for a in value):
        # Order is not part of the contract: an `auth` ACL expands over the connection's ids,
        # which Apache keeps in a hash set, so its order there is the set's iteration order.
        return sorted((a.perms, a.scheme, a.id) for a in value)
    return value


def norm_result(op: int, res: Result, sessions: dict[int, str]) -> dict[str, Any]:
    return {"err": res.err, "zxid": Zx(res.zxid), "value": norm_value(op, res.value, sessions)}


class ZxOrder:
    """Maps both sides' zxids to shared labels, checking equality patterns and relative order."""

    def __init__(self) -> None:
        self.known: list[list[int]] = [[], []]
        self.label: list[dict[int, int]] = [{}, {}]

    def match(self, a: int, b: int) -> Optional[str]:
        la, lb = self.label[0].get(a), self.label[1].get(b)
        if la is not None or lb is not None:
            if la != lb:
                return f"zxid {a:#x} (label {la}) vs {b:#x} (label {lb}): equality pattern differs"
            return None
        ia, ib = bisect.bisect(self.known[0], a), bisect.bisect(self.known[1], b)
        if ia != ib:
            return f"new zxid {a:#x} ranks {ia} vs new zxid {b:#x} ranks {ib}: order differs"
        label = len(self.label[0])
        for side, v in ((0, a), (1, b)):
            self.known[side].insert(bisect.bisect(self.known[side], v), v)
            self.label[side][v] = label
        return None


def diff(a: Any, b: Any, order: ZxOrder, where: str = "") -> Optional[str]:
    if isinstance(a, Zx) and isinstance(b, Zx):
        problem = order.match(a.value, b.value)
        return f"{where}: {problem}" if problem else None
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            problem = diff(a[k], b[k], order, f"{where}.{k}")
            if problem:
                return problem
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b) \
            and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            problem = diff(x, y, order, f"{where}[{i}]")
            if problem:
                return problem
        return None
    return None if a == b else f"{where}: {a!r} != {b!r}"


# ------------------------------------------------------------------ the two sides

@dataclass
class Side:
    name: str
    hosts: str
    conns: list[Optional[Connection]] = field(default_factory=lambda: [None] * SLOTS)
    sessions: dict[int, str] = field(default_factory=dict)  # session id -> logical name

    def open(self, slot: int, label: str) -> dict[str, Any]:
        """Open a session; returns the comparable part of the ConnectResponse."""
        conn = Connection.open(self.hosts, timeout_ms=40000)
        hs = conn.handshake
        assert hs is not None and hs.session_id != 0
        self.sessions[hs.session_id] = label
        self.conns[slot] = conn
        return {"timeout": hs.timeout_ms, "size": hs.size, "passwd_len": len(hs.passwd),
                "read_only": hs.read_only}

    def close_all(self) -> None:
        for conn in self.conns:
            if conn is not None:
                conn.close_socket()


@dataclass
class Op:
    """One step of the stream, run identically on both sides."""
    desc: str
    slot: int
    run: Callable[[Side], list[Any]]  # returns normalised results


# ------------------------------------------------------------------ the generator

class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.generation = 0
        self.seen_paths: list[str] = []  # paths the servers returned (sequential names)

    def path(self, read: bool = False) -> str:
        r = self.rng.random()
        if r < 0.05:
            return self.rng.choice(BAD_READ_PATHS if read else BAD_WRITE_PATHS)
        if r < 0.10:
            return self.rng.choice(SYSTEM_PATHS[:3] if not read or ENSEMBLE else SYSTEM_PATHS)
        if r < 0.45 and self.seen_paths:
            return self.rng.choice(self.seen_paths)
        depth = self.rng.choice([1, 1, 1, 2, 2, 3])
        return "".join("/" + self.rng.choice(NAMES) for _ in range(depth))

    def acl(self) -> Optional[list[ACL]]:
        return self.rng.choice(INVALID_ACLS) if self.rng.random() < 0.1 else self.rng.choice(VALID_ACLS)

    def create_request(self) -> tuple[int, bytes, str]:
        """(opcode, body, description) for one create of a random mode."""
        path, data, acl = self.path(), self.rng.choice(DATAS), self.acl()
        kind = self.rng.random()
        if kind < 0.55:
            flags = self.rng.choice([z.PERSISTENT, z.EPHEMERAL, z.PERSISTENT_SEQUENTIAL,
                                     z.EPHEMERAL_SEQUENTIAL])
            op, ttl = self.rng.choice([z.CREATE, z.CREATE2]), None
        elif kind < 0.7:
            op, flags, ttl = z.CREATE_CONTAINER, z.CONTAINER, None
        elif kind < 0.85:
            op, flags, ttl = z.CREATE_TTL, self.rng.choice([5, 6]), TTL_OK
        else:  # invalid combinations: bad TTL, TTL opcode with a plain mode, unknown flags
            op, flags, ttl = self.rng.choice([(z.CREATE_TTL, 5, self.rng.choice(TTL_BAD)),
                                              (z.CREATE_TTL, 0, TTL_OK), (z.CREATE, 7, None),
                                              (z.CREATE2, -1, None)])
        desc = f"op{op} {path!r} data={data!r} flags={flags} ttl={ttl} acl={acl}"
        return op, z.create_body(path, data, acl, flags, ttl), desc

    def single(self) -> tuple[int, bytes, str]:
        """One ordinary request (anything that can be pipelined)."""
        rng = self.rng
        kind = rng.choices(["create", "delete", "set", "get", "children", "children2", "getacl",
                            "setacl", "multi", "multiread", "count", "ephemerals", "sync"],
                           weights=[30, 12, 10, 8, 5, 5, 4, 6, 10, 3, 2, 2, 1])[0]
        if kind == "create":
            return self.create_request()
        if kind == "delete":
            path, v = self.path(), rng.choice(VERSIONS)
            if rng.random() < 0.05:
                path = "/zookeeper/config"  # protected: BADARGUMENTS
            return z.DELETE, z.path_version_body(path, v), f"delete {path!r} v={v}"
        if kind == "set":
            path, data, v = self.path(), rng.choice(DATAS), rng.choice(VERSIONS)
            return z.SET_DATA, z.set_data_body(path, data, v), f"setData {path!r} {data!r} v={v}"
        if kind in ("get", "children", "children2", "getacl", "count"):
            op = {"get": z.GET_DATA, "children": z.GET_CHILDREN, "children2": z.GET_CHILDREN2,
                  "getacl": z.GET_ACL, "count": z.GET_ALL_CHILDREN_NUMBER}[kind]
            path = self.path(read=True)
            if path == "" and op == z.GET_ALL_CHILDREN_NUMBER:
                path = "/"
            watch = None if op in (z.GET_ACL, z.GET_ALL_CHILDREN_NUMBER) else False
            return op, z.path_body(path, watch), f"{kind} {path!r}"
        if kind == "setacl":
            path, acl, v = self.path(), self.acl(), rng.choice(VERSIONS)
            if path == "/zookeeper/config":
                path = "/a"
            return z.SET_ACL, z.set_acl_body(path, acl, v), f"setACL {path!r} {acl} v={v}"
        if kind == "multi":
            return self.multi()
        if kind == "multiread":
            ops = [(rng.choice([z.GET_DATA, z.GET_CHILDREN]), z.path_body(self.path(read=True), False))
                   for _ in range(rng.randint(1, 3))]
            return z.MULTI_READ, z.multi_body(ops), f"multiRead {ops}"
        if kind == "ephemerals":
            prefix = rng.choice(["/", "", "/a", "/a/b", "/b", "/zookeeper"])
            return z.GET_EPHEMERALS, z.path_body(prefix), f"getEphemerals {prefix!r}"
        path = self.path(read=True)
        if ENSEMBLE:  # see the module docstring
            return z.GET_DATA, z.path_body(path, False), f"get {path!r}"
        return z.SYNC, z.path_body(path), f"sync {path!r}"

    def multi(self) -> tuple[int, bytes, str]:
        ops, descs = [], []
        for _ in range(self.rng.choice([0, 1, 2, 2, 3, 4])):
            kind = self.rng.choice(["create", "create", "delete", "set", "check"])
            if kind == "create":
                op, body, desc = self.create_request()
            elif kind == "delete":
                op, body = z.DELETE, z.path_version_body(self.path(), self.rng.choice(VERSIONS))
                desc = "delete"
            elif kind == "set":
                op, body = z.SET_DATA, z.set_data_body(self.path(), self.rng.choice(DATAS),
                                                       self.rng.choice(VERSIONS))
                desc = "setData"
            else:
                op, body = z.CHECK, z.path_version_body(self.path(), self.rng.choice(VERSIONS))
                desc = "check"
            ops.append((op, body))
            descs.append(f"{desc} {body!r}")
        return z.MULTI, z.multi_body(ops), f"multi [{'; '.join(descs)}]"

    def next_op(self) -> Op:
        rng = self.rng
        slot = rng.randrange(SLOTS)
        r = rng.random()
        if r < 0.03:  # close the session (its ephemerals vanish) and open a fresh one
            self.generation += 1
            label = f"session{slot}.{self.generation}"

            def close_and_reopen(side: Side) -> list[Any]:
                conn = side.conns[slot]
                assert conn is not None
                res = norm_result(z.CLOSE_SESSION, conn.close_session(), side.sessions)
                return [res, side.open(slot, label)]
            return Op(f"closeSession, reopen as {label}", slot, close_and_reopen)
        if r < 0.07:
            scheme, cred = rng.choice(AUTHS)

            def add_auth(side: Side) -> list[Any]:
                conn = side.conns[slot]
                assert conn is not None
                return [norm_result(z.AUTH, conn.add_auth(scheme, cred.encode()), side.sessions)]
            return Op(f"addauth {scheme} {cred}", slot, add_auth)
        if r < 0.13:  # exists, guarded by a getData (see module docstring)
            path = self.path(read=True)
            reqs = [(z.GET_DATA, z.path_body(path, False)), (z.EXISTS, z.path_body(path, False))]

            def guarded_exists(side: Side) -> list[Any]:
                conn = side.conns[slot]
                assert conn is not None
                got, ex = conn.pipeline(reqs)
                exists = "skipped: no READ" if got.err == z.NOAUTH else \
                    norm_result(z.EXISTS, ex, side.sessions)
                return [norm_result(z.GET_DATA, got, side.sessions), exists]
            return Op(f"getData+exists {path!r}", slot, guarded_exists)
        count = rng.choice([1, 1, 1, 1, 2, 3, 4])  # sometimes pipeline several requests
        requests = [self.single() for _ in range(count)]
        # Apache's PrepRequestProcessor keeps the old ACL in a setACL's pending change record, so
        # a request pipelined behind a setACL is checked against whichever ACL wins a race (zoolog
        # answers with the new one, linearizably). A setACL therefore ends its batch.
        first_set_acl = next((i for i, (op, _, _) in enumerate(requests) if op == z.SET_ACL), None)
        if first_set_acl is not None:
            requests = requests[: first_set_acl + 1]

        def run(side: Side) -> list[Any]:
            conn = side.conns[slot]
            assert conn is not None
            results = conn.pipeline([(op, body) for op, body, _ in requests])
            return [norm_result(op, res, side.sessions) for (op, _, _), res in zip(requests, results)]
        return Op(" | ".join(d for _, _, d in requests), slot, run)

    def learn(self, results: list[Any]) -> None:
        """Remember created (e.g. sequential) paths so later ops hit them."""
        def walk(v: Any) -> None:
            if isinstance(v, str) and v.startswith("/") and v not in self.seen_paths:
                self.seen_paths.append(v)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
            elif isinstance(v, dict):
                walk(v.get("value"))
        walk(results)
        del self.seen_paths[:-40]


# ------------------------------------------------------------------ the test

def run_stream(reference: Side, candidate: Side, seed: int, ops: int) -> None:
    gen = Generator(seed)
    order = ZxOrder()
    for slot in range(SLOTS):
        a, b = (side.open(slot, f"session{slot}.0") for side in (reference, candidate))
        assert a == b, f"ConnectResponse differs: {reference.name} {a}, {candidate.name} {b}"
    history: list[str] = []
    for index in range(ops):
        op = gen.next_op()
        a, b = op.run(reference), op.run(candidate)
        problem = diff(a, b, order)
        history.append(f"  #{index} [slot {op.slot}] {op.desc}\n      -> {a}")
        if problem:
            recent = "\n".join(history[-int(os.environ.get("ZK_DIFF_HISTORY", "6")):-1])
            pytest.fail(f"seed {seed} op #{index} [slot {op.slot}]: {op.desc}\n"
                        f"  mismatch at result{problem}\n"
                        f"  {reference.name}: {a}\n  {candidate.name}: {b}\n"
                        f"previous ops:\n{recent}", pytrace=False)
        gen.learn(a)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_stream_matches_apache(server_factory, seed: int) -> None:
    apache = server_factory(*SETTINGS, kind="apache")
    other = server_factory(*SETTINGS)
    z.wait_until_serving(apache.hosts)
    z.wait_until_serving(other.hosts)
    reference = Side(f"apache:{apache.port}", apache.hosts)
    candidate = Side(f"{other.kind}:{other.port}", other.hosts)
    try:
        run_stream(reference, candidate, seed, OPS_PER_SEED)
    finally:
        reference.close_all()
        candidate.close_all()


def test_zxid_order_comparison_itself() -> None:
    """The comparator accepts consistently shifted zxids and rejects other patterns."""
    order = ZxOrder()
    assert diff([Zx(5), Zx(7), Zx(5)], [Zx(2), Zx(9), Zx(2)], order) is None
    assert diff(Zx(6), Zx(4), order) is None  # new, between 5 and 7 on both sides
    assert diff(Zx(7), Zx(4), order) is not None  # known on one side, other label
    assert diff(Zx(8), Zx(3), order) is not None  # new on both, but different rank
    assert diff({"err": 0, "zxid": Zx(9)}, {"err": -101, "zxid": Zx(10)}, ZxOrder()) == ".err: 0 != -101"
