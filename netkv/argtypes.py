"""Command-line option types and the one-line parser, shared by ``python -m
netkv`` (run, reproduce, trace, ...) and ``python -m netkv.lincheck``: a bad
option is one line, exit 2, saying what is allowed (argparse's ``type=int``
says only "invalid int value", and prints its usage first). Standard library
only, so that ``--help`` stays fast."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, NoReturn

from netkv.config.core import EXIT_CONFIG


class OneLineParser(argparse.ArgumentParser):
    """Usage errors are one line and exit 2: ``<prefix><message> (see
    --help)``, the prefix ``netkv: <prog>: `` unless given (lincheck's is
    ``error: ``, the start of its one output line)."""

    def __init__(self, *args: Any, error_prefix: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.error_prefix = error_prefix

    def error(self, message: str) -> NoReturn:
        prefix = self.error_prefix if self.error_prefix is not None else f"netkv: {self.prog}: "
        self.exit(EXIT_CONFIG, f"{prefix}{message} (see --help)\n")


def integer(minimum: int, maximum: int | None = None, note: str = "") -> Callable[[str], int]:
    """An integer option's type: ``minimum`` and up (``minimum..maximum``
    if ``maximum``), ``note`` appended to what the refusal allows."""
    allowed = f"{minimum}..{maximum}" if maximum is not None else f"an integer >= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"{text!r} (allowed: {allowed}{note})")
        return value
    return parse


def seconds(above_zero: bool) -> Callable[[str], float]:
    """A duration option's type: a finite number of seconds, > 0 if
    ``above_zero``, else >= 0 (nan and inf were taken: nan never times out)."""
    return _finite("seconds", above_zero)


def gigabytes() -> Callable[[str], float]:
    """A memory cap option's type: a finite number of GB (10^9 bytes) > 0."""
    return _finite("GB", True)


def _finite(unit: str, above_zero: bool) -> Callable[[str], float]:
    bound = "> 0" if above_zero else ">= 0"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or (above_zero and value == 0):
            raise argparse.ArgumentTypeError(f"{text!r} (allowed: {unit}, a finite number "
                                             f"{bound})")
        return value
    return parse
