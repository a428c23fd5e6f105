"""Grading a shopping episode from its transcript (CONTRACT §5.2 step record, §5.5).

Step k bought the ASIN its purchase summary names (none when the step ended otherwise). The step
record's names are the database's (``name``, else ``title``, else ``small_description``); a purchase
without one takes the page text after the ASIN where it first appeared in the conversation, and a
target without one is ``Product k``; the catalogue gives the categories. The attributes are matched
by the judge model when the episode has one (LLM mode: up to three attempts, the first usable reply
counts), else by string matching (upstream's ``--no-llm``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from flowstate import ChatMessage, Completion, Policy, ToolCall
from pipeline.benchmarks.memoryarena import scoring
from pipeline.benchmarks.memoryarena.data import ShoppingTask
from pipeline.benchmarks.memoryarena.shopping.episode import action_of, purchased_asin
from pipeline.benchmarks.memoryarena.shopping.store import product_names
from pipeline.benchmarks.transcript import TranscriptMessage

_ASIN = re.compile(r"\b[A-Z0-9]{10}\b")
_SEGMENTS = re.compile(r"\[SEP\]|\\n|\n")
_PRICE_LIKE = re.compile(r"\$?[\d\.,]+")


def purchases(transcript: Sequence[TranscriptMessage], steps: int) -> list[str | None]:
    """Each step's purchased ASIN, read from the summary its last observation shows."""
    last: dict[int, str] = {}
    for message in transcript:
        if message.role == "tool" and message.content:
            last[message.request] = message.content
    return [purchased_asin(last.get(k, "")) for k in range(1, steps + 1)]


def _texts(message: TranscriptMessage) -> str:
    actions = [action_of(ToolCall(name=c.name, arguments=c.arguments)) for c in message.tool_calls or []]
    return "\n".join([message.content or "", *actions])


def name_from_pages(transcript: Sequence[TranscriptMessage], asin: str) -> str | None:
    """The text after the ASIN in the first message that shows it (upstream's fallback name)."""
    text = next((t for t in map(_texts, transcript) if asin in _ASIN.findall(t)), "")
    segments = [s.strip() for s in _SEGMENTS.split(text) if s.strip()]
    for i, segment in enumerate(segments):
        if asin in segment and i + 1 < len(segments) and not _PRICE_LIKE.fullmatch(segments[i + 1]):
            return segments[i + 1]
    for segment in segments:
        if asin in segment:
            cleaned = segment.replace(asin, "").strip(" -:")
            if cleaned:
                return cleaned
    return None


async def _judge_replies(judge: Policy, name: str, attributes: Sequence[str]) -> list[str]:
    messages = [ChatMessage(role=m["role"], content=m["content"]) for m in scoring.attribute_judge_messages(name, attributes)]
    replies: list[str] = []
    for _ in range(scoring.JUDGE_ATTEMPTS):
        reply: Completion = await judge.complete(messages)
        replies.append(reply.text)
        if scoring.judge_reply_matches(reply.text, attributes) is not None:
            break
    return replies


async def grade_episode(task: ShoppingTask, transcript: Sequence[TranscriptMessage], db_dir: Path,
                        judge: Policy | None) -> scoring.ShoppingResult:
    bought = purchases(transcript, len(task.answers))
    targets = [a.target_asin for a in task.answers]
    names = product_names(db_dir, {a for a in [*bought, *targets] if a})
    catalog = {asin: {"name": n.catalog_name, "product_category": n.category} for asin, n in names.items()}
    subtasks = []
    for k, (answer, asin) in enumerate(zip(task.answers, bought, strict=True), 1):
        known = names.get(answer.target_asin.upper())
        target_name = (known.db_name if known else None) or f"Product {k}"
        purchased_name = None
        if asin:
            purchased_name = (names[asin].db_name if asin in names else None) or name_from_pages(transcript, asin)
        step_judge = None
        if judge is not None:
            replies: list[str] = []
            if asin and asin.upper() != answer.target_asin.upper() and answer.attributes and purchased_name:
                replies = await _judge_replies(judge, purchased_name, answer.attributes)
            pending = iter(replies)
            step_judge = lambda name, attributes, pending=pending: next(pending, "")  # noqa: E731 - the recorded replies
        subtasks.append(scoring.grade_step(k, asin, answer.target_asin, answer.attributes, catalog,
                                           purchased_name=purchased_name, target_name=target_name, judge=step_judge))
    success = [s.success for s in subtasks]
    return scoring.ShoppingResult(id=task.id, solved=all(success), progress=sum(success) / len(success),
                                  subtasks=subtasks)
