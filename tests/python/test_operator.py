"""The operator surface: the AdminServer's HTTP commands (ZooKeeper's JSON), Prometheus /metrics
scraped and parsed with the reference parser, the four-letter words crst srst gtmk stmk hash, and
bad HTTP input that must never disturb the client port."""
import http.client
import json
import os
import socket
import struct
import time

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.skipif(
    os.environ.get("ZK_KIND", "zoolog") != "zoolog",
    reason="zoolog's metric names; Apache's AdminServer is off in tests/zk-server",
)

# The standalone operator surface: server role "standalone", an empty voting view, no zab state,
# no leader. An ensemble member answers these differently (what it answers is not pinned down yet).
standalone_only = pytest.mark.skipif(
    os.environ.get("ZK_TOPOLOGY", "standalone") == "ensemble",
    reason="checks the standalone answers (role, voting_view, zabstate, leader) of the operator surface",
)

PROMETHEUS_CLASS = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(port, path, method="GET"):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), response.read().decode()
    finally:
        connection.close()


def raw_request(port, data):
    """Sends raw bytes and returns the whole answer ('' when the server just closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")


def command(port, name):
    status, content_type, body = get(port, f"/commands/{name}")
    assert status == 200, body
    assert content_type.startswith("application/json")
    return json.loads(body)


def scrape(port):
    status, content_type, body = get(port, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    return {family.name: family for family in text_string_to_metric_families(body)}


def samples(families, sample_name, **labels):
    """Values of the samples called `sample_name` whose labels include `labels`."""
    return [
        sample.value
        for family in families.values()
        for sample in family.samples
        if sample.name == sample_name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]


def value(families, sample_name, **labels):
    found = samples(families, sample_name, **labels)
    assert len(found) == 1, (sample_name, labels, found)
    return found[0]


def create_nodes(server, prefix, count):
    """Creates nodes prefix0 .. prefix{count-1} through a session of their own, closed after."""
    zk = KazooClient(hosts=server.hosts, timeout=10)
    zk.start()
    try:
        for index in range(count):
            zk.create(f"{prefix}{index}", b"v")
    finally:
        zk.stop()
        zk.close()


@pytest.fixture
def admin_server(server_factory):
    port = free_port()
    server = server_factory("admin.enableServer=true", f"admin.serverPort={port}")
    server.admin_port = port
    return server


@pytest.fixture
def client(admin_server):
    zk = KazooClient(hosts=admin_server.hosts, timeout=10)
    zk.start()
    yield zk
    zk.stop()
    zk.close()


def assert_histograms_are_consistent(families):
    histograms = [family for family in families.values() if family.type == "histogram"]
    assert histograms
    for family in histograms:
        series = {}
        for sample in family.samples:
            key = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
            series.setdefault(key, []).append(sample)
        for key, members in series.items():
            buckets = [s for s in members if s.name.endswith("_bucket")]
            count = [s.value for s in members if s.name.endswith("_count")]
            total = [s.value for s in members if s.name.endswith("_sum")]
            assert len(count) == 1 and len(total) == 1, (family.name, key)
            bounds = [float(s.labels["le"]) for s in buckets]
            assert bounds == sorted(bounds) and bounds[-1] == float("inf"), (family.name, bounds)
            values = [s.value for s in buckets]
            assert values == sorted(values), f"{family.name}{key}: buckets not cumulative"
            assert values[-1] == count[0], f"{family.name}{key}: +Inf != _count"
            assert total[0] >= 0


@standalone_only
def test_metrics_parse_and_move_with_client_operations(admin_server, client):
    before = scrape(admin_server.admin_port)
    for name in ("HELP", "TYPE"):
        assert before["znode_count"].documentation and before["znode_count"].type == "gauge", name
    assert value(before, "zoolog_server_role", role="standalone") == 1
    assert value(before, "zoolog_quorum_up") == 1

    client.create("/op", b"x")
    for i in range(20):
        client.create(f"/op/n{i}", b"data" * 10)
        client.get(f"/op/n{i}")
    client.create("/op/eph", b"", ephemeral=True)
    client.exists("/op/n0", watch=lambda event: None)

    after = scrape(admin_server.admin_port)
    assert value(after, "znode_count") == value(before, "znode_count") + 22
    assert value(after, "ephemerals_count") == value(before, "ephemerals_count") + 1
    assert value(after, "watch_count") >= 1
    assert value(after, "approximate_data_size") > value(before, "approximate_data_size") + 20 * 40
    assert value(after, "num_alive_connections") >= 1
    assert value(after, "global_sessions") >= 1
    assert value(after, "outstanding_requests") == 0
    assert value(after, "zoolog_last_zxid") >= value(before, "zoolog_last_zxid") + 22
    assert after["bytes_received_count"].type == "counter"
    assert value(after, "bytes_received_count_total") >= value(before, "bytes_received_count_total") + 20 * 40
    # The largest reply: a getData of 40 bytes (16 + 4 + 40 + a 68-byte Stat).
    assert value(after, "max_client_response_size") >= 128
    for counter in ("zoolog_log_entries_committed_total", "zoolog_log_batches_committed_total",
                    "zoolog_log_fsyncs_total"):
        assert value(after, counter) > value(before, counter), counter
    assert after["zoolog_log_entries_committed"].type == "counter"
    assert value(after, "zoolog_log_fsync_duration_seconds_count") >= 1

    latency = "zoolog_request_latency_seconds_count"
    assert value(after, latency, op="create") >= 22
    assert value(after, latency, op="getData") >= 20
    assert value(after, latency, op="exists") >= 1
    assert value(after, "zoolog_request_latency_seconds_sum", op="create") > 0
    assert_histograms_are_consistent(after)


def test_latency_summaries_have_zookeepers_quantiles_and_they_and_bytes_received_outlive_srst(admin_server, client):
    client.create("/lat", b"")
    for i in range(20):
        client.create(f"/lat/n{i}", b"x")
        client.get(f"/lat/n{i}")
    before = scrape(admin_server.admin_port)
    for name in ("readlatency", "updatelatency"):
        assert before[name].type == "summary", name
        quantiles = [value(before, name, quantile=q) for q in ("0.5", "0.9", "0.99")]
        assert quantiles == sorted(quantiles) and quantiles[0] >= 0, (name, quantiles)
        assert value(before, f"{name}_sum") >= quantiles[0], name
    assert value(before, "updatelatency_count") >= 21
    assert value(before, "readlatency_count") >= 20

    assert admin_server.four_letter("srst") == "Server stats reset.\n"
    client.create("/lat/after", b"x")
    after = scrape(admin_server.admin_port)
    assert value(after, "updatelatency_count") == value(before, "updatelatency_count") + 1
    assert value(after, "bytes_received_count_total") > value(before, "bytes_received_count_total")
    assert value(after, "readlatency_count") >= value(before, "readlatency_count")


def test_every_log_sync_is_timed_and_one_over_the_warning_threshold_is_counted_and_logged(server_factory):
    """fsync.warningthresholdms=0: every sync exceeds it. Each is counted (admin srvr's
    fsync_threshold_exceed_count, zoolog_log_slow_fsyncs_total) and logged as a warning, and the
    sync histogram, ZooKeeper's fsynctime summary and the sync counter all count every sync."""
    port = free_port()
    server = server_factory("admin.enableServer=true", f"admin.serverPort={port}",
                            "fsync.warningthresholdms=0")
    create_nodes(server, "/slow-", 10)
    exceeded = command(port, "srvr")["server_stats"]["fsync_threshold_exceed_count"]
    assert exceeded >= 10
    families = scrape(port)
    syncs = value(families, "zoolog_log_fsyncs_total")
    assert value(families, "zoolog_log_slow_fsyncs_total") >= 10
    assert value(families, "zoolog_log_fsync_duration_seconds_count") == syncs
    assert value(families, "fsynctime_count") == syncs
    assert value(families, "fsynctime_sum") == pytest.approx(
        value(families, "zoolog_log_fsync_duration_seconds_sum") * 1000)
    assert server.log_text().count("took longer than fsync.warningthresholdms") >= 10


