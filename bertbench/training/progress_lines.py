"""Pre-training's progress as plain lines, for output that is not a terminal (see `bertbench.runtime.progress`)."""
from __future__ import annotations

from typing import Callable, Optional

from bertbench.runtime.progress import Ticker, progress_line
from bertbench.training.lightning_compat import lightning as L

RichProgressBar = L.pytorch.callbacks.RichProgressBar


class ProgressLines(L.Callback):
    """Every `every` seconds, on rank 0: step/total, share of the schedule done (steps, or seconds of a
    wall-clock budget), tokens/s as the run log last measured it (`run_log.shown`, host numbers: a progress
    line never reads the device), and the time left: at the pace of the steps after the first where that one held a
    compile (`step`, training.step.TrainingStep), which would otherwise stretch the ETA of a long run for hours."""

    def __init__(self, every: float, total_steps: Optional[int], echo: Callable[[str], None], run_log=None, step=None):
        self.every, self.total_steps, self.echo, self.run_log, self.step = every, total_steps, echo, run_log, step
        self.ticker: Optional[Ticker] = None

    def on_train_start(self, trainer, pl_module):
        self.ticker = Ticker(self.every)  # set-up (data, tokenizer) is not training time

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not trainer.is_global_zero or self.ticker is None or not self.ticker.due():
            return
        step = trainer.global_step
        tps = self.run_log.shown.get("tok/s") if self.run_log is not None else None  # the last row's
        rate = f"{float(tps):,.0f} tok/s" if tps is not None else None
        done, seconds = pl_module.progress(step), pl_module.training_seconds()
        if self.total_steps and self.step is not None:  # counted in steps: the pace without a compile's first step
            paced, seconds = self.step.eta_pace(step, seconds)
            done = paced / max(1, self.total_steps - (step - paced))
        self.echo(f"pretrain {progress_line(step, self.total_steps, done, seconds, rate)}")


class StepProgressBar(RichProgressBar):
    """(lightning workaround: progress-bar-from-run-log) The bar on a terminal. Lightning's says 'Epoch 0/-2' for a run counted in steps or minutes (max_epochs is
    -1, which it prints minus one); ours says what runs, and the counter beside it counts the steps.

    Its numbers are the run log's last row (`run_log.shown`): Lightning's bar reads every logged metric back
    from the device (`.item()`) at every batch, which makes the host wait for each step to finish."""

    def __init__(self, *args, run_log=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.run_log = run_log

    def get_metrics(self, trainer, pl_module) -> dict:
        if self.run_log is None:
            return super().get_metrics(trainer, pl_module)
        return dict(self.run_log.shown)

    def _get_train_description(self, current_epoch: int) -> str:
        return "pretrain"
