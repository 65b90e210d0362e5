"""What a client of a replicated ensemble relies on, checked with kazoo against real processes:
sessions that move between servers and expire once for everyone, observers, read-only mode,
sync-then-read that stays linearizable when the leader is cut off, and messages between members
corrupted on the way.

One ensemble of 3 participants and 1 observer behind the fault proxy (tests/ensemble) serves the
module; every test leaves it healed with a quorum. The snapshot catch-up test starts an ensemble
of its own, which snapshots every few entries, the read-only test one with local sessions, the
TTL test one whose members' wall clocks read an hour apart, and the test of a write held through
a leader change one with ZooKeeper's default tick. ZK_KIND=apache runs the same
tests against Debian's ZooKeeper, except where ZooKeeper is known to fall short or is not
tested (said at the test).
"""
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NotReadOnlyCallError
from kazoo.retry import KazooRetry

import zkwire
from test_kazoo_support import create_ttl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ensemble"))
from ensemble import (  # noqa: E402
    DEFAULT_SETTINGS, Ensemble, four_letter, mntr, srvr_mode, start_ephemeral_holder)

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.environ.get("ZK_ENSEMBLE", "1") == "0",
                       reason="ZK_ENSEMBLE=0: this server build cannot run a replicated ensemble"),
]

KIND = os.environ.get("ZK_KIND", "zoolog")
OBSERVER = 4


@contextlib.contextmanager
def running_ensemble(prefix, settings):
    """3 participants and 1 observer behind the fault proxy, read-only mode on."""
    root = tempfile.mkdtemp(prefix=prefix)
    ensemble = Ensemble.create(root, 3, observers=1, proxy=True,
                               settings={"-Dreadonlymode.enabled": "true", **settings})
    try:
        ensemble.up(timeout_s=90)
        yield ensemble
    finally:
        ensemble.destroy()
        if os.environ.get("ZK_ENSEMBLE_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def ens():
    with running_ensemble("zoolog-semantics-", {}) as ensemble:
        yield ensemble


@pytest.fixture
def local_sessions_ens():
    """An ensemble of its own with local sessions on: Apache ZooKeeper's read-only server makes
    new sessions only as local ones (without them it answers a read-only client's connect with
    NOTREADONLY), and a local session cannot move, which the other tests need. zoolog ignores
    the key: its read-only sessions are always local, and its others can always move."""
    with running_ensemble("zoolog-semantics-local-", {"localSessionsEnabled": "true"}) as ensemble:
        yield ensemble


@pytest.fixture
def default_tick_ens():
    """An ensemble of its own with ZooKeeper's default tickTime, 2 s: a member without a leader
    holds its clients' writes for a tick, and the module's 500 ms would leave little time to
    act on a loaded machine."""
    with running_ensemble("zoolog-semantics-tick-", {"tickTime": "2000"}) as ensemble:
        yield ensemble


@pytest.fixture(autouse=True)
def healed(ens):
    yield
    ens.heal()
    for sid in ens.ids:
        if not ens.running(sid):
            ens.start(sid)
    ens.wait_quorum(timeout_s=60)


def client(hosts, **options):
    options.setdefault("timeout", 10)
    c = KazooClient(hosts=hosts, **options)
    c.start(timeout=15)
    return c


def client_with_states(hosts, **options):
    """A started client, and the list of the connection states it goes through from now."""
    states = []
    c = client(hosts, **options)
    c.add_listener(states.append)
    return c, states


def send_write_that_waits(c, path, data, why):
    """Sends a setData and checks that it is still unanswered 0.3 s later: its async result."""
    pending = c.set_async(path, data)
    time.sleep(0.3)
    assert not pending.ready(), why
    return pending


def stop_clients(*clients):
    """Stops and closes each client that was started (None for one that was not)."""
    for c in clients:
        if c is not None:
            c.stop()
            c.close()


def wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def follower(ens):
    leader = ens.leader()
    return next(sid for sid in ens.participants if sid != leader)


def exists_everywhere(ens, path):
    """Whether each running server, after a sync, holds path."""
    found = {}
    for sid in ens.ids:
        if not ens.running(sid):
            continue
        c = client(ens.hosts(sid))
        try:
            c.sync(path)
            found[sid] = c.exists(path) is not None
        finally:
            c.stop()
            c.close()
    return found


def test_writes_through_every_server_are_seen_by_every_server(ens):
    clients = {sid: client(ens.hosts(sid)) for sid in ens.ids}
    try:
        clients[ens.leader()].ensure_path("/all")
        for sid, c in clients.items():
            c.create(f"/all/from-{sid}", str(sid).encode())
        for sid, c in clients.items():
            c.sync("/all")
            assert sorted(c.get_children("/all")) == sorted(f"from-{i}" for i in ens.ids), sid
    finally:
        for c in clients.values():
            c.stop()
            c.close()


def test_a_session_moves_to_another_server_and_keeps_its_ephemerals(ens):
    first = follower(ens)
    second = next(sid for sid in ens.participants if sid != first)
    c = client(f"{ens.hosts(first)},{ens.hosts(second)}", randomize_hosts=False,
               connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5))
    try:
        c.ensure_path("/moves")
        c.create("/moves/eph", b"mine", ephemeral=True)
        session = c.client_id[0]
        ens.kill(first)
        # The client reconnects to the second server with the same session.
        wait_for(lambda: c.connected and c.client_id[0] == session, 20, "the session to resume")
        # Until kazoo notices the dead socket a request may still go out on it and be lost.
        c.retry(c.set, "/moves/eph", b"still mine")
        assert c.client_id[0] == session
        assert exists_everywhere(ens, "/moves/eph") == {sid: True for sid in ens.ids if sid != first}
    finally:
        c.stop()
        c.close()


