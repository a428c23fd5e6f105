"""TEST FIXTURE: the oracle behind an OpenAI-compatible HTTP server (the stub server's responder).

Episodes then have the oracle's real shape (number of model calls, prompt sizes) while every call
crosses a real HTTP connection: used by the end-to-end tests and the throughput benchmark. The
client names each conversation in OpenAI's ``user`` field (``<episode_id>/<role>``), which picks
the episode's oracle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowstate import ChatMessage, Policy
from pipeline.core.specs import EpisodeSpec
from pipeline.run.scripted_policies import oracle_for


class OracleResponder:
    """``await responder(messages, body)`` -> the oracle's next output for that conversation."""

    def __init__(self, episodes: Mapping[str, EpisodeSpec]) -> None:
        self.episodes = episodes
        self._oracles: dict[str, Policy] = {}
        self._first_prompt: dict[str, str] = {}

    async def __call__(self, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        conversation = body.get("user") or ""
        episode_id = conversation.split("/")[0]
        if episode_id not in self.episodes:
            raise KeyError(f"unknown conversation {conversation!r}")
        prompt = messages[-1]["content"] if messages else ""
        # A conversation that starts over (a retried or resumed episode) sends its first prompt again.
        if self._first_prompt.get(conversation) in (None, prompt):
            self._first_prompt[conversation] = prompt
            self._oracles[conversation] = oracle_for(self.episodes[episode_id])
        oracle = self._oracles[conversation]
        chat = [ChatMessage(role=m["role"], content=m["content"]) for m in messages]
        return (await oracle.complete(chat)).text
