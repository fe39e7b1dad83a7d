"""Throughput benchmarks (`bertbench bench`): bertbench's training paths against Hugging Face transformers on the
same config, one module per benchmark, the shared machinery (rounds that alternate the sides, medians of per-round
ratios) in `common`, and what each optimisation contributes in `ablations` and `finetune_ablations`.
"""
