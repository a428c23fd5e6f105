"""One writer per sweep: the claim beside a sweep's directory, between real processes; fencing a driver
whose claim another took over."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import ray
import yaml

from pipeline.cli.main import CLAIM_LOST_STATUS
from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.core.fault_injection import SIGNAL_ENV
from pipeline.run.actors import EpisodeWorker
from pipeline.run.dispatch import start_deployments, stop_deployments
from pipeline.run.launch import run_sweep
from pipeline.store import claim
from pipeline.store.claim import ClaimHolder, ClaimLostError, SweepBusyError, claim_path, claim_sweep, read_claim
from pipeline.store.manifest import read_manifest
from pipeline.store.reader import finished_episodes
from pipeline.store.verify import verify_sweep
from pipeline.tracking.digest import compare, sweep_digest
from tests.conftest import REPO_ROOT
from tests.pipeline.analysis.test_live import eventually
from tests.pipeline.conftest import SMALL_ORACLE_JOB

TINY_JOB = {"name": "fenced", "plugins": ["examples.tiny"], "benchmarks": [{"benchmark": "tiny", "tasks": ["t1"]}],
            "methods": [{"name": "flowstate"}, {"name": "full_context"}], "agents": [{"deployment": "oracle"}],
            "deployments": {"oracle": {"kind": "scripted", "name": "oracle"}}}


@contextlib.contextmanager
def another_driver_holds(sweep_dir: Path, *, heartbeat_age_s: float = 0.0, host: str = "node-7") -> Iterator[Path]:
    """TEST FIXTURE: the claim file another driver (on another host) would hold."""
    beat = datetime.now(UTC) - timedelta(seconds=heartbeat_age_s)
    holder = ClaimHolder(host=host, pid=4242, action="run", since=beat - timedelta(minutes=5), heartbeat=beat,
                         token="other")
    path = claim_path(sweep_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(holder.model_dump_json())
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


class ClaimClock:
    """TEST FIXTURE: the claim module's clock, moved only by the module's own sleeps: a lease passes at
    once, and how long a driver watched a claim before taking it is exact."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ClaimClock:
    fake = ClaimClock()
    monkeypatch.setattr(claim, "time", fake)
    return fake


def test_a_second_driver_is_refused_at_once_with_the_holder_named(tmp_path, clock):
    sweep = tmp_path / "runs" / "job-123"
    with another_driver_holds(sweep):
        with pytest.raises(SweepBusyError) as refused, claim_sweep(sweep, "run"):
            pass
        assert clock.now == 1000.0  # refused without waiting
    assert str(refused.value).startswith(f"{sweep} is held by another driver: run by pid 4242 on node-7, since ")
    assert "--wait" in str(refused.value)


def test_a_claim_is_released_on_exit_and_on_error_and_is_re_entrant(tmp_path):
    sweep = tmp_path / "job-1"
    with claim_sweep(sweep, "run"):
        holder = read_claim(sweep)
        assert holder is not None and holder.pid == os.getpid() and holder.action == "run"
        with claim_sweep(sweep, "compact"):  # the run compacts under its own claim
            assert read_claim(sweep) == holder
        assert read_claim(sweep) == holder
    assert not claim_path(sweep).exists()
    with pytest.raises(RuntimeError, match="boom"), claim_sweep(sweep, "track"):
        raise RuntimeError("boom")
    assert not claim_path(sweep).exists()


def test_a_dead_drivers_claim_is_taken_once_watched_unchanged_for_a_lease(tmp_path, clock):
    sweep = tmp_path / "job-1"
    with another_driver_holds(sweep, heartbeat_age_s=claim.LEASE_S + 5):
        assert read_claim(sweep) is None  # looks dead: as good as none
        with claim_sweep(sweep, "run"):
            assert read_claim(sweep).pid == os.getpid()
        assert claim.LEASE_S <= clock.now - 1000.0 < claim.LEASE_S + 2 * claim.POLL_S  # watched for a lease first


