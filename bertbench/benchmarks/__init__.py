"""Throughput benchmarks: bertbench's training paths against Hugging Face transformers on the same config.

One module per benchmark (`pretrain`, `finetune`, `data`), the shared machinery in `common` (timing
rounds that alternate the sides, medians of per-round ratios, the matmul peak, machine facts), and
`ablations` for measuring what each optimisation contributes (`python -m bertbench.benchmarks.ablations`).
Timings on a shared machine are noisy: every side runs once per round in rotating order, and every
reported number is a median over rounds, never a mean or a single run.
"""
