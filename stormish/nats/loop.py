"""The one asyncio loop thread of a worker process, shared by its NATS components.

nats-py is an asyncio client; a topology's executors are plain threads (or one
cooperative scheduler thread) that must never block. So each worker process runs one
daemon thread with one event loop, started when the first NATS component opens and
stopped when the last one closes; every spout and sink of the process submits its work
there (`submit` from any thread, `call` for a callback) and never awaits on its own
thread. One loop per process, not per component: a loop thread is a thread that wants
the GIL, and with several components per worker a thread each would cost hand-offs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

_lock = threading.Lock()
_shared: LoopThread | None = None


class LoopThread:
    """An event loop on a daemon thread; `users` counts the components holding it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.users = 0
        self.thread = threading.Thread(target=self._run, name="stormish-nats-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            # what a component left running (a client whose open failed half way) is
            # cancelled and awaited, not destroyed pending with the loop
            left = asyncio.all_tasks(self.loop)
            for task in left:
                task.cancel()
            if left:
                gather = asyncio.gather(*left, return_exceptions=True)
                self.loop.run_until_complete(gather)
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> Future:
        """Run `coro` on the loop; the returned future is safe to wait on elsewhere."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call `fn(*args)` on the loop thread soon (one wake-up of the loop)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout: float = 5.0) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)


def acquire() -> LoopThread:
    """The process's loop thread, started if none runs; pair each call with release()."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = LoopThread()
        _shared.users += 1
        return _shared


def release(loop: LoopThread) -> None:
    """One component is done with the loop; the last one stops it."""
    global _shared
    with _lock:
        loop.users -= 1
        if loop.users > 0 or _shared is not loop:
            return
        _shared = None
    loop.stop()


def running() -> LoopThread | None:
    """The loop thread if one runs (tests check that the last close stopped it)."""
    return _shared