def test_another_hosts_claim_is_judged_by_its_heartbeats_never_by_its_clock(tmp_path, monkeypatch):
    """Clocks that disagree: a live holder whose clock is a day behind keeps its claim; a dead one
    whose clock is a day ahead is taken once it stayed unchanged for a lease."""
    monkeypatch.setattr(claim, "LEASE_S", 0.3)
    monkeypatch.setattr(claim, "POLL_S", 0.02)
    behind, ahead = tmp_path / "job-behind", tmp_path / "job-ahead"
    with another_driver_holds(behind, heartbeat_age_s=86_400) as path:
        with beating(path), pytest.raises(SweepBusyError, match="pid 4242 on node-7"), claim_sweep(behind, "run"):
            pass
        assert read_holder(path).token == "other"
    with another_driver_holds(ahead, heartbeat_age_s=-86_400):
        clock = ClaimClock()
        monkeypatch.setattr(claim, "time", clock)
        taken = threading.Event()
        threading.Thread(target=lambda: _take(ahead, taken), daemon=True).start()
        assert taken.wait(10) and clock.now - 1000.0 >= claim.LEASE_S


def _take(sweep: Path, taken: threading.Event) -> None:
    with claim_sweep(sweep, "run", wait=True):
        taken.set()


@contextlib.contextmanager
def beating(path: Path) -> Iterator[None]:
    """TEST FIXTURE: another host's live driver, rewriting its claim (its own clock frozen) every 20 ms."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(0.02):
            holder = read_holder(path)
            path.write_text(holder.model_copy(update={"beats": holder.beats + 1}).model_dump_json())

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_different_sweeps_of_one_folder_do_not_block_each_other(tmp_path):
    with another_driver_holds(tmp_path / "job-a"), claim_sweep(tmp_path / "job-b", "run"):
        assert read_claim(tmp_path / "job-b").pid == os.getpid()


def _holder_process(sweep: Path, seconds: float) -> subprocess.Popen[str]:
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from pipeline.store import claim
        claim.HEARTBEAT_S = 0.2
        with claim.claim_sweep(Path({str(sweep)!r}), "run"):
            print("held", flush=True)
            time.sleep({seconds})
    """)
    process = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_the_holders_heartbeat_keeps_its_claim_and_a_waiting_driver_takes_it_after(tmp_path, monkeypatch):
    sweep = tmp_path / "job-1"
    process = _holder_process(sweep, 1.5)
    first = read_claim(sweep)
    deadline = time.monotonic() + 30
    while read_claim(sweep).heartbeat == first.heartbeat and time.monotonic() < deadline:
        time.sleep(0.05)
    assert read_claim(sweep).heartbeat > first.heartbeat and read_claim(sweep).token == first.token
    with pytest.raises(SweepBusyError, match=f"pid {process.pid}"), claim_sweep(sweep, "run"):
        pass
    monkeypatch.setattr(claim, "POLL_S", 0.1)
    waited: list[ClaimHolder] = []
    with claim_sweep(sweep, "run", wait=True, on_wait=waited.append):
        assert read_claim(sweep).pid == os.getpid()
    assert [h.pid for h in waited] == [process.pid] and process.wait(10) == 0


def test_a_killed_holders_claim_on_this_host_is_taken_at_once(tmp_path):
    sweep = tmp_path / "job-1"
    process = _holder_process(sweep, 60)
    process.kill()
    process.wait()
    assert claim_path(sweep).exists()  # SIGKILL: nothing cleaned up
    with claim_sweep(sweep, "run"):  # its heartbeat is fresh, but its process is gone
        assert read_claim(sweep).pid == os.getpid()


def test_another_hosts_claim_is_taken_only_once_its_lease_runs_out(tmp_path, clock):
    sweep = tmp_path / "job-1"
    with another_driver_holds(sweep, host="node-7"):
        with claim_sweep(sweep, "run", wait=True):
            assert read_claim(sweep).pid == os.getpid()
        assert clock.now - 1000.0 >= claim.LEASE_S


def test_a_live_driver_on_this_host_keeps_its_claim_even_when_its_heartbeat_is_old(tmp_path):
    """A driver stopped with Ctrl-Z or a suspended laptop: alive, so still the holder."""
    import socket

    sweep = tmp_path / "job-1"
    with another_driver_holds(sweep, heartbeat_age_s=claim.LEASE_S * 10, host=socket.gethostname()) as path:
        path.write_text(read_holder(path).model_copy(update={"pid": os.getppid()}).model_dump_json())
        with pytest.raises(SweepBusyError, match=f"pid {os.getppid()}"), claim_sweep(sweep, "run"):
            pass


def test_a_claim_being_written_by_another_driver_is_never_removed_on_release(tmp_path):
    sweep = tmp_path / "job-1"
    with claim_sweep(sweep, "run"):
        path = claim_path(sweep)
        path.rename(tmp_path / "broken")  # judged dead and broken by another driver,
        path.write_text("")  # whose claim is created and not yet written
    assert path.exists() and path.read_text() == ""


