"""The `flowstate` command line, run as users run it."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


def flowstate(*args: str, cwd=REPO_ROOT, max_memory: int | None = None) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own (``max_memory``: bytes of heap it may take)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (max_memory, max_memory))

    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          preexec_fn=limit if max_memory else None)


def test_trace_replay_writes_the_result(tmp_path):
    out = tmp_path / "out.json"
    proc = flowstate("trace", "replay", "jobs/traces/hotel.json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "replayed 3 requests, 8 steps" in proc.stdout
    result = json.loads(out.read_text())
    assert set(result) == {"steps", "repository", "index"}


def test_trace_replay_reports_bad_input_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = flowstate("trace", "replay", str(bad), "--out", str(tmp_path / "o.json"))
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o.json").exists()


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path):
    import yaml

    from tests.pipeline.conftest import SMALL_ORACLE_JOB

    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(SMALL_ORACLE_JOB))
    proc = flowstate("run", str(job), "--out", str(tmp_path / "runs"), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "dry run: nothing started" in proc.stdout and "taubench.airline.flowstate.oracle" in proc.stdout
    assert " 8 " in proc.stdout.splitlines()[-2]  # the total row: 8 episodes
    assert not (tmp_path / "runs").exists()


def test_a_malformed_job_is_one_clear_line(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: x\nbenchmarks: []\nmethods: [{name: flowstate}]\nagents: [{deployment: d}]\n"
                   "user_simulator: scripted\njudge: none\n")
    proc = flowstate("run", str(job))
    assert proc.returncode == 2 and "job.yaml:2: benchmarks" in proc.stderr and "Traceback" not in proc.stderr


def _edited(job: dict, **changes) -> str:
    import yaml

    return yaml.safe_dump({**job, **changes})


def _refused_jobs() -> dict[str, tuple[str, str]]:
    """Jobs `run` refuses before anything starts (job text, what its one line says)."""
    from tests.pipeline.conftest import SMALL_ORACLE_JOB as JOB

    airline, text = JOB["benchmarks"][0], _edited(JOB)
    name_line = text.splitlines().index(f"name: {JOB['name']}") + 1
    bomb = "".join(f"l{d}: &l{d} [{', '.join([f'*l{d - 1}' if d else 'x'] * 10)}]\n" for d in range(8))
    return {
        "methods differing by label": (_edited(JOB, methods=[{"name": "flowstate", "label": "fs-a"},
                                                            {"name": "flowstate", "label": "fs-b"}],
                                               analysis={"baseline": "fs-a"}),
                                       "methods[0] ('fs-a') and methods[1] ('fs-b') make the same cells"),
        "agents differing by label": (_edited(JOB, agents=[{"deployment": "oracle", "label": "run-1"},
                                                          {"deployment": "oracle", "label": "run-2"}]),
                                      "agents[0] ('run-1') and agents[1] ('run-2') make the same cells"),
        "a task twice": (_edited(JOB, benchmarks=[{**airline, "tasks": ["0", "0"]}]),
                         "benchmarks[0].tasks: task '0' is listed more than once"),
        "too many trials": (_edited(JOB, trials=10**12), "= 8,000,000,000,000 episodes, beyond the 10,000,000"),
        "a baseline of no method": (_edited(JOB, analysis={"baseline": "oracle"}), "analysis.baseline: 'oracle' is not"),
        "a bar in a label": (_edited(JOB, methods=[{"name": "flowstate", "label": "fs|a"}]), "methods[0].label: 'fs|a'"),
        "a key twice": (text + "name: again\n",
                        f":{text.count(chr(10)) + 1}: duplicate key 'name' (first on line {name_line})"),
        "an alias bomb": (text + bomb, ": its aliases expand it to 123,456,"),
    }


@pytest.mark.parametrize("case", sorted(_refused_jobs()))
def test_run_refuses_a_job_in_one_line_before_anything_starts(tmp_path, case):
    """In 1 GiB: a trillion trials (or 10^8 aliased nodes) is counted, never made."""
    text, expected = _refused_jobs()[case]
    job = tmp_path / "job.yaml"
    job.write_text(text)
    proc = flowstate("run", str(job), "--out", str(tmp_path / "runs"), "--dry-run", max_memory=2**30)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"flowstate: error: {job}") and proc.stderr.count("\n") == 1, proc.stderr
    assert expected in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_show_prints_an_episode(oracle_sweep):
    import pyarrow.parquet as pq

    episode = pq.read_table(next((oracle_sweep / "episodes").glob("*/*.parquet")), columns=["episode_id"])[0][0].as_py()
    proc = flowstate("show", episode[:8], "--runs", str(oracle_sweep.parent))
    assert proc.returncode == 0, proc.stderr
    assert f"episode {episode}" in proc.stdout and "request 1:" in proc.stdout and "conversation:" in proc.stdout
    assert flowstate("show", "zzzz", "--runs", str(oracle_sweep)).returncode == 2


def test_grade_recomputes_rewards_from_stored_transcripts(oracle_sweep, tmp_path):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    sweep = tmp_path / oracle_sweep.name
    shutil.copytree(oracle_sweep, sweep)
    target = next((sweep / "episodes").glob("*/*.parquet"))  # a compacted part (the sweep ended compacted)
    stored = pq.read_table(target)
    rows = stored.to_pylist()
    rows[0]["reward"], rows[0]["metrics"] = 0.0, [("db", 0.0)]  # a wrong stored grade
    pq.write_table(pa.Table.from_pylist(rows, schema=stored.schema), target)
    proc = flowstate("grade", str(sweep))
    assert proc.returncode == 0, proc.stderr
    assert "graded 8 episodes (1 changed, 0 ungraded), mean reward 1.0000" in proc.stdout
    regraded = pq.read_table(target)
    assert regraded.to_pylist()[0]["reward"] == 1.0
    assert regraded.schema.metadata == stored.schema.metadata  # the part still lists its episodes
    # On each task's own basis: retail task 0 has no NL assertions (graded without a judge);
    # task 36 has some, and without a judge model its two episodes are left as they were.
    proc = flowstate("grade", str(sweep), "--basis", "task")
    labels = {(r["task_id"], r["grading_basis"]) for p in (sweep / "episodes").glob("*/*.parquet")
              for r in pq.read_table(p).to_pylist() if r["domain"] == "retail"}
    assert proc.returncode == 0 and labels == {("0", "task: DB×NL_ASSERTION"), ("36", "classic: DB×COMMUNICATE")}
    assert "2 episodes need a judge model" in proc.stdout