@pytest.mark.skipif(KIND == "apache", reason="ZooKeeper's leader closes a follower's connection "
                    "after syncLimit ticks without a word from it, so the follower goes looking and "
                    "drops its clients when it resumes")
def test_a_follower_paused_longer_than_the_leader_timeout_keeps_following_and_its_clients(ens):
    """A follower stopped for longer than the leader timeout (a long GC pause, a descheduled VM)
    while the leader and the other follower run on: on resume the leader's heartbeats wait in
    its sockets, so it goes on following, and the connection of a client whose session outlives
    the pause is never dropped."""
    tick_s = int(DEFAULT_SETTINGS["tickTime"]) / 1000
    leader_timeout_s = int(DEFAULT_SETTINGS["syncLimit"]) * tick_s
    # Shorter than initLimit ticks, after which a leader may give up on a silent follower.
    pause_s = leader_timeout_s + (int(DEFAULT_SETTINGS["initLimit"]) * tick_s - leader_timeout_s) / 2
    paused = follower(ens)
    # kazoo gives up on a silent server after two thirds of the session timeout: not before
    # the pause ends.
    c, states = client_with_states(ens.hosts(paused), timeout=30)
    try:
        c.create("/paused-follower", b"before")
        ens.pause(paused)
        time.sleep(pause_s)
        ens.resume(paused)
        # A server that went looking on resume would drop its clients within milliseconds.
        time.sleep(2)
        c.set("/paused-follower", b"after")
        assert c.get("/paused-follower")[0] == b"after"
        assert states == [], f"the client's connection changed state: {states}"
        assert ens.modes()[paused] == "follower"
    finally:
        ens.resume(paused)
        c.stop()
        c.close()


@pytest.mark.skipif(KIND == "apache", reason="ZooKeeper's followers drop every client when they "
                    "lose their leader")
