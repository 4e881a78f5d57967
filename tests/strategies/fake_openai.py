"""A local OpenAI-compatible HTTP server for tests: real client, real HTTP, scripted replies."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# request -> (status, content, held): a reply that is held is sent only once the test sets the event.
Reply = Callable[[dict[str, Any]], tuple[int, str, "threading.Event | None"]]
HOLD_CAP = 60.0  # bounds a failing test only: a held reply is normally released by the test at once


def text_reply(text: str, status: int = 200, held: threading.Event | None = None) -> Reply:
    return lambda request: (status, text, held)


@contextmanager
def openai_server(reply: Reply) -> Iterator[dict[str, Any]]:
    """Serve ``/v1/chat/completions`` on 127.0.0.1; yields ``{"base_url", "requests"}``."""
    requests: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            requests.append(body)
            status, content, held = reply(body)
            if held is not None:
                held.wait(HOLD_CAP)
            if status != 200:
                payload = {"error": {"message": content, "type": "server_error", "code": status}}
            else:
                payload = {
                    "id": f"chatcmpl-{len(requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                }
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"base_url": f"http://127.0.0.1:{server.server_address[1]}/v1", "requests": requests}
    finally:
        server.shutdown()
        server.server_close()
