"""kazoo end-to-end: sync, server_version() and the four-letter words kazoo's command() sends
(fact sheet §5.9, §13, appendix). Output is checked for the shapes tools parse, not byte for byte."""
import os
import re
import socket
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError

from test_kazoo_support import (  # noqa: F401  (fixtures)
    SERVER_MODES,
    EventRecorder,
    base,
    make_zk_factory,
    shared_server,
    wait_for,
    zk,
)

zk_factory = make_zk_factory("shared_server")


def mntr(server):
    lines = server.four_letter("mntr").splitlines()
    pairs = [line.split("\t") for line in lines]
    assert all(len(p) == 2 for p in pairs), lines
    return pairs


def mntr_value(server, key):
    return dict(mntr(server))[key]


def wchs(server):
    text = server.four_letter("wchs")
    match = re.fullmatch(r"(\d+) connections watching (\d+) paths\nTotal watches:(\d+)\n?", text)
    assert match, text
    return tuple(int(g) for g in match.groups())


def test_sync_returns_the_path_and_a_synced_reader_sees_prior_writes(zk_factory, base):
    writer, reader = zk_factory(), zk_factory()
    writer.create(base, b"v0")
    writer.set(base, b"v1")
    assert reader.sync(base) == base
    assert reader.get(base)[0] == b"v1"


def test_sync_on_a_missing_path_still_answers(zk, base):
    assert zk.sync(base + "/nowhere") == base + "/nowhere"


def test_server_version_is_parsed_by_kazoo_from_envi(zk):
    version = zk.server_version()
    assert len(version) >= 3 and all(isinstance(part, int) for part in version)
    assert (3, 6) <= version < (4,)


def test_ruok_answers_imok(zk, shared_server):
    assert zk.command(b"ruok") == "imok"
    assert shared_server.four_letter("ruok") == "imok"


def test_isro_answers_rw_on_a_writable_server(zk):
    assert zk.command(b"isro") == "rw"


def test_srvr_lists_version_counters_zxid_mode_and_node_count(zk, shared_server, base):
    before = zk.command(b"srvr")
    _, stat = zk.create(base, include_data=True)
    text = zk.command(b"srvr")
    lines = text.splitlines()
    assert re.match(r"Zookeeper version: \d+\.\d+\.\d+", lines[0])
    keys = [line.split(":")[0] for line in lines[1:] if line]
    want = ["Latency min/avg/max", "Received", "Sent", "Connections", "Outstanding", "Zxid", "Mode", "Node count"]
    if "Mode: leader" in lines:
        want.append("Proposal sizes last/min/max")  # a leader's srvr ends with this line (Apache)
    assert keys == want, text
    assert re.search(r"^Latency min/avg/max: \d+/[\d.]+/\d+$", text, re.M)
    assert any(f"Mode: {mode}" in lines for mode in SERVER_MODES), lines
    # At least our create: an ensemble member also orders a Touch of its sessions every half tick.
    zxid = int(re.search(r"^Zxid: 0x([0-9a-f]+)$", text, re.M).group(1), 16)
    assert zxid >= stat.czxid, text
    count = lambda t: int(re.search(r"^Node count: (\d+)$", t, re.M).group(1))  # noqa: E731
    assert count(text) == count(before) + 1


def test_stat_lists_the_connected_clients(zk, shared_server):
    local_port = zk._connection._socket.getsockname()[1]
    text = shared_server.four_letter("stat")
    lines = text.splitlines()
    assert re.match(r"Zookeeper version: \d+\.\d+\.\d+", lines[0])
    assert lines[1] == "Clients:"
    assert any(line.startswith(f" /127.0.0.1:{local_port}[") for line in lines)
    assert any(f"Mode: {mode}" in lines for mode in SERVER_MODES), lines
    assert re.search(r"^Node count: \d+$", text, re.M)


def test_cons_describes_each_session_connection(zk, shared_server):
    sid = zk.client_id[0]
    lines = [line for line in shared_server.four_letter("cons").splitlines() if f"sid=0x{sid:x}," in line]
    assert len(lines) == 1
    line = lines[0]
    assert re.match(r" /127\.0\.0\.1:\d+\[[0-9a-f]+\]\(queued=\d+,recved=\d+,sent=\d+,sid=0x[0-9a-f]+,", line)
    for field in ("lop=", "est=", "to=10000", "lcxid=0x", "lzxid=0x", "lresp=", "llat=", "minlat=", "avglat=",
                  "maxlat="):
        assert field in line, field


def test_conf_reports_the_effective_configuration(shared_server):
    conf = dict(line.split("=", 1) for line in shared_server.four_letter("conf").splitlines() if "=" in line)
    assert conf["clientPort"] == str(shared_server.port)
    assert conf["tickTime"] == "2000"
    assert conf["minSessionTimeout"] == "4000"
    assert conf["maxSessionTimeout"] == "40000"
    assert conf["maxClientCnxns"] == "0"
    assert "dataDir" in conf