def test_a_client_waiting_for_nothing_keeps_its_connection_and_watch_through_a_leader_kill(ens):
    """kill -9 of the leader: the survivors elect a new one within milliseconds, and a
    follower's client that was waiting for no reply keeps its connection, its session and its
    watch, which then fires for a write made under the new leader."""
    kept_on = follower(ens)
    other = next(sid for sid in ens.participants if sid not in (kept_on, ens.leader()))
    events = []
    c, states = client_with_states(ens.hosts(kept_on))
    writer = None
    try:
        c.create("/kept-through-failover", b"before")
        c.get("/kept-through-failover", watch=events.append)
        session = c.client_id[0]
        killed = ens.leader()
        ens.kill(killed)
        new_leader = ens.wait_quorum(timeout_s=30, servers=[kept_on, other])
        assert new_leader != killed
        writer = client(ens.hosts(other))
        writer.set("/kept-through-failover", b"after")
        wait_for(lambda: events, 10, "the watch to fire")
        assert [(e.type, e.path) for e in events] == [("CHANGED", "/kept-through-failover")]
        c.set("/kept-through-failover", b"through the kept connection")
        assert states == [], f"the client's connection changed state: {states}"
        assert c.client_id[0] == session
    finally:
        stop_clients(c, writer)


@pytest.mark.skipif(KIND == "apache", reason="ZooKeeper's followers drop every client when they "
                    "lose their leader")
def test_a_write_sent_while_its_server_has_no_leader_waits_for_one_instead_of_failing(
        default_tick_ens):
    """A follower whose leader is killed while the other follower is paused has no quorum. A
    write its client sends then is held, not failed: once the paused follower resumes and the
    two elect a leader, the write is ordered and answered, and the client never saw its
    connection change state."""
    ens = default_tick_ens
    leader = ens.leader()
    kept_on, paused = [sid for sid in ens.participants if sid != leader]
    c, states = client_with_states(ens.hosts(kept_on))
    checker = None
    try:
        c.create("/held-through-failover", b"before")
        ens.pause(paused)
        ens.kill(leader)
        wait_for(lambda: ens.modes()[kept_on] not in ("leader", "follower"), 10,
                 f"server {kept_on} to lose its leader")
        sent = time.monotonic()
        pending = send_write_that_waits(c, "/held-through-failover", b"held",
                                        "a write was answered without a quorum")
        ens.resume(paused)
        resumed = time.monotonic()
        pending.get(timeout=10)
        print(f"held {time.monotonic() - sent:.3f}s, answered "
              f"{time.monotonic() - resumed:.3f}s after the resume")
        assert states == [], f"the client's connection changed state: {states}"
        assert int(mntr(ens.client_port(kept_on))["zk_leader_change_requests_held"]) == 1
        ens.wait_quorum(timeout_s=30, servers=[kept_on, paused])
        checker = client(ens.hosts(paused))
        checker.sync("/held-through-failover")
        assert checker.get("/held-through-failover")[0] == b"held"
    finally:
        ens.resume(paused)
        stop_clients(c, checker)


NO_CLIENTS_KEPT = pytest.mark.skipif(
    KIND == "apache", reason="ZooKeeper's followers drop every client when they lose their "
    "leader, failing the writes it waits for")


def assert_settled(ens, pending, states, kept_on, path, appended_again, since):
    """The write `pending` (setData of `path` through `kept_on`, to b"after") is answered, as
    written once, with no connection state change and no client dropped, and every server
    holds it; `appended_again` says whether `kept_on` had to append it a second time."""
    stat = pending.get(timeout=10)
    print(f"answered {time.monotonic() - since:.3f}s after {kept_on} lost its leader")
    assert stat.version == 1, "written once"
    assert states == [], f"the client's connection changed state: {states}"
    counters = mntr(ens.client_port(kept_on))
    assert (int(counters["zk_leader_change_writes_appended_again"]),
            int(counters["zk_leader_change_clients_dropped"])) == (int(appended_again), 0)
    running = [sid for sid in ens.participants if ens.running(sid)]
    ens.wait_quorum(timeout_s=30, servers=running)
    checker = client(ens.hosts(next(sid for sid in running if sid != kept_on)))
    try:
        checker.sync(path)
        data, stat = checker.get(path)
        assert (data, stat.version) == (b"after", 1)
    finally:
        stop_clients(checker)


