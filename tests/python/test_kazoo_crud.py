"""kazoo end-to-end: create modes, Stat bookkeeping, versions, children, transactions and the
error codes kazoo users see (fact sheet §5, §9, §11, §12)."""
import json
import re

import pytest
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    UnimplementedError,
)
from kazoo.protocol.serialization import Create
from kazoo.security import OPEN_ACL_UNSAFE

from test_kazoo_support import (  # noqa: F401  (fixtures)
    TOPOLOGY,
    CreateTTL,
    EventRecorder,
    WAIT_S,
    base,
    create_container,
    create_ttl,
    low_level,
    make_zk_factory,
    shared_server,
    zk,
)

zk_factory = make_zk_factory("shared_server")


# --- create modes ------------------------------------------------------------------------------


def test_persistent_node_round_trips_data_and_starts_with_fresh_stat(zk, base):
    assert zk.create(base, b"hello") == base
    data, stat = zk.get(base)
    assert data == b"hello"
    assert (stat.version, stat.cversion, stat.aversion) == (0, 0, 0)
    assert stat.ephemeralOwner == 0
    assert stat.dataLength == 5
    assert stat.numChildren == 0
    assert stat.czxid == stat.mzxid == stat.pzxid
    assert stat.czxid > 0
    assert stat.ctime == stat.mtime


def test_create_with_include_data_returns_the_same_stat_a_read_returns(zk, base):
    path, stat = zk.create(base, b"abc", include_data=True)
    assert path == base
    assert stat == zk.exists(base)
    assert stat.dataLength == 3


def test_null_data_and_empty_data_stay_distinct(zk, base):
    zk.create(base)
    zk.create(base + "/null", None)
    zk.create(base + "/empty", b"")
    null_data, null_stat = zk.get(base + "/null")
    empty_data, empty_stat = zk.get(base + "/empty")
    assert null_data is None
    assert empty_data == b""
    assert null_stat.dataLength == 0 and empty_stat.dataLength == 0
    zk.set(base + "/empty", None)
    assert zk.get(base + "/empty")[0] is None


def test_ephemeral_node_reports_its_owning_session(zk_factory, base):
    owner = zk_factory()
    other = zk_factory()
    owner.create(base, b"e", ephemeral=True)
    session_id = owner.client_id[0]
    assert owner.exists(base).ephemeralOwner == session_id
    assert other.exists(base).ephemeralOwner == session_id


