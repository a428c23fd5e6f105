"""τ-bench (τ³-Bench v1.0.1) airline and retail: environments, user simulator, grading.

The behavioural contract is ``TOOLS.md`` next to the data (``$FLOWSTATE_DATA/taubench``). Importing
this package registers the benchmark (:mod:`pipeline.benchmarks.taubench.benchmark`).
"""

from pipeline.benchmarks.taubench.airline import AirlineTools
from pipeline.benchmarks.taubench.benchmark import TAUBENCH, TauBench, TauBenchCell, task_prompt
from pipeline.benchmarks.taubench.conformance import (
    AGENT_INSTRUCTION,
    agent_system_prompt,
    compact_tool_list,
    exec_calls,
    replay_gold,
    tool_list,
)
from pipeline.benchmarks.taubench.data import DATA_ENV_VAR, DOMAINS, SHA256, Domain, TauBenchDataError, data_root
from pipeline.benchmarks.taubench.database import EpisodeDB, InitialDB, canonical_hash, changed_records
from pipeline.benchmarks.taubench.domains import (
    ToolSchemas,
    fresh_db,
    get_task,
    initial_db,
    load_tasks,
    policy,
    simulation_guidelines,
    task_split,
    tool_schemas,
    toolkit_for,
)
from pipeline.benchmarks.taubench.episode import GREETING, EpisodeEndedError, TauEpisode, Termination
from pipeline.benchmarks.taubench.grading import (
    ActionCheck,
    Basis,
    CommunicateCheck,
    DBCheck,
    JudgeOutputError,
    JudgeRequiredError,
    NLAssertionCheck,
    ReplayMismatchError,
    RewardInfo,
    gold_db_hash,
    grade,
    is_success,
    judge_messages,
    pass_hat_k,
)
from pipeline.benchmarks.taubench.retail import RetailTools
from pipeline.benchmarks.taubench.scripted_user import ScriptedUser
from pipeline.benchmarks.taubench.tasks import GoldAction, Task
from pipeline.benchmarks.taubench.toolkit import ToolKit
from pipeline.benchmarks.taubench.user_simulator import (
    STOP_TOKENS,
    LLMUserSimulator,
    UserSimulator,
    is_stop,
    render_scenario,
    user_messages,
    user_system_prompt,
)

__all__ = [
    "AGENT_INSTRUCTION",
    "DATA_ENV_VAR",
    "DOMAINS",
    "GREETING",
    "SHA256",
    "STOP_TOKENS",
    "TAUBENCH",
    "ActionCheck",
    "AirlineTools",
    "Basis",
    "CommunicateCheck",
    "DBCheck",
    "Domain",
    "EpisodeDB",
    "EpisodeEndedError",
    "GoldAction",
    "InitialDB",
    "JudgeOutputError",
    "JudgeRequiredError",
    "LLMUserSimulator",
    "NLAssertionCheck",
    "ReplayMismatchError",
    "RetailTools",
    "RewardInfo",
    "ScriptedUser",
    "Task",
    "TauBench",
    "TauBenchCell",
    "TauBenchDataError",
    "TauEpisode",
    "Termination",
    "ToolKit",
    "ToolSchemas",
    "UserSimulator",
    "agent_system_prompt",
    "canonical_hash",
    "changed_records",
    "compact_tool_list",
    "data_root",
    "exec_calls",
    "fresh_db",
    "get_task",
    "gold_db_hash",
    "grade",
    "initial_db",
    "is_stop",
    "is_success",
    "judge_messages",
    "load_tasks",
    "pass_hat_k",
    "policy",
    "render_scenario",
    "replay_gold",
    "simulation_guidelines",
    "task_prompt",
    "task_split",
    "tool_list",
    "tool_schemas",
    "toolkit_for",
    "user_messages",
    "user_system_prompt",
]