@NO_CLIENTS_KEPT
def test_a_write_on_its_way_when_the_leader_dies_is_answered_not_failed(default_tick_ens):
    """A follower forwards its client's write to a leader that is paused, and so never orders
    it; then the leader is killed. The follower keeps the client, and once it serves the new
    leader's epoch, whose history shows that the write was never ordered, appends it again:
    the client gets its answer and never sees its connection change state (ZooKeeper fails the
    write with a connection loss, and the client cannot tell whether it happened)."""
    ens = default_tick_ens
    leader = ens.leader()
    kept_on = follower(ens)
    c, states = client_with_states(ens.hosts(kept_on))
    try:
        c.create("/on-its-way-through-failover", b"before")
        ens.pause(leader)
        pending = send_write_that_waits(c, "/on-its-way-through-failover", b"after",
                                        "a write was answered by a paused leader")
        ens.kill(leader)
        assert_settled(ens, pending, states, kept_on, "/on-its-way-through-failover",
                       appended_again=True, since=time.monotonic())
    finally:
        stop_clients(c)


@NO_CLIENTS_KEPT
def test_a_write_on_its_way_when_a_follower_loses_its_leader_is_answered_not_failed(
        default_tick_ens):
    """A follower forwards its client's write over a slowed link to its leader, and the link
    breaks before the write gets there: the follower leaves the quorum while the leader leads
    on with the other follower. When the link heals the follower rejoins the same epoch. Its
    leader dropped whatever it still held from the follower's earlier attempt, so the history
    it synchronizes the follower to shows the write was never ordered: the follower appends
    it again, and the client gets its answer with no change of connection state."""
    ens = default_tick_ens
    leader = ens.leader()
    kept_on = follower(ens)
    epoch = logged_zxid(ens, leader) >> 32
    c, states = client_with_states(ens.hosts(kept_on))
    try:
        c.create("/on-its-way-through-a-rejoin", b"before")
        for a, b in ((kept_on, leader), (leader, kept_on)):
            ens.delay(a, b, 3000)
        pending = send_write_that_waits(c, "/on-its-way-through-a-rejoin", b"after",
                                        "a write got through a link slowed by 3 s")
        ens.partition([kept_on], [leader])
        cut = time.monotonic()
        wait_for(lambda: srvr_mode(ens.client_port(kept_on), 1.0) != "follower", 5,
                 f"server {kept_on} to leave the quorum")
        ens.heal()
        assert_settled(ens, pending, states, kept_on, "/on-its-way-through-a-rejoin",
                       appended_again=True, since=cut)
        assert ens.leader() == leader and logged_zxid(ens, leader) >> 32 == epoch, \
            "the leader led on in its epoch"
    finally:
        stop_clients(c)


def test_a_session_talking_only_to_an_observer_lives_and_expires_once_everywhere(ens):
    """A session whose client talks only to a non-voting server must not expire while it talks
    (its liveness reaches whoever decides expiry), and when its process dies without a word its
    ephemerals vanish from every server."""
    timeout_s = 2.0
    holder = start_ephemeral_holder(ens.hosts(OBSERVER), "/live/held", timeout_s)
    try:
        time.sleep(4 * timeout_s)
        assert exists_everywhere(ens, "/live/held") == {sid: True for sid in ens.ids}
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        started = time.monotonic()
        wait_for(lambda: not any(exists_everywhere(ens, "/live/held").values()),
                 timeout_s + 20, "the dead session's ephemeral to go everywhere")
        print(f"ephemeral gone {time.monotonic() - started:.2f}s after the client died")
    finally:
        holder.kill()
        holder.wait()


