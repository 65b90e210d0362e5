"""The AdminServer of ensemble members: voting_view lists the voting members of the
configuration, zabstate says who the member is and where it is in the protocol, leader names
the leader. One ensemble of 3 participants and 1 observer, each with its own AdminServer, of
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
from pathlib import Path

import pytest
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ensemble"))
from ensemble import Ensemble, free_ports  # noqa: E402

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
