"""What a number depends on besides its config: code version, hardware, library versions, date."""
from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import subprocess
from pathlib import Path

# The package's version (pyproject.toml says the same); here, at the bottom, so that `bertbench.__version__`
# re-exports it and nothing below the package's front door imports the front door (which loads checkpoints).
__version__ = "0.1.0"

_ROOT = Path(__file__).resolve().parents[2]  # the checkout (git's working tree)


# A checkout copied without .git (a device machine's): the commit, passed in (scripts/gpu_check.sh sets it)
COMMIT_VARIABLE = "BERTBENCH_COMMIT"


def _passed_in() -> str:
    commit = os.environ.get(COMMIT_VARIABLE, "").strip()
    return f"bertbench {__version__} git:{commit}" if commit else f"bertbench {__version__}"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """'bertbench 0.1.0 git:abc1234' (+ '-dirty' when the tree has uncommitted changes); without git or .git,
    the commit $BERTBENCH_COMMIT names."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return _passed_in()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=_ROOT, capture_output=True,
                               text=True, timeout=5).stdout.strip()
        return f"bertbench {__version__} git:{sha.stdout.strip()}{'-dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        return _passed_in()


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@functools.lru_cache(maxsize=1)
def hardware() -> str:
    """One line: the accelerator if one is used, else the CPU model and core count."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    desc = f"{cpu}, {len(os.sched_getaffinity(0))} cores"
    try:
        import torch

        if torch.cuda.is_available():
            desc = f"{torch.cuda.get_device_name(0)} ×{torch.cuda.device_count()}; host {desc}"
    except ImportError:
        pass
    return desc


def installed_versions(names: tuple[str, ...]) -> dict[str, str]:
    """{package: version} of those of `names` that are installed."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def library_versions() -> dict[str, str]:
    names = ("torch", "lightning", "datasets", "tokenizers", "transformers", "numpy")
    return {"python": platform.python_version(), **installed_versions(names)}


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def bf16_native(device_type: str) -> bool:
    """Whether the hardware computes bf16 natively (detected, not assumed). On a CPU: AVX512-BF16 or AMX, and torch's
    kernels at an AVX512 level (ATEN_CPU_CAPABILITY=avx2 makes this host an AVX2-only one: fp32, as there)."""
    import torch

    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] >= 8
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags()) and "AVX512" in torch.backends.cpu.get_cpu_capability()


def resolve_precision(precision: str, device_type: str) -> str:
    """'auto' → 'bf16-mixed' where bf16 is native (fp32 master weights, autocast), else '32-true'."""
    aliases = {"32": "32-true", "fp32": "32-true", "bf16": "bf16-mixed", "16": "16-mixed", "fp16": "16-mixed"}
    if precision == "auto":
        return "bf16-mixed" if bf16_native(device_type) else "32-true"
    return aliases.get(precision, precision)
