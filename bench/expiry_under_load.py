#!/usr/bin/env python3
"""How long a dead client's ephemeral outlives it while a 3-server ensemble is saturated with
writes: the lock a crashed holder leaves is only as good as this. Starts an ensemble of KIND
(zoolog or apache) through tests/ensemble/ensemble.py, saturates it with `zoolog bench`'s
write-only throughput workload, and in each trial has a kazoo client on a follower (session
timeout 2 s) create an ephemeral, then kills it with SIGKILL and times how long until the
leader no longer holds the node.

    python3 bench/expiry_under_load.py zoolog 5
    python3 bench/expiry_under_load.py apache 5 --sessions 200 --outstanding 200

With many sessions and outstanding requests the servers' queues stay full (zoolog answers
THROTTLEDOP), which is where an expiry could wait behind client writes.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "ensemble"))
from ensemble import Ensemble, start_ephemeral_holder  # noqa: E402

TIMEOUT_S = 2.0
TRIAL_S = 12
GONE_WAIT_MAX_S = 60

def seconds_until_gone(checker: KazooClient, holder_hosts: str, path: str) -> float:
    holder = start_ephemeral_holder(holder_hosts, path, TIMEOUT_S)
    try:
        time.sleep(1)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    died = time.monotonic()
    while checker.exists(path) is not None:
        if time.monotonic() - died > GONE_WAIT_MAX_S:
            raise RuntimeError(f"{path} still there {GONE_WAIT_MAX_S} s after its client died")
        time.sleep(0.02)
    return time.monotonic() - died


def main(args: argparse.Namespace) -> None:
    directory = tempfile.mkdtemp(prefix="expiry-under-load-")
    ensemble = Ensemble.create(directory, 3, kind=args.kind)
    load = None
    try:
        ensemble.up(timeout_s=90)
        leader = ensemble.leader()
        follower = next(s for s in ensemble.participants if s != leader)
        zoolog = os.environ.get("ZOOLOG_BIN", str(REPO / "target" / "release" / "zoolog"))
        load_log = Path(directory) / "load.log"
        with load_log.open("w") as out:
            load = subprocess.Popen(
                [zoolog, "bench", "--servers", ",".join(ensemble.hosts(s) for s in ensemble.ids),
                 "--workload", "throughput", "--read-ratios", "0",
                 "--sessions", str(args.sessions), "--outstanding", str(args.outstanding),
                 "--warmup-s", "1", "--duration-s", str(TRIAL_S * args.trials + 30),
                 "--out", str(Path(directory) / "bench")],
                stdout=out, stderr=subprocess.STDOUT)
        time.sleep(5)
        checker = KazooClient(hosts=ensemble.hosts(leader), timeout=10)
        checker.start(timeout=30)
        try:
            for trial in range(args.trials):
                gone_s = seconds_until_gone(checker, ensemble.hosts(follower),
                                            f"/expiry-under-load/held-{trial}")
                print(f"{args.kind} trial {trial}: the ephemeral went {gone_s:.2f} s after its "
                      f"client died (session timeout {TIMEOUT_S:.0f} s)", flush=True)
                time.sleep(2)
        finally:
            checker.stop()
            checker.close()
        load.send_signal(signal.SIGINT)
        load.wait(timeout=60)
        summary = [line for line in load_log.read_text().splitlines() if "read_ratio=0" in line]
        print(f"the load meanwhile: {summary[-1] if summary else 'no summary (see load.log)'}")
    finally:
        if load is not None and load.poll() is None:
            load.kill()
        ensemble.destroy()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["zoolog", "apache"])
    parser.add_argument("trials", type=int)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--outstanding", type=int, default=50)
    main(parser.parse_args())
