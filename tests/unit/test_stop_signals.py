"""A worker's fork holds the stop signals until the worker handles them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

FORK = textwrap.dedent(
    """
    import os, signal
    from narad.serve.server import STOP_SIGNALS, pre_fork

    def held():
        return STOP_SIGNALS & signal.pthread_sigmask(signal.SIG_BLOCK, [])

    for _ in range(2):  # the release is registered once, runs every time
        pre_fork(None, None)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, b"child " + str(sorted(held())).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        print(os.read(read, 100).decode())
        print("master", sorted(held()))
    os.fork() or os._exit(0)  # not a worker's: nothing held
    print("other", sorted(held()))
    """
)


def test_the_stop_signals_are_held_in_the_new_worker_only():
    out = subprocess.run(
        [sys.executable, "-c", FORK], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    stops = "[<Signals.SIGINT: 2>, <Signals.SIGQUIT: 3>, <Signals.SIGTERM: 15>]"
    assert out == [f"child {stops}", "master []"] * 2 + ["other []"]
