"""Shared pytest fixtures: a real server process (zoolog, or Apache ZooKeeper with ZK_KIND=apache)
started through tests/zk-server, so every Python suite drives both through the same door."""
import os
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

ZK_SERVER = Path(__file__).resolve().parent.parent / "zk-server"


class Server:
    """One server process in its own directory; the data survives stop/kill/restart."""

    def __init__(self, directory, kind=None):
        self.directory = Path(directory)
        self.kind = kind or os.environ.get("ZK_KIND", "zoolog")
        self.port = None

    def _run(self, *args):
        env = dict(os.environ, ZK_KIND=self.kind)
        done = subprocess.run([str(ZK_SERVER), *args], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"zk-server {args[0]} failed: {done.stderr}")
        return done.stdout.strip()

    def start(self, *settings):
        """settings: 'key=value' zoo.cfg lines and '-Dprop=value' system properties."""
        self.port = int(self._run("start", str(self.directory), *settings))
        return self

    def restart(self):
        self.port = int(self._run("restart", str(self.directory)))

    def stop(self):
        self._run("stop", str(self.directory))

    def kill(self):
        self._run("kill", str(self.directory))

    def pause(self):
        self._run("pause", str(self.directory))

    def resume(self):
        self._run("resume", str(self.directory))

    @property
    def hosts(self):
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self):
        return int((self.directory / "pid").read_text())

    def log_text(self):
        return (self.directory / "server.log").read_text(errors="replace")

    def four_letter(self, word, timeout_s=5.0):
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    return b"".join(chunks).decode()
                chunks.append(chunk)


@pytest.fixture
def server_factory():
    """Start servers with chosen settings; all are stopped when the test ends."""
    started = []
    root = tempfile.mkdtemp(prefix="zoolog-test-")

    def make(*settings, kind=None):
        server = Server(Path(root) / f"server{len(started)}", kind=kind).start(*settings)
        started.append(server)
        return server

    yield make
    for server in started:
        try:
            server.stop()
        except RuntimeError:
            pass


@pytest.fixture
def server(server_factory):
    """A standalone server with extended types on (TTL nodes) and a super digest for super:test."""
    return server_factory(
        "-Dzookeeper.extendedTypesEnabled=true",
        "-Dzookeeper.DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=",
        "-Dznode.container.checkIntervalMs=1000",
    )
