"""Studies: `bertbench run --preset NAME`. A preset (preset.py) becomes a plan of stages (plan.py) keyed on
what determines each one's output (keys.py), which the scheduler (scheduler.py) runs in dependency order,
several at a time; run.py ties them together and writes the report."""
