"""A one-node Slurm cluster for the tests (tests/test_slurm.py): Debian's `slurm-wlm` and `munge`, installed
with apt where they are missing and we are root, their config, keys, state and logs under one temporary folder,
munged, slurmctld and slurmd started on localhost (one node, 2 CPUs, one partition) and stopped after.
The smallest cluster bertbench's Slurm path runs on (docs/scale.md shows its slurm.conf).

Where it cannot start (not root, no apt, no package), `start` returns the reason in one line and the tests skip.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

PACKAGES = ("slurm-wlm", "munge")
PARTITION = "debug"
CPUS = 2
START_SECONDS = 60  # until `sinfo` shows the node idle


def slurm_conf(folder: Path, ports: tuple[int, int], memory_mb: int) -> str:
    """One node (localhost, 2 CPUs), one partition; CPUs as the consumable (two 1-CPU jobs at a time); no
    cgroups, no accounting database: what a test machine (a container) has."""
    return "\n".join([
        f"ClusterName=bb{os.getpid()}",
        "SlurmctldHost=localhost",
        "SlurmUser=root",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder / 'munge.socket'}",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU_Memory",
        "MpiDefault=none",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=2",  # a requeued or released job starts within seconds
        "MinJobAge=300",
        "KillWait=10",
        f"DefMemPerCPU={memory_mb // CPUS}",  # a job that asks for no memory takes its CPUs' share, not the node's
        f"NodeName=localhost CPUs={CPUS} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _free_ports(n: int) -> tuple[int, ...]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return tuple(s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()


def install(say=print) -> Optional[str]:
    """Install the packages if slurmctld is missing; None when installed, else why not (one line)."""
    if all(shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin") for p in ("slurmctld", "slurmd", "munged", "sbatch")):
        return None
    if os.geteuid() != 0:
        return "Slurm is not installed, and installing it (apt-get install slurm-wlm munge) needs root"
    if shutil.which("apt-get") is None:
        return "Slurm is not installed, and there is no apt-get to install it with"
    import fcntl

    # one install at a time: two test workers may each start a cluster (apt's own lock would fail the second)
    with open("/tmp/bertbench-slurm-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if shutil.which("slurmctld", path="/usr/sbin"):
            return None
        return _apt_install(say)


def _apt_install(say) -> Optional[str]:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    t0 = time.monotonic()
    for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]):
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or ["?"])[-1]
            return f"`{' '.join(argv)}` failed: {tail}"
    say(f"installed {' '.join(PACKAGES)} in {time.monotonic() - t0:.0f} s")
    return None


@dataclass
class Cluster:
    folder: Path
    conf: Path
    env: dict[str, str]  # SLURM_CONF: every client (sbatch, squeue, srun in a job) finds this cluster
    processes: list[subprocess.Popen] = field(default_factory=list)
    started_s: float = 0.0

    def run(self, *argv: str, check: bool = True) -> str:
        r = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
        return r.stdout

    def jobs(self) -> list[dict[str, str]]:
        """Every job the controller still knows (MinJobAge: finished ones for 5 minutes): id, name, state."""
        out = self.run("squeue", "--all", "--states=all", "--noheader", "--format=%i|%j|%T|%r")
        return [dict(zip(("id", "name", "state", "reason"), line.split("|"))) for line in out.splitlines() if line]

    def logs(self) -> str:
        return "".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                       for p in sorted(self.folder.glob("*.log")))

    def stop(self) -> None:
        """Cancel every job and wait for them to end (a job step outlives slurmd), then stop the daemons
        (SIGTERM, SIGKILL after 15 s)."""
        if self.processes and self.processes[-1].poll() is None:
            self.run("scancel", "--full", "--user", "root", check=False)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.run("squeue", "--noheader", check=False).strip():
                time.sleep(0.5)
        for p in reversed(self.processes):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.processes):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start(folder: Path, say=print) -> tuple[Optional[Cluster], Optional[str]]:
    """(the running cluster, None), or (None, why it cannot run here)."""
    t0 = time.monotonic()
    why = install(say)
    if why:
        return None, why
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)  # munged refuses a key or socket folder others can write to
    for sub in ("state", "spool"):
        (folder / sub).mkdir(exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 * 9 // 10
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, _free_ports(2), memory_mb))
    env = dict(os.environ, SLURM_CONF=str(conf))
    cluster = Cluster(folder, conf, env)
    sbin = "/usr/sbin"
    daemons = [
        [f"{sbin}/munged", "--foreground", "--force", f"--key-file={key}", f"--socket={folder / 'munge.socket'}",
         f"--pid-file={folder / 'munged.pid'}", f"--log-file={folder / 'munged.log'}", f"--seed-file={folder / 'munged.seed'}"],
        [f"{sbin}/slurmctld", "-D", "-i", "-f", str(conf)],
        [f"{sbin}/slurmd", "-D", "-N", "localhost", "-f", str(conf)],
    ]
    try:
        for argv in daemons:
            cluster.processes.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                                      stdout=open(folder / f"{Path(argv[0]).name}.out", "w"),
                                                      stderr=subprocess.STDOUT, start_new_session=True))
            if argv[0].endswith("munged"):
                _wait(lambda: (folder / "munge.socket").exists(), 10, "munged's socket")
        _wait(lambda: cluster.run("sinfo", "--noheader", "--format=%t", check=False).strip() == "idle",
              START_SECONDS, "the node to be idle")
    except Exception as err:  # noqa: BLE001 (any failure to start is a reason to skip, said in one line)
        logs = cluster.logs()
        cluster.stop()
        return None, f"the test cluster did not start ({err}); {logs[-500:]!r}"
    cluster.started_s = time.monotonic() - t0
    return cluster, None


def _wait(ready, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {seconds:.0f} s")
        time.sleep(0.5)


def cluster_fixture(tmp_path_factory):
    """The body of a test module's cluster fixture (`slurm = pytest.fixture(scope="module")(cluster_fixture)`):
    the cluster, started here where it can be, else the module's tests skip with the reason; stopped after."""
    import pytest

    cluster, why = start(tmp_path_factory.mktemp("slurm"))
    if cluster is None:
        pytest.skip(why)
    yield cluster
    cluster.stop()


def release_requeued(cluster: Cluster, job: dict[str, str]) -> None:
    """Slurm holds a requeued job for about 2 minutes before it may start again (Reason=BeginTime); the tests
    let it start at once."""
    if job["state"] == "PENDING" and job["reason"] == "BeginTime":
        cluster.run("scontrol", "update", f"JobId={job['id']}", "StartTime=now", check=False)


def wait_for_jobs(cluster: Cluster, seconds: float, each=None) -> list[dict[str, str]]:
    """Poll until no job is pending or running; `each(job)` is called for every job at every poll (after the
    requeued ones are released). Returns the jobs as they ended (every state the controller still knows)."""
    deadline = time.monotonic() + seconds
    while True:
        jobs = cluster.jobs()
        for job in jobs:
            release_requeued(cluster, job)
            if each is not None:
                each(job)
        if not any(j["state"] in ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING") for j in jobs):
            return jobs
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still not done after {seconds:.0f} s: {jobs}\n{cluster.logs()}")
        time.sleep(1)


if __name__ == "__main__":  # `python3 tests/slurm_cluster.py install`: .ci/run, beside the virtual environment's build
    import sys

    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python3 tests/slurm_cluster.py install")
    reason = install()
    print(reason or "slurm-wlm and munge are installed")
