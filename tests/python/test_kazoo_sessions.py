"""kazoo end-to-end: session lifetime (fact sheet §3.3, §10): surviving server restarts and crashes,
expiry by a real server-side timeout, explicit close, resuming a session by id and password, and
timeout negotiation.

Tests that stop or kill the server get their own (conftest's ``server``); the rest share one.
"""
import re

import pytest

from test_kazoo_support import (  # noqa: F401  (fixtures)
    ClientFactory,
    EventRecorder,
    Proxy,
    WAIT_S,
    base,
    make_zk_factory,
    shared_server,
    state_recorder,
    wait_for,
    zk,
)

zk_factory = make_zk_factory("shared_server")  # tests that leave the server running
own_zk_factory = make_zk_factory("server")  # tests that stop or kill their own server


def negotiated_timeout_ms(server, client):
    """The server's view of a session's timeout, from the `cons` four-letter word."""
    sid = f"sid=0x{client.client_id[0]:x},"
    for line in server.four_letter("cons").splitlines():
        if sid in line:
            return int(re.search(r"[(,]to=(\d+)", line).group(1))
    raise AssertionError(f"session {sid} not listed by cons")


def types(events):
    return [e.type for e in events]


def wait_reconnected(states):
    return states.wait_until(lambda ev: ev[-1:] == ["CONNECTED"] and "SUSPENDED" in ev)


def test_session_and_its_ephemerals_survive_a_server_restart(server, own_zk_factory, base):
    client = own_zk_factory(timeout=30.0)
    client.create(base, b"still here", ephemeral=True)
    session = client.client_id
    states = state_recorder(client)
    server.stop()
    states.wait_until(lambda ev: "SUSPENDED" in ev)
    server.restart()
    wait_reconnected(states)
    assert "LOST" not in states.events
    assert client.client_id == session
    assert client.get(base)[0] == b"still here"
    assert own_zk_factory().exists(base).ephemeralOwner == session[0]
    # the session can keep working: a new ephemeral is owned by it too
    client.create(base + "-after", ephemeral=True)
    assert client.exists(base + "-after").ephemeralOwner == session[0]


def test_committed_data_and_sessions_survive_a_crash(server, own_zk_factory, base):
    client = own_zk_factory(timeout=30.0)
    client.create(base, b"durable")
    client.create(base + "-eph", ephemeral=True)
    stat = client.set(base, b"durable v1")
    session = client.client_id
    states = state_recorder(client)
    server.kill()
    states.wait_until(lambda ev: "SUSPENDED" in ev)
    server.restart()
    wait_reconnected(states)
    assert client.client_id == session
    data, after = client.get(base)
    assert (data, after.version, after.mzxid) == (b"durable v1", 1, stat.mzxid)
    assert client.exists(base + "-eph").ephemeralOwner == session[0]


def test_zxids_and_session_ids_keep_growing_uniquely_after_a_restart(server, own_zk_factory, base):
    first = own_zk_factory(timeout=30.0)
    _, before = first.create(base, include_data=True)
    old_sessions = {own_zk_factory().client_id[0] for _ in range(3)} | {first.client_id[0]}
    states = state_recorder(first)
    server.stop()
    states.wait_until(lambda ev: "SUSPENDED" in ev)
    server.restart()
    wait_reconnected(states)
    _, after = first.create(base + "-later", include_data=True)
    assert after.czxid > before.czxid
    new_sessions = {own_zk_factory().client_id[0] for _ in range(3)}
    assert all(s != 0 for s in new_sessions)
    assert len(new_sessions) == 3 and not (new_sessions & old_sessions)


def test_session_timeout_expiry_removes_ephemerals_and_the_client_learns_it_on_reconnect(
    shared_server, zk_factory, base
):
    proxy = Proxy(shared_server.port)
    try:
        client = zk_factory(hosts=proxy.hosts, timeout=4.0)  # tickTime 2000: 4 s is the minimum
        client.create(base, ephemeral=True)
        expired_session = client.client_id[0]
        observer = zk_factory()
        gone = EventRecorder()
        assert observer.exists(base, watch=gone) is not None
        states = state_recorder(client)

        proxy.cut()  # the server hears nothing from this session any more
        assert [(e.type, e.path) for e in gone.wait(1)] == [("DELETED", base)]
        assert observer.exists(base) is None
        assert "LOST" not in states.events  # nothing tells the client while it is cut off

        proxy.heal()
        states.wait_until(lambda ev: "LOST" in ev and ev[-1] == "CONNECTED")
        assert client.client_id[0] != expired_session  # kazoo starts a fresh session
        assert client.exists(base) is None
    finally:
        proxy.close()


