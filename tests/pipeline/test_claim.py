"""One writer per sweep: the claim beside a sweep's directory, between real processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipeline import claim
from pipeline.claim import ClaimHolder, SweepBusyError, claim_path, claim_sweep, read_claim
from tests.conftest import REPO_ROOT


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


def test_a_second_driver_is_refused_at_once_with_the_holder_named(tmp_path):
    sweep = tmp_path / "runs" / "job-123"
    with another_driver_holds(sweep):
        started = time.monotonic()
        with pytest.raises(SweepBusyError) as refused, claim_sweep(sweep, "run"):
            pass
        assert time.monotonic() - started < 1
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


def test_a_dead_drivers_claim_goes_stale_and_is_taken(tmp_path):
    sweep = tmp_path / "job-1"
    with another_driver_holds(sweep, heartbeat_age_s=claim.LEASE_S + 5):
        assert read_claim(sweep) is None  # stale: as good as none
        with claim_sweep(sweep, "run"):
            assert read_claim(sweep).pid == os.getpid()


def test_different_sweeps_of_one_folder_do_not_block_each_other(tmp_path):
    with another_driver_holds(tmp_path / "job-a"), claim_sweep(tmp_path / "job-b", "run"):
        assert read_claim(tmp_path / "job-b").pid == os.getpid()


def _holder_process(sweep: Path, seconds: float) -> subprocess.Popen[str]:
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from pipeline import claim
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
    time.sleep(0.6)
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


def test_another_hosts_claim_is_taken_only_once_its_lease_runs_out(tmp_path, monkeypatch):
    sweep = tmp_path / "job-1"
    monkeypatch.setattr(claim, "LEASE_S", 1.0)
    monkeypatch.setattr(claim, "POLL_S", 0.1)
    with another_driver_holds(sweep, host="node-7"):
        started = time.monotonic()
        with claim_sweep(sweep, "run", wait=True):
            assert read_claim(sweep).pid == os.getpid()
        assert time.monotonic() - started >= 0.9


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
        claim_path(sweep).write_text("")  # another driver's claim, created and not yet written
    assert claim_path(sweep).exists()


def read_holder(path: Path) -> ClaimHolder:
    return ClaimHolder.model_validate_json(path.read_text())
