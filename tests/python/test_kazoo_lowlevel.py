"""kazoo end-to-end, below kazoo's public API: persistent and persistent-recursive watches
(addWatch 106, removeWatches 18) and notification zxids (fact sheet §5.12, §5.19, §8).

kazoo 2.11 has no add_watch/remove_all_watches, and its watch dispatch only knows one-shot watches,
so these tests send the requests through kazoo's own connection (KazooClient._call) and read every
notification frame with a tap on the connection's event reader.
"""
import queue
from collections import namedtuple

import pytest
from kazoo.exceptions import NoWatcherError
from kazoo.protocol.serialization import ReplyHeader, Watch, int_struct, write_string

from test_kazoo_support import (  # noqa: F401  (fixtures)
    APACHE_38,
    WAIT_S,
    base,
    low_level,
    make_zk_factory,
    shared_server,
    zk,
)

zk_factory = make_zk_factory("shared_server")

PERSISTENT, PERSISTENT_RECURSIVE = 0, 1
WATCHER_CHILDREN, WATCHER_DATA, WATCHER_ANY, WATCHER_PERSISTENT, WATCHER_RECURSIVE = 1, 2, 3, 4, 5
EVENT_NAMES = {1: "CREATED", 2: "DELETED", 3: "CHANGED", 4: "CHILD"}


class AddWatch(namedtuple("AddWatch", "path mode")):
    type = 106

    def serialize(self):
        return write_string(self.path) + int_struct.pack(self.mode)

    @classmethod
    def deserialize(cls, buffer, offset):
        return int_struct.unpack_from(buffer, offset)[0]  # ErrorResponse{err}: 0


class RemoveWatches(namedtuple("RemoveWatches", "path watcher_type")):
    type = 18

    def serialize(self):
        return write_string(self.path) + int_struct.pack(self.watcher_type)

    @classmethod
    def deserialize(cls, buffer, offset):
        return True


class EventTap:
    """Every notification frame the client receives: (type name, path, header zxid)."""

    def __init__(self, client):
        self.frames = queue.Queue()
        connection = client._connection
        original = connection._read_watch_event

        def tap(buffer, offset):
            header, _ = ReplyHeader.deserialize(buffer, 0)
            watch, _ = Watch.deserialize(buffer, offset)
            self.frames.put((EVENT_NAMES.get(watch.type, watch.type), watch.path, header.zxid))
            return original(buffer, offset)

        connection._read_watch_event = tap

    def next(self):
        return self.frames.get(timeout=WAIT_S)

    def until_marker(self, client, base):
        """All frames up to (excluding) a marker event caused after everything before it."""
        marker = base + "-marker"
        client.ensure_path(marker)
        low_level(client, AddWatch(marker, PERSISTENT))
        client.set(marker, b"tick")
        seen = []
        while (frame := self.next())[1] != marker:
            seen.append(frame[:2])
        return seen


@pytest.fixture
def watcher(zk_factory):
    client = zk_factory()
    return client, EventTap(client)


def test_persistent_watch_fires_for_every_change_of_the_node_and_its_child_list(zk_factory, watcher, base):
    client, tap = watcher
    writer = zk_factory()
    assert low_level(client, AddWatch(base, PERSISTENT)) == 0
    writer.create(base)
    writer.set(base, b"1")
    writer.set(base, b"2")
    writer.create(base + "/child")
    writer.set(base + "/child", b"not reported")
    writer.create(base + "/child/grandchild")
    writer.delete(base + "/child/grandchild")
    writer.delete(base + "/child")
    writer.delete(base)
    assert tap.until_marker(client, base) == [
        ("CREATED", base), ("CHANGED", base), ("CHANGED", base), ("CHILD", base), ("CHILD", base), ("DELETED", base)
    ]


def test_recursive_watch_reports_the_whole_subtree_but_never_children_changed(zk_factory, watcher, base):
    client, tap = watcher
    writer = zk_factory()
    low_level(client, AddWatch(base, PERSISTENT_RECURSIVE))
    writer.create(base)
    writer.create(base + "/a")
    writer.create(base + "/a/b")
    writer.set(base + "/a/b", b"x")
    writer.delete(base + "/a/b")
    writer.create(base + "-sibling")  # a sibling with the same prefix is not inside the subtree
    assert tap.until_marker(client, base) == [
        ("CREATED", base), ("CREATED", base + "/a"), ("CREATED", base + "/a/b"), ("CHANGED", base + "/a/b"),
        ("DELETED", base + "/a/b"),
    ]


def test_persistent_watch_and_one_shot_watch_on_one_path_give_a_single_event(zk_factory, watcher, base):
    client, tap = watcher
    writer = zk_factory()
    writer.create(base)
    low_level(client, AddWatch(base, PERSISTENT))
    client.get(base, watch=lambda event: None)
    writer.set(base, b"x")
    assert tap.until_marker(client, base) == [("CHANGED", base)]


@pytest.mark.skipif(APACHE_38, reason="ZooKeeper 3.8.0 answers removeWatches type Persistent with "
                    "MARSHALLINGERROR; 3.9 removes the watch")
def test_removed_persistent_watch_stops_firing(zk_factory, watcher, base):
    client, tap = watcher
    writer = zk_factory()
    writer.create(base)
    low_level(client, AddWatch(base, PERSISTENT))
    writer.set(base, b"1")
    assert low_level(client, RemoveWatches(base, WATCHER_PERSISTENT)) is True
    writer.set(base, b"2")
    writer.create(base + "/c")
    assert tap.until_marker(client, base) == [("CHANGED", base)]


def test_removing_a_recursive_watch_with_type_any_stops_it(zk_factory, watcher, base):
    client, tap = watcher
    writer = zk_factory()
    low_level(client, AddWatch(base, PERSISTENT_RECURSIVE))
    low_level(client, RemoveWatches(base, WATCHER_ANY))
    writer.create(base)
    assert tap.until_marker(client, base) == []


def test_removing_watches_that_do_not_exist_is_no_watcher(zk, base):
    zk.create(base)
    with pytest.raises(NoWatcherError):
        low_level(zk, RemoveWatches(base, WATCHER_DATA))
    with pytest.raises(NoWatcherError):
        low_level(zk, RemoveWatches(base, WATCHER_CHILDREN))


def test_remove_watches_removes_one_shot_data_watches_server_side(zk_factory, watcher, base):
    client, tap = watcher
    writer = zk_factory()
    writer.create(base)
    client.get(base, watch=lambda event: None)
    client.get_children(base, watch=lambda event: None)
    low_level(client, RemoveWatches(base, WATCHER_DATA))
    writer.set(base, b"x")  # the data watch is gone
    writer.create(base + "/c")  # the child watch is still there
    assert tap.until_marker(client, base) == [("CHILD", base)]


@pytest.mark.skipif(APACHE_38, reason="ZooKeeper up to 3.8 sends zxid -1 in notifications; 3.9 sends the txn's")
def test_notifications_carry_the_zxid_of_the_triggering_transaction(zk_factory, watcher, base):
    client, tap = watcher
    writer = zk_factory()
    writer.create(base)
    client.get(base, watch=lambda event: None)
    stat = writer.set(base, b"x")
    assert tap.next() == ("CHANGED", base, stat.mzxid)
