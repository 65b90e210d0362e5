#!/usr/bin/env python3
"""Concurrent kazoo clients doing set/cas/get on a few znodes while a nemesis breaks the ensemble;
records the history (README.md's JSONL format), then heals, reads every key back from every
server, and runs the porcupine checker (tests/go/cmd/zkcheck).

    workload.py DIR [--clients 5] [--seconds 20] [--keys 3] [--nemesis kill-leader] [--out OUTDIR]

DIR is an ensemble started by `zk-ensemble up` (partition faults need --proxy; the silent cuts,
cut-*, one-way-* and link-leader, need an ensemble created with network="namespaces", and the
last two nftables' nft). Nemeses: none, kill-leader, kill-follower, pause-leader, pause-follower,
partition-leader, cut-leader, cut-follower, one-way-leader, one-way-follower, link-leader (the
link between the leader and a follower cut both ways), mixed. Exit 0 when every check passes.
From Python: run_workload(Ensemble(DIR), out_dir, ...) returns a report dict (report["ok"]);
run_checked asserts that it passed.
"""
import argparse
import json
import logging
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from ensemble import Ensemble, EnsembleError  # noqa: E402

from kazoo.client import KazooClient, KazooState  # noqa: E402
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # noqa: E402

HERE = Path(__file__).resolve().parent
GO_DIR = HERE.parent / "go"
NEMESES = ("none", "kill-leader", "kill-follower", "pause-leader", "pause-follower",
           "partition-leader", "cut-leader", "cut-follower", "one-way-leader", "one-way-follower",
           "link-leader", "mixed")

logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def now():
    return time.monotonic_ns()


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = []

    def add(self, op):
        with self.lock:
            self.ops.append(op)


def classify(exc):
    """(outcome, error) for an exception from a ZooKeeper call."""
    if isinstance(exc, NoNodeError):
        return "fail", "NONODE"
    if isinstance(exc, BadVersionError):
        return "fail", "BADVERSION"
    if isinstance(exc, NodeExistsError):
        return "fail", "NODEEXISTS"
    # Connection loss, session expiry, timeouts, anything else: the request may have been applied.
    return "unknown", type(exc).__name__


def make_client(hosts, session_timeout_s=6.0):
    client = KazooClient(hosts=hosts, timeout=session_timeout_s, randomize_hosts=False,
                         connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0})
    client.start(timeout=20)
    return client


def call(rec, session, key, op, fn, op_timeout_s, value=None, expected=None, synced=False):
    entry = {"session": session, "key": key, "op": op, "call": now()}
    if value is not None and op != "get":
        entry["value"] = value
    if expected is not None:
        entry["expected_version"] = expected
    if synced:
        entry["synced"] = True
    try:
        result = fn().get(timeout=op_timeout_s)
        entry["return"] = now()
        entry["outcome"] = "ok"
        if op == "get":
            data, stat = result
            entry["value"] = data.decode() if data is not None else ""
            entry["version"], entry["mzxid"] = stat.version, stat.mzxid
        elif op == "create":
            entry["version"] = 0
        else:
            entry["version"], entry["mzxid"] = result.version, result.mzxid
    except Exception as exc:  # noqa: BLE001 - every failure is recorded
        outcome, error = classify(exc)
        entry["outcome"], entry["error"] = outcome, error
        if outcome == "fail":
            entry["return"] = now()
    rec.add(entry)
    return entry


