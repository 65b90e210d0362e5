"""Snapshots in a real server process: with a small snapCount the server snapshots often, purges
old snapshots and log segments, and recovers every node and session from snapshot plus log tail,
after a clean stop and after kill -9."""
import os
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

pytestmark = [
    pytest.mark.skipif(os.environ.get("ZK_KIND", "zoolog") != "zoolog", reason="zoolog's data files"),
    pytest.mark.skipif(os.environ.get("ZK_TOPOLOGY", "standalone") == "ensemble",
                       reason="reads the snapshot files of one server's data directory and edits its "
                              "zoo.cfg; ensemble recovery is tested by test_ensemble_faults.py"),
]


def connect(server, **kwargs):
    client = KazooClient(hosts=server.hosts, timeout=10, **kwargs)
    client.start(timeout=15)
    return client


def wait_connected(client, timeout_s=30):
    """kazoo reports no session while it is still reconnecting after a restart."""
    connected = threading.Event()

    def listener(state):
        if state == KazooState.CONNECTED:
            connected.set()
        return connected.is_set()

    client.add_listener(listener)
    if client.state == KazooState.CONNECTED:
        connected.set()
    assert connected.wait(timeout_s), "client reconnected"


def snapshot_files(server):
    return sorted((server.directory / "data").glob("snapshot-*"))


def test_state_survives_restarts_across_many_snapshots(server_factory):
    server = server_factory("snapCount=50", "autopurge.snapRetainCount=3")
    writer = connect(server)
    owner = connect(server)
    owner.create("/owned", b"mine", ephemeral=True)
    expected = {}
    for round_index in range(3):
        for i in range(200):
            path = f"/r{round_index}/n{i:04d}"
            writer.create(path, f"{round_index}:{i}".encode(), makepath=True)
            expected[path] = f"{round_index}:{i}".encode()
        writer.set("/r0/n0000", f"set in round {round_index}".encode())
        expected["/r0/n0000"] = f"set in round {round_index}".encode()
        if round_index == 1:
            server.kill()
        else:
            server.stop()
        server.restart()
    snapshots = snapshot_files(server)
    assert 1 <= len(snapshots) <= 3, f"autopurge keeps at most 3 snapshots: {snapshots}"
    reader = connect(server)
    for path, data in expected.items():
        assert reader.get(path)[0] == data, path
    assert len(reader.get_children("/r2")) == 200
    wait_connected(owner)
    owner_session = owner.client_id
    assert owner_session is not None, "the owner's session survived the restarts"
    stat = reader.exists("/owned")
    assert stat is not None and stat.ephemeralOwner == owner_session[0], "and so did its ephemeral"
    for client in (writer, owner, reader):
        client.stop()
        client.close()


def test_zxids_keep_growing_after_recovery_from_a_snapshot(server_factory):
    server = server_factory("snapCount=20")
    client = connect(server)
    last = 0
    for i in range(100):
        last = client.create(f"/z{i}", b"", include_data=True)[1].czxid
    client.stop()
    server.kill()
    server.restart()
    client = connect(server)
    stat = client.create("/after", b"", include_data=True)[1]
    assert stat.czxid > last, "positions continue after the recovered ones"
    assert len(snapshot_files(server)) >= 1
    client.stop()


def test_a_snapshot_due_during_replay_is_saved_and_later_ones_follow(server_factory):
    """A long recovered tail (as after a crash while a snapshot was being written) makes a
    snapshot fall due during replay; it must be saved, and snapshots must keep coming after."""
    server = server_factory("snapCount=100000")
    client = connect(server)
    for i in range(300):
        client.create(f"/tail{i}", b"")
    client.stop()
    server.stop()
    assert snapshot_files(server) == [], "no snapshot yet: the whole history is log tail"
    with open(server.directory / "zoo.cfg", "a") as cfg:
        cfg.write("snapCount=100\n")
    server.restart()
    client = connect(server)
    recovered_snapshots = snapshot_files(server)
    for i in range(250):
        client.create(f"/more{i}", b"")
    client.stop()
    later_snapshots = snapshot_files(server)
    assert recovered_snapshots, "the snapshot due during replay was saved"
    assert set(later_snapshots) - set(recovered_snapshots), "snapshots continue after replay"