def test_snapshot_metrics_after_a_snapshot(server_factory):
    port = free_port()
    server = server_factory("admin.enableServer=true", f"admin.serverPort={port}", "snapCount=10")
    create_nodes(server, "/s", 40)
    deadline = time.time() + 10
    while True:
        families = scrape(port)
        if value(families, "zoolog_snapshot_duration_seconds_count") >= 1:
            break
        assert time.time() < deadline, "no snapshot was recorded"
        time.sleep(0.1)
    assert value(families, "zoolog_snapshot_size_bytes") > 0
    assert_histograms_are_consistent(families)
    snapshot = command(port, "lsnp")
    assert snapshot["command"] == "last_snapshot" and snapshot["error"] is None
    assert int(snapshot["zxid"], 16) > 0
    assert abs(snapshot["timestamp"] - time.time()) < 60


def test_startup_metrics_count_one_load_of_the_log_and_srst_leaves_them(server_factory):
    """ZooKeeper's dbinittime and startup_* summaries on /metrics: a first start loads nothing
    from its empty log; a restart after 30 creates loads them (and the session's own entries)
    once, with no snapshot at the default snapCount. srst leaves /metrics alone."""
    port = free_port()
    server = server_factory("admin.enableServer=true", f"admin.serverPort={port}")
    first = scrape(port)
    assert value(first, "dbinittime_count") == 1
    assert value(first, "startup_txns_loaded_count") == 0
    create_nodes(server, "/startup-", 30)
    server.stop()
    server.restart()
    families = scrape(port)
    assert value(families, "dbinittime_count") == 1
    assert value(families, "startup_snap_load_time_count") == 0
    assert value(families, "startup_txns_loaded_count") == 1
    assert value(families, "startup_txns_loaded_sum") >= 30
    assert value(families, "startup_txns_load_time_count") == 1
    assert value(families, "dbinittime_sum") >= value(families, "startup_txns_load_time_sum")
    assert server.four_letter("srst") == "Server stats reset.\n"
    assert value(scrape(port), "dbinittime_count") == 1


