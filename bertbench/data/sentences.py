"""A rule-based English sentence splitter: no model, no download, deterministic.

Rules: a sentence ends at `.`, `!`, `?` or `…` (and runs of them), optionally followed by closing quotes
or brackets, when whitespace and then an upper-case letter or digit (possibly after opening quotes)
follow. A full stop does not end a sentence after a known abbreviation ("Mr.", "Dr.", "vs."), an
initial ("J. R. R. Tolkien") or a dotted acronym ("e.g.", "i.e.", "U.S.", "Ph.D."). Decimals ("3.14")
never match because no whitespace follows the point. Paragraphs always end sentences: split each
paragraph separately (`split_paragraphs`).

Bump `SPLITTER_VERSION` whenever the output can change: it is part of the tokenised-corpus cache key.
"""
from __future__ import annotations

import re

SPLITTER_VERSION = "1"

# Lower-cased, without the trailing full stop. "etc." is left out on purpose: before an upper-case word
# it usually ends the sentence. Single letters are handled as initials.
ABBREVIATIONS = frozenset(
    """
    mr mrs ms mssrs messrs dr prof rev hon st sr jr esq capt col gen gov lt maj sgt cpl cmdr adm
    fr sen rep pres supt insp mme mlle mgr
    vs viz cf al approx ca fig figs eq eqs vol vols no nos op pp p ch chap sec art para ed eds trans
    dept univ assn bros inc ltd co corp mt ft ave blvd rd
    jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)

# A terminator run, then closing quotes/brackets, then whitespace (the candidate boundary).
_CANDIDATE = re.compile(r"[.!?…]+[\"'”’»)\]]*\s+")
_OPENERS = "\"'“‘«(["
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # e.g / i.e / U.S / Ph.D (the last dot stripped)
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


def _ends_sentence(text: str, term_start: int, term: str, next_pos: int) -> bool:
    """Whether the candidate terminator `term` at `term_start` ends a sentence."""
    nxt = text[next_pos : next_pos + 4].lstrip(_OPENERS)
    if not nxt or not (nxt[0].isupper() or nxt[0].isdigit()):
        return False
    if term != ".":  # "!", "?", "..." and mixes end the sentence before a capital
        return True
    word_start = text.rfind(" ", 0, term_start) + 1
    word = text[word_start:term_start].lstrip(_OPENERS)
    if not word:
        return True
    if word.lower() in ABBREVIATIONS:
        return False
    if len(word) == 1 and word.isalpha() and word.isupper():  # an initial: "J. Smith"
        return False
    return _DOTTED.fullmatch(word) is None


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph (a string without paragraph breaks); empty sentences are dropped."""
    text = " ".join(paragraph.split())  # one space everywhere: line wraps inside a paragraph are soft
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _CANDIDATE.finditer(text):
        term = m.group().rstrip().rstrip("\"'”’»)]")
        if _ends_sentence(text, m.start(), term, m.end()):
            out.append(text[start : m.end()].strip())
            start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs of a plain-text document: blocks separated by blank lines (single newlines are soft)."""
    return [p for p in (" ".join(block.split()) for block in _BLANK_LINE.split(text)) if p]


def document_sentences(paragraphs: list[str]) -> list[str]:
    """All sentences of a document given as paragraphs; a paragraph always ends a sentence."""
    return [s for p in paragraphs for s in split_sentences(p)]