def test_envi_starts_with_environment_and_carries_the_zookeeper_version(zk):
    lines = zk.command(b"envi").splitlines()
    assert lines[0] == "Environment:"
    entries = dict(line.split("=", 1) for line in lines[1:] if line)
    assert re.match(r"\d+\.\d+\.\d+", entries["zookeeper.version"])
    assert "host.name" in entries


def test_mntr_starts_with_version_and_state_and_counts_nodes_ephemerals_and_watches(zk_factory, shared_server,
                                                                                   base):
    pairs = mntr(shared_server)
    assert pairs[0][0] == "zk_version" and pairs[1][0] == "zk_server_state" and pairs[1][1] in SERVER_MODES
    keys = {k for k, _ in pairs}
    for key in ("zk_avg_latency", "zk_max_latency", "zk_min_latency", "zk_packets_received", "zk_packets_sent",
                "zk_num_alive_connections", "zk_outstanding_requests", "zk_znode_count", "zk_watch_count",
                "zk_ephemerals_count", "zk_approximate_data_size", "zk_open_file_descriptor_count",
                "zk_max_file_descriptor_count"):
        assert key in keys, key
    nodes, ephemerals = int(mntr_value(shared_server, "zk_znode_count")), int(
        mntr_value(shared_server, "zk_ephemerals_count"))
    watches = int(mntr_value(shared_server, "zk_watch_count"))
    client = zk_factory()
    client.create(base)
    client.create(base + "/e1", ephemeral=True)
    client.create(base + "/e2", ephemeral=True)
    client.get(base, watch=EventRecorder())
    assert int(mntr_value(shared_server, "zk_znode_count")) == nodes + 3
    assert int(mntr_value(shared_server, "zk_ephemerals_count")) == ephemerals + 2
    assert int(mntr_value(shared_server, "zk_watch_count")) == watches + 1
    client.stop()
    assert int(mntr_value(shared_server, "zk_ephemerals_count")) == ephemerals


SUMMARY_FIELDS = ("avg", "min", "max", "cnt", "sum")


def summaries(server, *names):
    """ZooKeeper's AvgMinMaxCounters in mntr (zk_avg_NAME ... zk_sum_NAME, milliseconds), by name."""
    values = dict(mntr(server))
    return {name: {field: float(values[f"zk_{field}_{name}"]) for field in SUMMARY_FIELDS} for name in names}


def wait_for_snapshots_to_settle(server, quiet_s=0.5):
    """Waits (bounded) until no snapshot has completed for `quiet_s`: a snapshot the last writes
    started may still be running when the first one is counted, and would count after a reset."""
    counts = [summaries(server, "snapshottime")["snapshottime"]["cnt"]]

    def unchanged():
        time.sleep(quiet_s)
        counts.append(summaries(server, "snapshottime")["snapshottime"]["cnt"])
        return counts[-1] == counts[-2]

    assert wait_for(unchanged), counts


def test_mntr_time_summaries_count_syncs_reads_updates_and_snapshots_and_srst_starts_them_over(server_factory):
    """ZooKeeper's fsynctime, readlatency, updatelatency and snapshottime counters: every write is
    synced (on a quorum) before it is acknowledged, a create is an update and a getData a read, and snapCount=10
    makes 40 creates take snapshots; srst resets the counters with the other server statistics.
    Times are milliseconds; an average may have a fraction."""
    names = ("fsynctime", "readlatency", "updatelatency", "snapshottime")
    server = server_factory("snapCount=10")
    client = KazooClient(hosts=f"127.0.0.1:{server.port}")
    client.start()
    try:
        before = summaries(server, *names)
        for index in range(40):
            client.create(f"/summary-{index}", b"v")
            client.get(f"/summary-{index}")
        wait_for(lambda: summaries(server, "snapshottime")["snapshottime"]["cnt"] >= 1)
        wait_for_snapshots_to_settle(server)
        after = summaries(server, *names)
        # A standalone server or a follower may make two writes durable in one sync, never many
        # more; an ensemble's leader delays its own syncs while its followers make the commits
        # (up to 3 ms), so there one sync may take in many writes.
        syncs_min = 1 if os.environ.get("ZK_TOPOLOGY") == "ensemble" else 20
        assert after["fsynctime"]["cnt"] >= before["fsynctime"]["cnt"] + syncs_min, (before, after)
        assert after["updatelatency"]["cnt"] >= before["updatelatency"]["cnt"] + 40, (before, after)
        assert after["readlatency"]["cnt"] >= before["readlatency"]["cnt"] + 40, (before, after)
        assert after["snapshottime"]["cnt"] >= 1, after
        for name, summary in after.items():
            # zoolog truncates min, max and sum to whole milliseconds but keeps the average's fraction.
            assert 0 <= summary["min"] <= summary["avg"] <= summary["max"] + 1, (name, summary)
            assert summary["max"] <= summary["sum"], (name, summary)
        assert int(dict(mntr(server))["zk_uptime"]) > 0

        assert server.four_letter("srst") == "Server stats reset.\n"
        reset = summaries(server, *names)
        assert reset["updatelatency"]["cnt"] == 0 and reset["snapshottime"]["cnt"] == 0, reset
        assert reset["fsynctime"]["cnt"] < 10 and reset["readlatency"]["cnt"] < 10, reset
        client.create("/summary-after-reset", b"v")
        assert summaries(server, "updatelatency")["updatelatency"]["cnt"] >= 1
    finally:
        client.stop()
        client.close()