def test_reconnecting_with_a_wrong_password_does_not_keep_a_dead_session_alive(ens):
    """Any reader can learn a session's id (an ephemeral's ephemeralOwner). A reconnection with
    the wrong password must not count as its client's sign of life, as in ZooKeeper, or a
    stranger could keep a dead client's ephemerals (its locks, its leadership) for ever."""
    timeout_ms = 2000
    checker = client(ens.hosts(ens.leader()))
    try:
        checker.ensure_path("/live")
        owner = zkwire.Connection.open(ens.hosts(follower(ens)), timeout_ms=timeout_ms)
        created = owner.call(zkwire.CREATE, zkwire.create_body(
            "/live/guessed", b"x", zkwire.OPEN_ACL_UNSAFE, zkwire.EPHEMERAL))
        assert created.err == zkwire.OK
        session_id = owner.handshake.session_id
        # The follower answers once two copies hold the create, maybe before the leader has
        # applied it: a read elsewhere needs a sync first.
        checker.sync("/live")
        assert checker.exists("/live/guessed").ephemeralOwner == session_id
        owner.close_socket()  # the owner dies without a word
        started = time.monotonic()
        attempts = 0

        def still_held():
            nonlocal attempts
            for sid in ens.ids:
                with contextlib.suppress(OSError, zkwire.ConnectionClosed):
                    host, port = ens.hosts(sid).rsplit(":", 1)
                    stranger = zkwire.Connection(host, int(port))
                    try:
                        answer = stranger.connect(session_id=session_id, passwd=b"\x01" * 16,
                                                  timeout_ms=timeout_ms)
                        assert (answer.session_id, answer.timeout_ms) == (0, 0), \
                            f"server {sid} took the session with the wrong password"
                        attempts += 1
                    finally:
                        stranger.close_socket()
            checker.sync("/live")
            return checker.exists("/live/guessed") is not None

        wait_for(lambda: not still_held(), timeout_ms / 1000 + 20,
                 "the dead session to expire although strangers reconnect to it")
        print(f"expired {time.monotonic() - started:.2f}s after its client died, "
              f"{attempts} wrong-password reconnections refused meanwhile")
        assert attempts > 0
    finally:
        checker.stop()
        checker.close()


def logged_zxid(ens, sid):
    for line in four_letter(ens.client_port(sid), "srvr").splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16)
    raise AssertionError(f"server {sid} gave no zxid")


def test_a_client_that_only_reads_keeps_its_session_without_a_log_entry_at_every_tick(ens):
    """A client that only reads (served by its own server) keeps its session alive, and its
    server reports it to the ensemble about once a third of its timeout, not at every half
    tick (Apache's reads and pings take no zxid at all). With tickTime 500 and a 10 s session,
    6 s of reads took 24 Touch entries when every half tick with activity had one; now about
    two."""
    reader = client(ens.hosts(follower(ens)), timeout=10)
    try:
        session_id = reader.client_id[0]
        reader.sync("/")
        before = logged_zxid(ens, ens.leader())
        finish = time.monotonic() + 6
        while time.monotonic() < finish:
            assert reader.exists("/") is not None
            time.sleep(0.05)
        reader.sync("/")
        after = logged_zxid(ens, ens.leader())
        assert after >> 32 == before >> 32, "the leader changed during the test"
        print(f"{after - before} log entries in 6 s of reads")
        assert after - before <= 8, f"{after - before} log entries while one client only read"
        assert reader.client_id[0] == session_id
    finally:
        reader.stop()
        reader.close()


def test_a_server_cut_off_from_the_quorum_serves_read_only_sessions_and_rejoins(local_sessions_ens):
    ens = local_sessions_ens
    cut = follower(ens)
    writer = client(ens.hosts(ens.leader()))
    try:
        writer.create("/ro", b"before")
        writer.sync("/ro")
        # Let the soon-isolated server apply the create before it is cut off.
        wait_for(lambda: exists_everywhere(ens, "/ro").get(cut), 10, "the create to reach it")
        ens.isolate(cut)
        wait_for(lambda: four_letter(ens.client_port(cut), "isro") == "ro", 30,
                 "the isolated server to turn read-only")
        reader = client(ens.hosts(cut), read_only=True)
        try:
            assert reader.get("/ro")[0] == b"before"
            with pytest.raises(NotReadOnlyCallError):
                reader.set("/ro", b"nope")
            # Writable sessions are refused: a client that may not read stale data goes elsewhere.
            strict = KazooClient(hosts=ens.hosts(cut), timeout=5)
            with pytest.raises(Exception):
                strict.start(timeout=3)
            strict.stop()
            strict.close()
            # A session the cut-off server made itself closes there, without a quorum.
            raw = zkwire.Connection.open(ens.hosts(cut), read_only=True)
            try:
                assert raw.handshake.read_only
                assert raw.call(zkwire.CLOSE_SESSION).err == zkwire.OK
                assert raw.is_closed_by_peer()
            finally:
                raw.close_socket()
        finally:
            reader.stop()
            reader.close()
        writer.set("/ro", b"after")
        ens.heal()
        wait_for(lambda: four_letter(ens.client_port(cut), "isro") == "rw", 30,
                 "the healed server to rejoin")
        back = client(ens.hosts(cut))
        try:
            back.sync("/ro")
            assert back.get("/ro")[0] == b"after"
            back.set("/ro", b"written through the rejoined server")
        finally:
            back.stop()
            back.close()
    finally:
        writer.stop()
        writer.close()


