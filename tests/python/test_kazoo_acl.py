"""kazoo end-to-end: ACLs, digest auth, super digest, redaction (fact sheet §5.6, §5.7, §5.14, §7, §8.7)."""
import pytest
from kazoo.exceptions import BadVersionError, InvalidACLError, NoAuthError
from kazoo.protocol.connection import _CONNECTION_DROP
from kazoo.security import (
    ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    Id,
    Permissions,
    make_acl,
    make_digest_acl,
    make_digest_acl_credential,
)

from test_kazoo_support import (  # noqa: F401  (fixtures)
    EventRecorder,
    WAIT_S,
    base,
    make_zk_factory,
    shared_server,
    skip_on_apache_38,
    state_recorder,
    zk,
)

zk_factory = make_zk_factory("shared_server")

ALICE = "alice:secret"
ALICE_ALL = make_digest_acl("alice", "secret", all=True)
WORLD_READ = make_acl("world", "anyone", read=True)


def authed(zk_factory, credential=ALICE):
    client = zk_factory()
    client.add_auth("digest", credential)
    return client


def fires_nothing_before_marker(client, recorder, base):
    """Events on one connection arrive in zxid order: once a later marker event has been delivered,
    any event the earlier change could have caused would have been delivered before it."""
    marker = EventRecorder()
    client.create(base + "-marker")
    client.exists(base + "-marker", watch=marker)
    client.set(base + "-marker", b"tick")
    assert [e.type for e in marker.wait(1)] == ["CHANGED"]
    return recorder.events == []


def test_nodes_default_to_open_acl(zk, base):
    zk.create(base)
    acls, stat = zk.get_acls(base)
    assert acls == [ACL(Permissions.ALL, Id("world", "anyone"))]
    assert stat.aversion == 0


def test_set_acls_bumps_only_aversion_and_checks_it(zk, base):
    zk.create(base, b"d")
    before = zk.exists(base)
    local_all = make_acl("ip", "127.0.0.1", all=True)
    stat = zk.set_acls(base, [WORLD_READ, local_all], version=0)
    assert stat.aversion == 1
    assert (stat.version, stat.mzxid, stat.cversion) == (before.version, before.mzxid, before.cversion)
    acls, acl_stat = zk.get_acls(base)
    assert sorted(acls, key=repr) == sorted([WORLD_READ, local_all], key=repr)
    assert acl_stat.aversion == 1
    with pytest.raises(BadVersionError):
        zk.set_acls(base, list(OPEN_ACL_UNSAFE), version=0)


def test_set_acls_fires_no_watch(zk, base):
    zk.create(base)
    recorder = EventRecorder()
    zk.get(base, watch=recorder)
    zk.set_acls(base, list(OPEN_ACL_UNSAFE))
    assert fires_nothing_before_marker(zk, recorder, base)


def test_digest_acl_denies_other_identities_and_admits_its_owner(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, b"private", acl=[ALICE_ALL])
    anonymous = zk_factory()
    wrong_password = authed(zk_factory, "alice:wrong")
    for client in (anonymous, wrong_password):
        with pytest.raises(NoAuthError):
            client.get(base)
        with pytest.raises(NoAuthError):
            client.set(base, b"x")
        with pytest.raises(NoAuthError):
            client.get_children(base)
        with pytest.raises(NoAuthError):
            client.create(base + "/child")
        with pytest.raises(NoAuthError):
            client.set_acls(base, list(OPEN_ACL_UNSAFE))
    assert owner.get(base)[0] == b"private"
    second_owner_connection = authed(zk_factory)
    assert second_owner_connection.set(base, b"changed").version == 1


def test_each_permission_bit_guards_its_own_operations(zk_factory, base):
    admin = authed(zk_factory)
    admin.create(base)
    other = zk_factory()
    # world may create children but not delete them, and may only read the parent
    admin.set_acls(base, [make_acl("world", "anyone", read=True, create=True), ALICE_ALL])
    other.create(base + "/c", acl=list(OPEN_ACL_UNSAFE))
    with pytest.raises(NoAuthError):
        other.delete(base + "/c")  # DELETE is checked on the parent
    with pytest.raises(NoAuthError):
        other.set(base, b"x")  # WRITE
    admin.set_acls(base, [make_acl("world", "anyone", delete=True), ALICE_ALL])
    with pytest.raises(NoAuthError):
        other.create(base + "/d")  # CREATE
    with pytest.raises(NoAuthError):
        other.get(base)  # READ
    other.delete(base + "/c")
    assert admin.get_children(base) == []


def test_auth_scheme_expands_to_the_callers_digest_identity(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, acl=[make_acl("auth", "", all=True)])
    acls, _ = owner.get_acls(base)
    assert acls == [ACL(Permissions.ALL, Id("digest", make_digest_acl_credential("alice", "secret")))]
    with pytest.raises(NoAuthError):
        zk_factory().get(base)


