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
