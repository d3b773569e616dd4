"""The one-waiter wake-up signal behind receive and transfer queues."""

from __future__ import annotations

import threading

from stormish.transport.wakeup import Wakeup


def test_starts_clear_and_a_wait_times_out():
    w = Wakeup()
    assert not w.is_set()
    assert w.wait(0.001) is False


def test_a_set_before_the_wait_is_not_lost_and_is_taken_once():
    w = Wakeup()
    w.set()
    w.set()  # several sets count as one
    assert w.is_set()
    assert w.wait(0) is True
    assert w.wait(0) is False


def test_clear_drops_a_pending_signal():
    w = Wakeup()
    w.set()
    w.clear()
    w.clear()  # clearing a clear signal is harmless
    assert w.wait(0) is False


def test_a_set_from_another_thread_wakes_the_waiter():
    w = Wakeup()
    waiting = threading.Event()
    got: list[bool] = []

    def waiter() -> None:
        waiting.set()
        got.append(w.wait(30.0))

    t = threading.Thread(target=waiter)
    t.start()
    waiting.wait(10)
    w.set()
    t.join(10)
    assert got == [True]


def test_concurrent_sets_never_raise():
    w = Wakeup()
    errors: list[BaseException] = []

    def setter() -> None:
        try:
            for _ in range(20_000):
                w.set()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=setter) for _ in range(4)]
    for t in threads:
        t.start()
    taken = 0
    while any(t.is_alive() for t in threads):
        taken += w.wait(0.001)
    for t in threads:
        t.join()
    taken += w.wait(0)  # the last set is still there unless a wait above took it
    assert errors == [] and taken >= 1


def _readable(fd: int, timeout: float) -> bool:
    import select

    return bool(select.select([fd], [], [], timeout)[0])


def test_an_fd_wakeup_keeps_the_lock_rules_and_wakes_a_poll_on_its_descriptor():
    from stormish.transport.wakeup import FdWakeup

    w = FdWakeup()
    try:
        assert not w.is_set() and not _readable(w.readable_fd(), 0)
        w.set()
        w.set()  # several sets count as one signal
        assert w.is_set() and _readable(w.readable_fd(), 0)
        w.clear()  # takes the signal and empties the descriptor
        assert not w.is_set() and not _readable(w.readable_fd(), 0)
        assert w.wait(0.001) is False
    finally:
        w.close()


def test_an_fd_wakeup_set_from_another_thread_ends_a_poll_that_was_already_waiting():
    import zmq

    from stormish.transport.wakeup import FdWakeup

    w = FdWakeup()
    poller = zmq.Poller()
    poller.register(w.readable_fd(), zmq.POLLIN)
    setter = threading.Timer(0.05, w.set)
    try:
        setter.start()
        ready = poller.poll(30_000)  # returns when set, not after 30 s
        assert ready and ready[0][0] == w.readable_fd()
        assert w.is_set()
    finally:
        setter.cancel()
        w.close()