def test_auth_scheme_without_authenticated_identity_is_invalid_acl(zk, base):
    with pytest.raises(InvalidACLError):
        zk.create(base, acl=[make_acl("auth", "", all=True)])
    assert zk.exists(base) is None


@pytest.mark.parametrize(
    "acl",
    [
        [],
        [ACL(Permissions.ALL, Id("digest", "no-colon-here"))],
        [ACL(Permissions.ALL, Id("ip", "not-an-address"))],
        [ACL(Permissions.ALL, Id("world", "someone"))],
        [ACL(Permissions.ALL, Id("nosuchscheme", "x"))],
    ],
    ids=["empty", "digest-without-colon", "bad-ip", "world-not-anyone", "unknown-scheme"],
)
def test_malformed_acls_are_invalid_acl(zk, base, acl):
    zk.create(base)
    with pytest.raises(InvalidACLError):
        zk.set_acls(base, acl)
    if acl:
        with pytest.raises(InvalidACLError):
            zk.create(base + "/child", acl=acl)
    assert zk.get_acls(base)[0] == list(OPEN_ACL_UNSAFE)


def test_ip_acl_matches_the_connection_address(zk, base):
    zk.create(base)
    zk.create(base + "/mine", b"m", acl=[make_acl("ip", "127.0.0.1", all=True)])
    zk.create(base + "/subnet", b"s", acl=[make_acl("ip", "127.0.0.0/8", read=True)])
    zk.create(base + "/elsewhere", b"e", acl=[make_acl("ip", "10.1.2.3", all=True)])
    assert zk.get(base + "/mine")[0] == b"m"
    assert zk.get(base + "/subnet")[0] == b"s"
    with pytest.raises(NoAuthError):
        zk.get(base + "/elsewhere")


def test_get_acls_redacts_digests_for_callers_without_admin(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, acl=[WORLD_READ, ALICE_ALL])
    hashed = make_digest_acl_credential("alice", "secret")

    reader_acls, _ = zk_factory().get_acls(base)
    digest_ids = [a.id.id for a in reader_acls if a.id.scheme == "digest"]
    assert digest_ids == ["alice:x"]
    assert WORLD_READ in reader_acls

    owner_acls, _ = owner.get_acls(base)
    assert [a.id.id for a in owner_acls if a.id.scheme == "digest"] == [hashed]


def test_get_acls_needs_read_or_admin(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, acl=[ALICE_ALL])
    with pytest.raises(NoAuthError):
        zk_factory().get_acls(base)
    owner.set_acls(base, [make_acl("world", "anyone", admin=True), ALICE_ALL])
    acls, _ = zk_factory().get_acls(base)
    assert len(acls) == 2


def test_super_digest_bypasses_every_acl(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, b"locked", acl=[ALICE_ALL])
    owner.create(base + "/child", acl=[make_acl("world", "anyone", read=True)])
    root = authed(zk_factory, "super:test")
    assert root.get(base)[0] == b"locked"
    assert root.set(base, b"overridden").version == 1
    assert [a.id.id for a in root.get_acls(base)[0]] == [make_digest_acl_credential("alice", "secret")]
    root.delete(base, recursive=True)
    assert owner.exists(base) is None


def test_wrong_super_password_gets_no_privilege(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, acl=[ALICE_ALL])
    with pytest.raises(NoAuthError):
        authed(zk_factory, "super:guess").get(base)


def test_digest_auth_is_resent_by_kazoo_after_a_reconnect(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, b"private", acl=[ALICE_ALL])
    states = state_recorder(owner)
    session_id = owner.client_id[0]
    owner._call(_CONNECTION_DROP, owner.handler.async_result())
    states.wait_until(lambda ev: ev[-2:] == ["SUSPENDED", "CONNECTED"])
    assert owner.client_id[0] == session_id
    assert owner.get(base)[0] == b"private"


@skip_on_apache_38
def test_exists_needs_read_permission_on_an_existing_node(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, acl=[ALICE_ALL])
    stranger = zk_factory()
    with pytest.raises(NoAuthError):
        stranger.exists(base)
    assert stranger.exists(base + "-missing") is None
    assert owner.exists(base) is not None


@skip_on_apache_38
def test_watch_events_are_withheld_from_connections_without_read(zk_factory, base):
    owner = authed(zk_factory)
    stranger = zk_factory()
    recorder = EventRecorder()
    stranger.exists(base, watch=recorder)  # watch on a missing node
    owner.create(base, acl=[ALICE_ALL])  # the stranger may not read the created node
    assert fires_nothing_before_marker(stranger, recorder, base)


def test_read_only_world_acl_allows_reads_only(zk_factory, base):
    owner = authed(zk_factory)
    owner.create(base, b"r", acl=list(READ_ACL_UNSAFE))
    reader = zk_factory()
    assert reader.get(base)[0] == b"r"
    with pytest.raises(NoAuthError):
        reader.set(base, b"w")
    with pytest.raises(NoAuthError):
        owner.set(base, b"w")  # the creator has no special rights either
