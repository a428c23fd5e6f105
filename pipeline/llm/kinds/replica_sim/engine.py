"""One simulated GPU replica: a vLLM-like prefix cache and continuous batching on a scaled clock.

The stand-in server's replica mode (:class:`pipeline.llm.kinds.replica_sim.server.StubServer` with ``replica=``)
puts every chat call through a :class:`SimulatedReplica`, so that sweeps can be planned at cluster
scale without GPUs: the calls take the time the modelled engine would take, and the reply reports
``usage.prompt_tokens_details.cached_tokens`` as vLLM does.

The model, kept small on purpose:

- **Prefix cache** (vLLM's automatic prefix caching): the KV cache holds ``cache_tokens`` tokens in
  blocks of ``block_tokens``. A full block is named by a hash of its tokens and of the block before
  it, so a block stands for the whole prefix up to it. A request's hit is the longest run of leading
  full blocks of its prompt found in the cache, never the whole prompt (the last prompt token is
  always computed, for its logits). Blocks held by running sequences are pinned; the others are
  evicted least recently used first when new blocks are needed, a finished sequence's blocks from its
  tail (so its prefix, which others share, stays longest). A prompt's blocks are named once its
  prefill is done; its output's blocks when it finishes (the last sampled token has no KV).
- **Continuous batching**: up to ``max_batch`` sequences run together. A request is admitted in
  arrival order when a sequence slot is free and the KV blocks for its prompt and output fit
  (reserved at admission, so nothing is ever preempted; vLLM allocates as it goes and preempts).
  Each engine step spends at most ``max_batched_tokens``: one token per decoding sequence first,
  then chunks of prompts being prefilled (vLLM's chunked prefill); the step that finishes a prompt
  samples its first output token.
- **Latency**: a step takes ``decode_s_per_token`` (reading the weights once, whatever the batch)
  + ``prefill_s_per_token`` × prompt tokens computed in it + ``context_s_per_token`` × the context
  tokens of its decoding sequences (reading their KV). The sum is an upper bound: a real step
  overlaps compute and memory traffic.

**Clock**: simulated seconds run on the real clock scaled by ``time_scale`` (real seconds per
simulated second), not on a virtual clock: the clients are the real pipeline, whose next call comes
when it comes. The engine keeps its own time: each step ends ``step time × time_scale`` real seconds
after the one before, and a request joins the first step that starts after it arrived. When the
process falls behind the real clock, steps follow at once until it has caught up, so a busy CPU
delays answers (the clients then call later) but never stretches a step; ``lag_s`` says how far
behind it fell. The time a conversation spends between a reply and its next call, in simulated
seconds, is what the clients and the CPU add: keep it small against the calls' own latency.

Tokens are the stand-in's: see :func:`sim_token_ids`.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ReplicaSettings(BaseModel):
    """One replica's engine. Defaults: one H100 SXM (80 GB) serving a 32B model (Qwen3-32B, FP8
    weights, BF16 KV cache) with vLLM's defaults: assumptions derived in docs/performance.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefill_s_per_token: float = Field(default=7.5e-5, ge=0)  # 65.6 GFLOP per token at ~45% of 1,979 TFLOP/s FP8
    decode_s_per_token: float = Field(default=0.014, ge=0)  # one step: 32.8 GB of weights at ~70% of 3.35 TB/s
    context_s_per_token: float = Field(default=1.1e-7, ge=0)  # 256 KiB of KV per token at ~70% of 3.35 TB/s
    cache_tokens: int = Field(default=150_000, gt=0)  # ~36 GiB left for KV at gpu_memory_utilization 0.9
    block_tokens: int = Field(default=16, gt=0)  # vLLM's block size on CUDA
    max_batch: int = Field(default=1024, gt=0)  # vLLM's max_num_seqs on H100-class GPUs
    max_batched_tokens: int = Field(default=8192, gt=0)  # vLLM's per-step token budget there
    max_model_len: int = Field(default=40_960, gt=0)  # Qwen3-32B's context
    time_scale: float = Field(default=1.0, gt=0)  # real seconds per simulated second

    @model_validator(mode="after")
    def _one_request_fits(self) -> ReplicaSettings:
        if self.cache_tokens < self.max_model_len:  # vLLM refuses to start in this case too
            raise ValueError(f"cache_tokens ({self.cache_tokens}) must hold one request of max_model_len "
                             f"({self.max_model_len}) tokens")
        return self


def sim_token_ids(text: str | None) -> list[int]:
    """The replica mode's tokens: each whitespace-separated word cut into pieces of up to four
    characters (about what a real tokenizer makes of this JSON-heavy text), each piece's id a hash."""
    return [zlib.crc32(word[i:i + 4].encode()) for word in (text or "").split() for i in range(0, len(word), 4)]


def block_keys(tokens: list[int], block_tokens: int, parent: int = 0, start: int = 0) -> list[int]:
    """The names of the full blocks of ``tokens`` from block ``start`` on, each a hash of the block's
    tokens and of the name before it (``parent``: the name of block ``start - 1``)."""
    keys = []
    for i in range(start * block_tokens, len(tokens) - block_tokens + 1, block_tokens):
        parent = hash((parent, *tokens[i:i + block_tokens]))
        keys.append(parent)
    return keys


