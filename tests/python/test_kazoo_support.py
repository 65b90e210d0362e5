"""Shared helpers for the kazoo end-to-end suites (test_kazoo_*.py).

This module holds no tests. It provides:

* ``shared_server`` - one server per test module (same settings as conftest's ``server`` fixture),
  for tests that do not stop, pause or reconfigure the server; every test works under its own
  unique path (fixture ``base``) so tests stay independent.
* ``zk_factory`` / ``zk`` - KazooClient factory bound to the test's server; every client it made
  is stopped and closed at teardown.
* ``Proxy`` - a loopback TCP forwarder that can cut a client off from the server (to make a
  session really time out on the server side, which kazoo itself cannot do).
* low-level request records for opcodes kazoo 2.11 has no public method for (createContainer,
  createTTL), submitted through kazoo's own connection (``KazooClient._call``).
"""
import os
import socket
import tempfile
import threading
import time
import uuid
from collections import namedtuple
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import int_struct, long_struct, read_string, stat_struct, write_buffer, write_string
from kazoo.protocol.states import ZnodeStat
from kazoo.security import OPEN_ACL_UNSAFE

from conftest import Server

KIND = os.environ.get("ZK_KIND", "zoolog")

# ZK_TOPOLOGY=ensemble: tests/zk-server starts a 3-server ensemble and hands out the client port of
# its leader or of a follower; srvr/stat/mntr then report that member's mode.
TOPOLOGY = os.environ.get("ZK_TOPOLOGY", "standalone")
SERVER_MODES = ("standalone",) if TOPOLOGY == "standalone" else ("leader", "follower")

# What the `server` fixture of conftest.py configures; shared_server uses the same settings.
SUPER_DIGEST_SETTINGS = (
    "-Dzookeeper.extendedTypesEnabled=true",
    "-Dzookeeper.DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=",
    "-Dznode.container.checkIntervalMs=1000",
)

# Bounded waits: generous, so a slow CI machine never produces a false failure.
WAIT_S = 30.0

# Reconnect quickly and forever: kazoo's default back-off grows to minutes during long outages.
FAST_RETRY = dict(max_tries=-1, delay=0.1, backoff=1.5, max_jitter=0.1, max_delay=1.0)

# ZK_KIND=apache runs Debian's ZooKeeper 3.8.0 unless APACHE_ZK_CLASSPATH points elsewhere (e.g. at
# 3.9.3 via tests/java/apache-3.9-classpath.sh); 3.9-only behaviour is skipped on the Debian server.
APACHE_38 = KIND == "apache" and "zookeeper-3.9" not in os.environ.get("APACHE_ZK_CLASSPATH", "")

skip_on_apache_38 = pytest.mark.skipif(
    APACHE_38,
    reason="Debian's Apache ZooKeeper is 3.8.0; this 3.9 behaviour arrived in 3.8.4/3.9.x",
)


@pytest.fixture(scope="module")
def shared_server():
    """One server (extended types on, super digest super:test) for a whole test module."""
    root = tempfile.mkdtemp(prefix="zoolog-kazoo-")
    server = Server(Path(root) / "server").start(*SUPER_DIGEST_SETTINGS)
    yield server
    try:
        server.stop()
    except RuntimeError:
        pass


@pytest.fixture
def base(request):
    """A unique, not yet existing path for this test's nodes."""
    return "/" + request.node.name.replace("[", "-").replace("]", "") + "-" + uuid.uuid4().hex[:8]


class ClientFactory:
    def __init__(self, default_hosts):
        self.default_hosts = default_hosts
        self.clients = []

    def __call__(self, hosts=None, start=True, timeout=10.0, **kwargs):
        kwargs.setdefault("connection_retry", dict(FAST_RETRY))
        kwargs.setdefault("command_retry", dict(FAST_RETRY))
        client = KazooClient(hosts=hosts or self.default_hosts(), timeout=timeout, **kwargs)
        self.clients.append(client)
        if start:
            client.start(timeout=WAIT_S)
        return client

    def close_all(self):
        for client in self.clients:
            try:
                client.stop()
                client.close()
            except Exception:
                pass


