"""The methods: FlowState and its baselines behind one session interface, registered by name.

A new method is one module: an options model (``name: Literal["my_method"]`` plus its options), a
session class over that model (``MethodSession[MyOptions]``) declaring what it uses, and a call to
:func:`register_method`, which type-checks the pair.
"""

from flowstate.methods.base import (
    Capability,
    EpisodeShape,
    MethodCallers,
    MethodOptions,
    MethodSession,
    OwnCalls,
    StateStats,
)
from flowstate.methods.bm25 import BM25Options, BM25Session
from flowstate.methods.flowstate_ablations import (
    FlowStateNoIsuOptions,
    FlowStateNoIsuSession,
    FlowStateNoPsaOptions,
    FlowStateNoPsaSession,
)
from flowstate.methods.flowstate_method import FlowStateOptions, FlowStateSession
from flowstate.methods.full_context import FullContextOptions, FullContextSession
from flowstate.methods.mem0 import Mem0Options, Mem0Session
from flowstate.methods.reasoningbank import ReasoningBankOptions, ReasoningBankSession
from flowstate.methods.reasoningbank_release import RELEASE as REASONINGBANK_RELEASE
from flowstate.methods.registry import (
    METHODS,
    MethodPlugin,
    method_options,
    method_plugin,
    new_session,
    register_method,
)
from flowstate.methods.render import render_trajectory
from flowstate.methods.zipact import ZipActBM25Options, ZipActBM25Session, ZipActOptions, ZipActSession
from flowstate.methods.zipact.release import RELEASE as ZIPACT_RELEASE

register_method(FlowStateOptions, FlowStateSession)
register_method(FullContextOptions, FullContextSession)
register_method(FlowStateNoPsaOptions, FlowStateNoPsaSession)
register_method(FlowStateNoIsuOptions, FlowStateNoIsuSession)
register_method(BM25Options, BM25Session)
register_method(ZipActOptions, ZipActSession, release=ZIPACT_RELEASE)
register_method(ZipActBM25Options, ZipActBM25Session, release=ZIPACT_RELEASE)
register_method(ReasoningBankOptions, ReasoningBankSession, release=REASONINGBANK_RELEASE)
register_method(Mem0Options, Mem0Session)

__all__ = [
    "METHODS", "BM25Options", "BM25Session", "Capability", "EpisodeShape", "FlowStateNoIsuOptions", "FlowStateNoIsuSession",
    "FlowStateNoPsaOptions", "FlowStateNoPsaSession", "FlowStateOptions", "FlowStateSession",
    "FullContextOptions", "FullContextSession", "Mem0Options", "Mem0Session", "MethodCallers", "MethodOptions", "MethodPlugin",
    "MethodSession", "OwnCalls", "ReasoningBankOptions", "ReasoningBankSession", "StateStats", "method_options",
    "method_plugin", "new_session", "register_method",
    "render_trajectory", "ZipActBM25Options", "ZipActBM25Session", "ZipActOptions", "ZipActSession",
]