class PrefixCache:
    """KV blocks: ``capacity`` of them, named (cached) or not, pinned while referenced.

    ``refs`` holds every named block with its reference count; ``evictable`` the named blocks nobody
    references, least recently used first; ``anonymous`` counts blocks held but not named (a prompt
    still being prefilled, an output's partial block, a duplicate of a named block).
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.refs: dict[int, int] = {}
        self.evictable: OrderedDict[int, None] = OrderedDict()
        self.anonymous = 0
        self.evictions = 0

    @property
    def free(self) -> int:
        return self.capacity - self.anonymous - len(self.refs)

    def hit(self, keys: list[int]) -> int:
        """How many leading blocks of ``keys`` are cached."""
        n = 0
        while n < len(keys) and keys[n] in self.refs:
            n += 1
        return n

    def can_hold(self, hit: list[int], new: int) -> bool:
        """Whether ``new`` more blocks fit once the ``hit`` blocks are pinned."""
        pinned_now = sum(1 for key in hit if key in self.evictable)
        return new <= self.free + len(self.evictable) - pinned_now

    def take(self, hit: list[int], new: int) -> None:
        """Pin the ``hit`` blocks and allocate ``new`` anonymous ones (check :meth:`can_hold` first)."""
        for key in hit:
            self.refs[key] += 1
            self.evictable.pop(key, None)
        while self.free < new:
            key, _ = self.evictable.popitem(last=False)
            del self.refs[key]
            self.evictions += 1
        self.anonymous += new

    def name(self, keys: list[int]) -> list[int]:
        """Name anonymous blocks of a sequence (their contents are computed); returns the keys that
        became cached, pinned by their sequence. A key already cached stays anonymous (a duplicate)."""
        named = [key for key in keys if key not in self.refs]
        for key in named:
            self.refs[key] = 1
        self.anonymous -= len(named)
        return named

    def release(self, keys: list[int], anonymous: int) -> None:
        """A sequence's end: unpin its named blocks (tail first into the LRU order), free the rest."""
        for key in reversed(keys):
            self.refs[key] -= 1
            if self.refs[key] == 0:
                self.evictable[key] = None
        self.anonymous -= anonymous


@dataclass
class Served:
    """What a request got: its cached prompt tokens and its simulated timeline (seconds)."""

    cached_tokens: int
    arrived: float
    started: float  # the start of its first step
    finished: float  # the end of its last step


@dataclass
class _Sequence:
    prompt: list[int]
    output: list[int]
    prompt_keys: list[int]
    arrived: float
    done: asyncio.Future[Served]
    held: list[int] = field(default_factory=list)  # named blocks it pins, in order
    anonymous: int = 0  # blocks it holds unnamed
    cached: int = 0
    computed: int = 0  # prompt tokens in the KV so far
    generated: int = 0
    started: float | None = None

    @property
    def kv_tokens(self) -> int:
        return len(self.prompt) + max(1, len(self.output)) - 1

    @property
    def decoding(self) -> bool:
        return self.computed == len(self.prompt)


