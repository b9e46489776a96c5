"""The board application behind main.py: build the worker, run it, finish.

It lives in the package (not in main.py) so that ``edgeps flash --mpy``
precompiles it too. Building (config, trainer, data, MQTT client) is in
``builder``, unloaded once the worker is built. Only the network bring-up
differs between ports: on the ESP32 every (re)connect first makes sure
Wi-Fi is up.

A finished run (job done, max_iterations, a config error, out of memory)
says why and, at a job's end, keeps its model (``end``, loaded only then);
it ends in ``finish``: an exit status where there is an operating system,
the REPL on a board, which then stays idle until it is reset.
"""

import gc
import sys

# ports with an operating system to hand an exit status to
HOSTED = ("linux", "darwin", "win32")


def finish(status):
    """End main.py with ``status``: sys.exit on an OS, back to the REPL on a board.

    On the ESP32 a SystemExit leaving main.py makes MicroPython soft-reset the
    board (pyexec's forced exit), so a finished board would rejoin, finish
    again forever; returning instead leaves
    it idle at the REPL until someone resets it.
    """
    if sys.platform in HOSTED:
        sys.exit(status)
    print("edgeps worker: finished, status " + str(status) + "; idle until reset")


def live_heap():
    """Bytes of heap held by live objects (collects first; MicroPython only)."""
    gc.collect()
    return gc.mem_alloc()  # type: ignore[attr-defined]


def build(path, stop=None):
    """A ready Worker (not yet connected) for the config file at ``path``.

    The builder module is unloaded afterwards: its code ran once.
    """
    from edgeps_worker import builder, unload

    try:
        w = builder.build(path, stop)
    finally:
        builder = None
        unload("builder")
        gc.collect()
    if w is None:  # inference mode, built with the builder's code off the heap
        w = __import__("edgeps_worker.infer", None, None, ("build",)).build(path)
    return w


def main(argv):
    path = argv[1] if len(argv) > 1 else "config.json"
    try:
        w = build(path)
    except (ValueError, OSError) as exc:
        print("edgeps worker: " + str(exc))
        return 2
    except MemoryError as exc:  # the model, batch or chunks do not fit this heap
        print("edgeps worker: out of memory at start-up: " + str(exc))
        return 2
    print("edgeps worker " + w.wid + " job " + w.job + " " + w.trainer.model)
    try:
        reason = w.run()
    except ValueError as exc:
        # bad local data (a label outside the model's classes, ...): a restart
        # would fail the same way, so say why and stop
        print("edgeps worker: " + str(exc))
        return 2
    finally:
        close = getattr(w.trainer, "close", None)  # alive.StepHeartbeat's thread
        if close is not None:
            close()
    # why it stopped and, at a job's end, its model kept: code loaded only
    # now (``end``); in a list, so that nothing here holds the worker
    w = [w]
    from edgeps_worker import end

    return end.run(w, argv, reason)