def test_startup_metrics_time_the_snapshot_a_restart_loads(server_factory):
    port = free_port()
    server = server_factory("admin.enableServer=true", f"admin.serverPort={port}", "snapCount=10")
    create_nodes(server, "/startup-snap-", 40)
    deadline = time.time() + 10
    while int(command(port, "lsnp")["zxid"], 16) == 0:
        assert time.time() < deadline, "no snapshot was written"
        time.sleep(0.1)
    server.stop()
    server.restart()
    families = scrape(port)
    assert value(families, "startup_snap_load_time_count") == 1
    assert value(families, "dbinittime_sum") >= value(families, "startup_snap_load_time_sum")


def test_prometheus_provider_port_serves_metrics_only(server_factory):
    port = free_port()
    server = server_factory(f"metricsProvider.className={PROMETHEUS_CLASS}",
                            f"metricsProvider.httpPort={port}")
    families = scrape(port)
    assert value(families, "znode_count") >= 1
    status, _, _ = get(port, "/commands/ruok")
    assert status == 404
    assert server.four_letter("ruok") == "imok"


@standalone_only
def test_admin_commands_answer_zookeepers_json(admin_server, client):
    port = admin_server.admin_port
    client.create("/adm", b"v")
    client.create("/adm/eph", b"", ephemeral=True)
    client.get("/adm", watch=lambda event: None)
    sid = client.client_id[0]

    status, content_type, body = get(port, "/commands")
    assert status == 200 and content_type.startswith("text/html")
    assert '<a href="/commands/monitor">monitor</a>' in body

    assert command(port, "ruok") == {"command": "ruok", "error": None}
    for alias, primary in (("srvr", "server_stats"), ("stat", "stats"), ("cons", "connections"),
                           ("conf", "configuration"), ("envi", "environment"),
                           ("mntr", "monitor"), ("wchs", "watch_summary"), ("wchc", "watches"),
                           ("wchp", "watches_by_path"), ("isro", "is_read_only"),
                           ("gtmk", "get_trace_mask"), ("lead", "leader"),
                           ("lsnp", "last_snapshot"), ("icfg", "initial_configuration"),
                           ("sysp", "system_properties")):
        assert command(port, alias)["command"] == primary, alias
        assert command(port, primary)["error"] is None or primary == "leader"

    srvr = command(port, "server_stats")
    assert srvr["server_stats"]["server_state"] == "standalone"
    assert srvr["server_stats"]["packets_received"] > 0
    assert srvr["node_count"] >= 4 and srvr["read_only"] is False

    connections = command(port, "connections")["connections"]
    mine = [c for c in connections if c["session_id"] == sid]
    assert len(mine) == 1 and mine[0]["packets_received"] >= 3
    assert {"remote_socket_address", "last_operation", "last_zxid", "avg_latency"} <= set(mine[0])
    brief = command(port, "stats")["connections"]
    assert brief and "session_id" not in brief[0]

    conf = command(port, "configuration")
    assert conf["client_port"] == admin_server.port and conf["tick_time"] == 2000

    assert command(port, "environment")["zookeeper.version"].startswith("3.9")
    monitor = command(port, "monitor")
    assert monitor["server_state"] == "standalone" and monitor["ephemerals_count"] >= 1

    assert command(port, "watch_summary")["num_total_watches"] >= 1
    assert "/adm" in command(port, "watches")["session_id_to_watched_paths"][str(sid)]
    assert sid in command(port, "watches_by_path")["path_to_session_ids"]["/adm"]
    dump = command(port, "dump")
    assert dump["session_id_to_ephemeral_paths"][str(sid)] == ["/adm/eph"]
    assert any(sid in ids for ids in dump["expiry_time_to_session_ids"].values())
    dirs = command(port, "dirs")
    assert dirs["datadir_size"] > 0 and "logdir_size" in dirs

    assert command(port, "is_read_only")["read_only"] is False
    assert command(port, "voting_view")["current_config"] == {}
    assert command(port, "zabstate") == {"command": "zabstate", "error": None,
                                         "voting": False, "zabstate": ""}
    assert command(port, "leader")["error"] == "server is not initialized"
    assert "admin.serverPort" in command(port, "initial_configuration")["initial_configuration"]
    assert command(port, "hash")["digests"] == []

    unknown = command(port, "no_such_command")
    assert unknown == {"command": "no_such_command", "error": "Unknown command: no_such_command"}