class Worker(threading.Thread):
    def __init__(self, idx, hosts, keys, rec, stop, seed, op_timeout_s):
        super().__init__(daemon=True, name=f"worker-{idx}")
        self.idx, self.hosts, self.keys, self.rec, self.stop = idx, hosts, keys, rec, stop
        self.rng = random.Random(seed)
        self.op_timeout_s = op_timeout_s
        self.generation = 0
        self.seq = 0
        self.known = {}  # key -> last version this client saw
        self.error = None

    def listener(self, state):
        if state == KazooState.LOST:
            self.generation += 1

    def run(self):
        try:
            client = make_client(self.hosts)
        except Exception as exc:  # noqa: BLE001
            self.error = f"client {self.idx} could not connect: {exc!r}"
            return
        client.add_listener(self.listener)
        try:
            while not self.stop.is_set():
                self.one(client)
                time.sleep(self.rng.uniform(0, 0.005))
        except Exception as exc:  # noqa: BLE001
            self.error = f"client {self.idx}: {exc!r}"
        finally:
            try:
                client.stop()
                client.close()
            except Exception:  # noqa: BLE001
                pass

    def one(self, client):
        key = self.rng.choice(self.keys)
        session = f"c{self.idx}.{self.generation}"
        r = self.rng.random()
        if r < 0.4:
            synced = self.rng.random() < 0.5
            t0 = now()
            if synced:
                try:
                    client.sync_async(key).get(timeout=self.op_timeout_s)
                except Exception as exc:  # noqa: BLE001 - a read that got no answer constrains nothing
                    self.rec.add({"session": session, "key": key, "op": "get", "synced": True,
                                  "call": t0, "outcome": "unknown", "error": type(exc).__name__})
                    return
            e = call(self.rec, session, key, "get", lambda: client.get_async(key), self.op_timeout_s,
                     synced=synced)
            e["call"] = t0  # the sync belongs to the read's interval
        else:
            self.seq += 1
            value = f"c{self.idx}-{self.seq}"
            if r < 0.7:
                e = call(self.rec, session, key, "set", lambda: client.set_async(key, value.encode()),
                         self.op_timeout_s, value=value)
            else:
                expected = self.known.get(key, 0)
                if self.rng.random() < 0.2:
                    expected += self.rng.choice((-1, 1, 2))
                    expected = max(expected, 0)
                e = call(self.rec, session, key, "cas",
                         lambda: client.set_async(key, value.encode(), expected),
                         self.op_timeout_s, value=value, expected=expected)
        if e["outcome"] == "ok":
            self.known[key] = e["version"]


class Nemesis(threading.Thread):
    def __init__(self, ens, kind, stop, events, seed, interval_s=2.0, hold_s=4.0):
        super().__init__(daemon=True, name="nemesis")
        self.ens, self.kind, self.stop, self.events = ens, kind, stop, events
        self.rng = random.Random(seed)
        self.interval_s, self.hold_s = interval_s, hold_s
        self.error = None
        self.faults = 0

    def log(self, what):
        self.events.append((time.monotonic_ns(), what))

    def wait(self, seconds):
        return self.stop.wait(seconds)

    def target_leader(self):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not self.stop.is_set():
            leader = self.ens.leader()
            if leader is not None:
                return leader
            time.sleep(0.2)
        return None

    def run(self):
        try:
            while not self.wait(self.interval_s):
                kind = self.kind
                if kind == "mixed":
                    choices = ["kill-leader", "kill-follower", "pause-leader", "pause-follower"]
                    if self.ens.state["proxy"]:
                        choices.append("partition-leader")
                    if self.ens.namespaces is not None:
                        choices += ["cut-leader", "cut-follower"]
                        if shutil.which("nft") is not None:
                            choices += ["one-way-leader", "one-way-follower", "link-leader"]
                    kind = self.rng.choice(choices)
                leader = self.target_leader()
                if leader is None:
                    self.log("no leader to target")
                    continue
                needs_follower = kind.endswith("-follower") or kind.startswith("link")
                followers = self.ens.followers() if needs_follower else []
                if needs_follower and not followers:
                    self.log("no follower to target")
                    continue
                target = self.rng.choice(followers) if kind.endswith("-follower") else leader
                other = self.rng.choice(followers) if kind.startswith("link") else None
                self.faults += 1
                ens = self.ens
                way = self.rng.choice(("in", "out")) if kind.startswith("one-way") else None
                # Each fault, and what ends it: as logged, and what it does to the target.
                (doing, act), (undoing, undo) = {
                    "kill": ((f"kill -9 {target} ({kind})", ens.kill), (f"start {target}", ens.start)),
                    "pause": ((f"pause {target}", ens.pause), (f"resume {target}", ens.resume)),
                    "partition": ((f"isolate {target}", ens.isolate), ("heal", lambda _: ens.heal())),
                    "cut": ((f"cut {target} off the network ({kind})", ens.cut_network),
                            (f"mend {target}'s network", ens.mend_network)),
                    "one-way": ((f"cut what {target} {'hears from' if way == 'in' else 'says to'}"
                                 f" its peers ({kind})", lambda t: ens.cut_network(t, way)),
                                (f"mend {target}'s network", ens.mend_network)),
                    "link": ((f"cut the link between {target} and {other} ({kind})",
                              lambda t: ens.cut_network(t, "both", [other])),
                             (f"mend {target}'s network", ens.mend_network)),
                }[kind.rsplit("-", 1)[0]]
                self.log(doing)
                act(target)
                self.stop.wait(self.hold_s)
                self.log(undoing)
                undo(target)
                # Let the ensemble settle before the next fault (bounded).
                try:
                    self.ens.wait_quorum(30)
                except EnsembleError as exc:
                    self.log(f"no quorum after recovery: {exc}")
        except Exception as exc:  # noqa: BLE001
            self.error = f"nemesis: {exc!r}"
            self.log(self.error)


