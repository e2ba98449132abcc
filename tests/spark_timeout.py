"""A pytest plugin: pytest-timeout's limit made to end a test stuck in a Spark job, with the
stacks of where it hung, and the run goes on in the same Spark session.

pytest-timeout's ``signal`` method cannot stop such a test: the main thread waits in py4j for
the job's answer, and even once a signal interrupts that wait, pyspark's clean-up makes another
py4j call on the same connection, which the busy job blocks. So, when the limit passes, a
watchdog thread dumps every thread's stack and cancels the Spark jobs (from its own py4j
connection): the test's call fails with Spark's "cancelled" error and its report says it timed
out. A test stuck outside Spark gets pytest-timeout's signal after a grace period, and one that
still does not end stops the run as pytest-timeout's ``thread`` method does (stacks, then exit).
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
import pytest_timeout

GRACE_SECONDS = 30.0
_TIMED_OUT = pytest.StashKey[float]()  # the limit a test passed


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    if threading.current_thread() is not threading.main_thread():
        return None  # pytest-timeout's own
    done = threading.Event()
    watchdog = threading.Thread(target=_watch, args=(item, settings, done), daemon=True,
                                name=f"spark-timeout {item.nodeid}")

    def handler(signum, frame):
        __tracebackhide__ = True
        pytest.fail(pytest_timeout.PYTEST_FAILURE_MESSAGE % settings.timeout)

    def cancel():
        done.set()
        watchdog.join()
        signal.signal(signal.SIGALRM, previous)

    item.cancel_timeout = cancel
    previous = signal.signal(signal.SIGALRM, handler)
    watchdog.start()
    return True


def _watch(item, settings, done: threading.Event) -> None:
    if done.wait(settings.timeout):
        return
    item.stash[_TIMED_OUT] = settings.timeout
    terminal = item.config.get_terminal_writer()
    terminal.sep("+", title=f"Timeout (>{settings.timeout}s): the stacks, then the Spark jobs are cancelled")
    pytest_timeout.dump_stacks(terminal)
    _cancel_spark_jobs()
    if done.wait(GRACE_SECONDS):
        return
    signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)  # stuck outside Spark
    if done.wait(GRACE_SECONDS):
        return
    terminal.sep("+", title="Timeout: the test did not end; the run stops")
    terminal.flush()
    os._exit(1)


def _cancel_spark_jobs() -> None:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        context.cancelAllJobs()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    limit = item.stash.get(_TIMED_OUT, None)
    if report.failed and limit is not None:
        report.longrepr = (f"Timeout (>{limit}s) from pytest-timeout; its Spark jobs were "
                           f"cancelled (the stacks are in the output above).\n{report.longrepr}")
    return report
