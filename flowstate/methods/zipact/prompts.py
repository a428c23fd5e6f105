"""ZipAct's released prompts, read from the data directory, with a benchmark's world state put in.

The prompts (MIT, ``Thomas-mci-21/ZipAct`` at the commit in ``SOURCE.md``) live in
``$FLOWSTATE_DATA/methods/zipact/`` and are checked against their SHA-256 when read; nothing of them
is in this repository. They are written for ALFWorld; the paper's "domain-specific injectables"
are the world-state fields, so each benchmark's fields (``world_state/<benchmark>.<domain>.json``,
written here) replace ALFWorld's in the three places the prompts name them, and ALFWorld's
``visited_locations`` becomes ``visited``. Every edit names its anchor and fails when the text has
moved (:func:`flowstate.prompts.edited`).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowstate.methods.zipact.release import RELEASE
from flowstate.prompts import edited, replace_between


class WorldField(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    initial: Any
    describe: str  # for the updater's field list
    actor: str  # for the actor's state table


class WorldState(BaseModel):
    """A benchmark's world-state fields and how to patch them (the injectables)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fields: tuple[WorldField, ...]
    patching: tuple[str, ...]


@cache
def world_state(benchmark: str | None, domain: str | None) -> WorldState:
    """The fields for ``<benchmark>.<domain>``, or the generic ones for a benchmark without its own."""
    folder = resources.files(__package__).joinpath("world_state")
    named = folder.joinpath(f"{benchmark}.{domain}.json")
    source = named if benchmark and named.is_file() else folder.joinpath("default.json")
    return WorldState.model_validate_json(source.read_text(encoding="utf-8"))


def upstream(name: str, data_dir: Path | None = None) -> str:
    """One released prompt, checked against its pinned SHA-256."""
    return RELEASE.read(name, data_dir, what="ZipAct")


def initial_state(world: WorldState) -> dict[str, Any]:
    """The empty state a task starts from (a request enters it as its first observation)."""
    return {
        "goal_state": {"global_instruction": "", "sub_goal_queue": [], "current_objective": ""},
        "world_state": {f.name: f.initial for f in world.fields},
        "constraint_state": {"negative_constraints": [], "visited": [], "attempted_actions": []},
    }


def _with_world(updater: str, world: WorldState) -> str:
    """The updater prompt with the benchmark's world state in its field list, patching rules and JSON."""
    text = replace_between(updater, "2. **World State (W)**: Abstracts environment into task-relevant variables\n",
                           "\n\n3. **Constraint State (C)**",
                           "\n".join(f"   - {f.name}: {f.describe}" for f in world.fields))
    text = replace_between(text, "### 2. World Patching\n", "\n\n### 3. Failure Reflection",
                           "\n".join(f"- {rule}" for rule in world.patching))
    text = replace_between(text, '  "world_state": {\n', '\n  },\n  "constraint_state"',
                           ",\n".join(f'    "{f.name}": {json.dumps(f.initial)}' for f in world.fields))
    return edited(text, replace=(
        ("   - visited_locations: Locations already explored (set/list)",
         "   - visited: What was already looked up or explored (list)"),
        ("- Track location in `visited_locations` to avoid repetition",
         "- Track what was looked up or explored in `visited` to avoid repetition"),
        ('    "visited_locations": [...],', '    "visited": [...],'),
    ))


def updater_system(world: WorldState, data_dir: Path | None = None) -> str:
    """The separate updater's system prompt: upstream's, with the benchmark's world state."""
    return _with_world(upstream("alfworld_updater_system.txt", data_dir), world)


def inline_rules(world: WorldState, data_dir: Path | None = None) -> str:
    """``{state_tracking_rules}`` of B.3 when the agent updates the state in its own output: the
    updater prompt, addressed to an agent that also acts, writing into ``execution_state``."""
    text = _with_world(upstream("alfworld_updater_system.txt", data_dir), world)
    text = edited(text, replace=(
        ("You are the State Updater for an intelligent agent. Your responsibility is to maintain",
         "Besides acting, you maintain"),
        ("## Output Format\nOutput ONLY valid JSON with this structure:",
         "## State Format\nThe execution_state block holds the whole state as JSON with this structure:"),
    ))
    return replace_between(text, "## Update Protocol\n\n", "by performing:",
                           "At every step you see the state in <agent_status> and the latest observation; a new "
                           "request arrives in <user_query>. Write the **UPDATED State** in execution_state ")


def actor_rules(world: WorldState, data_dir: Path | None = None) -> str:
    """``{state_tracking_rules}`` for the actor when a separate updater keeps the state: upstream's
    actor prompt with the benchmark's world state, its tools in place of ALFWorld's actions, and the
    shared output protocol in place of its Thought/Action format."""
    text = upstream("alfworld_actor_system.txt", data_dir)
    text = replace_between(text, "**World State**: What you know about the environment\n", "\n\n**Constraint State**",
                           "\n".join(f"- {f.name}: {f.actor}" for f in world.fields))
    text = replace_between(text, "## Available Actions\n\n", "\n\n## Decision Protocol",
                           "The tools listed in <tools>, called as <output_protocol> says.")
    text = edited(text, replace=(("- visited_locations: Places already explored",
                                  "- visited: What you already looked up or explored"),))
    return text[: text.index("\n\n## Output Format")]


def updater_user(state: dict[str, Any], last_action: str, observation: str, data_dir: Path | None = None) -> str:
    """Upstream's updater user message (an f-string body there) filled in."""
    values = {"{state_str}": json.dumps(state, indent=2, ensure_ascii=False), "{self.last_action}": last_action,
              "{observation}": observation}
    template = upstream("agent_updater_user_template.txt", data_dir)
    return _PLACEHOLDER.sub(lambda m: values[m.group(0)], template)  # one pass: filled text is never re-read


_PLACEHOLDER = re.compile(r"\{state_str\}|\{self\.last_action\}|\{observation\}")