def test_mntr_latency_percentiles_are_ordered_within_the_extremes_and_srst_clears_them(server_factory):
    """ZooKeeper's AvgMinMaxPercentileCounters: readlatency and updatelatency also have p50, p95,
    p99 and p999 keys (whole milliseconds), in order and within min and max."""
    server = server_factory()
    client = KazooClient(hosts=server.hosts)
    client.start()
    try:
        for index in range(60):
            client.create(f"/percentile-{index}", b"v")
            client.get(f"/percentile-{index}")
        values = dict(mntr(server))
        for name in ("readlatency", "updatelatency"):
            low, high = int(values[f"zk_min_{name}"]), int(values[f"zk_max_{name}"])
            percentiles = [int(values[f"zk_{p}_{name}"]) for p in ("p50", "p95", "p99", "p999")]
            assert low <= percentiles[0], (name, low, percentiles)
            assert percentiles == sorted(percentiles) and percentiles[-1] <= high, (name, percentiles, high)
        server.four_letter("srst")
        reset = dict(mntr(server))
        assert all(reset[f"zk_{p}_updatelatency"] == "0" for p in ("p50", "p95", "p99", "p999")), reset
    finally:
        client.stop()
        client.close()


def test_mntr_counts_bytes_received_and_sizes_client_responses(server_factory):
    """ZooKeeper's bytes_received_count (client packets, length prefixes included) and its
    BufferStats of client responses: replies and notifications without the length prefix."""
    server = server_factory()
    client = KazooClient(hosts=server.hosts)
    client.start()
    try:
        before = int(mntr_value(server, "zk_bytes_received_count"))
        client.create("/sized", b"v" * 5000)
        received = int(mntr_value(server, "zk_bytes_received_count")) - before
        # Length, header, path, the value and its length, an ACL and flags: more than the value.
        assert received > 5000 + 4 + 8 + len("/sized"), received
        server.four_letter("srst")
        client.get("/sized")
        values = dict(mntr(server))
        # A reply header (16 bytes), the value behind its length (5004) and a Stat (68); pings'
        # replies (16 bytes) may come between.
        assert int(values["zk_max_client_response_size"]) == 16 + 5004 + 68, values
        assert int(values["zk_min_client_response_size"]) >= 16, values
        assert int(values["zk_last_client_response_size"]) in (16, 16 + 5004 + 68), values
    finally:
        client.stop()
        client.close()


def test_mntr_startup_summaries_count_what_a_restart_loads_once_and_srst_clears_them(server_factory):
    """ZooKeeper's dbinittime and startup_txns_* summaries: a restart loads the log's 30 creates
    (and the session's own entries) once, in one load that takes at least as long as applying
    them; srst clears these with the other server statistics."""
    names = ("dbinittime", "startup_txns_loaded", "startup_txns_load_time")
    server = server_factory()
    client = KazooClient(hosts=server.hosts)
    client.start()
    for index in range(30):
        client.create(f"/startup-{index}", b"v")
    client.stop()
    client.close()
    server.stop()
    server.restart()
    wait_for(lambda: "zk_version" in server.four_letter("mntr"))  # Apache: serving after ruok
    loaded = summaries(server, *names)
    assert loaded["dbinittime"]["cnt"] == 1, loaded
    assert loaded["startup_txns_loaded"]["cnt"] == 1, loaded
    assert loaded["startup_txns_loaded"]["sum"] >= 30, loaded
    assert loaded["startup_txns_load_time"]["cnt"] == 1, loaded
    assert loaded["dbinittime"]["sum"] >= loaded["startup_txns_load_time"]["sum"], loaded

    assert server.four_letter("srst") == "Server stats reset.\n"
    reset = summaries(server, *names)
    assert all(summary["cnt"] == 0 for summary in reset.values()), reset


