"""`python SCRIPT ARGS...` or `python -m MODULE ARGS...` in a forked child of the test process.

Most of a fresh `python algos/<file>.py`'s time in a short run is its start-up: importing torch (and torch._dynamo,
which the first `torch.optim.Adam` imports), gymnasium, MiniGrid, TensorBoard and the repository. A child forked from
the test process, which has imported them once, runs the same file as `__main__` with the same argv, working
directory, stdout and stderr (its own file descriptors 1 and 2), exit code, warnings shown on stderr and logging
(Python's defaults: the test's capture of them is left behind), for a few seconds less per run.

`run` waits for the run's end (or runs it in a new interpreter with `fresh`), `start` gives a `Started` to read its lines and send it signals as the run goes on.

What a fork cannot check is a fresh interpreter's start-up: the file's own `sys.path` line, a warning printed while
importing, a random hash seed. The tests that start real processes keep those: every file's `--resume` command line
in test_checkpoint (a fresh interpreter, whose run must end as the forked reference run did), the same-seed run, the
first bad-input case of each command line, the tests of a reader that goes away, and the sweeps' runs."""

import atexit
import importlib
import io
import logging
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings

# a fresh interpreter's warning filters (python -W and PYTHONWARNINGS unset), as `warnings.filters` lists them
FRESH_FILTERS = [
    ("default", None, DeprecationWarning, "__main__", 0),
    ("ignore", None, DeprecationWarning, None, 0),
    ("ignore", None, PendingDeprecationWarning, None, 0),
    ("ignore", None, ImportWarning, None, 0),
    ("ignore", None, ResourceWarning, None, 0),
]


def _import_once(argv):
    """What a run imports, into the test process: its forks start with it."""
    if argv[0] == "-m":
        importlib.import_module(argv[1])  # the module and what it imports (as __main__ it runs afresh)
    import gymnasium  # noqa: F401
    import minigrid  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch.utils.tensorboard  # noqa: F401
    import tyro  # noqa: F401

    import common.checkpoint  # noqa: F401
    import common.heldout  # noqa: F401
    import common.runs  # noqa: F401
    import envs  # noqa: F401


def _show_warning(message):
    """warnings' own way of showing a warning (the test's capture has replaced it in this process)."""
    try:
        sys.stderr.write(warnings.formatwarning(message.message, message.category, message.filename, message.lineno))
    except OSError:
        pass


def _child(argv, cwd, out, err):
    """Become `python *argv` and exit as it would; never returns."""
    code = 1
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False))
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        warnings.filters[:] = FRESH_FILTERS
        warnings._filters_mutated()  # forget the warnings already shown in the test process
        warnings._showwarnmsg_impl = _show_warning
        warnings.showwarning = warnings._showwarning_orig
        logging.root.handlers.clear()  # a fresh interpreter's: warnings and errors to stderr
        atexit._clear()  # the test process's exit functions are not the run's
        os.chdir(cwd)
        if argv[0] == "-m":
            sys.modules.pop(argv[1], None)  # imported by the test process: as a fresh `python -m`, not yet
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
            runpy.run_path(argv[0], run_name="__main__")
        code = 0
    except SystemExit as stop:  # as the interpreter ends on it: None is 0, a number is the code, text is printed
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        try:  # as the interpreter ends: wait for the threads the run started, then its exit functions
            threading._shutdown()
            atexit._run_exitfuncs()
        except BaseException:
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def run(argv, cwd, timeout=300, fresh=False):
    """`python *argv` in `cwd`, forked: a CompletedProcess with its exit code and its stdout and stderr as text.
    With `fresh`, in a new interpreter instead (subprocess.run), for a test that checks the start-up a fork skips."""
    argv = [str(a) for a in argv]
    if fresh:
        return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    _import_once(argv)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(argv, str(cwd), out.fileno(), err.fileno())
        ended = os.pidfd_open(pid)
        try:
            if not select.select([ended], [], [], timeout)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise subprocess.TimeoutExpired([sys.executable, *argv], timeout)
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(ended)
        out.seek(0)
        err.seek(0)
        stdout, stderr = (f.read().decode(errors="backslashreplace") for f in (out, err))
    return subprocess.CompletedProcess([sys.executable, *argv], os.waitstatus_to_exitcode(status), stdout, stderr)


class Started:
    """A forked run going on (`start`): what the tests use of a subprocess.Popen with text pipes. Its stdout is a pipe
    (read it line by line as the run writes), its stderr is kept for `communicate`."""

    def __init__(self, argv, cwd):
        argv = [str(a) for a in argv]
        _import_once(argv)
        self.args, self.returncode = [sys.executable, *argv], None
        read, write = os.pipe()
        self._err = tempfile.TemporaryFile()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(read)
            _child(argv, str(cwd), write, self._err.fileno())
        os.close(write)
        self.stdout = open(read, encoding="utf-8", errors="backslashreplace")

    def send_signal(self, signum):
        if self.returncode is None:
            os.kill(self.pid, signum)

    def wait(self, timeout=None):
        if self.returncode is None:
            ended = os.pidfd_open(self.pid)
            try:
                if not select.select([ended], [], [], timeout)[0]:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            finally:
                os.close(ended)
        return self.returncode

    def communicate(self, timeout=None):
        """(the rest of stdout, stderr) once the run has ended; killed after `timeout` seconds."""
        killer = threading.Timer(timeout, os.kill, (self.pid, signal.SIGKILL)) if timeout else None
        if killer:
            killer.start()
        try:
            out = self.stdout.read()
            self.wait()
        finally:
            if killer:
                killer.cancel()
        self.stdout.close()
        self._err.seek(0)
        err = self._err.read().decode(errors="backslashreplace")
        self._err.close()
        return out, err


def start(argv, cwd):
    """`python *argv` in `cwd`, forked, going on: a `Started` (see there)."""
    return Started(argv, cwd)
