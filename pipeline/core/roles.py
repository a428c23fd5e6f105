"""The model roles of an episode: the agent, the method's memory model, and what the benchmark calls."""

from __future__ import annotations

from typing import Literal

Role = Literal["agent", "memory", "user_simulator", "judge", "tool_model", "embeddings"]


#: Every model role of an episode, in the order the tables list them.
ROLES: tuple[Role, ...] = ("agent", "memory", "user_simulator", "judge", "tool_model", "embeddings")


#: The roles whose tokens make the paper's #Tok: the agent and the method's own model.
TOK_ROLES: tuple[Role, ...] = ("agent", "memory")


