"""zoolog's logs as an operator reads or ships them: levels chosen with RUST_LOG, one JSON object
per line with ZOOLOG_LOG_FORMAT=json (timestamp, level, target, message and the event's fields),
plain text otherwise. The server is a real `zoolog serve` process; its stderr is the log."""
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
ZOOLOG = os.environ.get("ZOOLOG_BIN", str(ROOT / "target" / "release" / "zoolog"))
START_TIMEOUT_S = 30.0

pytestmark = pytest.mark.skipif(
    os.environ.get("ZK_KIND", "zoolog") != "zoolog", reason="zoolog's own log format")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ruok(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


def run_server(tmp_path, environment, *arguments, poke=None):
    """Starts `zoolog serve`, waits until it answers ruok, calls `poke(port)`, stops it with
    SIGTERM and returns its stderr lines."""
    port = free_port()
    log_path = tmp_path / f"server-{port}.log"
    command = [ZOOLOG, "serve", f"-DclientPort={port}", f"-DdataDir={tmp_path / str(port)}",
               "-Dzookeeper.4lw.commands.whitelist=ruok", "-Dzookeeper.admin.enableServer=false",
               *arguments]
    with open(log_path, "wb") as log:
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log,
                                  env={**os.environ, **environment})
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not ruok(port):
                assert server.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
            if poke:
                poke(port)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    return log_path.read_text().splitlines()


def send_garbage(port):
    """A frame length past jute.maxbuffer: the server closes the connection and says why."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\x7f\xff\xff\xff" + b"x" * 16)
        assert sock.recv(16) == b""


def test_json_lines_carry_level_target_message_and_fields(tmp_path):
    lines = run_server(tmp_path, {"ZOOLOG_LOG_FORMAT": "json", "RUST_LOG": "info"},
                       poke=send_garbage)
    events = [json.loads(line) for line in lines]
    assert events
    for event in events:
        assert {"timestamp", "level", "target", "message"} <= set(event), event
        assert event["level"] in ("ERROR", "WARN", "INFO", "DEBUG", "TRACE"), event
    serving = [e for e in events if e["message"] == "serving clients"]
    assert len(serving) == 1 and serving[0]["level"] == "INFO"
    assert serving[0]["address"].startswith("127.0.0.1:")
    bad_frame = [e for e in events if "bad frame length" in e["message"]]
    assert len(bad_frame) == 1, events
    assert "jute.maxbuffer" in bad_frame[0]["error"]
    assert events[-1]["message"] == "shutting down"


def test_rust_log_chooses_the_levels(tmp_path):
    # An unknown word in the whitelist is a warning; starting up is information. (The later
    # whitelist argument replaces run_server's.)
    arguments = ["-Dzookeeper.4lw.commands.whitelist=ruok,nope"]
    quiet = [json.loads(line) for line in run_server(
        tmp_path, {"ZOOLOG_LOG_FORMAT": "json", "RUST_LOG": "warn"}, *arguments)]
    assert [e["level"] for e in quiet] == ["WARN"], quiet
    assert '"nope" is not a four-letter word' in quiet[0]["message"]

    text = run_server(tmp_path, {"RUST_LOG": "info"}, *arguments)
    assert any(" WARN " in line and '"nope" is not a four-letter word' in line for line in text), text
    assert any(" INFO " in line and "serving clients" in line for line in text), text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text[0])
