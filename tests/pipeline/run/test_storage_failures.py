"""A full disk is an error, not a corruption: a write the disk refuses (injected through the file
layer's test hook, ``FLOWSTATE_FAULT_WRITE``) stops the sweep with one clear message, records
nothing as failed, leaves nothing half-written visible, and a rerun completes it with the same
results as a sweep that never met the fault."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from pipeline.config.job import load_job
from pipeline.config.sweep import expand
from pipeline.core.atomic import write_bytes_atomic
from pipeline.core.disk_full import StorageError, storage_failure
from pipeline.core.fault_injection import FAULT_WRITE_ENV
from pipeline.llm.kinds.replica_sim.server import StubServer
from pipeline.run.launch import run_sweep
from pipeline.store.reader import finished_episodes
from pipeline.store.verify import verify_sweep
from pipeline.testing.oracle_server import OracleResponder
from pipeline.tracking.digest import compare, sweep_digest
from tests.pipeline.conftest import SMALL_ORACLE_JOB


def test_the_nth_write_and_every_later_one_fail_and_leave_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv(FAULT_WRITE_ENV, "2:ENOSPC:*.bin")
    write_bytes_atomic(tmp_path / "a.bin", b"a")
    write_bytes_atomic(tmp_path / "a.txt", b"not counted")
    for name in ("b.bin", "c.bin"):  # a full disk stays full
        with pytest.raises(OSError) as raised:
            write_bytes_atomic(tmp_path / name, b"b")
        assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(tmp_path / name))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "a.txt"]  # no temporary left


def test_a_real_refused_write_names_its_file(tmp_path, monkeypatch):
    """``os.write`` says ENOSPC without a file name (here from /dev/full); the file layer adds it."""
    full = os.open("/dev/full", os.O_WRONLY)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda descriptor, data: real_write(full, data))
    try:
        with pytest.raises(OSError) as raised:
            write_bytes_atomic(tmp_path / "x.parquet", b"data")
    finally:
        monkeypatch.undo()
        os.close(full)
    assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, str(tmp_path / "x.parquet"))
    assert list(tmp_path.iterdir()) == []
    message = str(StorageError(storage_failure(raised.value)))
    assert message.startswith(f"cannot write {tmp_path / 'x.parquet'}: ENOSPC (No space left on device). ")
    assert "none was recorded as failed" in message and "Free space on that filesystem" in message


def write_job(tmp_path: Path, name: str, **changes) -> Path:
    job = tmp_path / f"{name}.yaml"  # its own name: its own sweep and MLflow runs in the session's store
    job.write_text(yaml.safe_dump({**SMALL_ORACLE_JOB, "name": name, **changes}))
    return job


def assert_nothing_failed_or_half_written(sweep_dir: Path) -> frozenset[str]:
    """The episodes the stopped sweep finished: all completed, every visible file whole."""
    assert not list(sweep_dir.rglob("*.tmp"))
    assert verify_sweep(sweep_dir, thorough=True).problems == []
    finished = finished_episodes(sweep_dir)
    assert not finished.failed
    return finished.done


def rerun_equals_reference(job: Path, tmp_path: Path, reference: Path, done_before: frozenset[str]) -> None:
    result = run_sweep(job, out=tmp_path / "runs")
    assert (result.skipped, result.failed, result.finish_errors) == (len(done_before), 0, [])
    comparison = compare(sweep_digest(reference), sweep_digest(result.sweep_dir))
    assert comparison.same, comparison


@pytest.mark.slow
def test_a_full_disk_in_an_actor_stops_the_sweep_and_a_rerun_completes_it(ray_local, oracle_sweep, tmp_path,
                                                                           monkeypatch):
    job = write_job(tmp_path, "disk-full-actor")
    monkeypatch.setenv(FAULT_WRITE_ENV, "2:ENOSPC:*/steps/*")  # the actor's second episode cannot be stored
    with pytest.raises(StorageError, match=r"cannot write \S+/steps/cell=\w+/\w+\.(parquet|json): ENOSPC") as raised:
        run_sweep(job, out=tmp_path / "runs")
    assert "run the same command again to resume" in str(raised.value)
    monkeypatch.delenv(FAULT_WRITE_ENV)
    sweep_dir = tmp_path / "runs" / expand(load_job(job)).sweep_id
    done = assert_nothing_failed_or_half_written(sweep_dir)
    assert len(done) <= 1
    rerun_equals_reference(job, tmp_path, oracle_sweep, done)


@pytest.mark.slow
def test_a_full_disk_at_the_drivers_failure_row_records_no_failure(ray_local, tmp_path, monkeypatch):
    """The model is down (500s) and the driver cannot write the failure rows: nothing is recorded
    (the episodes are not failed, the disk is); once both are back, every episode completes."""
    probe = write_job(tmp_path, "disk-full-failure-row", deployments={"oracle": {
        "kind": "endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m"}})
    with StubServer(OracleResponder(expand(load_job(probe)).by_id)) as stub:
        job = write_job(tmp_path, "disk-full-failure-row", deployments={"oracle": {
            "kind": "endpoint", "base_url": stub.url, "model": "m", "check_schema_enforcement": False,
            "client": {"retry": {"max_attempts": 1, "initial_backoff_s": 0.01}}}},
            execution={"concurrency": 8, "episode_attempts": 1})
        stub.inject("status", status=500)
        monkeypatch.setenv(FAULT_WRITE_ENV, "1:EDQUOT:*/episodes/*")
        with pytest.raises(StorageError, match=r"/episodes/cell=\w+/\w+\.parquet: EDQUOT .*within your quota"):
            run_sweep(job, out=tmp_path / "runs")
        monkeypatch.delenv(FAULT_WRITE_ENV)
        sweep_dir = tmp_path / "runs" / expand(load_job(job)).sweep_id
        assert assert_nothing_failed_or_half_written(sweep_dir) == frozenset()
        stub.clear()
        result = run_sweep(job, out=tmp_path / "runs")
    assert (result.skipped, result.completed, result.failed) == (0, 8, 0)
    digest = sweep_digest(result.sweep_dir)
    assert {e: r for e, (_, r) in digest.episodes.items()} == dict.fromkeys(expand(load_job(job)).by_id, 1.0)


@pytest.mark.slow
def test_a_read_only_disk_at_the_manifest_stops_the_sweep_and_a_rerun_finishes_it(ray_local, oracle_sweep,
                                                                                 tmp_path, monkeypatch):
    job = write_job(tmp_path, "read-only-manifest")
    monkeypatch.setenv(FAULT_WRITE_ENV, "3:EROFS:*/manifest.json")  # once the episodes ran
    with pytest.raises(StorageError, match=r"cannot write \S+/manifest.json: EROFS .*writable again"):
        run_sweep(job, out=tmp_path / "runs")
    monkeypatch.delenv(FAULT_WRITE_ENV)
    done = assert_nothing_failed_or_half_written(tmp_path / "runs" / expand(load_job(job)).sweep_id)
    rerun_equals_reference(job, tmp_path, oracle_sweep, done)


@pytest.mark.slow
def test_a_full_disk_during_compaction_keeps_the_episode_files_and_a_rerun_compacts(ray_local, oracle_sweep,
                                                                                    tmp_path, monkeypatch):
    job = write_job(tmp_path, "disk-full-compaction")
    monkeypatch.setenv(FAULT_WRITE_ENV, "2:ENOSPC:*/inventory/*/part-*")  # the second part's record
    first = run_sweep(job, out=tmp_path / "runs")
    monkeypatch.delenv(FAULT_WRITE_ENV)
    assert first.completed == 8
    [error] = first.finish_errors
    assert "compaction failed (cannot write" in error and ": ENOSPC (No space left on device)" in error
    assert "free space on that filesystem" in error and "flowstate compact " in error
    assert len(list(first.sweep_dir.glob("*/cell=*/part-*.parquet"))) == 1  # the first part, then the disk was full
    done = assert_nothing_failed_or_half_written(first.sweep_dir)
    assert len(done) == 8
    rerun_equals_reference(job, tmp_path, oracle_sweep, done)


@pytest.fixture
def small_disk(tmp_path):
    """A real 256 KiB filesystem (tmpfs) made by the test, unmounted after it; skipped where
    mounting is refused (not root, a container without the capability)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


@pytest.mark.slow
def test_a_real_full_filesystem_stops_the_sweep_and_a_rerun_after_it_grows_completes_it(ray_local, oracle_sweep,
                                                                                        tmp_path, small_disk):
    job = write_job(tmp_path, "real-disk-full")
    with pytest.raises(StorageError, match=rf"cannot write {small_disk}/\S+: ENOSPC \(No space left on device\)"):
        run_sweep(job, out=small_disk)
    done = assert_nothing_failed_or_half_written(small_disk / expand(load_job(job)).sweep_id)
    assert len(done) < 8
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)  # space freed
    result = run_sweep(job, out=small_disk)
    assert (result.skipped, result.failed, result.finish_errors) == (len(done), 0, [])
    comparison = compare(sweep_digest(oracle_sweep), sweep_digest(result.sweep_dir))
    assert comparison.same, comparison