def test_a_holder_whose_claim_was_taken_over_finds_out_before_its_next_write(tmp_path, monkeypatch):
    """The fencing check: the dispatch loop asks before each episode, an actor before it stores
    one, and the heartbeat before each beat (then the claim is marked lost)."""
    sweep = tmp_path / "job-1"
    monkeypatch.setattr(claim, "HEARTBEAT_S", 0.02)
    path = claim_path(sweep)
    with claim_sweep(sweep, "run") as held:
        held.check()
        held.fence.check()  # while it stands, nothing is raised
        path.rename(tmp_path / "broken")  # another driver judged this one dead and broke its claim,
        taker = read_holder(tmp_path / "broken").model_copy(update={"host": "node-7", "pid": 4242, "token": "other"})
        path.write_text(taker.model_dump_json())  # then took its own
        with pytest.raises(ClaimLostError, match="lost its claim .* now held by run by pid 4242 on node-7"):
            held.check()
        with pytest.raises(ClaimLostError, match="another driver took the sweep over"):
            held.fence.check()
        assert held.lost.wait(10)  # the heartbeat saw it too, and beats no more
    assert read_holder(path) == taker  # released: the other's claim stands as it was


def read_holder(path: Path) -> ClaimHolder:
    return ClaimHolder.model_validate_json(path.read_text())


def test_an_actor_stores_no_episode_once_its_drivers_claim_is_another_drivers(tmp_path):
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(TINY_JOB))
    job = load_job(tmp_path / "job.yaml")
    sweep = expand(job)
    folder = tmp_path / "runs" / sweep.sweep_id
    first, second = sweep.episodes
    deployments = start_deployments(job)
    try:
        with claim_sweep(folder, "run") as held:
            worker = EpisodeWorker(job, folder, deployments, "test", held.fence)  # the actor's body, in this process
            asyncio.run(worker.run(first, 1))
            path = claim_path(folder)
            path.rename(tmp_path / "broken")  # taken over by another driver
            path.write_text(read_holder(tmp_path / "broken").model_copy(update={"token": "other"}).model_dump_json())
            with pytest.raises(ClaimLostError):
                asyncio.run(worker.run(second, 1))  # it ran, and stored nothing: the new holder runs it
    finally:
        stop_deployments(deployments)
    assert finished_episodes(folder).done == {first.episode_id}
    assert not [p for p in folder.rglob("*") if second.episode_id in p.name]


def paused(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP): its state in /proc."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "T"


@pytest.mark.slow
def test_a_paused_driver_taken_over_from_another_host_stops_before_its_next_episode(ray_local, oracle_sweep, tmp_path):
    """A driver paused (SIGSTOP, as a paused VM) after its second episode, one at a time: another
    host watches its claim unchanged for a lease and takes it over. Running again, the old driver
    dispatches no further episode, writes nothing more, says so and exits 3; the new holder's run
    then gives what an uninterrupted run gives."""
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": "taken-over", "execution": {"concurrency": 1}}))
    out = tmp_path / "runs"
    sweep_dir = out / expand(load_job(job)).sweep_id
    driver = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "run", str(job), "--out", str(out),
         "--address", ray.get_runtime_context().gcs_address], cwd=REPO_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), SIGNAL_ENV: "dispatch:2:SIGSTOP"})
    try:
        assert eventually(lambda: paused(driver.pid), timeout_s=120)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(claim, "gethostname", lambda: "node-7")  # this test is the other host
            patch.setattr(claim, "LEASE_S", 0.5)
            patch.setattr(claim, "POLL_S", 0.05)
            with claim_sweep(sweep_dir, "run", wait=True) as taker:
                os.kill(driver.pid, signal.SIGCONT)
                stdout, stderr = driver.communicate(timeout=60)
                assert driver.returncode == CLAIM_LOST_STATUS, stdout + stderr
                assert "lost its claim to the sweep" in stderr and "stopped dispatching" in stderr, stderr
                assert len(finished_episodes(sweep_dir).done) == 2  # not one episode more
                assert read_manifest(sweep_dir)["runs"] == [] and not verify_sweep(sweep_dir).problems
                assert read_holder(claim_path(sweep_dir)).token == taker.holder.token
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    result = run_sweep(job, out=out)
    assert (result.skipped, result.completed, result.failed) == (2, 6, 0)
    comparison = compare(sweep_digest(oracle_sweep), sweep_digest(sweep_dir))
    assert comparison.same, comparison
