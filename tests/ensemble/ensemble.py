"""A replicated ZooKeeper-compatible ensemble of real processes on 127.0.0.1, for fault tests.

Starts N participants and M observers of kind $ZK_KIND (zoolog, the default, or apache), each in
DIR/s<ID> with its own zoo.cfg, data/myid, server.log and pid file; DIR/ensemble.json holds the
layout so that separate processes (the zk-ensemble CLI, pytest, workload.py) can drive the same
ensemble. With proxy=True every server-to-server connection goes through faultproxy.py: server i's
zoo.cfg lists server j (j != i) at proxy ports that forward to j's real quorum and election ports,
so links can be cut per ordered pair (partition, isolate, heal, delay). With
network="namespaces" (root only) every server runs in a network namespace of its own instead, at
198.18.N.<id> on a bridge (RFC 2544's benchmarking range), and cut_network/mend_network take a
server off the bridge and back: a network that loses every packet silently, as a cut cable does,
where the proxy resets connections. A cut may also go one way only (nftables' `nft` inside the
server's namespace): the server hears nothing from its peers, or its peers hear nothing from it,
while clients still reach it; and so may a cut of the link between two servers only.

    ens = Ensemble.create("/tmp/e", 3, proxy=True)   # writes the configs
    ens.up()                                         # starts everything, waits for a quorum
    ens.kill(ens.leader()); ens.start(1); ens.partition([1], [2, 3]); ens.heal()
    ens.destroy()                                    # kills every process it started

Stdlib only. Every wait has a timeout and raises EnsembleError when it expires.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

DEFAULT_SETTINGS = {
    "tickTime": "500",
    "initLimit": "10",
    "syncLimit": "5",
    "4lw.commands.whitelist": "*",
    "maxClientCnxns": "0",
    "admin.enableServer": "false",
    "clientPortAddress": "127.0.0.1",
}


class EnsembleError(RuntimeError):
    pass


class StandaloneError(EnsembleError):
    """The servers run standalone although their zoo.cfg lists an ensemble: no ensemble mode."""


class NetworkUnavailable(EnsembleError):
    """This machine would not build the namespaces and bridge of network="namespaces"."""


def free_ports(count):
    """count distinct free ports (all held open together so none is handed out twice)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


HOLDER_SCRIPT = """
import sys, time
from kazoo.client import KazooClient
hosts, path, timeout_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
c = KazooClient(hosts=hosts, timeout=timeout_s)
c.start(timeout=30)
c.ensure_path(path.rsplit('/', 1)[0] or '/')
c.create(path, b'x', ephemeral=True)
print('created', flush=True)
time.sleep(600)
"""


def start_ephemeral_holder(hosts, path, timeout_s):
    """A kazoo client in a process of its own, with a session of timeout_s, that creates the
    ephemeral node path (and its parents) and then only keeps its session: kill the process to
    leave the session behind. Returns the process once the node exists (kazoo must be
    installed)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER_SCRIPT, hosts, path, str(timeout_s)],
                              stdout=subprocess.PIPE, text=True)
    if holder.stdout.readline().strip() != "created":
        holder.kill()
        holder.wait()
        raise EnsembleError(f"the holder of {path} did not create it")
    return holder


def four_letter(port, word, timeout_s=2.0, host="127.0.0.1"):
    """The answer to a four-letter word, or '' when the server does not answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(word.encode())
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def mntr(port, host="127.0.0.1"):
    """{key: value} of the server's mntr ({} when it does not answer)."""
    answer = four_letter(port, "mntr", host=host)
    return dict(line.split("\t", 1) for line in answer.splitlines() if "\t" in line)


