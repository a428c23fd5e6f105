"""`flowstate show`: an episode without words for what its rows do not hold, and the list of episodes
to show, over a hand-made sweep (tests/pipeline/analysis/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.core.commands import flowstate_command
from tests.pipeline.analysis.builder import SweepBuilder
from tests.pipeline.analysis.conftest import build_scores_sweep


@pytest.fixture
def sweep(tmp_path: Path) -> SweepBuilder:
    return build_scores_sweep(tmp_path / "runs")


def show(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["show", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_show_says_nothing_where_a_value_is_absent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A server that reports no cached tokens (an estimate only), a user simulator's call outside any
    request, a step whose tokens no server reported; a grading failure has no reward."""
    b = SweepBuilder(tmp_path / "runs")
    prompt = '[{"role": "user", "content": "hi"}]'
    messages = [{"seq": 0, "caller": "agent", "request": 1, "step": 1, "prompt_json": prompt, "completion": "ok",
                 "latency_s": 1.0, "prompt_tokens": 100, "completion_tokens": 10},
                {"seq": 1, "caller": "user_simulator", "prompt_json": prompt, "completion": "thanks", "latency_s": 0.5}]
    steps = [{"request": 1, "step": 1, "query": "change my flight", "latency_s": 1.0, "active_nodes": 2}]
    ids = b.episode(method="flowstate", steps=steps, messages=messages, n_parse_error_steps=0, n_tool_errors=0,
                    agent_prompt_tokens=100, agent_completion_tokens=10, agent_cached_tokens_estimate=60)
    failed_grading = b.episode(method="flowstate", task="B", status="grading_failed", reward=None, n_parse_error_steps=0,
                               n_tool_errors=0, agent_prompt_tokens=5, agent_completion_tokens=1, grading_basis=None)
    b.manifest()
    status, out, _ = show(capsys, ids["episode_id"], "--runs", str(b.root))
    assert status == 0 and "None" not in out, out
    assert "agent 100 prompt + 10 completion (estimated cached 60);" in out
    assert "  step 1: 1.00 s, active state 2 nodes" in out
    assert "  agent (request 1, step 1): prompt 35 chars, 100 + 10 tokens" in out
    assert "  user_simulator: prompt 35 chars, 0.50 s -> thanks" in out
    status, out, _ = show(capsys, failed_grading["episode_id"], "--runs", str(b.root))
    assert status == 0 and "None" not in out, out
    assert "status grading_failed · termination user_stop · no reward\n" in out


def test_show_list_gives_the_ids_with_what_tells_them_apart(sweep: SweepBuilder,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = show(capsys, "--list", "--runs", str(sweep.root))
    lines = [line for line in out.splitlines() if any(e in line for e in sweep.written)]
    assert status == 0 and len(lines) == len(sweep.written) == 17 and "17 episodes under" in out
    first = sweep.ids(domain="airline", method="flowstate", model="m1", task="A", trial=0)
    assert [cell.strip() for cell in lines[0].split("│")[1:-1]] == [first["episode_id"], first["cell"], "A", "0", "1",
                                                                   "completed"]  # cells, then tasks, then trials
    status, out, _ = show(capsys, "--list", "--runs", str(sweep.root), "--method", "flowstate", "--status", "failed")
    assert status == 0 and sweep.ids(domain="airline", method="flowstate", model="m1", task="A", trial=3)["episode_id"] in out
    assert "1 episodes under" in out
    status, out, err = show(capsys, "--list", "--runs", str(sweep.root), "--cell", "no-such-cell")
    assert status == 0 and out == "" and err == f"no episodes under {sweep.root} that match\n"


def test_show_asks_for_an_id_or_the_list_in_one_line(sweep: SweepBuilder, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = show(capsys, "--runs", str(sweep.root))
    listing = flowstate_command("show --list")  # as the user can type it
    assert status == 2 and err == f"flowstate: error: show needs an EPISODE_ID; `{listing}` lists them\n"
    status, _, err = show(capsys, "abc", "--method", "flowstate", "--runs", str(sweep.root))
    assert status == 2 and "--method filter(s) the list: use them with --list" in err
