"""TEST FIXTURE: an oracle agent for MemoryArena that answers each subtask with its gold answer.

It is not a model and proves nothing about any model: with the scripted judge it makes every subtask
correct, so a sweep with it checks the pipeline end to end (subtasks as requests, tools, memory,
grading, per-request outcomes, the depth analysis). Formal reasoning: the first subtask of a task
asks the ``reasoning`` tool once, then every subtask answers with its gold answer. Group travel: a
``RestaurantSearch`` of the trip's destination, then the traveller's gold plan in the plan format.
Bundled shopping: per step, a search for the target's name, a click on its ASIN, then Buy Now.
Which subtask a prompt belongs to is read from its ``<user_query>``; what it writes follows the
method's declared capabilities.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from flowstate import Capability, ChatMessage, Completion, ProtocolMode
from flowstate.protocol import STATE_BLOCKS, render_output
from pipeline.benchmarks.memoryarena.data import FormalTask, ShoppingTask, Task, TravelTask, prompts
from pipeline.benchmarks.memoryarena.shopping.pages import search_page
from pipeline.benchmarks.memoryarena.subtasks import formal_prompts, plan_text, shopping_prompts, travel_prompts

_QUERY = re.compile(r"<user_query>\n(.*?)\n</user_query>", re.DOTALL)
_OBSERVED = re.compile(r"<latest_observation>\nobservation_id: obs_\d+_\d+\n", re.DOTALL)


class MemoryArenaOracle:
    def __init__(self, task: Task, uses: frozenset[Capability], protocol: ProtocolMode | str,
                 target_names: dict[str, str] | None = None) -> None:
        self.task = task
        self.blocks = tuple(b for b in STATE_BLOCKS if Capability(b) in uses)
        self.protocol = ProtocolMode(protocol)
        if isinstance(task, FormalTask):
            queries = formal_prompts(task)
        elif isinstance(task, ShoppingTask):
            queries = [search_page(i) for i in shopping_prompts(task)]
        else:
            queries = [m for _, m in travel_prompts(task)]
        self.subtask = {query: k for k, query in enumerate(queries)}
        self.target_names = target_names or {}
        self._actions: dict[int, int] = {}  # shopping: actions sent per step

    async def complete(self, messages: Sequence[ChatMessage], *, json_schema: Any = None) -> Completion:
        if messages[0].content == prompts()["formal_reasoning"]["reasoning_tool_system"]:  # asked as the tool model
            return Completion(text="Worked through the problem step by step.", model="oracle-fixture")
        prompt = messages[-1].content
        query = _QUERY.search(prompt)
        k = self.subtask[query.group(1) if query else ""]
        observed = _OBSERVED.search(prompt) is not None
        if isinstance(self.task, ShoppingTask):
            text = self._shop(self.task, k)
        elif isinstance(self.task, FormalTask):
            if k == 0 and not observed:
                text = self._render(calls=[{"name": "reasoning", "arguments": {"input": self.task.questions[0]}}])
            else:
                text = self._render(message=self.task.answers[k])
        else:
            text = self._travel(self.task, k, observed)
        return Completion(text=text, model="oracle-fixture", finish_reason="stop")

    def _shop(self, task: ShoppingTask, k: int) -> str:
        done = self._actions.get(k, 0)
        self._actions[k] = done + 1
        target = task.answers[k].target_asin
        script = [("search", {"keywords": self.target_names.get(target, target)}), ("click", {"value": target}),
                  ("click", {"value": "Buy Now"})]
        name, arguments = script[min(done, len(script) - 1)]
        return self._render(calls=[{"name": name, "arguments": arguments}])

    def _travel(self, task: TravelTask, k: int, observed: bool) -> str:
        gt = task.answers[k]
        if not observed:
            city = next((d["current_city"] for d in gt if " to " not in str(d.get("current_city", " to "))),
                        str(gt[0].get("current_city", "")).split(" to ")[-1])
            return self._render(calls=[{"name": "RestaurantSearch", "arguments": {"city": city}}])
        name, _ = travel_prompts(task)[k]
        return self._render(message=plan_text(name, gt))

    def _render(self, **parts: Any) -> str:
        return render_output(self.protocol, state_blocks=self.blocks, **parts)
