"""User-facing errors: anything raised as `BertbenchError` is printed as one clear message and exits 2."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class BertbenchError(Exception):
    """An error caused by the user's input (a file, a flag, a config), not by a bug."""

    exit_code = 2


def did_you_mean(name: str, choices: Iterable[str], what: str = "name") -> str:
    """'Unknown task 'cloa'. Did you mean: cola? Available: ...' — the lm-eval-harness style."""
    choices = sorted(choices)
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    msg = f"Unknown {what} {name!r}."
    if close:
        msg += f" Did you mean: {', '.join(close)}?"
    msg += f" Available: {', '.join(choices)}"
    return msg


def unknown_key(key: str, known: Iterable[str]) -> str:
    """"unknown key 'lables' (did you mean 'labels'?)": a misspelt key of a config or task file, where the
    message lists the known keys once after all the unknown ones (so one closest name, a stricter cutoff)."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
