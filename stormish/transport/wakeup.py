"""A wake-up signal for one waiting consumer thread, cheaper than `threading.Event`.

`Event.set` and `Event.wait` run a `Condition` in Python code (a waiter lock allocated
per wait, a notify loop): a few microseconds per wake-up, paid on every small batch an
executor or the transfer thread is woken for. At moderate rates batches are small and
wake-ups are what a worker spends its CPU on. A bare lock used as a binary semaphore
does the same job in C: `set` releases it (the signal is up), `wait` acquires it (takes
the signal, or times out).

Rules it keeps: exactly one thread waits; any thread may set; a set before the wait is
not lost (the wait returns at once); several sets before one wait count as one.
"""

from __future__ import annotations

import threading


class Wakeup:
    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # held = no signal

    def set(self) -> None:
        if self._lock.locked():
            try:
                self._lock.release()
            except RuntimeError:  # another thread set it first: signals do not add up
                pass

    def wait(self, timeout: float) -> bool:
        """True when woken by `set` (the signal is taken), False on timeout."""
        return self._lock.acquire(True, timeout if timeout > 0 else 0)

    def clear(self) -> None:
        self._lock.acquire(False)

    def is_set(self) -> bool:
        return not self._lock.locked()
