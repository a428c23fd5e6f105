"""Gold replays of all 164 tasks against gold_hashes.json and the facts of TOOLS.md §7.2 / §8."""

from __future__ import annotations

import pytest

from pipeline.benchmarks.taubench import exec_calls, get_task, gold_db_hash, load_tasks, replay_gold, task_split

from .conftest import gold_hashes

AIRLINE_GOLD_IS_INITIAL = {0, 1, 2, 3, 4, 5, 6, 9, 10, 13, 26, 27, 28, 31, 34, 36, 38, 41, 43, 45, 46, 47, 48, 49}
RETAIL_GOLD_IS_INITIAL = {10, 12, 24, 25, 50, 57, 62, 65, 67, 68, 105}
RETAIL_FAILING_GOLD = {
    ("2", "Product not found"), ("3", "Product not found"), ("4", "Product not found"),
    ("35", "User not found"), ("37", "User not found"), ("38", "User not found"), ("54", "User not found"),
    ("55", "User not found"), ("39", "User not found"), ("67", "User not found"), ("68", "User not found"),
    ("46", "Order not found"), ("47", "Order not found"),
    ("64", "Non-delivered order cannot be exchanged"),
    ("105", "Insufficient gift card balance to pay for the price difference"),
}


@pytest.fixture(scope="module")
def replays() -> dict[tuple[str, str], dict]:
    return {
        (domain, task.id): replay_gold(domain, task.id)
        for domain in ("airline", "retail")
        for task in load_tasks(domain)
    }


def test_every_gold_replay_matches_gold_hashes(replays: dict[tuple[str, str], dict]) -> None:
    expected = {(domain, task_id): digest for domain, data in gold_hashes().items()
                for task_id, digest in data["gold_hash"].items()}
    assert len(expected) == len(replays) == 164
    mismatched = [key for key, replay in replays.items() if replay["final_db_hash"] != expected[key]]
    assert mismatched == []


def test_gold_db_hash_is_the_replay_hash_and_cached(replays: dict[tuple[str, str], dict]) -> None:
    for domain in ("airline", "retail"):
        for task in load_tasks(domain)[:5]:
            assert gold_db_hash(task) == replays[(domain, task.id)]["final_db_hash"]
            assert gold_db_hash(task) == gold_db_hash(task)


def test_tasks_whose_gold_db_is_the_initial_db(replays: dict[tuple[str, str], dict]) -> None:
    for domain, expected in (("airline", AIRLINE_GOLD_IS_INITIAL), ("retail", RETAIL_GOLD_IS_INITIAL)):
        initial = gold_hashes()[domain]["initial_hash"]
        same = {int(task_id) for (d, task_id), replay in replays.items() if d == domain and replay["final_db_hash"] == initial}
        assert same == expected
        assert all(not replays[(domain, str(task_id))]["changed"] for task_id in expected)


def test_which_gold_actions_fail(replays: dict[tuple[str, str], dict]) -> None:
    airline_failures = [key for key, replay in replays.items() if key[0] == "airline"
                        and any(output["error"] for output in replay["outputs"])]
    assert airline_failures == []
    assert sum(len(task.evaluation_criteria.actions) for task in load_tasks("airline")) == 142
    failures = [(task_id, output["content"].removeprefix("Error: "))
                for (domain, task_id), replay in replays.items() if domain == "retail"
                for output in replay["outputs"] if output["error"]]
    assert len(failures) == 18
    assert set(failures) == RETAIL_FAILING_GOLD
    assert failures.count(("46", "Order not found")) == failures.count(("47", "Order not found")) == 2
    # Task 64 tries the exchange first, then modifies the pending order.
    actions = [a.name for a in get_task("retail", "64").evaluation_criteria.actions]
    assert actions.index("exchange_delivered_order_items") < actions.index("modify_pending_order_items")
    task_105 = get_task("retail", "105").evaluation_criteria.actions
    assert [a.action_id for a in task_105 if a.name == "exchange_delivered_order_items"] == ["106_0"]


def test_exec_calls_shape_and_changed_records() -> None:
    result = exec_calls("airline", [
        {"name": "cancel_reservation", "arguments": {"reservation_id": "4WQ150"}},
        {"name": "get_user_details", "arguments": {"user_id": 1}},
    ])
    assert [output["error"] for output in result["outputs"]] == [False, True]
    assert result["outputs"][1]["content"] == "Error: User 1 not found"
    assert list(result["changed"]) == ["reservations"]
    assert result["changed"]["reservations"]["4WQ150"]["status"] == "cancelled"
    assert result["final_db_hash"] != gold_hashes()["airline"]["initial_hash"]
    assert exec_calls("retail", [])["final_db_hash"] == gold_hashes()["retail"]["initial_hash"]


def test_task_facts_of_the_contract() -> None:
    airline, retail = load_tasks("airline"), load_tasks("retail")
    assert (len(airline), len(retail)) == (50, 114)
    assert all(task.evaluation_criteria.reward_basis == ["DB", "COMMUNICATE"] for task in airline)
    db_only = {task.id for task in retail if task.evaluation_criteria.reward_basis == ["DB"]}
    assert db_only == {"33", "34"}
    assert sum(task.evaluation_criteria.reward_basis == ["DB", "NL_ASSERTION"] for task in retail) == 112
    assert sum(bool(task.evaluation_criteria.communicate_info) for task in airline) == 6
    assert sum(bool(task.evaluation_criteria.nl_assertions) for task in retail) == 40
    any_call = [a for task in (*airline, *retail) for a in task.evaluation_criteria.actions if a.compare_args == []]
    assert len(any_call) == 5 and {a.name for a in any_call} == {"transfer_to_human_agents"}
    assert all(task.user_scenario.persona is None for task in (*airline, *retail))
    assert len(task_split("airline", "base")) == 50
    assert set(task_split("airline", "train")) | set(task_split("airline", "test")) == {t.id for t in airline}
