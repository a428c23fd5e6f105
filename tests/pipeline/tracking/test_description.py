"""The parent run's description stays within what MLflow keeps of a tag: a paper section that would
be cut mid-table is left to the report, with a pointer to it."""

from __future__ import annotations

from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

from pipeline.tracking.headline import HeadlineRow
from pipeline.tracking.mlflow_log import PAPER_POINTER, description

MANIFEST = {"sweep_id": "s-0123456789", "job_name": "s"}
ROWS = [HeadlineRow("taubench", "airline", "flowstate", "m1", 4, {"1 PR": 50.0, "4 Tok": 1200.0})]


def test_a_paper_section_that_fits_is_in_the_description() -> None:
    paper = "## The paper beside this sweep\n\n| airline | m1 | flowstate | PR | 50.0 | 61.2 |"
    text = description(MANIFEST, ROWS, None, {}, paper)
    assert paper in text and PAPER_POINTER not in text and "| flowstate | airline | m1 | 50.0 |" in text


def test_a_paper_section_mlflow_would_cut_is_pointed_to() -> None:
    paper = "## The paper beside this sweep\n\n" + "| bundled_shopping | m1 | flowstate | PS | 18.4 | 21.11 |\n" * 200
    text = description(MANIFEST, ROWS, None, {}, paper)
    assert len(text) <= MAX_TAG_VAL_LENGTH
    assert PAPER_POINTER in text and "bundled_shopping" not in text and "| flowstate | airline | m1 | 50.0 |" in text
