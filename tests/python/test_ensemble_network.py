"""Members cut off by a network that loses their packets silently (a cut cable or a failed
switch, not a refused connection).

Each server runs in a network namespace of its own (tests/ensemble, network="namespaces"), and a
cut takes one off their bridge. The fault proxy of test_ensemble_faults.py cannot show this: it
resets the connections it cuts, and its own host acknowledges whatever a server sends it. Here the
connections stay open with their data unacknowledged, and TCP spaces its retransmissions further
and further apart: a member that waits for them after the network comes back rejoins 20 s or more
later (26 s after a 30 s cut, in the forty-fifth session's runs). A cut shorter than that bound
but longer than syncLimit (the protocol gave up, the connections did not) must not wait for
TCP's doubling resends either. A cut may also go one way only:
a member that hears nothing from its peers, or whose peers hear nothing from it, while its
clients still reach it. A leader cut either way must be replaced, and serve again as a member
once mended. A cut of one link only (between the leader and a follower, or between two
followers) must change no leader. Under a kazoo load, the leader or a follower cut off for a few
seconds at a time, both ways, one way, or from one peer, must leave a history that porcupine
finds linearizable, in session order, with no acknowledged write missing (as in
test_ensemble_faults.py).

Needs root (namespaces, a bridge), nftables' nft (the one-way cuts) and Go (the checker);
ZK_KIND=apache runs it against Debian's ZooKeeper. ZK_ENSEMBLE_SECONDS sets the workload length
per scenario.
"""
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ensemble"))
from ensemble import Ensemble, NetworkUnavailable  # noqa: E402
import workload  # noqa: E402

KIND = os.environ.get("ZK_KIND", "zoolog")
SECONDS = float(os.environ.get("ZK_ENSEMBLE_SECONDS", "15"))
CUT_S = 30
# A bound on a liveness wait, not a measurement: the quorum's election and synchronization take
# well under a second here, and a member left to TCP's retransmissions takes 20 s or more.
REJOIN_S = 10

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.environ.get("ZK_ENSEMBLE", "1") == "0",
                       reason="ZK_ENSEMBLE=0: this server build cannot run a replicated ensemble"),
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                       reason="network namespaces need root and iproute2's ip"),
]


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    ens = Ensemble.create(tmp_path_factory.mktemp("ensemble"), 3, network="namespaces")
    try:
        try:
            ens.up(timeout_s=90)
        except NetworkUnavailable as e:
            pytest.skip(f"this machine builds no network namespaces: {e}")
        yield ens
    finally:
        ens.destroy()


def client_of(ens, sid):
    client = KazooClient(hosts=ens.hosts(sid), timeout=10)
    client.start(timeout=30)
    return client


@pytest.mark.skipif(KIND == "apache", reason="ZooKeeper's members wait for TCP's retransmissions: "
                    "the follower rejoined 27 s after a 30 s cut (forty-fifth session)")
def test_a_follower_cut_off_silently_serves_again_soon_after_the_network_returns(ensemble):
    ens = ensemble
    workload.recover(ens)
    cut = ens.followers()[0]
    writer = client_of(ens, ens.leader())
    try:
        ens.cut_network(cut)
        time.sleep(CUT_S)
        writer.create("/written-during-the-cut", b"x")
        ens.mend_network(cut)
        mended = time.monotonic()
        ens.wait_quorum(timeout_s=REJOIN_S, servers=ens.ids)
        print(f"server {cut} followed again {time.monotonic() - mended:.2f} s after the network "
              f"returned")
        reader = client_of(ens, cut)
        try:
            reader.sync("/")
            assert reader.get("/written-during-the-cut")[0] == b"x"
        finally:
            reader.stop()
    finally:
        writer.stop()


def another_leader(ens, former):
    """The server that leads in place of server former, within REJOIN_S."""
    deadline = time.monotonic() + REJOIN_S
    while time.monotonic() < deadline:
        leader = ens.leader()
        if leader not in (None, former):
            return leader
        time.sleep(0.1)
    raise AssertionError(f"no leader but server {former} within {REJOIN_S} s: {ens.modes()}")


# With ZooKeeper's default tickTime (2 s): past syncLimit (5 ticks), short of initLimit (10).
BETWEEN_LIMITS_CUT_S = 15
# A bound on a liveness wait: TCP resends at least every second now (0.6 s measured), where its
# doubling waits left 5-6 s.
RESUMED_S = 3