def make_zk_factory(server_fixture_name):
    @pytest.fixture
    def zk_factory(request):
        server = request.getfixturevalue(server_fixture_name)
        factory = ClientFactory(lambda: server.hosts)
        yield factory
        factory.close_all()

    return zk_factory


@pytest.fixture
def zk(zk_factory):
    return zk_factory()


def wait_for(predicate, timeout=WAIT_S, interval=0.05):
    """Poll a condition that has no event to wait on (bounded); returns the last value."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        pause.wait(interval)


class EventRecorder:
    """A watch/listener callback that records every call and lets a test wait for the n-th."""

    def __init__(self):
        self.events = []
        self._cond = threading.Condition()

    def __call__(self, event):
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait(self, count=1, timeout=WAIT_S):
        with self._cond:
            self._cond.wait_for(lambda: len(self.events) >= count, timeout)
            return list(self.events)

    def wait_until(self, predicate, timeout=WAIT_S):
        with self._cond:
            self._cond.wait_for(lambda: predicate(list(self.events)), timeout)
            return list(self.events)


def state_recorder(client):
    """Register a KazooState listener recorder on client."""
    recorder = EventRecorder()
    client.add_listener(recorder)
    return recorder


# ----------------------------------------------------------------------------------------------
# Low-level requests for opcodes kazoo 2.11 does not wrap. They follow kazoo's request protocol
# (namedtuple + type + serialize() + deserialize()) and go through kazoo's own connection.


def _serialize_create(path, data, acl, flags):
    b = bytearray()
    b.extend(write_string(path))
    b.extend(write_buffer(data))
    b.extend(int_struct.pack(len(acl)))
    for entry in acl:
        b.extend(int_struct.pack(entry.perms) + write_string(entry.id.scheme) + write_string(entry.id.id))
    b.extend(int_struct.pack(flags))
    return b


def _deserialize_create2(buffer, offset):
    path, offset = read_string(buffer, offset)
    return path, ZnodeStat._make(stat_struct.unpack_from(buffer, offset))


class CreateContainer(namedtuple("CreateContainer", "path data acl flags")):
    """opcode 19, flags 4 (CONTAINER); reply Create2Response."""

    type = 19

    def serialize(self):
        return _serialize_create(self.path, self.data, self.acl, self.flags)

    @classmethod
    def deserialize(cls, buffer, offset):
        return _deserialize_create2(buffer, offset)


class CreateTTL(namedtuple("CreateTTL", "path data acl flags ttl")):
    """opcode 21, flags 5 (PERSISTENT_WITH_TTL) or 6 (PERSISTENT_SEQUENTIAL_WITH_TTL)."""

    type = 21

    def serialize(self):
        return _serialize_create(self.path, self.data, self.acl, self.flags) + long_struct.pack(self.ttl)

    @classmethod
    def deserialize(cls, buffer, offset):
        return _deserialize_create2(buffer, offset)


def low_level(client, request):
    """Submit a request record through kazoo's connection and wait for the result."""
    result = client.handler.async_result()
    client._call(request, result)
    return result.get(timeout=WAIT_S)


def create_container(client, path, data=b"", acl=OPEN_ACL_UNSAFE):
    return low_level(client, CreateContainer(path, data, list(acl), 4))


def create_ttl(client, path, ttl_ms, data=b"", sequential=False, acl=OPEN_ACL_UNSAFE):
    return low_level(client, CreateTTL(path, data, list(acl), 6 if sequential else 5, ttl_ms))


# ----------------------------------------------------------------------------------------------


class Proxy:
    """Loopback TCP forwarder between kazoo and the server.

    ``cut()`` closes every proxied connection and refuses new ones (accepts and closes at once),
    so the server hears nothing from the client's session: a real server-side timeout.
    ``heal()`` forwards again.
    """

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open = []
        self._cut = False
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def hosts(self):
        return f"127.0.0.1:{self.port}"

    def _accept_loop(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                if self._cut or self._closed:
                    conn.close()
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                except OSError:
                    conn.close()
                    continue
                upstream.settimeout(None)
                self._open += [conn, upstream]
            threading.Thread(target=self._pump, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, conn), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self):
        with self._lock:
            self._cut = True
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._open = []

    def heal(self):
        with self._lock:
            self._cut = False

    def close(self):
        self._closed = True
        self.cut()
        self.listener.close()
