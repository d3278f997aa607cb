"""ReadyQueue: the seed's task order, and the owner's sleep and wake-up."""

from __future__ import annotations

import signal
import threading

import pytest

from aiograd.engine.ready_queue import JOB_KEY, SHUTDOWN_KEY, WAKE_KEY, ReadyQueue, task_key

pytestmark = pytest.mark.timeout(30)


def test_pop_order_is_shutdown_wake_deeper_then_higher_sequence_nr_then_jobs():
    q = ReadyQueue("test")
    q.push_job("job")
    q.push(task_key(0, 5), "gt0", "seq5", None)
    q.push(task_key(0, 9), "gt0", "seq9", None)
    q.push(task_key(1, 1), "gt1", "deeper", None)
    q.wake("gt0")
    q.shutdown()
    popped = [q.pop() for _ in range(6)]
    assert [t[0] for t in popped[:2]] == [SHUTDOWN_KEY, WAKE_KEY]
    assert [t[3] for t in popped[2:5]] == ["deeper", "seq9", "seq5"]
    assert popped[5][0] == JOB_KEY and popped[5][4] == "job"


def test_equal_keys_pop_in_push_order():
    q = ReadyQueue("test")
    for name in ("a", "b", "c"):
        q.push(task_key(0, 3), None, name, None)
    assert [q.pop()[3] for _ in range(3)] == ["a", "b", "c"]


def test_owner_sleeps_until_a_push_from_another_thread():
    q = ReadyQueue("test")
    got: list[object] = []
    done = threading.Event()

    def owner() -> None:
        for _ in range(3):
            got.append(q.pop()[3])
        done.set()

    thread = threading.Thread(target=owner)
    thread.start()
    for name in ("x", "y", "z"):
        q.push(task_key(0, 1), None, name, None)
    assert done.wait(10)
    thread.join()
    assert got == ["x", "y", "z"]


class _Interrupted(Exception):
    pass


def test_a_wait_cut_short_by_an_exception_leaves_the_queue_usable():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread")

    def interrupt(signum, frame):
        raise _Interrupted

    q = ReadyQueue("test")
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(_Interrupted):
            q.pop()  # empty: sleeps until the alarm
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    q.push(task_key(0, 1), None, "after", None)
    assert q.pop()[3] == "after"
    # The owner sleeps again and is woken again: no wake-up is lost or doubled.
    woken = threading.Event()

    def owner() -> None:
        q.pop()
        woken.set()

    thread = threading.Thread(target=owner)
    thread.start()
    q.push(task_key(0, 1), None, "again", None)
    assert woken.wait(10)
    thread.join()
    q.push(task_key(0, 1), None, "last", None)
    assert q.pop()[3] == "last"


def test_push_after_close_raises():
    q = ReadyQueue("cpu")
    q.close()
    with pytest.raises(RuntimeError, match="worker for cpu has stopped"):
        q.push_job("job")
