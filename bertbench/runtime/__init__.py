"""The process and its files, below everything else: atomic writes (`files`), run-folder locks
(`run_dir`), progress lines (`progress`), quiet library notices (`quiet`), the malloc settings
(`allocator`) and provenance (code version, hardware).

Import the submodule you need; this package imports nothing.
"""