def recover(ens, timeout_s=60):
    """Heals the network, resumes and restarts everything, waits for a quorum."""
    if ens.state["proxy"]:
        ens.heal()
    if ens.namespaces is not None:
        for i in ens.ids:
            ens.mend_network(i)
    for i in ens.ids:
        ens.resume(i)
    for i in ens.ids:
        if not ens.running(i):
            ens.start(i)
    return ens.wait_quorum(timeout_s)


def read_back(ens, keys, rec, timeout_s=30):
    """Every key from every server (sync, then get); appended to the history as synced reads."""
    per_server = {}
    for i in ens.ids:
        client = make_client(ens.hosts(i))
        try:
            values = {}
            for key in keys:
                deadline = time.monotonic() + timeout_s
                while True:
                    t0 = now()
                    try:
                        client.sync_async(key).get(timeout=10)
                        data, stat = client.get_async(key).get(timeout=10)
                    except Exception:  # noqa: BLE001 - the server may still be catching up
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.5)
                        continue
                    rec.add({"session": f"final-s{i}", "key": key, "op": "get", "synced": True,
                             "call": t0, "return": now(), "outcome": "ok",
                             "value": data.decode(), "version": stat.version, "mzxid": stat.mzxid})
                    values[key] = (data.decode(), stat.version)
                    break
            per_server[i] = values
        finally:
            client.stop()
            client.close()
    return per_server


def acknowledged_problems(ops, per_server, keys):
    """Servers must agree; the newest acknowledged write of each key is present or superseded."""
    problems = []
    for key in keys:
        seen = {i: v[key] for i, v in per_server.items()}
        if len(set(seen.values())) != 1:
            problems.append(f"{key}: servers disagree: {seen}")
        final_value, final_version = next(iter(seen.values()))
        acked = [o for o in ops if o["key"] == key and o["op"] != "get" and o["outcome"] == "ok"]
        if not acked:
            continue
        newest = max(acked, key=lambda o: o["version"])
        if final_version < newest["version"]:
            problems.append(f"{key}: acknowledged write {newest['value']!r} made version "
                            f"{newest['version']} but the servers hold version {final_version}")
        elif final_version == newest["version"] and final_value != newest["value"]:
            problems.append(f"{key}: version {final_version} holds {final_value!r}, but the "
                            f"acknowledged write of that version was {newest['value']!r}")
    return problems


def checker_command():
    """ZKCHECK_BIN, or a zkcheck built once from tests/go (go build is incremental)."""
    if os.environ.get("ZKCHECK_BIN"):
        return [os.environ["ZKCHECK_BIN"]]
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"zoolog-zkcheck-{os.getuid()}" / "zkcheck"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(out), "./cmd/zkcheck"], cwd=GO_DIR, check=True,
                   timeout=300, capture_output=True)
    return [str(out)]


def run_checker(history, timeout_s=300):
    done = subprocess.run(checker_command() + ["-timeout", "60s", str(history)],
                          capture_output=True, text=True, timeout=timeout_s)
    return done.returncode, (done.stdout + done.stderr).strip()


