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
