"""Fault tests of a replicated ensemble: 3 servers behind the fault proxy, concurrent kazoo clients
doing set/cas/get for ~15 s per scenario while a nemesis kills, pauses or partitions servers; then
every server must agree, no acknowledged write may be missing, and the history must pass the
porcupine checker (tests/go/cmd/zkcheck). Harness: tests/ensemble (README.md there).

ZK_KIND=apache runs against Debian's ZooKeeper; ZK_ENSEMBLE=0 skips the module (for a server build
without ensemble mode). Unless ZK_ENSEMBLE=1, a server that answers `Mode: standalone` to an
ensemble zoo.cfg also skips the module, with that reason. ZK_ENSEMBLE_SECONDS sets the workload
length per scenario.
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ensemble"))
from ensemble import Ensemble, StandaloneError  # noqa: E402
import workload  # noqa: E402

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.environ.get("ZK_ENSEMBLE", "1") == "0",
                       reason="ZK_ENSEMBLE=0: this server build cannot run a replicated ensemble"),
    pytest.mark.skipif(shutil.which("go") is None, reason="the history checker needs Go"),
]

SECONDS = float(os.environ.get("ZK_ENSEMBLE_SECONDS", "15"))


@pytest.fixture(scope="module")
def ensemble():
    # The checker is built once here, so no scenario pays for the compile.
    os.environ.setdefault("ZKCHECK_BIN", workload.checker_command()[0])
    root = tempfile.mkdtemp(prefix="zoolog-ensemble-")
    ens = Ensemble.create(root, 3, proxy=True)
    try:
        try:
            ens.up(timeout_s=90)
        except StandaloneError as e:
            if os.environ.get("ZK_ENSEMBLE") == "1":
                raise
            pytest.skip(f"{e} (set ZK_ENSEMBLE=1 to make this a failure)")
        yield ens
    finally:
        ens.destroy()
        if os.environ.get("ZK_ENSEMBLE_KEEP") != "1":
            shutil.rmtree(root, ignore_errors=True)


def run(ens, tmp_path, nemesis):
    return workload.run_checked(ens, tmp_path, nemesis, SECONDS)


def test_kill_leader_under_load(ensemble, tmp_path):
    run(ensemble, tmp_path, "kill-leader")


def test_kill_follower(ensemble, tmp_path):
    run(ensemble, tmp_path, "kill-follower")


def test_pause_resume_leader(ensemble, tmp_path):
    run(ensemble, tmp_path, "pause-leader")


def test_pause_resume_follower(ensemble, tmp_path):
    # Paused for longer than the leader timeout: zoolog's follower keeps following on resume,
    # Apache's leader drops it and it rejoins; either way no history may break.
    run(ensemble, tmp_path, "pause-follower")


def test_partition_leader_away_and_heal(ensemble, tmp_path):
    run(ensemble, tmp_path, "partition-leader")