def test_a_follower_cut_for_less_than_init_limit_follows_again_soon_after_the_network_returns(
        tmp_path):
    ens = Ensemble.create(tmp_path / "ensemble", 3, network="namespaces",
                          settings={"tickTime": "2000"})
    try:
        try:
            ens.up(timeout_s=90)
        except NetworkUnavailable as e:
            pytest.skip(f"this machine builds no network namespaces: {e}")
        cut = ens.followers()[0]
        ens.cut_network(cut)
        time.sleep(BETWEEN_LIMITS_CUT_S)
        ens.mend_network(cut)
        mended = time.monotonic()
        ens.wait_quorum(timeout_s=RESUMED_S, servers=ens.ids)
        print(f"server {cut} followed again {time.monotonic() - mended:.2f} s after a "
              f"{BETWEEN_LIMITS_CUT_S} s cut")
    finally:
        ens.destroy()


NEEDS_NFT = pytest.mark.skipif(shutil.which("nft") is None,
                               reason="one-way cuts need nftables' nft (scripts/test installs it)")


@NEEDS_NFT
@pytest.mark.parametrize("direction", ["in", "out"])
def test_a_leader_cut_one_way_from_its_peers_is_replaced_and_serves_again_once_mended(
        ensemble, direction):
    ens = ensemble
    workload.recover(ens)
    cut = ens.leader()
    others = [i for i in ens.ids if i != cut]
    writer = KazooClient(hosts=",".join(ens.hosts(i) for i in others), timeout=10)
    writer.start(timeout=30)
    try:
        ens.cut_network(cut, direction)
        started = time.monotonic()
        leader = another_leader(ens, cut)
        ens.wait_quorum(timeout_s=REJOIN_S, servers=others)
        print(f"server {leader} led in place of server {cut} (cut {direction}) "
              f"{time.monotonic() - started:.2f} s after the cut")
        writer.retry(writer.create, f"/written-while-{cut}-was-cut-{direction}", b"x")
        ens.mend_network(cut)
        mended = time.monotonic()
        ens.wait_quorum(timeout_s=REJOIN_S, servers=ens.ids)
        print(f"server {cut} served again {time.monotonic() - mended:.2f} s after the mend")
        reader = client_of(ens, cut)
        try:
            reader.sync("/")
            assert reader.get(f"/written-while-{cut}-was-cut-{direction}")[0] == b"x"
        finally:
            reader.stop()
    finally:
        writer.stop()


@NEEDS_NFT
@pytest.mark.parametrize("ends", ["leader-follower", "follower-follower"])
def test_a_link_cut_between_two_members_changes_no_leader(ensemble, ends):
    """The leader keeps a quorum through its other follower, and a follower cut from it alone
    finds it named by that follower: no one must start an election that unseats it."""
    ens = ensemble
    leader = workload.recover(ens)
    followers = ens.followers()
    one, other = (leader, followers[0]) if ends == "leader-follower" else followers
    writer = client_of(ens, leader)
    parent = writer.create(f"/link-cut-{ends}-", sequence=True)
    try:
        ens.cut_network(one, "both", [other])
        # Past the leader's and the followers' timeouts on each other (syncLimit, 2.5 s).
        deadline = time.monotonic() + 3 * 2.5
        written = 0
        while time.monotonic() < deadline:
            writer.create(f"{parent}/write-", b"x", sequence=True)
            written += 1
            assert ens.leader() == leader, f"the leader changed: {ens.modes()}"
            time.sleep(0.25)
        ens.mend_network(one)
        ens.wait_quorum(timeout_s=REJOIN_S, servers=ens.ids)
        assert ens.leader() == leader
        for sid in (one, other):
            reader = client_of(ens, sid)
            try:
                reader.sync("/")
                assert len(reader.get_children(parent)) == written, f"server {sid}"
            finally:
                reader.stop()
    finally:
        writer.stop()


NEEDS_GO = pytest.mark.skipif(shutil.which("go") is None, reason="the history checker needs Go")


@NEEDS_GO
@pytest.mark.parametrize("nemesis", [
    "cut-leader",
    "cut-follower",
    pytest.param("one-way-leader", marks=NEEDS_NFT),
    pytest.param("one-way-follower", marks=NEEDS_NFT),
    pytest.param("link-leader", marks=NEEDS_NFT),
])
def test_cuts_under_load(ensemble, tmp_path, nemesis):
    workload.run_checked(ensemble, tmp_path, nemesis, SECONDS)