@pytest.mark.skipif(KIND == "apache", reason="ZooKeeper's sync is not linearizable across a "
                    "leader change (ZOOKEEPER-1675, Jepsen 2019): not a property to test it for")
def test_sync_then_read_never_returns_stale_data_from_a_deposed_leader(ens):
    """The leader is cut off from the others while a client of it keeps asking sync-then-read;
    the others elect a new leader and take a write. No sync-then-read that returns after that
    write was acknowledged may miss it: a cut-off leader cannot order the sync, so it answers
    nothing (and the client moves on) rather than something stale."""
    old = ens.leader()
    others = [sid for sid in ens.participants if sid != old]
    setup = client(ens.hosts(old))
    setup.ensure_path("/lin")
    setup.set("/lin", b"old")
    setup.stop()
    setup.close()
    # The reader starts on the old leader and moves on to the others when it is dropped.
    reader = KazooClient(hosts=",".join(ens.hosts(sid) for sid in [old] + others),
                         randomize_hosts=False, timeout=10)
    reader.start(timeout=10)
    assert reader.get("/lin")[0] == b"old"
    writer = client(",".join(ens.hosts(sid) for sid in others),
                    connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5))
    try:
        ens.partition([old], others + [OBSERVER])
        acknowledged_at = None
        deadline = time.monotonic() + 30
        while acknowledged_at is None and time.monotonic() < deadline:
            try:
                writer.set_async("/lin", b"new").get(timeout=5)
                acknowledged_at = time.monotonic()
            except Exception:  # connection loss, timeout: the write may not have happened
                time.sleep(0.05)
        assert acknowledged_at is not None, "the majority never took the write"
        stale = []
        answered = 0
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                reader.sync_async("/lin").get(timeout=2)
                value = reader.get_async("/lin").get(timeout=2)[0]
            except Exception:  # no answer from a server that cannot order anything
                time.sleep(0.1)
                continue
            answered += 1
            if value != b"new":
                stale.append(value)
        assert not stale, f"sync then read on the deposed leader returned {stale}"
        assert answered > 0, "the reader never got an answer anywhere"
    finally:
        reader.stop()
        reader.close()
        writer.stop()
        writer.close()


def catch_up_by_snapshot(directory, values, snap_count):
    """Stops a follower, writes values (path to bytes) and a few small nodes through the leader
    of a fresh ensemble that snapshots every snap_count entries or so, restarts the follower
    and checks that it serves every write, after installing a snapshot (zoolog)."""
    behind_ensemble = Ensemble.create(str(directory), 3, settings={"snapCount": str(snap_count)})
    try:
        behind_ensemble.up(timeout_s=90)
        behind = follower(behind_ensemble)
        behind_ensemble.stop(behind)
        writer = client(behind_ensemble.hosts(behind_ensemble.leader()), timeout=30)
        try:
            for path, value in values.items():
                writer.create(path, value)
            for i in range(40):  # several more snapshots' worth of entries
                writer.create(f"/small-{i}", b"s")
        finally:
            writer.stop()
            writer.close()
        behind_ensemble.start(behind)
        behind_ensemble.wait_quorum(timeout_s=60)
        reader = client(behind_ensemble.hosts(behind), timeout=30)
        try:
            reader.sync("/")
            for path, value in values.items():
                assert reader.get(path)[0] == value, path
            assert reader.exists("/small-39") is not None
        finally:
            reader.stop()
            reader.close()
        if KIND == "zoolog":
            log = (Path(behind_ensemble.servers[behind]["dir"]) / "server.log").read_text(errors="replace")
            assert "installed a snapshot" in log, "the follower caught up without a snapshot"
    finally:
        behind_ensemble.destroy()


