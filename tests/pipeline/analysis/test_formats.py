"""Query results written out: nested cells (a query's list column) in CSV."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa

from pipeline.analysis.formats import to_csv


def test_list_and_struct_cells_become_json_text_in_csv():
    table = pa.table({"method": ["reasoningbank", "mem0"], "titles": [["Check first", "Ask, then act"], None],
                      "hit": [{"record": "0", "score": 1.5}, None], "items": [2, 1]})
    rows = list(csv.DictReader(io.StringIO(to_csv(table))))
    assert json.loads(rows[0]["titles"]) == ["Check first", "Ask, then act"] and rows[1]["titles"] == ""
    assert json.loads(rows[0]["hit"]) == {"record": "0", "score": 1.5}
    assert [r["items"] for r in rows] == ["2", "1"]
