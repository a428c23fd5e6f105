"""The embeddings server: OpenAI's ``/v1/embeddings`` and ``/v1/models`` over :class:`TextEmbedder`.

``python -m pipeline.llm.kinds.wordllama.server --port 8000`` serves on 127.0.0.1. Requests
are answered on the event loop (a batch of 32 takes milliseconds; a thread pool would cost more
than it saves). Errors have OpenAI's shape, so clients report them like any other server's.
"""

from __future__ import annotations

import argparse
import json
import socket
from typing import Any

import uvicorn

from pipeline.llm.asgi import read_body, send_json
from pipeline.llm.kinds.wordllama.model import MODELS, TextEmbedder, WordLlamaModel


def _error(status: int, message: str, param: str | None = None) -> tuple[int, dict[str, Any]]:
    return status, {"object": "error", "error": {"message": message, "type": "BadRequestError" if status == 400
                                                 else "NotFoundError", "param": param, "code": status}}


class EmbeddingsApp:
    """A bare ASGI app serving one model under one name."""

    def __init__(self, embedder: TextEmbedder, served_model: str) -> None:
        self.embedder = embedder
        self.served_model = served_model

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        body: dict[str, Any]
        if method == "GET" and path == "/health":
            status, body = 200, {"status": "ok"}
        elif method == "GET" and path == "/v1/models":
            status, body = 200, {"object": "list", "data": [{"id": self.served_model, "object": "model",
                                                             "owned_by": "wordllama"}]}
        elif method == "POST" and path == "/v1/embeddings":
            try:
                request = json.loads(await read_body(receive))
            except ValueError:
                status, body = _error(400, "the request body is not JSON")
            else:
                status, body = self.embeddings(request)
        else:
            status, body = _error(404, f"no route {method} {path}")
        await send_json(send, status, body)

    def embeddings(self, request: Any) -> tuple[int, dict[str, Any]]:
        if not isinstance(request, dict):
            return _error(400, "the request body must be a JSON object")
        texts = request.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return _error(400, "input must be a string or a non-empty list of strings", "input")
        if request.get("encoding_format", "float") != "float":
            return _error(400, "only encoding_format 'float' is served", "encoding_format")
        model = request.get("model", self.served_model)
        if model != self.served_model:
            return _error(404, f"model {model!r} is not served here (this serves {self.served_model!r})", "model")
        vectors = self.embedder.embed(texts)
        tokens = sum(self.embedder.token_counts(texts))
        data = [{"object": "embedding", "index": i, "embedding": row.tolist()} for i, row in enumerate(vectors)]
        return 200, {"object": "list", "data": data, "model": self.served_model,
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def serve(host: str, port: int, model: WordLlamaModel, dim: int, served_model: str) -> None:
    app = EmbeddingsApp(TextEmbedder(model, dim), served_model)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY, see replica_sim.server
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(app, interface="asgi3", log_level="warning", lifespan="off", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", choices=sorted(MODELS), default="l2_supercat")
    parser.add_argument("--dim", type=int, choices=[64, 128, 256], default=256)
    parser.add_argument("--served-model-name", default=None)
    args = parser.parse_args(argv)
    serve(args.host, args.port, args.model, args.dim, args.served_model_name or f"wordllama-{args.model}-{args.dim}")


if __name__ == "__main__":
    main()
