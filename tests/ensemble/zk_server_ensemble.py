#!/usr/bin/env python3
"""The ZK_TOPOLOGY=ensemble half of tests/zk-server (see the comment there): the same commands
(start, restart, stop, kill, pause, resume) for a 3-server ensemble in DIR, printing the client
port of one member so that every end-to-end suite runs unchanged against an ensemble.

    start DIR [key=value ...] [-Dprop=value ...]   3 members, same settings; prints one port
    restart DIR                                    start every member again; the same port
    stop|kill|pause|resume DIR                     every member

ZK_ENSEMBLE_MEMBER=leader|follower|rotate (default rotate) picks the member; ZK_ENSEMBLE_SIZE
(default 3) the number of participants.
"""
import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from ensemble import Ensemble, EnsembleError, free_ports  # noqa: E402

# The standalone defaults of tests/zk-server (tickTime 2000, so that session timeouts up to 40 s
# negotiate as they do standalone), plus the ensemble timing of tests/ensemble.
SETTINGS = {
    "tickTime": "2000",
    "initLimit": "10",
    "syncLimit": "5",
    "4lw.commands.whitelist": "*",
    "maxClientCnxns": "0",
    "admin.enableServer": "false",
    "clientPortAddress": "127.0.0.1",
}
# Settings that name a port of their own: one member keeps the requested one, the others get a
# free port each (three servers cannot listen on one port).
PORT_KEYS = ("admin.serverPort", "metricsProvider.httpPort", "secureClientPort")
QUORUM_TIMEOUT_S = float(os.environ.get("ZK_READY_TIMEOUT_S", "60"))


def fail(message):
    print(f"zk-server (ensemble): {message}", file=sys.stderr)
    sys.exit(1)


def want_role():
    choice = os.environ.get("ZK_ENSEMBLE_MEMBER", "rotate")
    if choice in ("leader", "follower"):
        return choice
    if choice != "rotate":
        fail(f"ZK_ENSEMBLE_MEMBER must be leader, follower or rotate, not {choice}")
    path = os.environ.get("ZK_ENSEMBLE_ROTATE_FILE") or os.path.join(
        os.environ.get("TMPDIR", "/tmp"), f"zk-server-rotate.{os.getuid()}")
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        try:
            count = int(f.read().strip() or 0)
        except ValueError:
            count = 0
        f.seek(0)
        f.truncate()
        f.write(f"{count + 1}\n")
    return "leader" if count % 2 == 0 else "follower"


def link_member(ens, directory, member):
    """DIR/pid, DIR/port and DIR/server.log name the picked member, as they do standalone."""
    (directory / "pid").write_text(str(ens.pid(member)))
    (directory / "port").write_text(str(ens.client_port(member)))
    log = directory / "server.log"
    if log.is_symlink() or log.exists():
        log.unlink()
    log.symlink_to(Path(ens.servers[member]["dir"]) / "server.log")


def bring_up(ens, first):
    """Starts every stopped member, `first` before the others (with equal histories the election
    prefers the highest id it hears, so the first one up usually leads); waits for a quorum."""
    try:
        order = [first] + [i for i in ens.ids if i != first]
        for i in order:
            if not ens.running(i):
                ens.start(i, wait_s=0)
                if i == first:
                    ens.wait_ruok(i, 30.0)
        for i in order:
            ens.wait_ruok(i, 30.0)
        return ens.wait_quorum(QUORUM_TIMEOUT_S)
    except BaseException:
        ens.destroy()
        raise


def start(directory, args):
    directory.mkdir(parents=True, exist_ok=True)
    settings, props = dict(SETTINGS), []
    for arg in args:
        if arg.startswith("-D"):
            props.append(arg)
        elif "=" in arg:
            k, v = arg.split("=", 1)
            settings[k] = v
        else:
            fail(f"bad argument {arg}")
    size = int(os.environ.get("ZK_ENSEMBLE_SIZE", "3"))
    role = want_role()
    # The highest id is started first and so expected to lead; a follower is then the lowest id.
    expected = size if role == "leader" else 1
    # -Dzookeeper.admin.serverPort is the zoo.cfg key admin.serverPort for both kinds (Apache
    # turns unknown zoo.cfg keys into zookeeper.* system properties).
    for p in [p for p in props if p.split("=", 1)[0] == "-Dzookeeper.admin.serverPort"]:
        props.remove(p)
        settings["admin.serverPort"] = p.split("=", 1)[1]
    own = {k: settings.pop(k) for k in PORT_KEYS if k in settings}
    # ensemble.py gives settings named -Dname to every server as system properties.
    for p in props:
        k, _, v = p.partition("=")
        settings[k] = v
    ens = Ensemble.create(directory, size, settings=settings,
                          kind=os.environ.get("ZK_KIND", "zoolog"))
    for i in ens.ids:
        mine = own if i == expected else dict(zip(own, free_ports(len(own))))
        if mine:
            with open(Path(ens.servers[i]["dir"]) / "zoo.cfg", "a") as cfg:
                cfg.writelines(f"{k}={v}\n" for k, v in mine.items())
    ens = Ensemble(directory)
    leader = bring_up(ens, size)
    modes = ens.modes()
    candidates = [i for i in ens.participants if (modes[i] == "leader") == (role == "leader")]
    if own:
        member = expected  # it holds the requested ports, whatever it turned out to be
        if member not in candidates:
            print(f"zk-server (ensemble): wanted a {role} with the requested ports, but server "
                  f"{member} is {modes[member]} (leader {leader}); using it anyway", file=sys.stderr)
    else:
        member = candidates[0]
    (directory / "member.json").write_text(json.dumps(
        {"member": member, "wanted": role, "mode_at_start": modes[member], "leader": leader,
         "connect": ens.connect}) + "\n")
    link_member(ens, directory, member)
    print(ens.client_port(member))


def main(argv):
    if len(argv) < 2:
        fail("usage: zk-server start|restart|stop|kill|pause|resume DIR ...")
    cmd, directory, rest = argv[0], Path(argv[1]).resolve(), argv[2:]
    if cmd == "start":
        return start(directory, rest)
    ens = Ensemble(directory)
    member = json.loads((directory / "member.json").read_text())["member"]
    if cmd == "restart":
        bring_up(ens, max(ens.ids))
        link_member(ens, directory, member)
        print(ens.client_port(member))
    elif cmd == "stop":
        # Every member at once: one by one, the last ones would lose their quorum first.
        for i in ens.ids:
            ens._signal(i, signal.SIGCONT)
            ens._signal(i, signal.SIGTERM)
        for i in ens.ids:
            if not ens._wait_dead(i, 10):
                ens.kill(i)
    elif cmd == "kill":
        ens.destroy()
    elif cmd == "pause":
        for i in ens.ids:
            ens.pause(i)
    elif cmd == "resume":
        for i in ens.ids:
            ens.resume(i)
    else:
        fail(f"unknown command {cmd}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except EnsembleError as e:
        fail(str(e))
