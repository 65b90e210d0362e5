"""The operator surface of ensemble members: the AdminServer's voting_view lists the voting
members of the configuration, zabstate says who the member is and where it is in the protocol,
leader names the leader, observers lists the leader's synced observers; the leader's mntr counts
its learners and its proposals' sizes, which srvr prints too. One ensemble of 3 participants and 1 observer, each with its own AdminServer, of
kind $ZK_KIND (zoolog, or Apache ZooKeeper: the same checks hold for both). Apache needs Jetty
on its class path for its AdminServer; Debian's 3.8 has it in /usr/share/java:
  APACHE_ZK_CLASSPATH=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:<jetty9-server, -servlet,
  -http, -io, -util, -security, -util-ajax, servlet-api, jackson-databind, -core, -annotations>"""
import http.client
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ensemble"))
from ensemble import Ensemble, four_letter, free_ports, mntr  # noqa: E402

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.environ.get("ZK_ENSEMBLE", "1") == "0",
                       reason="ZK_ENSEMBLE=0: this server build cannot run a replicated ensemble"),
]

OBSERVER = 4


@pytest.fixture(scope="module")
def ens():
    root = tempfile.mkdtemp(prefix="zoolog-operator-ensemble-")
    # Apache's launcher turns its AdminServer off on the command line; a later -D turns it on.
    ensemble = Ensemble.create(root, 3, observers=1,
                               settings={"-Dzookeeper.admin.enableServer": "true"})
    # Every member gets an AdminServer of its own (the shared settings turn it off).
    admin_ports = dict(zip(ensemble.ids, free_ports(len(ensemble.ids))))
    for sid, port in admin_ports.items():
        config = Path(ensemble.servers[sid]["dir"]) / "zoo.cfg"
        with open(config, "a") as out:
            out.write(f"admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort={port}\n")
    ensemble.admin_ports = admin_ports
    try:
        ensemble.up(timeout_s=90)
        yield ensemble
    finally:
        ensemble.destroy()
        shutil.rmtree(root, ignore_errors=True)


def command(port, name):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", f"/commands/{name}")
        response = connection.getresponse()
        body = response.read().decode()
        assert response.status == 200, body
        return json.loads(body)
    finally:
        connection.close()


def test_voting_view_lists_the_voting_members(ens):
    for sid in ens.ids:
        # A member knows its own client address; the server lines name no others.
        expected = {
            str(member): {
                "server_addresses": [f"127.0.0.1:{ens.servers[member]['quorum_port']}"],
                "election_addresses": [f"127.0.0.1:{ens.servers[member]['election_port']}"],
                "client_address": f"127.0.0.1:{ens.client_port(member)}" if member == sid else "",
                "learner_type": "participant",
            }
            for member in ens.participants
        }
        answer = command(ens.admin_ports[sid], "voting_view")
        assert answer["error"] is None, answer
        assert answer["current_config"] == expected, (sid, answer)


def multiple_addresses(port):
    """ZooKeeper's JSON for one of a member's addresses (its MultipleAddresses, as Jackson
    renders every getter)."""
    address = f"127.0.0.1:{port}"
    return {"empty": False, "wildcard_addresses": [f"0.0.0.0:{port}"], "all_ports": [port],
            "all_host_strings": ["127.0.0.1"], "all_reachable_addresses_or_all": [address],
            "reachable_or_one": address, "all_addresses": [address],
            "all_reachable_addresses": [address], "one": address, "reachable_address": address}


