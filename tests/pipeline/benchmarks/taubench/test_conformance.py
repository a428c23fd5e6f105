"""Tool-list rendering helpers."""

from __future__ import annotations

import json
import re

from pipeline.benchmarks.taubench import AGENT_INSTRUCTION, agent_system_prompt, compact_tool_list, tool_list

from .conftest import contract, data_dir


def test_agent_system_prompt_follows_the_contract() -> None:
    match = re.search(r"`AGENT_INSTRUCTION` = (\".*?\")\n", contract())
    assert match
    assert AGENT_INSTRUCTION == json.loads(match.group(1))
    policy = (data_dir() / "taubench" / "airline" / "policy.md").read_text()
    assert agent_system_prompt("airline") == (
        f"<instructions>\n{AGENT_INSTRUCTION}\n</instructions>\n<policy>\n{policy}\n</policy>"
    )


def test_full_tool_list_is_tools_json_verbatim() -> None:
    for domain in ("airline", "retail"):
        expected = json.loads((data_dir() / "taubench" / domain / "tools.json").read_text())["tools"]
        listed = tool_list(domain)
        assert listed == expected
        listed[0]["function"]["name"] = "changed"
        assert tool_list(domain) == expected  # callers get their own copy


def test_compact_tool_list_has_one_line_per_tool() -> None:
    lines = compact_tool_list("retail").splitlines()
    assert len(lines) == 16
    assert lines[1] == ("cancel_pending_order(order_id, reason): Cancel a pending order. If the order is already "
                        "processed or delivered,")
    airline = compact_tool_list("airline").splitlines()
    assert airline[0] == ("book_reservation(user_id, origin, destination, flight_type, cabin, flights, passengers, "
                          "payment_methods, total_baggages, nonfree_baggages, insurance): Book a reservation.")
    assert "list_all_airports(): Returns a list of all available airports." in airline
