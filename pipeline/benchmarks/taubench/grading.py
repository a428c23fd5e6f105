"""Grading a finished episode from its transcript alone (TOOLS.md §7).

Grading is its own stage so that stored transcripts can be re-graded without re-simulating: the
predicted database is rebuilt by replaying the transcript's write calls on a fresh database and
compared with the gold database (the task's gold actions replayed, once per task per process).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from math import comb
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from flowstate.chat import ChatMessage, Policy
from flowstate.environment import ToolCall, ToolResult
from pipeline.benchmarks import base
from pipeline.benchmarks.taubench.data import DataDir
from pipeline.benchmarks.taubench.database import EpisodeDB
from pipeline.benchmarks.taubench.domains import ToolKind, fresh_db, initial_db, tool_schemas, toolkit_for
from pipeline.benchmarks.taubench.tasks import GoldAction, Task
from pipeline.benchmarks.transcript import TranscriptMessage

Basis = Literal["task", "classic"]
GRADED_TERMINATIONS = ("user_stop", "agent_stop")
CLASSIC_BASIS = ("DB", "COMMUNICATE")

JUDGE_SYSTEM_PROMPT = (
    "\n        TASK\n        - You will be given a list of expected outcomes and a conversation that was "
    "collected during a test case run.\n        - The conversation is between an agent and a customer.\n"
    "        - Your job is to evaluate whether the agent satisfies each of the expected outcomes.\n"
    "        - Grade each expected outcome individually.\n\n        FORMAT\n        - Your response "
    "should be a JSON object with the following fields:\n        - `reasoning`: a short explanation "
    "for your classification\n        - `metExpectation`: `true` if the agent satisfies the expected "
    "outcomes, `false` otherwise\n        - `expectedOutcome`: repeat the expectation from the input "
    "that you are grading\n        \n        Example response structure:\n        {\n            "
    '"results": [\n                {\n                    "expectedOutcome": "<one of the expected '
    'outcomes from the input>",\n                    "reasoning": "<reasoning trace>",\n'
    '                    "metExpectation": <false or true>,\n                }\n            ]\n'
    "        }\n        "
)


class JudgeRequiredError(base.JudgeRequiredError, ValueError):
    """The task's reward needs NL assertions judged, but no judge policy was given."""


class JudgeOutputError(ValueError):
    """The judge's reply is not the JSON upstream parses; the caller decides whether to retry."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(f"{message}; judge reply: {raw[:500]!r}")
        self.raw = raw


class ReplayMismatchError(RuntimeError):
    """Replaying a write call gave a different result than the transcript recorded."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DBCheck(_Model):
    match: bool
    predicted_hash: str
    gold_hash: str


class CommunicateCheck(_Model):
    info: str
    met: bool


class NLAssertionCheck(_Model):
    assertion: str
    met: bool
    reasoning: str


class ActionCheck(_Model):
    action_id: str
    name: str
    kind: ToolKind | None  # None for a name that is not a tool of the domain
    matched: bool


class RewardInfo(_Model):
    """Everything grading decided, and on which basis."""

    reward: float
    basis: Basis
    # The components multiplied into the reward (the task's reward_basis, or DB × COMMUNICATE).
    reward_basis: list[str]
    termination: str
    # False when the termination gate set the reward to 0 without evaluating anything.
    graded: bool
    components: dict[str, float] = {}
    db: DBCheck | None = None
    communicate_checks: list[CommunicateCheck] = []
    nl_assertion_checks: list[NLAssertionCheck] = []
    judge_raw: str | None = None
    action_checks: list[ActionCheck] = []
    read_accuracy: float | None = None
    write_accuracy: float | None = None


class _JudgeVerdict(BaseModel):
    """One entry of the judge's ``results``; upstream reads these three keys (lax types)."""

    expectedOutcome: str  # noqa: N815 - the judge's JSON field names
    reasoning: str
    metExpectation: bool  # noqa: N815


class _JudgeReply(BaseModel):
    results: list[_JudgeVerdict] = []  # upstream: ``.get("results", [])``


