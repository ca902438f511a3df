"""Console output that a reader going away never stops: a run piped into `head -1`, or into a
`tee` that Ctrl-C ended, goes on to its checkpoint and its clean exit; and an error's first line, for the one-line
errors of bad input."""

from __future__ import annotations

import argparse
import os
import sys


def say(line: str, stream=None) -> None:
    """Print `line` to `stream` (stdout by default) and flush it. If the reader has gone (EPIPE),
    the stream's file descriptor goes to os.devnull: this and every later write, and the flush
    at exit, are dropped instead of raising BrokenPipeError."""
    stream = sys.stdout if stream is None else stream
    try:
        print(line, file=stream, flush=True)
    except BrokenPipeError:
        reader_gone(stream)


def reader_gone(stream) -> None:
    """After a BrokenPipeError on `stream`: its file descriptor goes to os.devnull, so that later writes and the
    flush at exit are dropped instead of raising it again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


def first_line(error: BaseException) -> str:
    """What an error says, cut to its first sentence of its first line (its type's name if it says nothing)."""
    text = str(error).strip()
    return text.splitlines()[0].split(". ")[0] if text else type(error).__name__


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser for the tools of `common/` (run as `python -m common.<tool>`), whose usage errors (a missing or
    unknown argument, a value of the wrong type) are one line, `error: <what argparse says> (python -m common.<tool>
    --help lists the arguments)`, and exit code 2, as argparse's own."""

    def error(self, message):
        tool = os.path.splitext(self.prog)[0]
        self.exit(2, f"error: {message} (python -m common.{tool} --help lists the arguments)\n")