def test_children_under_an_ephemeral_are_refused(zk, base):
    zk.create(base, ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create(base + "/child")
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create(base + "/seq-", sequence=True)


def test_sequential_suffix_is_ten_digits_from_a_counter_shared_with_plain_children(zk, base):
    zk.create(base)
    zk.create(base + "/a")
    zk.delete(base + "/a")
    # one child was created before: the counter is 1, deletions neither reuse nor advance it
    assert zk.create(base + "/s", sequence=True) == base + "/s0000000001"
    assert zk.create(base + "/s", sequence=True) == base + "/s0000000002"
    zk.create(base + "/b")
    assert zk.create(base + "/x-", sequence=True) == base + "/x-0000000004"
    # 5 creates + 1 delete
    assert zk.exists(base).cversion == 6


def test_sequential_with_trailing_slash_names_the_child_by_number_only(zk, base):
    zk.create(base)
    assert zk.create(base + "/", sequence=True) == base + "/0000000000"
    assert zk.create(base + "/", sequence=True) == base + "/0000000001"


def test_ephemeral_sequential_node_is_numbered_and_owned(zk, base):
    zk.create(base)
    first = zk.create(base + "/lock-", ephemeral=True, sequence=True)
    second = zk.create(base + "/lock-", ephemeral=True, sequence=True)
    assert (first, second) == (base + "/lock-0000000000", base + "/lock-0000000001")
    assert zk.exists(second).ephemeralOwner == zk.client_id[0]


def test_sequential_numbers_are_unique_under_concurrent_creates(zk_factory, base):
    clients = [zk_factory() for _ in range(3)]
    clients[0].create(base)
    results = [c.create_async(base + "/n-", sequence=True) for c in clients for _ in range(20)]
    names = [r.get(timeout=WAIT_S) for r in results]
    assert len(set(names)) == 60
    assert sorted(int(n[-10:]) for n in names) == list(range(60))


def test_container_node_reports_no_owner_and_accepts_children(zk, base):
    path, stat = create_container(zk, base, b"c")
    assert path == base
    assert stat.ephemeralOwner == 0
    assert stat == zk.exists(base)
    zk.create(base + "/child")
    assert zk.get_children(base) == ["child"]


def test_container_is_reaped_after_its_last_child_is_deleted(zk, base):
    create_container(zk, base)
    zk.create(base + "/child")
    gone = EventRecorder()
    zk.exists(base, watch=gone)
    zk.delete(base + "/child")
    # the fixture's server scans containers every second (znode.container.checkIntervalMs=1000)
    events = gone.wait(1, timeout=WAIT_S)
    assert [e.type for e in events] == ["DELETED"]
    assert zk.exists(base) is None


def await_ttl_expiry(zk, path):
    """Waits, through an exists watch, until the reaper has removed the TTL node at path: the
    reaper may take it before the watch is set, if the 500 ms ran out on a slow machine."""
    gone = EventRecorder()
    if zk.exists(path, watch=gone) is not None:
        assert [e.type for e in gone.wait(1, timeout=WAIT_S)] == ["DELETED"]
    assert zk.exists(path) is None


def test_ttl_node_reports_no_owner_and_is_removed_once_expired(zk, base):
    path, stat = create_ttl(zk, base, ttl_ms=500, data=b"t")
    assert path == base
    assert stat.ephemeralOwner == 0
    assert stat.dataLength == 1
    await_ttl_expiry(zk, base)


def test_ttl_node_with_children_is_kept_and_may_have_children(zk, base):
    for _ in range(5):  # the child's create may come after the reaper took the 500 ms node
        create_ttl(zk, base, ttl_ms=500)
        try:
            zk.create(base + "/child")
            break
        except NoNodeError:
            continue
    else:
        pytest.fail("the TTL node was reaped before its child's create five times")
    # a sibling TTL node without children expires; the one with a child must still be there
    create_ttl(zk, base + "-sibling", ttl_ms=500)
    await_ttl_expiry(zk, base + "-sibling")
    assert zk.exists(base) is not None


def test_sequential_ttl_node_gets_a_sequence_suffix(zk, base):
    zk.create(base)
    path, _ = create_ttl(zk, base + "/t-", ttl_ms=60_000, sequential=True)
    assert path == base + "/t-0000000000"


@pytest.mark.parametrize("ttl_ms", [0, -5, 2**40])
def test_ttl_outside_one_ms_to_2_pow_40_minus_1_is_bad_arguments(zk, base, ttl_ms):
    with pytest.raises(BadArgumentsError):
        create_ttl(zk, base, ttl_ms=ttl_ms)
    assert zk.exists(base) is None


def test_ttl_opcode_with_a_non_ttl_mode_is_bad_arguments(zk, base):
    with pytest.raises(BadArgumentsError):
        low_level(zk, CreateTTL(base, b"", list(OPEN_ACL_UNSAFE), 0, 1000))
    assert zk.exists(base) is None


def test_create_flags_outside_known_modes_are_bad_arguments(zk, base):
    with pytest.raises(BadArgumentsError):
        low_level(zk, Create(base, b"", list(OPEN_ACL_UNSAFE), 7))
    assert zk.exists(base) is None


def test_ttl_create_without_extended_types_is_unimplemented(server_factory, zk_factory, base):
    plain = server_factory()  # no -Dzookeeper.extendedTypesEnabled
    client = zk_factory(hosts=plain.hosts)
    with pytest.raises(UnimplementedError):
        create_ttl(client, base, ttl_ms=1000)
    # the server closes the connection after UNIMPLEMENTED; kazoo reconnects the same session
    assert client.exists(base) is None


# --- Stat bookkeeping --------------------------------------------------------------------------


def test_set_data_bumps_version_and_mzxid_but_not_czxid_or_ctime(zk, base):
    _, created = zk.create(base, b"one", include_data=True)
    after = zk.set(base, b"three")
    assert after.version == 1
    assert after.czxid == created.czxid
    assert after.mzxid > created.mzxid
    assert after.ctime == created.ctime
    assert after.mtime >= created.mtime
    assert after.dataLength == 5
    assert after.pzxid == created.pzxid
    again = zk.set(base, b"three")  # identical data still counts as a change
    assert again.version == 2
    assert again.mzxid > after.mzxid
    assert zk.get(base)[1] == again


def test_child_create_and_delete_move_parent_cversion_numchildren_and_pzxid(zk, base):
    _, parent0 = zk.create(base, b"p", include_data=True)
    _, child = zk.create(base + "/c", include_data=True)
    parent1 = zk.exists(base)
    assert (parent1.cversion, parent1.numChildren) == (1, 1)
    assert parent1.pzxid == child.czxid
    assert parent1.mzxid == parent0.mzxid and parent1.version == 0

    zk.set(base + "/c", b"changed")
    assert zk.exists(base).pzxid == parent1.pzxid  # child data changes leave the parent alone

    zk.delete(base + "/c")
    parent2 = zk.exists(base)
    assert (parent2.cversion, parent2.numChildren) == (2, 0)
    assert parent2.pzxid > parent1.pzxid
    assert parent2.mzxid == parent0.mzxid


def test_zxids_grow_with_every_write_in_order(zk, base):
    first = zk.create(base, include_data=True)[1]
    second = zk.create(base + "-2", include_data=True)[1]
    third = zk.set(base, b"x")
    assert first.czxid < second.czxid < third.mzxid


def test_builtin_zookeeper_nodes_exist_with_reference_stats(zk, shared_server):
    assert sorted(zk.get_children("/zookeeper")) == ["config", "quota"]
    data, stat = zk.get("/zookeeper/config")
    if TOPOLOGY == "standalone":
        assert data == b""  # standalone: no dynamic config
    else:
        # An ensemble publishes its membership, as zoo.cfg lists it, then the config version
        # (Apache 3.8: "server.1=127.0.0.1:Q:E:participant\n...\nversion=0", stat version -1).
        layout = json.loads((shared_server.directory / "ensemble.json").read_text())
        want = [f"server.{i}=127.0.0.1:{s['quorum_port']}:{s['election_port']}:{s['role']}"
                for i, s in sorted(layout["servers"].items(), key=lambda kv: int(kv[0]))]
        lines = data.decode().splitlines()
        assert lines[:-1] == want and re.fullmatch(r"version=[0-9a-f]+", lines[-1]), data
    zk_stat = zk.exists("/zookeeper")
    assert (zk_stat.czxid, zk_stat.version, zk_stat.numChildren) == (0, 0, 2)
    assert zk_stat.cversion == -2  # built-in children are not counted as created (§11.4)


# --- versions ----------------------------------------------------------------------------------


def test_set_with_the_current_version_succeeds_and_a_stale_one_is_refused(zk, base):
    zk.create(base, b"v0")
    assert zk.set(base, b"v1", version=0).version == 1
    with pytest.raises(BadVersionError):
        zk.set(base, b"stale", version=0)
    assert zk.get(base)[0] == b"v1"
    assert zk.set(base, b"any", version=-1).version == 2


def test_delete_with_a_wrong_version_keeps_the_node(zk, base):
    zk.create(base)
    zk.set(base, b"x")
    with pytest.raises(BadVersionError):
        zk.delete(base, version=0)
    assert zk.exists(base) is not None
    zk.delete(base, version=1)
    assert zk.exists(base) is None


# --- reads, children, paths --------------------------------------------------------------------


def test_exists_returns_none_for_a_missing_node_and_a_stat_otherwise(zk, base):
    assert zk.exists(base) is None
    zk.create(base, b"12")
    assert zk.exists(base).dataLength == 2


def test_get_children_lists_bare_names_and_the_parent_stat(zk, base):
    zk.create(base, b"parent")
    for name in ("x", "y", "z"):
        zk.create(f"{base}/{name}")
    zk.create(f"{base}/x/grandchild")
    children, stat = zk.get_children(base, include_data=True)
    assert sorted(children) == ["x", "y", "z"]
    assert stat == zk.exists(base)
    assert stat.numChildren == 3 and stat.dataLength == 6
    assert zk.get_children(base + "/y") == []


def test_ensure_path_creates_every_missing_ancestor_and_is_idempotent(zk, base):
    zk.ensure_path(base + "/a/b/c")
    assert zk.exists(base + "/a/b/c") is not None
    zk.ensure_path(base + "/a/b/c")
    assert zk.get_children(base + "/a") == ["b"]


def test_create_with_makepath_builds_parents(zk, base):
    assert zk.create(base + "/p/q/leaf", b"d", makepath=True) == base + "/p/q/leaf"
    assert zk.get(base + "/p/q/leaf")[0] == b"d"


def test_recursive_delete_removes_a_whole_subtree(zk, base):
    for path in ("/a/b", "/a/c", "/d"):
        zk.ensure_path(base + path)
    zk.delete(base, recursive=True)
    assert zk.exists(base) is None


def test_unicode_node_names_within_the_allowed_range_work(zk, base):
    path = base + "/grüße-日本"
    zk.create(path, makepath=True)
    assert zk.get_children(base) == ["grüße-日本"]


# --- errors ------------------------------------------------------------------------------------


def test_operations_on_missing_nodes_raise_no_node(zk, base):
    with pytest.raises(NoNodeError):
        zk.get(base)
    with pytest.raises(NoNodeError):
        zk.set(base, b"x")
    with pytest.raises(NoNodeError):
        zk.delete(base)
    with pytest.raises(NoNodeError):
        zk.get_children(base)
    with pytest.raises(NoNodeError):
        zk.create(base + "/orphan")


def test_creating_an_existing_node_raises_node_exists(zk, base):
    zk.create(base, b"first")
    with pytest.raises(NodeExistsError):
        zk.create(base, b"second")
    assert zk.get(base)[0] == b"first"


def test_deleting_a_node_with_children_raises_not_empty(zk, base):
    zk.create(base + "/child", makepath=True)
    with pytest.raises(NotEmptyError):
        zk.delete(base)
    assert zk.exists(base + "/child") is not None


@pytest.mark.parametrize("name", ["bad\u0001char", "bad\u007fchar", "emoji\U0001F600", "nul\u0000byte"])
def test_paths_with_forbidden_characters_are_bad_arguments(zk, base, name):
    zk.create(base)
    with pytest.raises(BadArgumentsError):
        zk.create(f"{base}/{name}")
    assert zk.get_children(base) == []


@pytest.mark.parametrize("path", ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"])
def test_builtin_nodes_cannot_be_deleted(zk, path):
    with pytest.raises(BadArgumentsError):
        zk.delete(path)
    assert zk.exists(path) is not None


# --- transactions (multi) ----------------------------------------------------------------------


def test_transaction_applies_every_operation_and_returns_per_op_results(zk, base):
    zk.create(base, b"v0")
    zk.create(base + "/gone")
    tx = zk.transaction()
    tx.check(base, 0)
    tx.create(base + "/new", b"n")
    tx.set_data(base, b"v1", version=0)
    tx.delete(base + "/gone")
    tx.create(base + "/seq-", sequence=True)
    results = tx.commit()
    assert results[0] is True
    assert results[1] == base + "/new"
    assert results[2].version == 1
    assert results[3] is True
    assert results[4] == base + "/seq-0000000002"
    assert zk.get(base)[0] == b"v1"
    assert sorted(zk.get_children(base)) == ["new", "seq-0000000002"]


def test_transaction_ops_share_one_zxid_and_see_earlier_ops(zk, base):
    zk.create(base)
    tx = zk.transaction()
    tx.create(base + "/a", b"1")
    tx.set_data(base + "/a", b"2", version=0)  # works on the node created by the previous op
    tx.create(base + "/b")
    results = tx.commit()
    assert results[1].version == 1
    a = zk.exists(base + "/a")
    b = zk.exists(base + "/b")
    parent = zk.exists(base)
    assert a.czxid == a.mzxid == b.czxid == parent.pzxid
    assert parent.cversion == 2


def test_failed_transaction_reports_rolled_back_failing_and_skipped_ops(zk, base):
    zk.create(base, b"keep")
    before = zk.exists(base)
    tx = zk.transaction()
    tx.create(base + "/would-be-created")
    tx.check(base, 7)
    tx.set_data(base, b"never")
    results = tx.commit()
    assert [type(r) for r in results] == [RolledBackError, BadVersionError, RuntimeInconsistency]
    assert zk.exists(base + "/would-be-created") is None
    after = zk.exists(base)
    assert zk.get(base)[0] == b"keep"
    assert (after.version, after.cversion, after.mzxid) == (before.version, before.cversion, before.mzxid)


def test_failed_transaction_with_missing_node_reports_no_node_for_that_op(zk, base):
    zk.create(base)
    tx = zk.transaction()
    tx.create(base + "/a")
    tx.delete(base + "/missing")
    results = tx.commit()
    assert [type(r) for r in results] == [RolledBackError, NoNodeError]
    assert zk.get_children(base) == []


def test_transaction_check_of_a_missing_node_fails_the_whole_transaction(zk, base):
    tx = zk.transaction()
    tx.check(base, -1)
    tx.create(base)
    results = tx.commit()
    assert [type(r) for r in results] == [NoNodeError, RuntimeInconsistency]
    assert zk.exists(base) is None
