"""kazoo end-to-end: one-shot data/exists/children watches, event order, kazoo's DataWatch and
ChildrenWatch helpers, and what kazoo users get across a reconnect (fact sheet §8).

kazoo 2.11 has no add_watch/remove_all_watches (persistent watches) and never sends SetWatches:
on a connection loss it fires every pending one-shot watch with a NONE event and forgets it
(KazooClient._reset_watchers); its DataWatch/ChildrenWatch helpers re-read and re-watch when the
connection comes back. The reconnect tests check exactly that contract against the server.
"""
import queue

import pytest
from kazoo.exceptions import NoNodeError

from test_kazoo_support import (  # noqa: F401  (fixtures)
    ClientFactory,
    EventRecorder,
    Proxy,
    WAIT_S,
    base,
    make_zk_factory,
    shared_server,
    state_recorder,
    zk,
)

zk_factory = make_zk_factory("shared_server")


def types(events):
    return [e.type for e in events]


def settle(client, base):
    """Return once every event caused by earlier changes has been delivered to client: events on a
    connection are delivered in zxid order, so a later marker event comes after all of them."""
    marker = EventRecorder()
    client.ensure_path(base + "-marker")
    client.exists(base + "-marker", watch=marker)
    client.set(base + "-marker", b"tick")
    assert types(marker.wait(1)) == ["CHANGED"]


# --- one-shot watches --------------------------------------------------------------------------


def test_data_watch_fires_once_for_the_first_change_only(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base, b"0")
    recorder = EventRecorder()
    watcher.get(base, watch=recorder)
    writer.set(base, b"1")
    writer.set(base, b"2")
    events = recorder.wait(1)
    settle(watcher, base)
    assert types(recorder.events) == ["CHANGED"]
    assert events[0].path == base
    assert events[0].state == "CONNECTED"