def test_ttl_nodes_wait_out_their_ttl_whatever_the_members_wall_clocks_say(tmp_path):
    """Server 1's wall clock reads an hour behind server 2's, server 3's an hour ahead (through
    libfaketime). Whichever leads, a TTL node made through each member is deleted neither
    before its TTL (one stamped by a clock behind the reaper's would look an hour old) nor an
    hour after it (one stamped ahead would look new for an hour)."""
    ttl_ms = 10_000
    skewed = Ensemble.create(str(tmp_path), 3, wall_clocks={1: "-1h", 3: "+1h"},
                             settings={"-Dzookeeper.extendedTypesEnabled": "true",
                                       "-Dznode.container.checkIntervalMs": "200"})
    try:
        skewed.up(timeout_s=90)
        clients = {sid: client(skewed.hosts(sid)) for sid in skewed.participants}
        try:
            created = time.monotonic()
            for sid, c in clients.items():
                create_ttl(c, f"/ttl-{sid}", ttl_ms)
            time.sleep(2)
            reader = clients[skewed.leader()]
            reader.sync("/")
            elapsed_ms = (time.monotonic() - created) * 1000
            if elapsed_ms < ttl_ms:  # a stalled test process proves nothing here
                assert sorted(reader.get_children("/")) == ["ttl-1", "ttl-2", "ttl-3", "zookeeper"]
            wait_for(lambda: not any(n.startswith("ttl-") for n in reader.get_children("/")),
                     ttl_ms / 1000 + 30, "every TTL node to be reaped")
        finally:
            for c in clients.values():
                c.stop()
                c.close()
    finally:
        skewed.destroy()


def test_a_follower_far_behind_catches_up_by_a_snapshot(tmp_path):
    """A follower that was down while the leader snapshotted past its log gets the leader's
    snapshot, and with it every write, 6 MiB of values among them."""
    values = {f"/big-{i}": bytes([i]) * (512 * 1024) for i in range(12)}
    catch_up_by_snapshot(tmp_path / "ensemble", values, snap_count=10)


@pytest.mark.skipif(os.environ.get("ZK_BIG_SNAPSHOT") != "1",
                    reason="ZK_BIG_SNAPSHOT=1: 1.6 GB of values, about 10 GiB of memory and 15 GB of disk")
def test_a_snapshot_larger_than_one_piece_reaches_a_follower(tmp_path):
    """The same with 1,600 values of 1 MB: the snapshot the follower gets is larger than one
    1 GiB piece of zoolog's peer protocol, so it travels in two."""
    value = b"v" * 1_000_000
    values = {f"/n{i}": value for i in range(1600)}
    catch_up_by_snapshot(tmp_path / "ensemble", values, snap_count=400)


def newest_snapshot_zxid(member_dir):
    """The zxid in the name of a member's newest snapshot (zoolog: snapshot-<hex>...,
    ZooKeeper: snapshot.<hex>), or -1."""
    zxids = [int(path.name.split(".")[1], 16) for path in Path(member_dir).rglob("snapshot.*")]
    zxids += [int(path.name[len("snapshot-"):len("snapshot-") + 16], 16)
              for path in Path(member_dir).rglob("snapshot-*")]
    return max(zxids, default=-1)


