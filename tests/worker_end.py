"""The end of a pytest-xdist worker without a stray KeyboardInterrupt.

Once its last worker has reported that its session finished, pytest-xdist tells the workers to
end; execnet, which runs them, gives a worker's session 5 s to return and then sends the worker
a SIGINT, to stop tests that would still be running. But after the report a worker still has
work of its own: the terminal summary's hooks (hypothesis imports itself there), pytest's
unconfiguring, and a last ``gc.collect()`` (whose callbacks include JAX's
``_xla_gc_callback``). On a loaded machine that can take more than 5 s: the SIGINT then lands in
whatever Python runs at that moment, usually a gc callback, and the suite ends with
``Exception ignored in: <function _xla_gc_callback ...> KeyboardInterrupt``. No test is left to
stop by then, so a worker ignores SIGINT from the end of its session: it finishes its own way,
well within the 10 s more execnet waits before it ends the process itself.

``tests/conftest.py`` uses this hook; a pytest session elsewhere loads it with ``-p tests.worker_end``.
"""

import signal
import threading

import pytest


def ignore_interrupts() -> None:
    """SIGINT ignored from now on in this process (where it can be set: the main thread)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker, at the end of its session (before it reports it finished): no
    more SIGINT (the module's docstring says why)."""
    if hasattr(session.config, "workerinput"):
        ignore_interrupts()