def test_exists_watch_on_a_missing_node_fires_created(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    recorder = EventRecorder()
    assert watcher.exists(base, watch=recorder) is None
    writer.create(base)
    assert [(e.type, e.path) for e in recorder.wait(1)] == [("CREATED", base)]


def test_exists_watch_on_an_existing_node_fires_deleted(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    recorder = EventRecorder()
    watcher.exists(base, watch=recorder)
    writer.delete(base)
    assert types(recorder.wait(1)) == ["DELETED"]


def test_exists_watch_on_an_existing_node_fires_changed_on_set(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    recorder = EventRecorder()
    watcher.exists(base, watch=recorder)
    writer.set(base, b"new")
    assert types(recorder.wait(1)) == ["CHANGED"]


def test_child_watch_fires_on_child_creation_but_not_on_child_data_changes(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    writer.create(base + "/existing")
    recorder = EventRecorder()
    watcher.get_children(base, watch=recorder)
    writer.set(base + "/existing", b"data")
    writer.set(base, b"parent data")
    settle(watcher, base)
    assert recorder.events == []
    writer.create(base + "/new")
    assert [(e.type, e.path) for e in recorder.wait(1)] == [("CHILD", base)]


def test_child_watch_fires_on_child_deletion(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base + "/c", makepath=True)
    recorder = EventRecorder()
    watcher.get_children(base, watch=recorder)
    writer.delete(base + "/c")
    assert types(recorder.wait(1)) == ["CHILD"]


def test_deleting_a_watched_node_fires_one_deleted_for_data_and_child_watchers(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    data_rec, child_rec = EventRecorder(), EventRecorder()
    watcher.get(base, watch=data_rec)
    watcher.get_children(base, watch=child_rec)
    writer.delete(base)
    assert types(data_rec.wait(1)) == ["DELETED"]
    assert types(child_rec.wait(1)) == ["DELETED"]
    settle(watcher, base)
    assert len(data_rec.events) == 1 and len(child_rec.events) == 1


def test_every_watching_client_is_notified(zk_factory, base):
    writer = zk_factory()
    writer.create(base)
    recorders = []
    for _ in range(3):
        recorder = EventRecorder()
        zk_factory().get(base, watch=recorder)
        recorders.append(recorder)
    writer.set(base, b"x")
    for recorder in recorders:
        assert types(recorder.wait(1)) == ["CHANGED"]


def test_watch_can_be_rearmed_from_its_callback(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base, b"0")
    seen = queue.Queue()

    def rearm(event):
        data, _ = watcher.get(base, watch=rearm)
        seen.put(data)

    watcher.get(base, watch=rearm)
    for value in (b"1", b"2", b"3"):
        writer.set(base, value)
        assert seen.get(timeout=WAIT_S) == value


def test_create_fires_node_created_before_the_parents_children_changed(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    recorder = EventRecorder()
    watcher.exists(base + "/c", watch=recorder)
    watcher.get_children(base, watch=recorder)
    writer.create(base + "/c")
    assert [(e.type, e.path) for e in recorder.wait(2)] == [("CREATED", base + "/c"), ("CHILD", base)]


def test_delete_fires_node_deleted_before_the_parents_children_changed(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base + "/c", makepath=True)
    recorder = EventRecorder()
    watcher.exists(base + "/c", watch=recorder)
    watcher.get_children(base, watch=recorder)
    writer.delete(base + "/c")
    assert [(e.type, e.path) for e in recorder.wait(2)] == [("DELETED", base + "/c"), ("CHILD", base)]


def test_events_arrive_in_transaction_order(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    names = [f"{base}/n{i}" for i in range(5)]
    recorder = EventRecorder()
    for name in reversed(names):  # registration order must not matter
        watcher.exists(name, watch=recorder)
    for name in names:
        writer.create(name)
    assert [e.path for e in recorder.wait(5)] == names


def test_multi_fires_the_watches_of_each_operation(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    writer.create(base + "/old")
    recorder = EventRecorder()
    watcher.exists(base + "/new", watch=recorder)
    watcher.exists(base + "/old", watch=recorder)
    tx = writer.transaction()
    tx.create(base + "/new")
    tx.delete(base + "/old")
    tx.commit()
    assert [(e.type, e.path) for e in recorder.wait(2)] == [("CREATED", base + "/new"), ("DELETED", base + "/old")]


def test_failed_multi_fires_no_watches(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    recorder = EventRecorder()
    watcher.exists(base + "/new", watch=recorder)
    watcher.get(base, watch=recorder)
    tx = writer.transaction()
    tx.create(base + "/new")
    tx.set_data(base, b"x", version=42)
    tx.commit()
    settle(watcher, base)
    assert recorder.events == []


def test_watch_set_on_a_failed_read_is_not_left_behind(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    recorder = EventRecorder()
    with pytest.raises(NoNodeError):
        watcher.get(base, watch=recorder)  # no watch is registered by a failed read
    writer.create(base)
    writer.set(base, b"x")
    settle(watcher, base)
    assert recorder.events == []


# --- kazoo's watch helpers ----------------------------------------------------------------------


def test_data_watch_helper_reports_initial_value_every_change_and_deletion(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base, b"a")
    calls = queue.Queue()

    @watcher.DataWatch(base)
    def on_data(data, stat):
        calls.put((data, stat.version if stat else None))

    assert calls.get(timeout=WAIT_S) == (b"a", 0)
    writer.set(base, b"b")
    assert calls.get(timeout=WAIT_S) == (b"b", 1)
    writer.delete(base)
    assert calls.get(timeout=WAIT_S) == (None, None)
    writer.create(base, b"again")
    assert calls.get(timeout=WAIT_S) == (b"again", 0)


def test_data_watch_helper_on_a_missing_node_sees_its_creation(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    calls = queue.Queue()
    watcher.DataWatch(base, lambda data, stat: calls.put(data))
    assert calls.get(timeout=WAIT_S) is None
    writer.create(base, b"born")
    assert calls.get(timeout=WAIT_S) == b"born"


def test_children_watch_helper_tracks_membership(zk_factory, base):
    writer, watcher = zk_factory(), zk_factory()
    writer.create(base)
    calls = queue.Queue()
    watcher.ChildrenWatch(base, lambda children: calls.put(sorted(children)))
    assert calls.get(timeout=WAIT_S) == []
    writer.create(base + "/x")
    assert calls.get(timeout=WAIT_S) == ["x"]
    writer.create(base + "/y", ephemeral=True)
    assert calls.get(timeout=WAIT_S) == ["x", "y"]
    writer.delete(base + "/x")
    assert calls.get(timeout=WAIT_S) == ["y"]


# --- reconnects --------------------------------------------------------------------------------


@pytest.fixture
def proxied(shared_server, zk_factory):
    """A client connected through a cuttable proxy, with a long session timeout."""
    proxy = Proxy(shared_server.port)
    client = zk_factory(hosts=proxy.hosts, timeout=30.0)
    yield proxy, client
    proxy.close()


def cut_and_wait(proxy, client, states):
    proxy.cut()
    states.wait_until(lambda ev: "SUSPENDED" in ev)


def heal_and_wait(proxy, states):
    proxy.heal()
    states.wait_until(lambda ev: ev[-1:] == ["CONNECTED"])


def test_kazoo_fires_pending_one_shot_watches_with_none_on_connection_loss(proxied, zk_factory, base):
    proxy, client = proxied
    writer = zk_factory()
    writer.create(base)
    recorder = EventRecorder()
    client.get(base, watch=recorder)
    states = state_recorder(client)
    session = client.client_id[0]
    cut_and_wait(proxy, client, states)
    assert [(e.type, e.state) for e in recorder.wait(1)] == [("NONE", "CONNECTING")]
    writer.set(base, b"while disconnected")
    heal_and_wait(proxy, states)
    assert client.client_id[0] == session
    # kazoo does not re-register plain watches: a fresh read is how its users catch up
    data, stat = client.get(base)
    assert (data, stat.version) == (b"while disconnected", 1)
    assert types(recorder.events) == ["NONE"]


def test_data_watch_helper_catches_up_on_a_change_made_while_disconnected(proxied, zk_factory, base):
    proxy, client = proxied
    writer = zk_factory()
    writer.create(base, b"before")
    calls = queue.Queue()
    client.DataWatch(base, lambda data, stat: calls.put(data))
    assert calls.get(timeout=WAIT_S) == b"before"
    states = state_recorder(client)
    cut_and_wait(proxy, client, states)
    writer.set(base, b"during")
    heal_and_wait(proxy, states)
    assert calls.get(timeout=WAIT_S) == b"during"
    writer.set(base, b"after")  # and the re-registered watch keeps working
    assert calls.get(timeout=WAIT_S) == b"after"


def test_children_watch_helper_catches_up_on_children_added_while_disconnected(proxied, zk_factory, base):
    proxy, client = proxied
    writer = zk_factory()
    writer.create(base)
    calls = queue.Queue()
    client.ChildrenWatch(base, lambda children: calls.put(sorted(children)))
    assert calls.get(timeout=WAIT_S) == []
    states = state_recorder(client)
    cut_and_wait(proxy, client, states)
    writer.create(base + "/during")
    heal_and_wait(proxy, states)
    assert calls.get(timeout=WAIT_S) == ["during"]
    writer.create(base + "/after")
    assert calls.get(timeout=WAIT_S) == ["after", "during"]


def test_watch_helpers_keep_working_across_a_server_restart(server, base):
    clients = ClientFactory(lambda: server.hosts)
    try:
        watcher = clients(timeout=30.0)
        writer = clients(timeout=30.0)
        writer.create(base, b"v0")
        calls = queue.Queue()
        watcher.DataWatch(base, lambda data, stat: calls.put(data))
        assert calls.get(timeout=WAIT_S) == b"v0"
        states = state_recorder(watcher)
        session = watcher.client_id[0]
        server.stop()
        states.wait_until(lambda ev: "SUSPENDED" in ev)
        server.restart()
        states.wait_until(lambda ev: ev[-1:] == ["CONNECTED"])
        assert watcher.client_id[0] == session
        writer.retry(writer.set, base, b"v1")
        # the helper re-reads on reconnect and reports only changed data: exactly v1
        assert calls.get(timeout=WAIT_S) == b"v1"
    finally:
        clients.close_all()