def test_closing_a_session_removes_its_ephemerals_at_once(zk_factory, base):
    owner, observer = zk_factory(), zk_factory()
    owner.create(base, ephemeral=True)
    owner.create(base + "-seq-", ephemeral=True, sequence=True)
    gone = EventRecorder()
    observer.exists(base, watch=gone)
    owner.stop()
    # no waiting: the close is committed before the close reply, so the next read sees it
    assert observer.exists(base) is None
    assert not [c for c in observer.get_children("/") if c.startswith(base[1:] + "-seq-")]
    assert types(gone.wait(1)) == ["DELETED"]


def test_closed_session_cannot_be_resumed(zk_factory, base):
    owner = zk_factory()
    session = owner.client_id
    owner.stop()
    # kazoo gets the expired handshake (timeout 0), drops the old id and opens a new session
    # (a never-connected client starts in LOST, so no LOST transition is reported)
    resumer = zk_factory(client_id=session)
    assert resumer.client_id[0] != session[0]


def test_wrong_password_cannot_take_over_a_live_session(zk_factory, base):
    owner = zk_factory()
    owner.create(base, ephemeral=True)
    sid, password = owner.client_id
    impostor = zk_factory(client_id=(sid, bytes(16) if password != bytes(16) else b"\x01" * 16))
    assert impostor.client_id[0] != sid  # refused: kazoo had to open a new session
    # (Apache drops the owner's connection before checking the password; the owner reconnects)
    assert owner.retry(owner.exists, base).ephemeralOwner == sid
    assert wait_for(lambda: owner.client_id) and owner.client_id[0] == sid


def test_resuming_a_session_by_id_and_password_shares_it_and_closing_it_expires_the_original(
    shared_server, zk_factory, base
):
    proxy = Proxy(shared_server.port)  # keeps the original client from fighting over the session
    try:
        original = zk_factory(hosts=proxy.hosts, timeout=30.0)
        original.create(base, ephemeral=True)
        sid, password = original.client_id
        original_states = state_recorder(original)
        proxy.cut()
        original_states.wait_until(lambda ev: "SUSPENDED" in ev)

        resumer = zk_factory(client_id=(sid, password))
        assert resumer.client_id == (sid, password)
        assert resumer.exists(base).ephemeralOwner == sid
        resumer.stop()  # closes the shared session
        assert zk_factory().exists(base) is None

        proxy.heal()
        original_states.wait_until(lambda ev: "LOST" in ev and ev[-1] == "CONNECTED")
        assert original.client_id[0] != sid
    finally:
        proxy.close()


def test_session_survives_a_dropped_connection(shared_server, zk_factory, base):
    proxy = Proxy(shared_server.port)
    try:
        client = zk_factory(hosts=proxy.hosts, timeout=10.0)
        client.create(base, ephemeral=True)
        session = client.client_id
        states = state_recorder(client)
        proxy.cut()
        states.wait_until(lambda ev: "SUSPENDED" in ev)
        proxy.heal()
        wait_reconnected(states)
        assert client.client_id == session
        assert zk_factory().exists(base).ephemeralOwner == session[0]
    finally:
        proxy.close()


@pytest.mark.parametrize(
    "requested_s, expected_ms",
    [(1.0, 4000), (10.0, 10000), (1000.0, 40000)],
    ids=["below-min", "in-range", "above-max"],
)
def test_session_timeout_is_clamped_to_2_and_20_ticks(shared_server, zk_factory, requested_s, expected_ms):
    client = zk_factory(timeout=requested_s)  # tests/zk-server configures tickTime=2000
    assert negotiated_timeout_ms(shared_server, client) == expected_ms


def test_configured_min_and_max_session_timeouts_are_honoured(server_factory):
    custom = server_factory("minSessionTimeout=5000", "maxSessionTimeout=7000")
    clients = ClientFactory(lambda: custom.hosts)
    try:
        low, high, middle = clients(timeout=1.0), clients(timeout=60.0), clients(timeout=6.0)
        assert negotiated_timeout_ms(custom, low) == 5000
        assert negotiated_timeout_ms(custom, high) == 7000
        assert negotiated_timeout_ms(custom, middle) == 6000
    finally:
        clients.close_all()
