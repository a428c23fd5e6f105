"""FlowState: execution state as memory for long-horizon LLM agents.

The method as a pure library: typed state nodes (:mod:`flowstate.state`), the Persistent State
Repository and its index (:mod:`flowstate.repository`), the execution rules
(:mod:`flowstate.rules`), ISU/PSA/Persist (:mod:`flowstate.runtime`), the output protocol
(:mod:`flowstate.protocol`), the prompt templates (:mod:`flowstate.prompts`), FlowState and
Full Context behind one interface (:mod:`flowstate.methods`) and Algorithm 1
(:mod:`flowstate.loop`). No Ray, no MLflow, no files: JSON in, JSON out.
"""

from flowstate.chat import ChatMessage, Completion, ContextOverflowError, Policy, TokenUsage
from flowstate.environment import Environment, ToolCall, ToolResult
from flowstate.loop import EpisodeResult, EpisodeRunner, LoopLimits, estimate_tokens, run_episode
from flowstate.methods import (
    FlowStateSession,
    FullContextSession,
    MethodName,
    MethodOptions,
    MethodSession,
    new_session,
)
from flowstate.prompts import TaskPrompt
from flowstate.protocol import ParsedOutput, ProtocolMode, parse_output, protocol_schema
from flowstate.records import ModelExchange, StepRecord
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
from flowstate.trace import Trace, replay_trace

__all__ = [
    "AddOp", "ChatMessage", "Completion", "ContextOverflowError", "DeltaOp", "Environment",
    "EpisodeResult", "EpisodeRunner", "FlowStateRuntime", "FlowStateSession", "FocusRequest",
    "FullContextSession", "IndexEntry", "LoopLimits", "MethodName", "MethodOptions", "MethodSession",
    "ModelExchange", "Observation", "Origin", "ParsedOutput", "Policy", "ProtocolMode", "Reason", "Ref",
    "Rejection", "RelationType", "RemoveOp", "Repository", "RepositoryExport", "RequestRecord",
    "StateNode", "StateType", "StepEffects", "StepRecord", "TaskPrompt", "TokenUsage", "ToolCall",
    "ToolResult", "Trace", "UpdateOp", "estimate_tokens", "new_session", "observation_id",
    "parse_output", "protocol_schema", "replay_trace", "run_episode",
]
