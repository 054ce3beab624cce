"""The channel between the host and a container's tool server (its PID 1, tools/tool_server.py):
the container's attached stdin/stdout, in Docker's multiplexed stream framing, carrying frames

    DEEPSWE <secret> <length>\n<json>

both ways. The secret is random per container and sent first, so nothing the agent writes to the
server's stdout or stdin (e.g. to /proc/1/fd/1) can desynchronize the channel: bytes outside
frames are skipped. `docker_runtime.DockerRuntime` sends one request frame per command and
reads frames until its answer.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from typing import Any

import docker

from deepswe_jax.env.runtime import SERVER_GRACE_S

FRAME_TAG = b"DEEPSWE "  # tools/tool_server.py's


class ServerChannel:
    """The attached stdin/stdout of the tool server, in Docker's multiplexed framing: frames
    `DEEPSWE <secret> <length>\n<json>` both ways (tools/tool_server.py); other bytes on the
    server's stdout (an agent writing to /proc/1/fd/1) are skipped."""

    def __init__(self, api: docker.APIClient, container_id: str, secret: str):
        response_socket = api.attach_socket(
            container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        self._response_socket = response_socket
        self._sock: socket.socket = getattr(response_socket, "_sock", response_socket)
        self._marker = FRAME_TAG + secret.encode("ascii") + b" "
        self._raw = bytearray()
        self._stdout = bytearray()
        self.stderr_tail = bytearray()
        self.skipped_bytes = 0

    def send_secret(self) -> None:
        """The first line the server reads: the secret of every frame after it."""
        self._sock.settimeout(SERVER_GRACE_S)
        self._sock.sendall(self._marker[len(FRAME_TAG) :].strip() + b"\n")

    def send(self, message: Mapping[str, Any]) -> None:
        payload = json.dumps(message, ensure_ascii=True).encode("ascii")
        self._sock.settimeout(SERVER_GRACE_S)
        self._sock.sendall(self._marker + str(len(payload)).encode("ascii") + b"\n" + payload)

    def _next_frame(self) -> dict[str, Any] | None:
        """The next whole frame's message from what was received, or None; skips other bytes."""
        start = self._stdout.find(self._marker)
        if start < 0:
            keep = len(self._marker)  # a marker may be arriving in pieces
            self.skipped_bytes += max(0, len(self._stdout) - keep)
            del self._stdout[: max(0, len(self._stdout) - keep)]
            return None
        self.skipped_bytes += start
        del self._stdout[:start]
        header_end = self._stdout.find(b"\n", len(self._marker))
        if header_end < 0:
            return None
        length = bytes(self._stdout[len(self._marker) : header_end])
        if not length.isdigit():
            raise ValueError(f"bad frame header {bytes(self._stdout[:header_end])[:100]!r}")
        end = header_end + 1 + int(length)
        if len(self._stdout) < end:
            return None
        payload = bytes(self._stdout[header_end + 1 : end])
        del self._stdout[:end]
        return json.loads(payload)

    def receive(self, deadline: float) -> dict[str, Any]:
        """Next message from the server; raises TimeoutError at `deadline`, EOFError if closed."""
        while True:
            message = self._next_frame()
            if message is not None:
                return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self._sock.settimeout(remaining)
            try:
                data = self._sock.recv(1 << 20)
            except TimeoutError:
                raise
            except OSError as e:
                raise EOFError(str(e)) from e
            if not data:
                raise EOFError("the tool server closed its output")
            self._raw += data
            self._demultiplex()

    def _demultiplex(self) -> None:
        # Each frame: 1 byte stream (1 stdout, 2 stderr), 3 zero bytes, 4 bytes big-endian size.
        while len(self._raw) >= 8:
            size = int.from_bytes(self._raw[4:8], "big")
            if len(self._raw) < 8 + size:
                return
            payload = self._raw[8 : 8 + size]
            if self._raw[0] == 2:
                self.stderr_tail = (self.stderr_tail + payload)[-4000:]
            else:
                self._stdout += payload
            del self._raw[: 8 + size]

    def close(self) -> None:
        for closeable in (self._sock, self._response_socket):
            try:
                closeable.close()
            except OSError:
                pass