class SimulatedReplica:
    """The engine of one replica. :meth:`serve` is called from the server's event loop; the steps
    run in a task of that loop, started by the first request."""

    def __init__(self, settings: ReplicaSettings) -> None:
        self.settings = settings
        self.cache = PrefixCache(settings.cache_tokens // settings.block_tokens)
        self._waiting: deque[_Sequence] = deque()  # in arrival order
        self._running: list[_Sequence] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._t0 = time.monotonic()
        self._t0_wall = time.time()
        self._now = 0.0  # the engine's simulated time
        self.busy: list[list[float]] = []  # [start, end] of each run of steps with sequences in progress
        self.requests: list[dict[str, Any]] = []
        self._totals = {"steps": 0, "prompt_tokens": 0, "cached_tokens": 0, "prefill_tokens": 0,
                        "output_tokens": 0, "batch_seconds": 0.0, "lag_s": 0.0}

    def clock(self) -> float:
        """Simulated seconds since the replica started, on the real clock."""
        return (time.monotonic() - self._t0) / self.settings.time_scale

    async def serve(self, prompt: list[int], output: list[int], conversation: str | None = None) -> Served:
        """Run one request through the engine; returns when its last token is generated."""
        blocks = -(-(len(prompt) + max(1, len(output)) - 1) // self.settings.block_tokens)
        if blocks > self.cache.capacity:
            raise ValueError(f"a request of {len(prompt)} prompt and {len(output)} output tokens needs "
                             f"{blocks} KV blocks; the cache has {self.cache.capacity}")
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        elif self._task.done():
            raise RuntimeError("the simulated engine has stopped") from self._task.exception()
        keys = block_keys(prompt, self.settings.block_tokens)
        sequence = _Sequence(prompt, output, keys, self.clock(), asyncio.get_running_loop().create_future())
        self._waiting.append(sequence)
        self._wake.set()
        served = await sequence.done
        self.requests.append({"conversation": conversation, "arrived": served.arrived, "started": served.started,
                              "finished": served.finished, "prompt_tokens": len(prompt),
                              "cached_tokens": served.cached_tokens, "output_tokens": len(output)})
        return served

    # -- the engine --------------------------------------------------------------------------
    async def _run(self) -> None:
        self._now = self.clock()
        try:
            await self._steps()
        except Exception as exc:  # a bug must fail the requests in progress, not leave them hanging
            for q in [*self._running, *self._waiting]:
                if not q.done.done():
                    q.done.set_exception(exc)
            raise

    async def _steps(self) -> None:
        while True:
            if not self._running and not self._waiting:
                self._wake.clear()
                await self._wake.wait()
            if not self._running:  # idle until the next request arrived
                self._now = max(self._now, self._waiting[0].arrived)
            chunks = self._schedule()
            step = self._step_seconds(chunks)
            start, self._now = self._now, self._now + step
            self._record(start, len(self._running))
            delay = self._now * self.settings.time_scale - (time.monotonic() - self._t0)
            self._totals["lag_s"] = max(self._totals["lag_s"], -delay)
            await asyncio.sleep(max(0.0, delay))
            self._advance(chunks)

    def _schedule(self) -> dict[int, int]:
        """This step's prompt tokens per prefilling sequence (by id); admits waiting requests."""
        s = self.settings
        budget = s.max_batched_tokens - sum(1 for q in self._running if q.decoding)
        chunks: dict[int, int] = {}
        for q in self._running:
            if not q.decoding and budget > 0:
                chunks[id(q)] = min(len(q.prompt) - q.computed, budget)
                budget -= chunks[id(q)]
        while (self._waiting and self._waiting[0].arrived <= self._now and budget > 0
               and len(self._running) < s.max_batch and self._admit(self._waiting[0])):
            q = self._waiting.popleft()
            q.started = self._now
            self._running.append(q)
            chunks[id(q)] = min(len(q.prompt) - q.computed, budget)
            budget -= chunks[id(q)]
        return chunks

    def _admit(self, q: _Sequence) -> bool:
        """Pin the request's cached prefix and reserve its other blocks, if they fit."""
        b = self.settings.block_tokens
        hit = q.prompt_keys[:min(self.cache.hit(q.prompt_keys), (len(q.prompt) - 1) // b)]
        new = -(-q.kv_tokens // b) - len(hit)
        if not self.cache.can_hold(hit, new):
            return False
        self.cache.take(hit, new)
        q.held, q.anonymous = list(hit), new
        q.cached = q.computed = len(hit) * b
        self._totals["prompt_tokens"] += len(q.prompt)
        self._totals["cached_tokens"] += q.cached
        return True

    def _step_seconds(self, chunks: dict[int, int]) -> float:
        s = self.settings
        context = sum(q.computed + q.generated for q in self._running if q.decoding)
        prefill = sum(chunks.values())
        return s.decode_s_per_token + s.prefill_s_per_token * prefill + s.context_s_per_token * context

    def _advance(self, chunks: dict[int, int]) -> None:
        """The step's work is done: tokens computed and generated, finished requests answered."""
        b = self.settings.block_tokens
        self._totals["steps"] += 1
        self._totals["prefill_tokens"] += sum(chunks.values())
        still: list[_Sequence] = []
        for q in self._running:
            if q.decoding:
                q.generated += 1
            elif id(q) in chunks:
                q.computed += chunks[id(q)]
                if q.decoding:  # the prompt is in the KV: name its blocks, sample the first token
                    self._name(q, q.prompt_keys[len(q.held):])
                    q.generated = 1
            if q.decoding and q.generated >= max(1, len(q.output)):
                tokens = q.prompt + q.output[:-1]
                parent = q.prompt_keys[-1] if q.prompt_keys else 0
                self._name(q, block_keys(tokens, b, parent, start=len(q.prompt_keys)))
                self.cache.release(q.held, q.anonymous)
                self._totals["output_tokens"] += len(q.output)
                assert q.started is not None
                if not q.done.done():
                    q.done.set_result(Served(q.cached, q.arrived, q.started, self._now))
            else:
                still.append(q)
        self._running = still

    def _name(self, q: _Sequence, keys: list[int]) -> None:
        """Blocks of ``q`` whose tokens are now in the KV become cached, unless they are already."""
        named = self.cache.name(keys)
        q.held += named
        q.anonymous -= len(named)

    def _record(self, start: float, batch: int) -> None:
        if self.busy and self.busy[-1][1] == start:
            self.busy[-1][1] = self._now
        else:
            self.busy.append([start, self._now])
        self._totals["batch_seconds"] += batch * (self._now - start)

    # -- what the benchmark reads ------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Totals, busy spans and every answered request, in simulated seconds from ``t0_wall``
        (the wall clock at simulated 0; a wall time ``w`` is simulated ``(w - t0_wall) / time_scale``)."""
        return {"settings": self.settings.model_dump(), "t0_wall": self._t0_wall, "now": self.clock(),
                **self._totals, "busy": self.busy, "evictions": self.cache.evictions,
                "waiting": len(self._waiting), "running": len(self._running), "requests": self.requests}
