"""Run under the loopback-only guard (``python -m tests.pipeline.llm.offline_memory_episode``):
the WordLlama server, then a ReasoningBank and a Mem0 session embedding through it, with the
memory-model fixture. Prints a JSON summary, including every non-loopback connection tried."""

from __future__ import annotations

from tests import netguard

netguard.install()  # before anything else is imported

import asyncio  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import uvicorn  # noqa: E402

from flowstate import MethodCallers, RequestEnd, RequestOutcome, RequestStart, new_session  # noqa: E402
from pipeline.llm import EmbeddingClient  # noqa: E402
from pipeline.llm.kinds.wordllama import WordLlamaSpec  # noqa: E402
from pipeline.llm.kinds.wordllama.model import TextEmbedder  # noqa: E402
from pipeline.llm.kinds.wordllama.server import EmbeddingsApp  # noqa: E402
from pipeline.run.scripted_policies import UnchangedStatePolicy  # noqa: E402
from tests.flowstate.fixtures import TASK  # noqa: E402


async def episode(method: str, url: str, model: str) -> str:
    embeddings = EmbeddingClient(url, model, conversation=f"{method}/embeddings")
    session = new_session(method, TASK, callers=MethodCallers(memory=UnchangedStatePolicy(), embeddings=embeddings))
    try:
        for index, (query, entry) in enumerate([("book a flight to Oslo", "the user flew to Oslo in seat 3A"),
                                                 ("which seat did the user take?", "")], 1):
            session.clock.request = index
            await session.begin_request(RequestStart(index=index, query=query, memory_query=query))
            user = (await session.messages(None))[1].content
            await session.end_request(RequestOutcome(index=index, query=query, ended=RequestEnd.RESPONSE,
                                                     final_response="ok", steps=[], memory_entries=[entry] if entry else []))
        return user.split("<memory>\n", 1)[1].split("\n</memory>", 1)[0]
    finally:
        await session.aclose()


def main() -> None:
    spec = WordLlamaSpec()
    config = uvicorn.Config(EmbeddingsApp(TextEmbedder(), spec.served_model()), host="127.0.0.1", port=0,
                            log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    memories = {m: asyncio.run(episode(m, url, spec.served_model())) for m in ("reasoningbank", "mem0")}
    server.should_exit = True
    print(json.dumps({"memories": memories, "attempts": netguard.ATTEMPTS}))


if __name__ == "__main__":
    main()
