"""`bertbench data build`: a pre-training's data made once, before any rank starts, on every core: each distinct
corpus of the phases tokenised, then every phase's instance indices (`instances.index_specs`, what
`build_pretraining_data` reads) built side by side, one index per process, and one throughput line. What it
does and why an index is not split further: docs/scale-data.md (One data build, before any rank starts).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

Echo = Callable[[str], None]


@dataclass
class _IndexJob:
    phase: int  # 1-based, as the user counts the phases
    corpus: Any  # the TokenizedCorpus (memory-mapped: a forked process shares its pages)
    data_cfg: Any
    spec: Any  # instances.IndexSpec
    folder: Path


# set before the pool forks: a job crosses to its process as an index into this list (a corpus, memory-mapped,
# and a progress callable, often a lambda, do not pickle)
_JOBS: list[_IndexJob] = []
_ECHO: list[Optional[Echo]] = [None]


def build_data(data_cfgs: list, tokenizer, objective: str, seed: int, num_proc: int = 0, echo: Optional[Echo] = None,
               cache_dir: Optional[Path] = None) -> dict[str, Any]:
    """Tokenise the corpora of `data_cfgs` (one per phase) and build every phase's indices. `echo` gets the
    build's own lines (what was built, the throughput line); progress lines go to stderr, as in a pre-training
    (`corpus.progress_echo`). Returns what was done:
    {"tokenise": {mb, seconds, processes} or None when cached, "index": {count, mb, seconds, cpu_seconds,
    processes} or None when all were built, "corpora": [folders], "indices": [folders]}."""
    from bertbench.data.corpus import default_num_proc, load_tokenized_corpus, progress_echo, tokenized_corpus_folder
    from bertbench.data.instances import index_folder, index_specs

    say = echo or (lambda line: None)
    cores = num_proc or default_num_proc()
    corpora: dict[tuple, Any] = {}
    tokenised = dict(mb=0.0, seconds=0.0, processes=0)
    for dcfg in data_cfgs:
        ident = (tuple(dcfg.corpus), dcfg.max_documents, dcfg.doc_sentences)
        if ident in corpora:
            continue
        built_before = (tokenized_corpus_folder(dcfg.corpus, tokenizer, dcfg.max_documents, cache_dir,
                                               dcfg.doc_sentences) / "meta.json").is_file()
        corpus = load_tokenized_corpus(dcfg.corpus, tokenizer, dcfg.max_documents, cores, cache_dir=cache_dir,
                                       doc_sentences=dcfg.doc_sentences)
        corpora[ident] = corpus
        if built_before:
            say(f"corpus: built before ({corpus.num_documents:,} documents, {corpus.num_tokens:,} tokens): {corpus.path}")
            continue
        meta = corpus.meta
        tokenised["mb"] += meta["text_bytes"] / 1e6
        tokenised["seconds"] += meta["tokenise_seconds"]
        tokenised["processes"] = max(tokenised["processes"], meta["tokenise_processes"])
        say(f"corpus: {meta['text_bytes'] / 1e6:,.1f} MB → {corpus.num_documents:,} documents, {corpus.num_tokens:,} "
            f"tokens in {meta['tokenise_seconds']:.1f} s: {corpus.path}")
    jobs, done = [], []
    for phase, dcfg in enumerate(data_cfgs, 1):
        corpus = corpora[(tuple(dcfg.corpus), dcfg.max_documents, dcfg.doc_sentences)]
        for spec in index_specs(corpus, dcfg, objective, seed):
            folder = index_folder(corpus, spec, dcfg, objective)
            if folder in {j.folder for j in jobs} or folder in done:
                continue  # two phases that share an index (same layout and length) build it once
            if (folder / "meta.json").is_file():
                say(f"index of phase {phase} {spec.what}: built before: {folder}")
                done.append(folder)
            else:
                jobs.append(_IndexJob(phase, corpus, dcfg, spec, folder))
    indexed = _build_indices(jobs, cores, tokenizer, objective, say, progress_echo()) if jobs else None
    summary = dict(tokenise=tokenised if tokenised["processes"] else None, index=indexed,
                   corpora=[str(c.path) for c in corpora.values()], indices=[str(f) for f in done + [j.folder for j in jobs]])
    say(throughput_line(summary))
    return summary


def _build_indices(jobs: list[_IndexJob], cores: int, tokenizer, objective: str, say: Echo, echo: Optional[Echo]) -> dict:
    """Every job's index, side by side: one process per index, at most `cores` at once."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    processes = max(1, min(cores, len(jobs)))
    say(f"building {len(jobs)} instance indices on {processes} process(es)")
    t0 = time.perf_counter()
    results: list[dict] = []

    def done(result: dict) -> None:
        results.append(result)
        job = jobs[result["job"]]
        say(f"index of phase {job.phase} {job.spec.what}: {result['instances']:,} instances in {result['seconds']:.1f} s: "
            f"{job.folder}")

    _JOBS[:], _ECHO[0] = jobs, echo
    try:
        if processes == 1:
            for i in range(len(jobs)):
                done(_build_index(i, tokenizer.cls_id, tokenizer.sep_id, objective))
        else:  # fork: the processes share the memory-mapped corpus and need not import the caller's main script
            with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
                futures = [pool.submit(_build_index, i, tokenizer.cls_id, tokenizer.sep_id, objective)
                           for i in range(len(jobs))]
                for future in as_completed(futures):
                    done(future.result())
    finally:
        _JOBS.clear()
        _ECHO[0] = None
    wall = time.perf_counter() - t0
    # the text each index covers: its share of the corpus' documents, once per copy
    mb = sum(r["mb"] for r in results)
    return dict(count=len(jobs), mb=mb, seconds=wall, cpu_seconds=sum(r["seconds"] for r in results), processes=processes,
                pids=sorted({r["pid"] for r in results}))


def _build_index(i: int, cls_id: int, sep_id: int, objective: str) -> dict:
    from bertbench.data.instances import cached_instances

    job = _JOBS[i]
    t0 = time.perf_counter()
    built = cached_instances(job.corpus, job.spec, job.data_cfg, objective, cls_id, sep_id, _ECHO[0])
    share = len(job.spec.docs) / max(1, job.corpus.num_documents)
    return dict(job=i, instances=len(built), seconds=time.perf_counter() - t0,
                mb=job.corpus.meta.get("text_bytes", 0) / 1e6 * share * job.spec.copies, pid=os.getpid())


def throughput_line(summary: dict) -> str:
    """'data build: tokenised 12.3 MB in 4.1 s on 2 cores: 3.0 MB/s (1.5 MB/s per core); 4 indices ...'."""
    parts = []
    t = summary["tokenise"]
    if t:
        rate = t["mb"] / max(t["seconds"], 1e-9)
        parts.append(f"tokenised {t['mb']:,.1f} MB in {t['seconds']:.1f} s on {t['processes']} core(s): {rate:,.2f} MB/s "
                     f"({rate / t['processes']:,.2f} MB/s per core)")
    x = summary["index"]
    if x:
        parts.append(f"{x['count']} instance ind{'ex' if x['count'] == 1 else 'ices'} over {x['mb']:,.1f} MB of text "
                     f"in {x['seconds']:.1f} s on {x['processes']} core(s): {x['mb'] / max(x['seconds'], 1e-9):,.2f} MB/s "
                     f"({x['mb'] / max(x['cpu_seconds'], 1e-9):,.2f} MB/s per core)")
    return "data build: " + ("; ".join(parts) if parts else "everything was built before; nothing to do")