def srvr_mode(port, timeout_s=2.0, host="127.0.0.1"):
    """'leader', 'follower', 'observer', 'standalone' or None (not serving / not answering)."""
    for line in four_letter(port, "srvr", timeout_s, host).splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def run_ip(*args):
    """Runs `ip ARGS`; raises EnsembleError with its complaint when it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise EnsembleError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Namespaces:
    """The network of an ensemble created with network="namespaces": a bridge, and for each
    server a namespace joined to it by a veth pair (interface names stay within 15 bytes)."""

    def __init__(self, layout):
        self.tag, self.subnet = layout["tag"], layout["subnet"]

    @staticmethod
    def layout():
        """A tag, and so a subnet, that no bridge of another ensemble on this machine holds:
        the first free one from the creating process's pid on (one process may create several
        ensembles)."""
        for step in range(250):
            tag = (os.getpid() + step) % 250
            if not Path(f"/sys/class/net/zl{tag}br").exists():
                return {"tag": tag, "subnet": f"198.18.{tag}"}
        raise NetworkUnavailable("every 198.18.N subnet has an ensemble's bridge on it")

    @property
    def bridge(self):
        return f"zl{self.tag}br"

    def namespace(self, sid):
        return f"zl{self.tag}n{sid}"

    def outer_end(self, sid):
        return f"zl{self.tag}h{sid}"

    def up(self, hosts):
        """Builds the bridge (this side's address .254) and one namespace per server id in
        hosts ({id: address}); NetworkUnavailable when the machine will not have a bridge or
        a namespace."""
        try:
            run_ip("link", "add", self.bridge, "type", "bridge")
            run_ip("netns", "add", self.namespace(0))
            run_ip("netns", "del", self.namespace(0))
        except EnsembleError as e:
            raise NetworkUnavailable(str(e)) from None
        run_ip("addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        run_ip("link", "set", self.bridge, "up")
        for sid, host in hosts.items():
            ns, outer, inner = self.namespace(sid), self.outer_end(sid), f"zl{self.tag}i{sid}"
            run_ip("netns", "add", ns)
            run_ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            run_ip("link", "set", inner, "netns", ns)
            run_ip("link", "set", outer, "master", self.bridge)
            run_ip("link", "set", outer, "up")
            run_ip("-n", ns, "addr", "add", f"{host}/24", "dev", inner)
            run_ip("-n", ns, "link", "set", inner, "up")
            run_ip("-n", ns, "link", "set", "lo", "up")

    def down(self, ids):
        """Removes what up() built (a namespace takes its veth pair with it); what is already
        gone is no error."""
        for sid in ids:
            subprocess.run(["ip", "netns", "del", self.namespace(sid)], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def cut(self, sid):
        run_ip("link", "set", self.outer_end(sid), "nomaster")

    def drop_peer_packets(self, sid, direction, peers):
        """Drops, inside server sid's namespace, the packets it receives from the addresses in
        peers (direction "in"), sends to them ("out"), or both; NetworkUnavailable without nft."""
        hooks = {"in": [("input", "saddr")], "out": [("output", "daddr")],
                 "both": [("input", "saddr"), ("output", "daddr")]}[direction]
        chains = "".join(f" chain {hook} {{\n  type filter hook {hook} priority 0;\n"
                         f"  ip {match} {{ {', '.join(peers)} }} drop\n }}\n"
                         for hook, match in hooks)
        self._nft(sid, "-f", "-", script=f"table inet zoolog_cut {{\n{chains}}}\n")

    def mend(self, sid):
        """Puts server sid back on the bridge and drops none of its packets; what is already
        mended is no error. (Where nft is missing or refused, no drop rule was ever added: the
        flush may fail unseen.)"""
        run_ip("link", "set", self.outer_end(sid), "master", self.bridge)
        subprocess.run(["ip", "netns", "exec", self.namespace(sid), "nft", "flush", "ruleset"],
                       capture_output=True)

    def _nft(self, sid, *args, script=None):
        if shutil.which("nft") is None:
            raise NetworkUnavailable("one-way cuts need nftables' nft")
        done = subprocess.run(["ip", "netns", "exec", self.namespace(sid), "nft", *args],
                              input=script, capture_output=True, text=True)
        if done.returncode != 0:
            raise EnsembleError(f"nft {' '.join(args)} in {self.namespace(sid)}: "
                                f"{done.stderr.strip()}")


def pid_alive(pid):
    """True when pid runs (a zombie counts as dead; our own dead children are reaped)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def pid_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


class Ensemble:
    def __init__(self, directory):
        self.dir = Path(directory).resolve()
        state_file = self.dir / "ensemble.json"
        if not state_file.exists():
            raise EnsembleError(f"{state_file} missing: run `up` first")
        self.state = json.loads(state_file.read_text())
        self.kind = self.state["kind"]
        self.servers = {int(k): v for k, v in self.state["servers"].items()}
        network = self.state.get("namespaces")
        self.namespaces = Namespaces(network) if network else None

    # ---- layout -------------------------------------------------------------------------------

    @classmethod
    def create(cls, directory, participants, observers=0, proxy=False, settings=None, kind=None,
               wall_clocks=None, network="loopback"):
        """Writes DIR/ensemble.json and every server's zoo.cfg and myid; starts nothing.
        wall_clocks maps server ids to libfaketime offsets ("-1h", "+30m"): those servers' wall
        clocks read that far off (their monotonic clocks do not). network is "loopback" (every
        server on 127.0.0.1) or "namespaces" (see the module's documentation)."""
        kind = kind or os.environ.get("ZK_KIND", "zoolog")
        if kind not in ("zoolog", "apache"):
            raise EnsembleError(f"ZK_KIND must be zoolog or apache, not {kind}")
        if network not in ("loopback", "namespaces") or (network == "namespaces" and proxy):
            raise EnsembleError(f"network {network!r} (with proxy={proxy}) is not a layout")
        namespaces = Namespaces.layout() if network == "namespaces" else None
        d = Path(directory).resolve()
        d.mkdir(parents=True, exist_ok=True)
        ids = list(range(1, participants + observers + 1))
        ports = iter(free_ports(3 * len(ids) + (2 * len(ids) * (len(ids) - 1) if proxy else 0)))
        servers = {}
        for i in ids:
            servers[i] = {
                "role": "participant" if i <= participants else "observer",
                "client_port": next(ports), "quorum_port": next(ports), "election_port": next(ports),
                "dir": str(d / f"s{i}"),
                "wall_clock": (wall_clocks or {}).get(i),
                "host": f"{namespaces['subnet']}.{i}" if namespaces else "127.0.0.1",
            }
        links = []
        if proxy:
            for i in ids:
                for j in ids:
                    if i == j:
                        continue
                    for kind_ in ("quorum", "election"):
                        links.append({"src": i, "dst": j, "kind": kind_, "listen": next(ports),
                                      "target": servers[j][f"{kind_}_port"]})
        merged = dict(DEFAULT_SETTINGS)
        # Keys starting with -D are system properties: JVM flags for Apache, arguments for zoolog.
        properties = [f"{k}={v}" for k, v in (settings or {}).items() if k.startswith("-D")]
        merged.update({k: v for k, v in (settings or {}).items() if not k.startswith("-D")})
        state = {"kind": kind, "servers": {str(k): v for k, v in servers.items()},
                 "proxy": bool(proxy), "links": links, "settings": merged,
                 "properties": properties, "namespaces": namespaces}
        for i in ids:
            sdir = Path(servers[i]["dir"])
            (sdir / "data").mkdir(parents=True, exist_ok=True)
            (sdir / "data" / "myid").write_text(f"{i}\n")
            lines = [f"{k}={v}" for k, v in merged.items()]
            lines += [f"dataDir={sdir / 'data'}", f"clientPort={servers[i]['client_port']}"]
            if namespaces:
                lines.append(f"clientPortAddress={servers[i]['host']}")
            if kind == "apache" and servers[i]["role"] == "observer":
                lines.append("peerType=observer")
            if kind == "zoolog" and "zoolog.serverThreads" not in merged:
                # Members sharing this machine share its CPUs (as `zoolog ensemble up` does).
                lines.append(f"zoolog.serverThreads={max(1, (os.cpu_count() or 1) // len(ids))}")
            for j in ids:
                if j == i or not proxy:
                    q, e = servers[j]["quorum_port"], servers[j]["election_port"]
                else:
                    q = next(l["listen"] for l in links if (l["src"], l["dst"], l["kind"]) == (i, j, "quorum"))
                    e = next(l["listen"] for l in links if (l["src"], l["dst"], l["kind"]) == (i, j, "election"))
                lines.append(f"server.{j}={servers[j]['host']}:{q}:{e}:{servers[j]['role']}")
            (sdir / "zoo.cfg").write_text("\n".join(lines) + "\n")
        if proxy:
            (d / "links.json").write_text(json.dumps({"links": links}, indent=1))
        (d / "ensemble.json").write_text(json.dumps(state, indent=1))
        return cls(d)

    @property
    def ids(self):
        return sorted(self.servers)

    @property
    def participants(self):
        return [i for i in self.ids if self.servers[i]["role"] == "participant"]

    def client_port(self, sid):
        return self.servers[sid]["client_port"]

    def host(self, sid):
        return self.servers[sid].get("host", "127.0.0.1")

    def hosts(self, sid):
        return f"{self.host(sid)}:{self.client_port(sid)}"

    @property
    def connect(self):
        return ",".join(self.hosts(i) for i in self.ids)

    def pid(self, sid):
        try:
            return int((Path(self.servers[sid]["dir"]) / "pid").read_text())
        except (OSError, ValueError):
            return None

    def running(self, sid):
        pid = self.pid(sid)
        return pid is not None and pid_alive(pid)

    def paused(self, sid):
        pid = self.pid(sid)
        return pid is not None and pid_state(pid) == "T"

    def info(self):
        return {"connect": self.connect, "kind": self.kind, "dir": str(self.dir),
                "servers": {str(i): {"client_port": self.client_port(i), "pid": self.pid(i),
                                     "role": self.servers[i]["role"]} for i in self.ids}}

    # ---- processes ----------------------------------------------------------------------------

    def _command(self, sid):
        cfg = str(Path(self.servers[sid]["dir"]) / "zoo.cfg")
        if self.kind == "apache":
            cp = os.environ.get("APACHE_ZK_CLASSPATH", "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar")
            # Debian ships no slf4j binding with ZooKeeper: route its log through commons-logging
            # to java.util.logging (stderr, into server.log) when those jars are present.
            for jar in ("/usr/share/java/slf4j-jcl.jar", "/usr/share/java/commons-logging.jar"):
                if os.path.exists(jar) and jar not in cp:
                    cp += ":" + jar
            return ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
                    f"-Dzookeeper.log.dir={self.servers[sid]['dir']}",
                    "-Dzookeeper.root.logger=INFO,CONSOLE", "-Dzookeeper.admin.enableServer=false",
                    *self.state.get("properties", []),
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg]
        binary = os.environ.get("ZOOLOG_BIN", str(REPO / "target" / "release" / "zoolog"))
        return [binary, "serve", "--config", cfg, *self.state.get("properties", [])]

    def _launcher(self, sid):
        """What runs a server's command: nothing, or `ip netns exec` into its namespace (which
        execs the command, so the pid is the server's)."""
        if self.namespaces is None:
            return []
        return ["ip", "netns", "exec", self.namespaces.namespace(sid)]

    def _environment(self, sid):
        """The server's environment: ours, with its wall clock set off by libfaketime if asked."""
        offset = self.servers[sid].get("wall_clock")
        if offset is None:
            return None
        library = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"), None)
        if library is None:
            raise EnsembleError("a skewed wall clock needs libfaketime (Debian's faketime)")
        return {**os.environ, "LD_PRELOAD": str(library), "FAKETIME": offset,
                "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

    def start(self, sid, wait_s=30.0):
        """Starts server sid (again) with its config and data; waits until it answers ruok."""
        if self.running(sid):
            raise EnsembleError(f"server {sid} is already running (pid {self.pid(sid)})")
        sdir = Path(self.servers[sid]["dir"])
        with open(sdir / "server.log", "ab") as log:
            log.write(f"\n==== start {time.strftime('%H:%M:%S')} ====\n".encode())
            log.flush()
            proc = subprocess.Popen(self._launcher(sid) + self._command(sid), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=self._environment(sid))
        (sdir / "pid").write_text(str(proc.pid))
        if wait_s:
            self.wait_ruok(sid, wait_s)
        return proc.pid

    def wait_ruok(self, sid, wait_s):
        deadline = time.monotonic() + wait_s
        while four_letter(self.client_port(sid), "ruok", 1.0, self.host(sid)) != "imok":
            if not self.running(sid):
                raise EnsembleError(f"server {sid} exited during start; log tail:\n{self.log_tail(sid)}")
            if time.monotonic() > deadline:
                raise EnsembleError(f"server {sid} did not answer ruok in {wait_s}s")
            time.sleep(0.1)

    def _signal(self, sid, sig):
        pid = self.pid(sid)
        if pid is None or not pid_alive(pid):
            return False
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True

    def _wait_dead(self, sid, timeout_s):
        pid = self.pid(sid)
        deadline = time.monotonic() + timeout_s
        while pid is not None and pid_alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def kill(self, sid):
        """SIGKILL (a crash); returns once the process is gone."""
        self._signal(sid, signal.SIGKILL)
        if not self._wait_dead(sid, 10):
            raise EnsembleError(f"server {sid} survived SIGKILL")

    def stop(self, sid=None):
        """SIGTERM (SIGKILL after 10 s) one server, or every server, the proxy and the
        namespaces."""
        for i in ([sid] if sid is not None else self.ids):
            self._signal(i, signal.SIGCONT)
            self._signal(i, signal.SIGTERM)
            if not self._wait_dead(i, 10):
                self.kill(i)
        if sid is None:
            self._take_down_network()

    def destroy(self):
        """Kills every server and takes the proxy and the namespaces down (test teardown)."""
        for i in self.ids:
            self._signal(i, signal.SIGKILL)
        for i in self.ids:
            self._wait_dead(i, 10)
        self._take_down_network()

    def _take_down_network(self):
        self._stop_proxy()
        if self.namespaces is not None:
            self.namespaces.down(self.ids)

    def cut_network(self, sid, direction="both", peers=None):
        """Loses server sid's packets silently. Given no peers, every packet to or from it
        (direction "both": it is off the network, to clients too), or only those it receives
        from the other servers ("in"), or only those it sends them ("out"). Given peers (server
        ids), only its packets with those, one way or both. Clients still reach it, except in
        the first case."""
        if direction == "both" and peers is None:
            self.namespaces.cut(sid)
            return
        cut_off = [i for i in self.ids if i != sid] if peers is None else peers
        self.namespaces.drop_peer_packets(sid, direction, [self.host(i) for i in cut_off])

    def mend_network(self, sid):
        self.namespaces.mend(sid)

    def pause(self, sid):
        if not self._signal(sid, signal.SIGSTOP):
            raise EnsembleError(f"server {sid} is not running")

    def resume(self, sid):
        self._signal(sid, signal.SIGCONT)

    def log_tail(self, sid, lines=40):
        try:
            text = (Path(self.servers[sid]["dir"]) / "server.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # ---- cluster state ------------------------------------------------------------------------

    def modes(self):
        """{id: mode or None} for every server; paused or dead servers are None without asking."""
        return {i: (srvr_mode(self.client_port(i), 1.0, self.host(i))
                    if self.running(i) and not self.paused(i) else None) for i in self.ids}

    def leader(self):
        """The id whose srvr says Mode: leader, or None."""
        leaders = [i for i, m in self.modes().items() if m == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def followers(self):
        return [i for i, m in self.modes().items() if m == "follower"]

    def wait_quorum(self, timeout_s=60.0, servers=None):
        """Waits until exactly one leader serves and every given server (default: every running,
        unpaused one) reports leader/follower, or observer for observers. Returns the leader."""
        deadline = time.monotonic() + timeout_s
        standalone_since = None
        last = None
        while time.monotonic() < deadline:
            want = servers if servers is not None else [
                i for i in self.ids if self.running(i) and not self.paused(i)]
            last = self.modes()
            leaders = [i for i, m in last.items() if m == "leader"]
            ok = len(leaders) == 1 and all(
                last[i] == "observer" if self.servers[i]["role"] == "observer"
                else last[i] in ("leader", "follower") for i in want)
            if ok:
                return leaders[0]
            if any(m == "standalone" for m in last.values()):
                standalone_since = standalone_since or time.monotonic()
                if time.monotonic() - standalone_since > 5:
                    raise StandaloneError(f"{self.kind} runs standalone with an ensemble zoo.cfg "
                                          f"(no ensemble mode); modes: {last}")
            else:
                standalone_since = None
            time.sleep(0.2)
        raise EnsembleError(f"no quorum in {timeout_s}s; modes: {last}")

    def up(self, timeout_s=90.0):
        """Starts the proxy (if any) and every server, then waits for a quorum. Returns info()."""
        if self.state["proxy"]:
            self._start_proxy()
        try:
            if self.namespaces is not None:
                self.namespaces.up({i: self.host(i) for i in self.ids})
            started = [i for i in self.ids if not self.running(i)]
            for i in started:
                self.start(i, wait_s=0)
            for i in started:
                self.wait_ruok(i, 30.0)
            self.wait_quorum(timeout_s)
        except BaseException:
            self.destroy()
            raise
        return self.info()

    # ---- proxy --------------------------------------------------------------------------------

    @property
    def control_path(self):
        return str(self.dir / "proxy.sock")

    def _start_proxy(self, wait_s=15.0):
        ready = self.dir / "proxy.ready"
        if ready.exists():
            ready.unlink()
        with open(self.dir / "proxy.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, str(HERE / "faultproxy.py"), "--links", str(self.dir / "links.json"),
                 "--control", self.control_path, "--ready-file", str(ready)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        (self.dir / "proxy.pid").write_text(str(proc.pid))
        deadline = time.monotonic() + wait_s
        while not ready.exists():
            if not pid_alive(proc.pid) or time.monotonic() > deadline:
                raise EnsembleError("fault proxy did not start; see " + str(self.dir / "proxy.log"))
            time.sleep(0.05)

    def _stop_proxy(self):
        try:
            pid = int((self.dir / "proxy.pid").read_text())
        except (OSError, ValueError):
            return
        if pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)

    def proxy(self, line, timeout_s=5.0):
        """Sends one control command to the proxy and returns its answer (raises on 'error')."""
        if not self.state["proxy"]:
            raise EnsembleError("this ensemble was started without --proxy")
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout_s)
            s.connect(self.control_path)
            s.sendall(line.encode() + b"\n")
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
        answer = answer.decode().strip()
        if not answer.startswith("ok"):
            raise EnsembleError(f"proxy: {line!r}: {answer}")
        return answer[2:].strip()

    def partition(self, *groups, mode="hold"):
        """Cuts every link between servers of different groups, both ways; servers in no group
        keep their links."""
        groups = [[int(x) for x in g] for g in groups]
        for gi, a_group in enumerate(groups):
            for gj, b_group in enumerate(groups):
                if gi != gj:
                    for a in a_group:
                        for b in b_group:
                            self.proxy(f"block {a} {b} {mode}")

    def isolate(self, sid, mode="hold"):
        self.partition([sid], [i for i in self.ids if i != sid], mode=mode)

    def block(self, a, b, mode="hold"):
        self.proxy(f"block {a} {b} {mode}")

    def unblock(self, a, b):
        self.proxy(f"unblock {a} {b}")

    def delay(self, a, b, ms):
        self.proxy(f"delay {a} {b} {ms}")

    def corrupt(self, a, b, every):
        """Flips one random bit in every `every`th chunk a sends to b (0 stops it)."""
        self.proxy(f"corrupt {a} {b} {every}")

    def heal(self):
        self.proxy("heal")

    def proxy_status(self):
        return json.loads(self.proxy("status"))

    def status(self):
        out = self.info()
        modes = self.modes()
        for i in self.ids:
            out["servers"][str(i)].update(running=self.running(i), paused=self.paused(i), mode=modes[i])
        if self.state["proxy"]:
            try:
                out["proxy"] = self.proxy_status()
            except (OSError, EnsembleError) as e:
                out["proxy"] = f"unreachable: {e}"
        return out