def test_zabstate_names_the_member_and_its_phase(ens):
    leader = ens.wait_quorum()
    # A write through the leader, applied there before it is acknowledged: a zxid of this epoch.
    client = KazooClient(hosts=ens.hosts(leader), timeout=10)
    client.start()
    try:
        written_zxid = client.create("/zabstate", b"", ephemeral=True) and client.exists("/zabstate").czxid
    finally:
        client.stop()
        client.close()
    assert command(ens.admin_ports[leader], "zabstate")["zab_epoch"] == written_zxid >> 32
    for sid in ens.ids:
        state = command(ens.admin_ports[sid], "zabstate")
        assert state["error"] is None, state
        assert state["myid"] == sid
        assert state["is_leader"] == (sid == leader)
        assert state["voting"] == (sid != OBSERVER)
        assert state["zabstate"] == "broadcast"
        assert state["quorum_address"] == multiple_addresses(ens.servers[sid]["quorum_port"])
        assert state["election_address"] == multiple_addresses(ens.servers[sid]["election_port"])
        assert state["client_address"] == f"127.0.0.1:{ens.client_port(sid)}"
        last_zxid = int(state["last_zxid"], 16)
        assert (state["zab_epoch"], state["zab_counter"]) == (last_zxid >> 32, last_zxid & 0xFFFFFFFF)
        assert state["zab_epoch"] <= written_zxid >> 32


def test_leader_names_the_leader_everywhere(ens):
    leader = ens.wait_quorum()
    for sid in ens.ids:
        answer = command(ens.admin_ports[sid], "leader")
        assert answer["error"] is None, answer
        assert answer["is_leader"] == (sid == leader)
        assert answer["leader_id"] == leader
        assert answer["leader_ip"] == "127.0.0.1"


@pytest.mark.skipif(os.environ.get("ZK_KIND", "zoolog") != "zoolog",
                    reason="zoolog's metric names (Apache's /metrics is a separate provider)")
def test_metrics_name_each_members_role_and_the_quorum(ens):
    from prometheus_client.parser import text_string_to_metric_families

    leader = ens.wait_quorum()
    for sid in ens.ids:
        connection = http.client.HTTPConnection("127.0.0.1", ens.admin_ports[sid], timeout=10)
        try:
            connection.request("GET", "/metrics")
            body = connection.getresponse().read().decode()
        finally:
            connection.close()
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(body) for s in family.samples}
        role = "leader" if sid == leader else "observer" if sid == OBSERVER else "follower"
        assert samples[("zoolog_server_role", (("role", role),))] == 1, (sid, role)
        assert samples[("zoolog_quorum_members", ())] == 3
        assert samples[("zoolog_quorum_up", ())] == 1
        # ZooKeeper's names for the same.
        assert samples[("quorum_size", ())] == 3
        # (The parser names a counter's sample with _total.)
        assert samples[("looking_count_total", ())] >= 1
        assert samples[("election_time_count", ())] == (0 if sid == OBSERVER else 1), sid
        assert samples[("election_time_sum", ())] >= 0
        assert (("leader_uptime", ()) in samples) == (sid == leader)


# The mntr keys only a leader has (LeaderZooKeeperServer's gauges); zoolog leaves out
# pending_syncs (its syncs are log entries like writes), so the tests do not ask for it.
LEADER_ONLY_KEYS = {"zk_learners", "zk_synced_followers", "zk_synced_non_voting_followers",
                    "zk_synced_observers", "zk_pending_syncs", "zk_last_proposal_size",
                    "zk_max_proposal_size", "zk_min_proposal_size"}
LARGE_DATA_BYTES = 4000


def eventually(probe, done, what, wait_s=30.0):
    """probe() until done(answer) holds; the leader learns of its learners' progress from
    their messages, after the client's write has been answered."""
    deadline = time.monotonic() + wait_s
    answer = probe()
    while not done(answer):
        assert time.monotonic() < deadline, f"{what} never held; last answer: {answer}"
        time.sleep(0.1)
        answer = probe()
    return answer


def all_learners_synced(values):
    return values.get("zk_synced_followers") == "2" and values.get("zk_synced_observers") == "1"


