"""An OpenAI-compatible HTTP server on 127.0.0.1 with scripted replies (error shapes included)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# request body -> (HTTP status, raw response body, delay in seconds)
Reply = Callable[[dict[str, Any]], tuple[int, str, float]]


def completion(text: str, delay: float = 0.0) -> Reply:
    """A well-formed chat completion whose message content is ``text``."""

    def reply(body: dict[str, Any]) -> tuple[int, str, float]:
        payload = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
        return 200, json.dumps(payload), delay

    return reply


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> Reply:
    """A chat completion asking for one native tool call."""

    def reply(body: dict[str, Any]) -> tuple[int, str, float]:
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        payload = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
        return 200, json.dumps(payload), 0.0

    return reply


def error(status: int, message: str, code: str | None = None) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code}})
    return lambda request: (status, body, 0.0)


@contextmanager
def serve(reply: Reply) -> Iterator[dict[str, Any]]:
    """Serve ``/v1/chat/completions``; yields ``{"base_url", "requests", "headers"}`` (the request bodies
    and headers received)."""
    requests: list[dict[str, Any]] = []
    headers: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            requests.append(body)
            headers.append({k.lower(): v for k, v in self.headers.items()})
            status, data, delay = reply(body)
            if delay:
                time.sleep(delay)
            raw = data.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield {"base_url": f"http://127.0.0.1:{server.server_address[1]}/v1", "requests": requests, "headers": headers}
    finally:
        server.shutdown()
        server.server_close()