def test_trace_mask_over_http_and_four_letter_words(admin_server):
    port = admin_server.admin_port
    assert admin_server.four_letter("gtmk") == "306"
    assert command(port, "get_trace_mask")["tracemask"] == 306
    assert command(port, "set_trace_mask?traceMask=12")["tracemask"] == 12
    assert admin_server.four_letter("gtmk") == "12"
    bad = command(port, "set_trace_mask?traceMask=abc")
    assert bad["error"] == "setTraceMask requires long traceMask argument, got abc"
    assert command(port, "stmk")["error"] == "setTraceMask requires long traceMask argument"

    with socket.create_connection(("127.0.0.1", admin_server.port), timeout=5) as sock:
        sock.sendall(b"stmk" + struct.pack(">q", 1 << 40))
        answer = b""
        while chunk := sock.recv(100):
            answer += chunk
    assert answer.decode() == str(1 << 40)
    assert admin_server.four_letter("gtmk") == str(1 << 40)
    assert admin_server.four_letter("hash") == ""


def packets_received(server):
    line = next(l for l in server.four_letter("mntr").splitlines() if l.startswith("zk_packets_received"))
    return int(line.split("\t")[1])


def my_cons_line(server, sid):
    return next(l for l in server.four_letter("cons").splitlines() if f"sid=0x{sid:x}," in l)


def cons_received(line):
    return int(line.split("recved=")[1].split(",")[0])


def test_crst_and_srst_reset_the_stats(admin_server, client):
    for i in range(30):
        client.create(f"/r{i}", b"")
    sid = client.client_id[0]
    assert packets_received(admin_server) >= 30
    assert cons_received(my_cons_line(admin_server, sid)) >= 30

    assert admin_server.four_letter("srst") == "Server stats reset.\n"
    assert packets_received(admin_server) < 5
    assert admin_server.four_letter("crst") == "Connection stats reset.\n"
    line = my_cons_line(admin_server, sid)
    assert cons_received(line) < 5, line
    assert "lop=NA" in line or "lop=PING" in line, line

    client.create("/again", b"")
    assert command(admin_server.admin_port, "stat_reset") == {"command": "stat_reset", "error": None}
    assert command(admin_server.admin_port, "server_stats")["server_stats"]["packets_received"] < 5
    assert command(admin_server.admin_port, "crst") == {"command": "connection_stat_reset",
                                                         "error": None}
    mine = [c for c in command(admin_server.admin_port, "cons")["connections"] if c["session_id"] == sid]
    assert mine[0]["packets_received"] < 5


def test_bad_http_gets_400_and_never_disturbs_the_client_port(admin_server, client):
    port = admin_server.admin_port
    for garbage in (b"\x00\x01\x02garbage\r\n\r\n", b"GET\r\n\r\n", b"GET /x SPDY/9\r\n\r\n",
                    b"GET /%zz HTTP/1.1\r\n\r\n", b"GET /commands/ruok HTTP/1.1\r\nbad header\r\n\r\n",
                    b"GET /commands/ruok HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody"):
        assert raw_request(port, garbage).startswith("HTTP/1.1 400 "), garbage
    assert raw_request(port, b"POST /commands/ruok HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 405 ")
    huge = b"GET / HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"
    assert raw_request(port, huge).startswith("HTTP/1.1 431 ")
    assert get(port, "/nowhere")[0] == 404
    status, _, body = get(port, "/commands/ruok", method="HEAD")
    assert status == 200 and body == ""

    # Idle connections hold at most the connection limit; the rest are refused, not queued. A
    # request answered just before may still hold its slot for a moment after the client saw it
    # end, so idle connections are added until a probe finds no slot free (bounded).
    idle = []
    try:
        refused = "HTTP/1.1 200 "
        for _ in range(10):
            idle += [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(40)]
            time.sleep(0.2)
            refused = raw_request(port, b"GET /commands/ruok HTTP/1.1\r\n\r\n")
            if not refused.startswith("HTTP/1.1 200 "):
                break
        assert refused == "" or refused.startswith("HTTP/1.1 503 ")
        assert admin_server.four_letter("ruok") == "imok"
        client.create("/still-serving", b"")
    finally:
        for sock in idle:
            sock.close()
    deadline = time.time() + 5
    while raw_request(port, b"GET /commands/ruok HTTP/1.1\r\n\r\n").split(" ")[1:2] != ["200"]:
        assert time.time() < deadline, "the admin server did not recover"
        time.sleep(0.05)
    assert client.exists("/still-serving")