def test_the_leaders_mntr_counts_its_learners_and_proposal_sizes(ens):
    leader = ens.wait_quorum()
    port = ens.client_port(leader)
    client = KazooClient(hosts=ens.hosts(leader), timeout=10)
    client.start()
    try:
        client.create("/proposal-sizes", b"x" * LARGE_DATA_BYTES)
        client.set("/proposal-sizes", b"")
        values = eventually(lambda: mntr(port), all_learners_synced, "2 followers and 1 observer synced")
    finally:
        client.stop()
        client.close()
    assert values["zk_server_state"] == "leader"
    assert values["zk_learners"] == "3"
    assert values["zk_synced_non_voting_followers"] == "0"
    last, smallest, largest = (int(values[f"zk_{k}_proposal_size"]) for k in ("last", "min", "max"))
    # The large create is the largest proposal; the emptying set, the last, is smaller.
    assert 0 < smallest <= last < LARGE_DATA_BYTES < largest, values
    # The AdminServer's monitor gives the same gauges.
    monitor = command(ens.admin_ports[leader], "monitor")
    for key in ("learners", "synced_followers", "synced_non_voting_followers", "synced_observers"):
        assert str(monitor[key]) == values[f"zk_{key}"], (key, monitor)
    assert monitor["max_proposal_size"] == largest


def test_the_leaders_srvr_prints_its_proposal_sizes(ens):
    leader = ens.wait_quorum()
    values = mntr(ens.client_port(leader))
    for word in ("srvr", "stat"):
        lines = four_letter(ens.client_port(leader), word).splitlines()
        sizes = [line for line in lines if line.startswith("Proposal sizes last/min/max: ")]
        assert len(sizes) == 1, lines
        last, smallest, largest = (int(size) for size in sizes[0].split(": ")[1].split("/"))
        assert 0 < smallest <= last and largest >= int(values["zk_max_proposal_size"]) > 0, sizes
    for sid in ens.ids:
        if sid != leader:
            assert "Proposal sizes" not in four_letter(ens.client_port(sid), "srvr")


def test_only_the_leader_has_the_learner_gauges(ens):
    leader = ens.wait_quorum()
    for sid in ens.ids:
        keys = set(mntr(ens.client_port(sid)))
        assert "zk_server_state" in keys, (sid, keys)
        if sid == leader:
            assert LEADER_ONLY_KEYS - {"zk_pending_syncs"} <= keys, keys
        else:
            assert not keys & LEADER_ONLY_KEYS, (sid, keys & LEADER_ONLY_KEYS)
            monitor = command(ens.admin_ports[sid], "monitor")
            assert not {f"zk_{key}" for key in monitor} & LEADER_ONLY_KEYS, (sid, monitor)


def test_observers_lists_the_leaders_synced_observer(ens):
    leader = ens.wait_quorum()
    client = KazooClient(hosts=ens.hosts(leader), timeout=10)
    client.start()
    try:
        written_zxid = client.create("/observed", b"") and client.exists("/observed").czxid
    finally:
        client.stop()
        client.close()
    # The observer was sent the write (and whatever came after it).
    answer = eventually(
        lambda: command(ens.admin_ports[leader], "obsr"),
        lambda a: a["synced_observers"] == 1 and a["observers"][0]["last_zxid"] >= written_zxid,
        "the observer synced and sent the write")
    assert answer["error"] is None, answer
    [observer] = answer["observers"]
    assert set(observer) == {"remote_socket_address", "sid", "established", "queued_packets",
                             "queued_packets_size", "packets_received", "packets_sent",
                             "requests", "last_zxid"}, observer
    assert observer["sid"] == OBSERVER
    host, port = observer["remote_socket_address"].rsplit(":", 1)
    assert host == "/127.0.0.1" and 0 < int(port) < 65536, observer
    assert observer["established"] <= time.time() * 1000
    assert observer["packets_received"] > 0 and observer["packets_sent"] > 0, observer
    assert observer["queued_packets"] >= 0, observer
    # Apache's can be below zero: its NEWLEADER and UPTODATE packets are queued without being
    # counted in, and counted out when sent.
    assert isinstance(observer["queued_packets_size"], int), observer
    for sid in ens.ids:
        if sid != leader:
            assert command(ens.admin_ports[sid], "observers") == {
                "command": "observers", "error": None, "synced_observers": 0, "observers": []}


