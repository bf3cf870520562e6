"""Running one command through the engine's exec API: the output stream, its end, its exit code.

Blocking SDK calls run on the engine pool; a stream that may last as long as its command runs on a
daemon thread of its own (see `in_daemon_thread`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from docker.utils.socket import STDOUT, frames_iter

from .docker_adapter import exec_socket, send, shutdown
from .shell import PendingOutput

# A command is done when its process exits; the engine waits up to 2 s for a background child
# holding the output open, so the stream is given a little more than that before it is cut.
STREAM_GRACE_SEC = 3.0


def in_daemon_thread[T](fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """Run a blocking call that may last as long as a command does.

    A daemon thread, not the pool: the pool's threads are joined at interpreter exit, and a
    stream still open then would keep the process from ever exiting.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # noqa: BLE001 - re-raised in the awaiting coroutine
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    threading.Thread(target=target, name="aes-engine-stream", daemon=True).start()
    return future


def pump(
    api: Any, exec_id: str, out: PendingOutput, err: PendingOutput, sockets: list[Any]
) -> None:
    sock = exec_socket(api, exec_id)  # no read timeout: a command may be quiet for minutes
    sockets.append(sock)
    try:
        send(sock, b"go\n")  # attached: the command may start (container.AFTER_ATTACH)
        try:
            for stream, data in frames_iter(sock, False):
                (out if stream == STDOUT else err).add(data)
        except OSError:
            pass  # cut by _cut() after a timeout
    finally:
        try:
            sock.close()
        except OSError:
            pass


def cut(sockets: list[Any]) -> None:
    for sock in sockets:
        shutdown(sock)


async def finish(pump: asyncio.Future[None], sockets: list[Any]) -> None:
    """Give the output stream a moment to end on its own, then cut it."""
    try:
        await asyncio.wait_for(asyncio.shield(pump), STREAM_GRACE_SEC)
    except TimeoutError:
        cut(sockets)
        await pump


def exit_code(api: Any, exec_id: str) -> int | None:
    for _ in range(100):  # the stream may close a moment before the engine records the exit
        info = api.exec_inspect(exec_id)
        if not info.get("Running"):
            return info.get("ExitCode")
        time.sleep(0.02)
    return None
