"""FlowState: execution state as memory for long-horizon LLM agents.

The method as a pure library: typed state nodes (:mod:`flowstate.state`), the Persistent State
Repository and its index (:mod:`flowstate.repository`), the execution rules
(:mod:`flowstate.rules`), the paper's operations by name — Validate_upd and Commit (ISU),
Validate_acc and Disclose (PSA), Persist and Index (:mod:`flowstate.operations`) — and the runtime
that holds the state between them (:mod:`flowstate.runtime`), the output protocol
(:mod:`flowstate.protocol`), the prompt templates (:mod:`flowstate.prompts`), the methods behind
one session interface and registered by name (:mod:`flowstate.methods`) and Algorithm 1
(:mod:`flowstate.loop`). No Ray, no MLflow, no files: JSON in, JSON out.
"""

from flowstate.chat import (
    ChatMessage,
    Completion,
    ContextOverflowError,
    Embedder,
    Embeddings,
    Policy,
    SamplingOverride,
    TokenUsage,
    estimate_tokens,
    with_sampling,
)
from flowstate.environment import Environment
from flowstate.errors import FlowStateError
from flowstate.loop import EpisodeResult, LoopLimits, StepRunner, run_episode
from flowstate.methods import (
    METHODS,
    Capability,
    EpisodeShape,
    FlowStateOptions,
    FlowStateSession,
    FullContextOptions,
    FullContextSession,
    MethodCallers,
    MethodOptions,
    MethodPlugin,
    MethodSession,
    OwnCalls,
    method_options,
    method_plugin,
    new_session,
    register_method,
    render_trajectory,
)
from flowstate.operations import (
    AccessValidation,
    ActiveState,
    UpdateValidation,
    commit,
    disclose,
    index,
    persist,
    validate_acc,
    validate_upd,
)
from flowstate.prompts import TaskPrompt
from flowstate.protocol import ParsedOutput, ProtocolMode, parse_output, protocol_schema
from flowstate.records import (
    MethodRecord,
    ModelExchange,
    RequestEnd,
    RequestOutcome,
    RequestStart,
    StepClock,
    StepRecord,
)
from flowstate.registry import Registry, UnknownPluginError
from flowstate.repository import IndexEntry, Repository, RepositoryExport, RequestRecord
from flowstate.rules import Reason, Rejection
from flowstate.runtime import FlowStateRuntime, Observation, StepEffects
from flowstate.state import (
    AddOp,
    DeltaOp,
    FocusRequest,
    Origin,
    Ref,
    RelationType,
    RemoveOp,
    StateNode,
    StateType,
    UpdateOp,
    observation_id,
)
from flowstate.tools import ToolCall, ToolResult
from flowstate.trace import Trace, replay_trace

__all__ = [
    # the paper's operations (§2.2-2.3, Algorithm 1): ISU = validate_upd + commit, PSA = validate_acc + disclose
    "validate_upd", "commit", "validate_acc", "disclose", "persist", "index",
    "AccessValidation", "ActiveState", "AddOp", "Capability", "ChatMessage", "Completion", "ContextOverflowError",
    "DeltaOp", "Embedder", "Embeddings", "Environment", "EpisodeResult", "EpisodeShape", "FlowStateError", "FlowStateOptions",
    "FlowStateRuntime", "FlowStateSession", "FocusRequest", "FullContextOptions", "FullContextSession", "IndexEntry",
    "LoopLimits", "METHODS", "MethodCallers", "MethodOptions", "MethodPlugin", "MethodRecord", "MethodSession",
    "ModelExchange", "Observation", "Origin", "OwnCalls", "ParsedOutput", "Policy", "ProtocolMode", "Reason", "Ref", "Registry",
    "Rejection", "RelationType", "RemoveOp", "Repository", "RepositoryExport", "RequestEnd", "RequestOutcome",
    "RequestRecord", "RequestStart", "SamplingOverride", "StateNode", "StateType", "StepClock", "StepEffects",
    "StepRecord", "StepRunner", "TaskPrompt", "TokenUsage", "ToolCall", "ToolResult", "Trace", "UnknownPluginError",
    "UpdateOp", "UpdateValidation",
    "estimate_tokens", "method_options", "method_plugin", "new_session", "observation_id", "parse_output",
    "protocol_schema", "register_method", "render_trajectory", "replay_trace", "run_episode", "with_sampling",
]
