"""The episode actor's process: its heap settled after start-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SETTLE = """
import gc, json
from pipeline.run.actors import GC_YOUNG_THRESHOLD, settle_heap
held = [{"row": i} for i in range(50_000)]  # what start-up loaded for good (a benchmark's data)
before = gc.get_threshold()
settle_heap()
print(json.dumps({"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold(), "before": before,
                  "young": GC_YOUNG_THRESHOLD}))
"""


def test_settling_the_heap_takes_start_up_objects_out_of_full_collections_and_collects_less_often() -> None:
    # a process of its own: freezing and thresholds are process-wide
    out = subprocess.run([sys.executable, "-c", SETTLE], cwd=Path(__file__).parents[3], capture_output=True, text=True,
                         check=True)
    result = json.loads(out.stdout)
    assert result["frozen"] > 50_000  # the held rows and what the imports made
    assert result["threshold"] == [result["young"], *result["before"][1:]] and result["young"] > result["before"][0]