def replay(db: EpisodeDB, calls: Sequence[ToolCall]) -> list[ToolResult]:
    """Execute the calls in order on ``db``; failing calls stay failed and keep their effects."""
    tools = toolkit_for(db)
    return [tools.execute(call) for call in calls]


_gold_hashes: dict[tuple[int, str], str] = {}


def gold_db_hash(task: Task, data_dir: DataDir = None) -> str:
    """Hash of a fresh DB after all gold actions (reads included, failures ignored); cached."""
    initial = initial_db(task.domain, data_dir)
    actions = task.evaluation_criteria.actions
    key = (id(initial), json.dumps([action.model_dump() for action in actions]))
    if key not in _gold_hashes:
        db = initial.fresh()
        replay(db, [ToolCall(name=action.name, arguments=action.arguments) for action in actions])
        _gold_hashes[key] = db.canonical_hash()
    return _gold_hashes[key]


def tool_calls(transcript: Sequence[TranscriptMessage]) -> list[ToolCall]:
    """The agent's tool calls in transcript order."""
    return [
        ToolCall(id=call.id, name=call.name, arguments=call.arguments)
        for message in transcript
        if message.role == "assistant" and message.tool_calls
        for call in message.tool_calls
    ]


def _same_output(replayed: str, recorded: str) -> bool:
    if replayed == recorded:
        return True
    try:
        return json.loads(replayed) == json.loads(recorded)
    except json.JSONDecodeError:
        return False


def predicted_db(task: Task, transcript: Sequence[TranscriptMessage], data_dir: DataDir = None) -> EpisodeDB:
    """A fresh DB with the transcript's write calls replayed (checked against the recorded results)."""
    kinds = tool_schemas(task.domain, data_dir).kinds
    writes = [call for call in tool_calls(transcript) if kinds.get(call.name) == "write"]
    recorded = {message.tool_call_id: message for message in transcript if message.role == "tool"}
    db = fresh_db(task.domain, data_dir)
    for call, result in zip(writes, replay(db, writes), strict=True):
        before = recorded.get(call.id)
        if before is not None and before.content is not None and not _same_output(result.content, before.content):
            raise ReplayMismatchError(
                f"Replaying {call.name} (id {call.id}) gave {result.content[:200]!r}, "
                f"the transcript recorded {before.content[:200]!r}"
            )
    return db


def communicate_checks(task: Task, transcript: Sequence[TranscriptMessage]) -> list[CommunicateCheck]:
    """Each info string must occur (case-insensitively) in an assistant text with commas removed."""
    texts = [
        message.content.lower().replace(",", "")
        for message in transcript
        if message.role == "assistant" and message.content and message.content.strip()
    ]
    return [
        CommunicateCheck(info=info, met=any(info.lower() in text for text in texts))
        for info in task.evaluation_criteria.communicate_info
    ]


def _matches(action: GoldAction, call: ToolCall) -> bool:
    if action.name != call.name:
        return False
    if action.compare_args == []:
        return True
    if not isinstance(call.arguments, dict):
        return False
    keys = set(call.arguments) if action.compare_args is None else set(action.compare_args)
    if not keys:
        return True
    predicted = {key: value for key, value in call.arguments.items() if key in keys}
    expected = {key: value for key, value in action.arguments.items() if key in keys}
    return predicted == expected


def action_checks(
    task: Task, transcript: Sequence[TranscriptMessage], kinds: Mapping[str, ToolKind]
) -> list[ActionCheck]:
    calls = tool_calls(transcript)
    return [
        ActionCheck(
            action_id=action.action_id,
            name=action.name,
            kind=kinds.get(action.name),
            matched=any(_matches(action, call) for call in calls),
        )
        for action in task.evaluation_criteria.actions
    ]


def _accuracy(checks: Sequence[ActionCheck], kind: ToolKind) -> float | None:
    relevant = [check.matched for check in checks if check.kind == kind]
    return sum(relevant) / len(relevant) if relevant else None


def render_conversation(transcript: Sequence[TranscriptMessage]) -> str:
    """The judge's view: ``role: content`` per message (``None`` for a tool-call-only message)."""
    return "\n".join(f"{message.role}: {message.content}" for message in transcript)


