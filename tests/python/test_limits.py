"""The server's limits, each hit on purpose: the connections one IP may open (maxClientCnxns)
and the requests one connection may have outstanding (globalOutstandingLimit). A limit that is
hit refuses or slows the offender and never disturbs anyone else."""
import os

import pytest

import zkwire

zoolog_only = pytest.mark.skipif(os.environ.get("ZK_KIND", "zoolog") != "zoolog", reason="zoolog's own limits")


def healthy(server):
    conn = zkwire.Connection.open(server.hosts)
    try:
        return conn.call(zkwire.EXISTS, zkwire.path_body("/", False)).err == 0
    finally:
        conn.close_socket()


@zoolog_only  # Apache still counts the launcher's closed ruok probe for a moment, so it refuses one early
def test_connections_beyond_the_per_ip_limit_are_closed(server_factory):
    server = server_factory("maxClientCnxns=5")
    held = [zkwire.Connection.open(server.hosts) for _ in range(5)]
    extra = zkwire.Connection("127.0.0.1", server.port)
    assert extra.is_closed_by_peer(timeout_s=10), "the sixth connection from one IP is closed"
    assert all(c.call(zkwire.EXISTS, zkwire.path_body("/", False)).err == 0 for c in held)
    held.pop().close_socket()
    replacement_ok = False
    for _ in range(50):  # the server notices the closed slot asynchronously
        try:
            replacement_ok = healthy(server)
            break
        except (zkwire.ConnectionClosed, OSError):
            continue
    assert replacement_ok, "a slot freed by a closed connection can be used again"
    for c in held:
        c.close_socket()


@zoolog_only
def test_a_flood_of_pipelined_requests_is_slowed_not_dropped(server_factory):
    server = server_factory("globalOutstandingLimit=8")
    conn = zkwire.Connection.open(server.hosts)
    request_count = 3000
    body = zkwire.path_body("/zookeeper", False)
    xids = [conn.send(zkwire.EXISTS, body) for _ in range(request_count)]
    replies = [conn.recv_reply() for _ in range(request_count)]
    assert [r.xid for r in replies] == xids, "every request answered, in order"
    assert all(r.err == 0 for r in replies)
    assert healthy(server), "others are served meanwhile"
    conn.close_socket()