def test_mntr_counts_connection_requests_rejections_and_auth_failures(server_factory):
    """maxClientCnxns=1: with one client connected, a second connection from the same address is
    closed at once (connection_rejected); a session handshake is a connection request, a
    four-letter word is not. An addAuth refused (an unknown scheme) is not an auth_failed_count:
    ZooKeeper counts there only the client certificates its TLS port refuses."""
    server = server_factory("maxClientCnxns=1")
    client = KazooClient(hosts=f"127.0.0.1:{server.port}")
    client.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as refused:
            assert refused.recv(1) == b"", "the server closes a connection over its limit"
    finally:
        client.stop()
        client.close()
    wait_for(lambda: int(mntr_value(server, "zk_num_alive_connections")) <= 1)
    counts = dict(mntr(server))
    assert int(counts["zk_connection_rejected"]) >= 1, counts
    assert int(counts["zk_connection_request_count"]) == 1, counts
    assert int(counts["zk_auth_failed_count"]) == 0, counts

    client = KazooClient(hosts=f"127.0.0.1:{server.port}")
    client.start()
    try:
        with pytest.raises(AuthFailedError):
            client.add_auth("no-such-scheme", "x")
    finally:
        client.stop()
        client.close()
    assert int(mntr_value(server, "zk_auth_failed_count")) == 0


def test_wchs_wchc_and_wchp_report_watches_by_connection_and_path(zk_factory, shared_server, base):
    connections, paths, total = wchs(shared_server)
    client = zk_factory()
    client.create(base)
    client.create(base + "/a")
    client.get(base, watch=EventRecorder())
    client.get_children(base, watch=EventRecorder())
    client.exists(base + "/a", watch=EventRecorder())
    # wchs summarises the data-watch table only (getData/exists): the child watch is not counted
    assert wchs(shared_server) == (connections + 1, paths + 2, total + 2)

    sid = f"0x{client.client_id[0]:x}"
    wchc = shared_server.four_letter("wchc")
    block = wchc.split(sid + "\n", 1)[1].split("\n0x", 1)[0]
    assert {line.strip() for line in block.splitlines() if line.startswith("\t")} == {base, base + "/a"}

    wchp = shared_server.four_letter("wchp").splitlines()
    for path in (base, base + "/a"):
        index = wchp.index(path)
        assert wchp[index + 1] == "\t" + sid


def test_dump_lists_sessions_with_their_ephemerals(zk, shared_server, base):
    zk.create(base, ephemeral=True)
    text = shared_server.four_letter("dump")
    assert "SessionTracker dump:" in text
    section = text.split("Sessions with Ephemerals", 1)[1]
    sid = f"0x{zk.client_id[0]:x}:"
    owned = section.split(sid, 1)[1].splitlines()[1:]
    assert "\t" + base in [line for line in owned if line.startswith("\t")]


def test_dirs_reports_data_and_log_sizes(shared_server):
    text = shared_server.four_letter("dirs")
    assert re.search(r"^datadir_size: \d+$", text, re.M)
    assert re.search(r"^logdir_size: \d+$", text, re.M)


def test_unknown_four_letter_word_just_closes_the_connection(shared_server):
    assert shared_server.four_letter("zzzz") == ""
    assert shared_server.four_letter("ruok") == "imok"  # and the server is fine


def test_four_letter_words_outside_the_whitelist_are_refused(server_factory):
    restricted = server_factory("4lw.commands.whitelist=srvr,ruok")
    assert restricted.four_letter("ruok") == "imok"
    # ruok answers as soon as the port is open; srvr needs the server to be serving
    srvr = wait_for(lambda: "Mode:" in restricted.four_letter("srvr") and restricted.four_letter("srvr"))
    assert any(f"Mode: {mode}" in srvr.splitlines() for mode in SERVER_MODES), srvr
    assert restricted.four_letter("envi").strip() == "envi is not executed because it is not in the whitelist."


def test_srvr_is_always_answered_and_isro_in_read_only_mode(server_factory):
    # ZooKeeper adds srvr to any whitelist (zkServer.sh status needs it), and isro when
    # readonlymode.enabled is on (clients probe with it).
    plain = server_factory("4lw.commands.whitelist=ruok")
    srvr = wait_for(lambda: "Mode:" in plain.four_letter("srvr") and plain.four_letter("srvr"))
    assert srvr and "Mode:" in srvr, plain.four_letter("srvr")
    assert plain.four_letter("isro").strip() == "isro is not executed because it is not in the whitelist."
    assert plain.four_letter("stat").strip() == "stat is not executed because it is not in the whitelist."
    read_only = server_factory("4lw.commands.whitelist=ruok", "-Dreadonlymode.enabled=true")
    # ZooKeeper answers "null" until its server is up.
    assert wait_for(lambda: read_only.four_letter("isro") != "null" and read_only.four_letter("isro")) == "rw"
    assert read_only.four_letter("conf").strip() == "conf is not executed because it is not in the whitelist."