def judge_messages(transcript: Sequence[TranscriptMessage], assertions: Sequence[str]) -> list[ChatMessage]:
    user = (
        "\n        conversation:\n        "
        + render_conversation(transcript)
        + "\n        \n        expectedOutcomes:\n        "
        + repr(list(assertions))
        + "\n        "
    )
    return [ChatMessage(role="system", content=JUDGE_SYSTEM_PROMPT), ChatMessage(role="user", content=user)]


def parse_judge_reply(raw: str) -> list[NLAssertionCheck]:
    """Strict JSON (no markdown stripping), read as upstream reads it."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise JudgeOutputError(f"judge reply is not valid JSON ({exc})", raw) from exc
    if not isinstance(data, dict):
        raise JudgeOutputError("judge reply is not a JSON object", raw)
    try:
        reply = _JudgeReply.model_validate(data)
    except ValidationError as exc:
        raise JudgeOutputError(f"judge reply has the wrong shape ({exc.error_count()} errors)", raw) from exc
    return [
        NLAssertionCheck(assertion=item.expectedOutcome, met=item.metExpectation, reasoning=item.reasoning)
        for item in reply.results
    ]


async def grade(
    task: Task,
    transcript: Sequence[TranscriptMessage],
    termination: str,
    *,
    judge: Policy | None = None,
    basis: Basis = "task",
    data_dir: DataDir = None,
) -> RewardInfo:
    """The reward of one episode; ``basis="classic"`` grades DB × COMMUNICATE and never judges."""
    reward_basis = list(task.evaluation_criteria.reward_basis) if basis == "task" else list(CLASSIC_BASIS)
    if termination not in GRADED_TERMINATIONS:
        return RewardInfo(reward=0.0, basis=basis, reward_basis=reward_basis, termination=termination, graded=False)

    kinds = tool_schemas(task.domain, data_dir).kinds
    predicted_hash = predicted_db(task, transcript, data_dir).canonical_hash()
    gold_hash = gold_db_hash(task, data_dir)
    db = DBCheck(match=predicted_hash == gold_hash, predicted_hash=predicted_hash, gold_hash=gold_hash)
    communicated = communicate_checks(task, transcript)
    actions = action_checks(task, transcript, kinds)
    components = {
        "DB": float(db.match),
        "COMMUNICATE": float(all(check.met for check in communicated)),
        "ACTION": float(all(check.matched for check in actions)),
    }

    judged: list[NLAssertionCheck] = []
    judge_raw = None
    if "NL_ASSERTION" in reward_basis:
        assertions = task.evaluation_criteria.nl_assertions
        if assertions:
            if judge is None:
                raise JudgeRequiredError(f"{task.domain} task {task.id} needs a judge for its NL assertions")
            judge_raw = (await judge.complete(judge_messages(transcript, assertions))).text
            judged = parse_judge_reply(judge_raw)
        components["NL_ASSERTION"] = float(all(check.met for check in judged))

    reward = 1.0
    for component in reward_basis:
        reward *= components[component]
    return RewardInfo(
        reward=reward,
        basis=basis,
        reward_basis=reward_basis,
        termination=termination,
        graded=True,
        components=components,
        db=db,
        communicate_checks=communicated,
        nl_assertion_checks=judged,
        judge_raw=judge_raw,
        action_checks=actions,
        read_accuracy=_accuracy(actions, "read"),
        write_accuracy=_accuracy(actions, "write"),
    )


def is_success(reward: float) -> bool:
    return abs(reward - 1.0) <= 1e-6


def pass_hat_k(successes_per_task: Mapping[str, Sequence[bool]], k: int) -> float:
    """Mean over tasks of C(c, k) / C(n, k) (n trials, c successes); ``k`` ≤ the fewest trials."""
    if not successes_per_task:
        raise ValueError("pass^k needs at least one task")
    fewest = min(len(trials) for trials in successes_per_task.values())
    if not 1 <= k <= fewest:
        raise ValueError(f"k must be between 1 and {fewest} (the fewest trials of any task), got {k}")
    return sum(
        comb(sum(trials), k) / comb(len(trials), k) for trials in successes_per_task.values()
    ) / len(successes_per_task)