def test_mntr_tells_peer_states_the_quorum_size_elections_and_the_leaders_proposals(ens):
    leader = ens.wait_quorum()
    values = {sid: mntr(ens.client_port(sid)) for sid in ens.ids}
    for sid, member in values.items():
        state = "leading" if sid == leader else "observing" if sid == OBSERVER else "following"
        assert member["zk_peer_state"] == f"{state} - broadcast", (sid, member["zk_peer_state"])
        assert member["zk_quorum_size"] == "3", (sid, member["zk_quorum_size"])
        assert int(member["zk_looking_count"]) >= 1, (sid, member)
        # An observer takes no part in elections: none is timed for it.
        elections = int(member["zk_cnt_election_time"])
        assert elections == 0 if sid == OBSERVER else elections >= 1, (sid, member)
        assert 0 <= int(member["zk_min_election_time"]) <= int(member["zk_max_election_time"])
        assert ("zk_leader_uptime" in member) == (sid == leader), (sid, member)
    assert int(values[leader]["zk_leader_uptime"]) > 0

    client = KazooClient(hosts=ens.hosts(leader), timeout=10)
    client.start()
    try:
        for index in range(5):
            client.create(f"/counted-{index}", b"", ephemeral=True)
    finally:
        client.stop()
        client.close()
    followers = [sid for sid in ens.participants if sid != leader]
    # A follower counts what it received once it has it.
    after = {sid: eventually(
        lambda: mntr(ens.client_port(sid)),
        lambda now: sid == leader or int(now["zk_learner_commit_received_count"])
        >= int(values[sid]["zk_learner_commit_received_count"]) + 5,
        f"server {sid} counted the commits") for sid in ens.ids}
    for key in ("zk_proposal_count", "zk_commit_count"):
        # Each create is proposed and committed by the leader, learners count neither.
        assert int(after[leader][key]) >= int(values[leader][key]) + 5, (key, after[leader])
        for sid in ens.ids:
            if sid != leader:
                assert after[sid][key] == values[sid][key], (sid, key, after[sid])
    for key in ("zk_learner_proposal_received_count", "zk_learner_commit_received_count"):
        assert after[leader][key] == values[leader][key], (key, after[leader])
        for sid in followers:
            assert int(after[sid][key]) >= int(values[sid][key]) + 5, (sid, key, after[sid])

    # A new election: each surviving participant goes looking once more and times it.
    survivors = [sid for sid in ens.participants if sid != leader]
    ens.kill(leader)
    try:
        ens.wait_quorum(servers=survivors)
        for sid in survivors:
            eventually(
                lambda: mntr(ens.client_port(sid)),
                lambda now: (now.get("zk_peer_state", "").endswith(" - broadcast")
                             and int(now["zk_looking_count"]) > int(after[sid]["zk_looking_count"])
                             and int(now["zk_cnt_election_time"])
                             > int(after[sid]["zk_cnt_election_time"])),
                f"server {sid} counted the election")
    finally:
        ens.start(leader)
        ens.wait_quorum()

    # The new leader synced the other survivor, the observer and the restarted member.
    new_leader = ens.wait_quorum()
    port = ens.client_port(new_leader)
    syncs = eventually(lambda: mntr(port),
                       lambda now: int(now["zk_diff_count"]) + int(now["zk_snap_count"]) >= 3,
                       "the new leader counted its learners' syncs")
    assert int(syncs["zk_snap_count"]) == 0, syncs  # every learner's log reached far enough

    # srst starts the counters over; the peer state and the quorum size stay.
    four_letter(port, "srst")
    reset = mntr(port)
    for key in ("zk_looking_count", "zk_cnt_election_time", "zk_proposal_count",
                "zk_diff_count"):
        assert reset[key] == "0", (key, reset[key])
    assert reset["zk_peer_state"] == "leading - broadcast"
    assert reset["zk_quorum_size"] == "3"