def run_workload(ens, out_dir, clients=5, seconds=20.0, keys=3, nemesis="kill-leader", seed=None,
                 op_timeout_s=8.0, interval_s=2.0, hold_s=4.0):
    if nemesis not in NEMESES:
        raise ValueError(f"nemesis must be one of {NEMESES}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    seed = seed if seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    prefix = f"/ensemble-{nemesis}-{seed}"
    key_paths = [f"{prefix}/k{i}" for i in range(keys)]
    rec = Recorder()

    setup = make_client(ens.connect)
    try:
        setup.ensure_path(prefix)
        for key in key_paths:
            call(rec, "setup", key, "create", lambda key=key: setup.create_async(key, b"init"),
                 op_timeout_s, value="init")
    finally:
        setup.stop()
        setup.close()

    hosts = [ens.hosts(i) for i in ens.ids]
    stop = threading.Event()
    workers = []
    for c in range(clients):
        rotated = hosts[c % len(hosts):] + hosts[:c % len(hosts)]
        workers.append(Worker(c, ",".join(rotated), key_paths, rec, stop, rng.randrange(1 << 30),
                              op_timeout_s))
    events = []
    nem = Nemesis(ens, nemesis, stop, events, rng.randrange(1 << 30), interval_s, hold_s) \
        if nemesis != "none" else None
    started = time.monotonic_ns()
    for w in workers:
        w.start()
    if nem:
        nem.start()
    time.sleep(seconds)
    stop.set()
    for t in workers + ([nem] if nem else []):
        t.join(timeout=op_timeout_s + 30)
    hung = [t.name for t in workers + ([nem] if nem else []) if t.is_alive()]

    leader = recover(ens)
    workload_ops = list(rec.ops)
    per_server = read_back(ens, key_paths, rec)
    problems = acknowledged_problems(workload_ops, per_server, key_paths)
    problems += [w.error for w in workers if w.error]
    if nem and nem.error:
        problems.append(nem.error)
    if hung:
        problems.append(f"threads did not stop: {hung}")

    history = out_dir / "history.jsonl"
    with open(history, "w") as f:
        for op in sorted(rec.ops, key=lambda o: o["call"]):
            f.write(json.dumps(op) + "\n")
    with open(out_dir / "nemesis.log", "w") as f:
        for t, what in events:
            f.write(f"{(t - started) / 1e9:8.3f}s {what}\n")
    rc, checker_output = run_checker(history)

    counts = {}
    for op in workload_ops:
        k = f"{op['op']}:{op['outcome']}"
        counts[k] = counts.get(k, 0) + 1
    report = {
        "ok": rc == 0 and not problems,
        "seed": seed, "nemesis": nemesis, "faults": nem.faults if nem else 0,
        "events": [f"{(t - started) / 1e9:.1f}s {w}" for t, w in events],
        "ops": len(workload_ops), "counts": counts, "leader_after": leader,
        "final": {str(i): {k: list(v) for k, v in vals.items()} for i, vals in per_server.items()},
        "problems": problems, "checker_rc": rc, "checker": checker_output,
        "history": str(history),
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=1))
    return report


def run_checked(ens, out_dir, nemesis, seconds):
    """run_workload from a healthy ensemble (recovered first), 5 clients on 3 keys, asserting
    that the checker and the read-back found nothing wrong, that enough writes got through, and
    that the nemesis struck; returns the report."""
    recover(ens)
    report = run_workload(ens, out_dir, clients=5, seconds=seconds, keys=3, nemesis=nemesis)
    details = json.dumps({k: report[k] for k in ("seed", "faults", "events", "counts", "problems")},
                         indent=1)
    assert report["checker_rc"] == 0, f"{report['checker']}\n{details}\nhistory: {report['history']}"
    assert not report["problems"], details
    assert report["counts"].get("set:ok", 0) + report["counts"].get("cas:ok", 0) > 50, details
    if nemesis != "none":
        assert report["faults"] >= 1, details
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", help="ensemble directory (zk-ensemble up)")
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--keys", type=int, default=3)
    parser.add_argument("--nemesis", default="kill-leader", choices=NEMESES)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--out", help="output directory (default DIR/workload-<time>)")
    args = parser.parse_args()
    ens = Ensemble(args.dir)
    out = args.out or str(Path(args.dir) / f"workload-{time.strftime('%H%M%S')}")
    report = run_workload(ens, out, clients=args.clients, seconds=args.seconds, keys=args.keys,
                          nemesis=args.nemesis, seed=args.seed)
    summary = {k: report[k] for k in ("ok", "seed", "nemesis", "faults", "ops", "counts",
                                      "problems", "checker_rc", "history")}
    print(json.dumps(summary, indent=1))
    print(report["checker"])
    for e in report["events"]:
        print("  nemesis:", e)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