def test_large_values_make_every_member_snapshot_long_before_snap_count(tmp_path):
    """snapSizeLimitInKb: a member snapshots once that many bytes are logged, however few the
    entries. 24 values of 256 KB, with a limit of 1 MiB and the default snapCount of 100,000,
    leave every member a snapshot taken in the second half of the writes. (A zoolog member holds
    the entries since its last snapshot in memory, so this bounds its memory too.)"""
    sized = Ensemble.create(str(tmp_path / "ensemble"), 3, settings={"snapSizeLimitInKb": "1024"})
    try:
        sized.up(timeout_s=90)
        writer = client(sized.hosts(sized.leader()), timeout=30)
        try:
            zxids = [writer.create(f"/v{i}", b"v" * 256 * 1024) and writer.exists(f"/v{i}").czxid
                     for i in range(24)]
        finally:
            writer.stop()
            writer.close()
        late = zxids[12]
        wait_for(lambda: all(newest_snapshot_zxid(sized.servers[sid]["dir"]) >= late for sid in sized.ids),
                 30, f"a snapshot at or after zxid {late:#x} on every member")
    finally:
        sized.destroy()


def test_a_follower_that_missed_more_than_its_log_queue_takes_rejoins(ens):
    """A follower that was down while 70 MB were written catches up through one sync that holds
    more than a zoolog member's log queue takes at once (64 MiB), and serves every write."""
    behind = follower(ens)
    ens.stop(behind)
    value = b"d" * 1_000_000
    writer = client(ens.hosts(ens.leader()))
    try:
        for i in range(70):
            writer.create(f"/long-sync-{i}", value)
    finally:
        writer.stop()
        writer.close()
    ens.start(behind)
    ens.wait_quorum(timeout_s=60)
    reader = client(ens.hosts(behind))
    try:
        reader.sync("/")
        for i in (0, 35, 69):
            assert reader.get(f"/long-sync-{i}")[0] == value, i
    finally:
        reader.stop()
        reader.close()


def create_once(c, path, value):
    """A create that a retry after a connection loss may find already done."""
    try:
        c.create(path, value)
    except NodeExistsError:
        pass


def values_under(ens, sid, parent):
    reader = client(ens.hosts(sid))
    try:
        reader.sync(parent)
        return {name: reader.get(f"{parent}/{name}")[0] for name in reader.get_children(parent)}
    finally:
        reader.stop()
        reader.close()


@pytest.mark.skipif(KIND == "apache", reason="ZooKeeper's quorum messages carry no checksum of "
                    "their own (they rely on TCP's); what a flipped bit does to it is not tested")
def test_bits_flipped_between_members_are_refused_and_never_reach_the_data(ens):
    """The proxy flips a bit in one of every few chunks the leader sends a follower and the
    observer, and the follower sends the leader, while a client writes through the follower.
    Each corrupted message is refused and its connection dropped; the data every member ends
    with is what the client wrote."""
    leader, other = ens.leader(), follower(ens)
    links = ((leader, other), (other, leader), (leader, OBSERVER))
    for a, b in links:
        ens.corrupt(a, b, 30)
    retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5)
    writer = client(ens.hosts(other), connection_retry=retry, command_retry=retry)
    written = {f"n{i:03d}": f"value {i} ".encode() * 20 for i in range(150)}
    try:
        writer.retry(writer.ensure_path, "/flipped")
        for name, value in written.items():
            writer.retry(create_once, writer, f"/flipped/{name}", value)
        corrupted = {(a, b): n for a, b, _, n in ens.proxy_status()["corruptions"]}
    finally:
        writer.stop()
        writer.close()
    ens.heal()
    ens.wait_quorum(timeout_s=60)
    assert all(corrupted[link] > 0 for link in links), corrupted
    for sid in ens.ids:
        assert values_under(ens, sid, "/flipped") == written, f"server {sid}"
    refused = {sid: int(mntr(ens.client_port(sid))["zk_peer_messages_refused"])
               for sid in (leader, other, OBSERVER)}
    assert all(count > 0 for count in refused.values()), refused
    assert all("a peer's message is refused" in ens.log_tail(sid, lines=100_000)
               for sid in refused)

