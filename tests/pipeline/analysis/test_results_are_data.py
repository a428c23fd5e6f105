"""Reading results never runs code a results folder names: the modules under a manifest's
``plugins:`` are not imported by ``query``, ``report``, ``track``, ``show`` or ``grade``; what readers
need of a benchmark (its metrics, labels, report layout) comes from the catalog stored in the
manifest, else from the installed plug-ins; ``grade`` takes plug-in code only from ``--plugin``."""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pipeline.cli.main import main
from pipeline.store.manifest import MANIFEST
from tests.pipeline.analysis.builder import SweepBuilder

# A benchmark no installed plug-in knows: what readers know of it is only its stored catalog.
CATALOG = {
    "metrics": [
        {"name": "pass_rate", "label": "PR", "description": "mean reward", "column": "reward", "headline": True},
        {"name": "db", "label": "DB", "description": "final database matches", "headline": True},
    ],
    "report_heading": "Canary results", "report_caption": "Stored with the sweep.",
    "domain_labels": {"airline": "Skies"}, "depth_panels": {"airline": "airline"},
}


@pytest.fixture
def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A module on ``sys.path`` that leaves a file behind if anything imports it."""
    name = f"canary_plugin_{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "imported"
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / f"{name}.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).touch()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    yield name, marker
    sys.modules.pop(name, None)


def _name_plugins(sweep_dir: Path, modules: list[str], **extra: Any) -> None:
    manifest = json.loads((sweep_dir / MANIFEST).read_text())
    manifest["job"]["plugins"] = modules
    manifest.update(extra)
    (sweep_dir / MANIFEST).write_text(json.dumps(manifest))


def test_readers_import_nothing_a_results_folder_names(tmp_path: Path, canary: tuple[str, Path],
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    module, marker = canary
    monkeypatch.chdir(tmp_path)  # MLflow's artifacts of a new experiment go under the working directory
    b = SweepBuilder(tmp_path / "runs", "canary-sweep", benchmark="canarybench")
    for method, reward, db in (("full_context", 1.0, 1.0), ("full_context", 0.0, 1.0), ("flowstate", 1.0, 0.0)):
        b.episode(method=method, task=str(len(b.written)), reward=reward, db=db)
    b.manifest()
    # a module that writes the canary, and one that cannot be imported at all
    _name_plugins(b.sweep_dir, [module, "no_such_module_anywhere"], benchmark_catalogs={"canarybench": CATALOG})

    assert main(["query", "scores", "--runs", str(b.root), "--format", "json"]) == 0
    scores = {(r["method"], r["metric"]): r["value"] for r in json.loads(capsys.readouterr().out)}
    assert scores == {("full_context", "pass_rate"): 0.5, ("full_context", "db"): 1.0,
                      ("flowstate", "pass_rate"): 1.0, ("flowstate", "db"): 0.0}
    report = tmp_path / "report.md"
    assert main(["report", str(b.sweep_dir), "--out", str(report)]) == 0
    text = report.read_text()
    assert "## Canary results" in text and "Stored with the sweep." in text and "| Skies PR | Skies DB |" in text
    episode = b.written[0]
    assert main(["show", episode[:8], "--runs", str(b.root)]) == 0
    assert f"episode {episode}" in capsys.readouterr().out
    assert main(["track", str(b.sweep_dir), "--experiment", "results-are-data"]) == 0
    assert "(2 cells" in capsys.readouterr().out
    assert not marker.exists() and module not in sys.modules


def test_a_sweep_without_a_stored_catalog_reads_with_the_installed_plugins(scores_sweep: SweepBuilder,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert "benchmark_catalogs" not in json.loads((scores_sweep.sweep_dir / MANIFEST).read_text())
    assert main(["query", "scores", "--runs", str(scores_sweep.sweep_dir), "--format", "json",
                 "--param", "metric=db"]) == 0
    assert {(r["method"], r["label"]) for r in json.loads(capsys.readouterr().out)} == {
        ("full_context", "DB"), ("flowstate", "DB")}


def test_grade_takes_plugins_from_the_command_line_only(oracle_sweep: Path, tmp_path: Path, canary: tuple[str, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    module, marker = canary
    sweep = tmp_path / oracle_sweep.name
    shutil.copytree(oracle_sweep, sweep)
    _name_plugins(sweep, [module, "no_such_module_anywhere"])
    before = pq.read_table(next((sweep / "episodes").glob("*/*.parquet"))).column("reward").to_pylist()
    assert main(["grade", str(sweep)]) == 0  # τ-bench is installed: the named modules are not needed
    assert "graded 8 episodes (0 changed" in capsys.readouterr().out
    assert not marker.exists() and module not in sys.modules
    assert pq.read_table(next((sweep / "episodes").glob("*/*.parquet"))).column("reward").to_pylist() == before

    assert main(["grade", str(sweep), "--plugin", module]) == 0  # asked for by the user: imported
    assert marker.exists()


def test_grade_names_the_plugins_a_sweep_needs(tmp_path: Path, canary: tuple[str, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    module, marker = canary
    b = SweepBuilder(tmp_path / "runs", "canary-sweep", benchmark="canarybench")
    b.episode()
    b.manifest()
    job = {"name": "canary", "plugins": [module], "benchmarks": [{"benchmark": "canarybench", "domain": "airline"}],
           "methods": [{"name": "full_context"}], "agents": [{"deployment": "m1"}],
           "deployments": {"m1": {"kind": "scripted", "name": "oracle"}}}
    _name_plugins(b.sweep_dir, [module], job=job)
    assert main(["grade", str(b.sweep_dir)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"flowstate: error: {b.sweep_dir / MANIFEST}: its job cannot be read here: benchmarks.0")
    assert f"the sweep ran with the plug-ins {module}: if you trust them, name each with --plugin MODULE" in error
    assert len(error.strip().splitlines()) == 1 and not marker.exists()
