"""A real Slurm cluster on this machine, for the tests of ``cnnbench sweep --executor slurm`` (issue 23).

Everything lives in one temporary folder and every daemon is a child of the test process:

* ``munged`` with a private ``--socket`` (named in ``AuthInfo=socket=...`` of ``slurm.conf`` and
  ``slurmdbd.conf`` and in ``AccountingStoragePass=``, so every connection uses it);
* MariaDB initialised with ``mariadb-install-db`` into a temporary datadir, on TCP 127.0.0.1 on a
  free port (``slurmdbd``'s ``StorageHost=127.0.0.1``);
* ``slurmdbd``, then ``sacctmgr add cluster/account/user`` before ``slurmctld`` starts;
* ``slurmctld`` and two ``slurmd`` as two nodes of one host (``NodeName=n[1-2] NodeHostname=localhost
  Port=...``, ``slurmd -N n1`` / ``-N n2``, ``%n`` in their pid, log and spool paths);
* ``proctrack/linuxproc`` and no cgroups, so that it runs in containers; two partitions
  (``main``: both nodes, the default; ``second``: n2 only); ``OverTimeLimit=0`` and a short
  ``KillWait`` so a job past its limit ends quickly.

Waiting is polling (``sinfo`` shows both nodes idle) with generous deadlines. :meth:`SlurmCluster.stop`
cancels every job and ends every process that carries this cluster's ``SLURM_CONF`` in its
environment (the daemons, the ``slurmstepd`` they started and the jobs), by process id.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

BINARIES = ("munged", "mariadb-install-db", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct",
            "sacctmgr", "squeue", "scontrol", "scancel", "sinfo", "srun")
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
PACKAGES = "slurm-wlm slurmdbd munge mariadb-server"
CLUSTER = "cnbtest"
ACCOUNT = "bench"
NODES = ("n1", "n2")
PARTITIONS = {"main": "n[1-2]", "second": "n2"}
START_DEADLINE_S = 180.0


def which(name: str) -> str | None:
    """``name`` on PATH or in the sbin folders (daemons live there and root's PATH may lack them)."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *SBIN]))


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if which(name) is None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def poll(check: Callable[[], bool], deadline_s: float, what: str, log: Callable[[], str] = lambda: "") -> None:
    """Call ``check`` until it is true; fail naming ``what`` (and the tail of a log) after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {deadline_s:g} s waiting for {what}\n{log()}")


class SlurmCluster:
    """Start with :meth:`start`, end with :meth:`stop` (which also cleans up after a failed start)."""

    def __init__(self, root: Path | None = None) -> None:
        # short: a unix socket's path has at most 107 bytes
        self.root = Path(root or tempfile.mkdtemp(prefix="cnbslurm-", dir="/tmp"))
        self.conf = self.root / "slurm.conf"
        self.ports = {name: free_port() for name in ("db", "dbd", "ctld", *NODES)}
        self.socket = self.root / "munge.sock"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf),
                    "PATH": os.pathsep.join([os.environ.get("PATH", ""), *SBIN])}
        self._daemons: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.cpus = os.cpu_count() or 1

    # -- commands ---------------------------------------------------------------------------
    def run(self, *args: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """A Slurm (or other) command with this cluster's ``SLURM_CONF``."""
        out = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {out.returncode}: {out.stderr.strip() or out.stdout.strip()}")
        return out

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        states: dict[str, str] = {}
        for line in out.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1].rstrip("*~#$@+")
        return states

    def wait_idle(self, deadline_s: float = START_DEADLINE_S) -> None:
        """Until every node is idle (no job on it, none draining)."""
        poll(lambda: all(self.node_states().get(n) == "idle" for n in NODES), deadline_s, "both nodes idle",
             lambda: f"sinfo: {self.node_states()}\n" + self.logs())

    def resume(self, node: str) -> None:
        """Bring a drained or down node back (with ReturnToService=2 a down node whose slurmd answers may
        already be back), and wait until it is idle."""
        if self.node_states().get(node) != "idle":
            out = self.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
            if out.returncode != 0 and "Invalid node state" not in out.stderr:
                raise RuntimeError(f"scontrol could not resume {node}: {out.stderr.strip()}")
        poll(lambda: self.node_states().get(node) == "idle", START_DEADLINE_S, f"{node} idle", self.logs)

    def jobs(self) -> list[str]:
        out = self.run("squeue", "-h", "-o", "%i %T", check=False)
        return out.stdout.splitlines()

    def cancel_all(self, deadline_s: float = 60.0) -> None:
        self.run("scancel", "--full", "-u", str(os.getuid()), check=False)
        poll(lambda: not self.jobs(), deadline_s, "every job to end", self.logs)

    def logs(self) -> str:
        parts = []
        for path in sorted(self.root.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    # -- start-up ---------------------------------------------------------------------------
    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        self._start_munge()
        self._start_mariadb()
        self._write_configs()
        self._start_slurmdbd()
        self._add_associations()
        self._start_slurmctld()
        for node in NODES:
            self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)])
        self.wait_idle()

    def _spawn(self, name: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        out = open(self.root / f"{name}.out", "wb")  # noqa: SIM115 - the daemon keeps it
        proc = subprocess.Popen([which(args[0]) or args[0], *args[1:]], env=self.env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_every_cpu)
        out.close()
        self._daemons.append((name, proc))
        return proc

    def _alive(self, name: str) -> None:
        for n, proc in self._daemons:
            if n == name and proc.poll() is not None:
                out = (self.root / f"{name}.out").read_text(errors="replace")
                raise RuntimeError(f"{name} exited {proc.returncode}: {out[-2000:]}\n{self.logs()}")

    def _start_munge(self) -> None:
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn("munged", ["munged", "-F", "-f", f"--socket={self.socket}", f"--key-file={key}",
                               f"--pid-file={self.root / 'munged.pid'}", f"--log-file={self.root / 'munged.log'}",
                               f"--seed-file={self.root / 'munged.seed'}"])

        def up() -> bool:
            self._alive("munged")
            return self.socket.exists()

        poll(up, START_DEADLINE_S, "munged's socket", self.logs)

    def _start_mariadb(self) -> None:
        data = self.root / "db"
        install = self.run("mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                           "--auth-root-authentication-method=normal", "--skip-test-db", check=False, timeout=300)
        if install.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {install.stdout[-2000:]}{install.stderr[-2000:]}")
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={data}", "--user=root",
                                 f"--socket={self.root / 'mysql.sock'}", f"--port={self.ports['db']}",
                                 "--bind-address=127.0.0.1", f"--pid-file={self.root / 'mariadbd.pid'}",
                                 f"--log-error={self.root / 'mariadbd.log'}", "--skip-name-resolve",
                                 "--innodb-buffer-pool-size=32M", "--skip-log-bin"])

        def up() -> bool:
            self._alive("mariadbd")
            try:
                with socket.create_connection(("127.0.0.1", self.ports["db"]), timeout=1):
                    return True
            except OSError:
                return False

        poll(up, START_DEADLINE_S, "MariaDB on 127.0.0.1", self.logs)

    def _write_configs(self) -> None:
        r = self.root
        common = f"AuthType=auth/munge\nAuthInfo=socket={self.socket}\n"
        dbd = self.root / "slurmdbd.conf"
        dbd.write_text(
            common + f"DbdHost=localhost\nDbdPort={self.ports['dbd']}\nSlurmUser=root\n"
            f"PidFile={r}/slurmdbd.pid\nLogFile={r}/slurmdbd.log\nDebugLevel=info\n"
            "StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\n"
            f"StoragePort={self.ports['db']}\nStorageUser=root\nStorageLoc=slurm_acct_db\n")
        os.chmod(dbd, 0o600)
        (r / "state").mkdir(exist_ok=True)
        for node in NODES:
            (r / "spool" / node).mkdir(parents=True, exist_ok=True)
        node_lines = "\n".join(f"NodeName={n} NodeHostname=localhost Port={self.ports[n]} CPUs={self.cpus} "
                               f"RealMemory=2000 State=UNKNOWN" for n in NODES)
        partitions = "\n".join(f"PartitionName={name} Nodes={nodes} Default={'YES' if name == 'main' else 'NO'} "
                               "MaxTime=INFINITE State=UP OverSubscribe=NO" for name, nodes in PARTITIONS.items())
        self.conf.write_text(
            common + f"ClusterName={CLUSTER}\nSlurmctldHost=localhost\nSlurmctldPort={self.ports['ctld']}\n"
            "SlurmUser=root\nSlurmdUser=root\nCredType=cred/munge\n"
            f"StateSaveLocation={r}/state\nSlurmdSpoolDir={r}/spool/%n\n"
            f"SlurmctldPidFile={r}/slurmctld.pid\nSlurmdPidFile={r}/slurmd-%n.pid\n"
            f"SlurmctldLogFile={r}/slurmctld.log\nSlurmdLogFile={r}/slurmd-%n.log\n"
            "SlurmctldDebug=info\nSlurmdDebug=info\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
            "MpiDefault=none\nSwitchType=switch/none\n"
            "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
            "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=localhost\n"
            f"AccountingStoragePort={self.ports['dbd']}\nAccountingStoragePass={self.socket}\n"
            "JobCompType=jobcomp/none\nReturnToService=2\nSlurmctldTimeout=120\nSlurmdTimeout=300\n"
            "InactiveLimit=0\nMinJobAge=600\nKillWait=2\nOverTimeLimit=0\nMessageTimeout=30\n"
            "MaxArraySize=10001\nMaxJobCount=20000\n"
            f"{node_lines}\n{partitions}\n")

    def _start_slurmdbd(self) -> None:
        self._spawn("slurmdbd", ["slurmdbd", "-D"])

        def up() -> bool:
            self._alive("slurmdbd")
            return self.run("sacctmgr", "-n", "list", "cluster", check=False, timeout=30).returncode == 0

        poll(up, START_DEADLINE_S, "slurmdbd to answer sacctmgr", self.logs)

    def _add_associations(self) -> None:
        user = self.run("id", "-un").stdout.strip()
        self.run("sacctmgr", "-i", "add", "cluster", CLUSTER)
        self.run("sacctmgr", "-i", "add", "account", ACCOUNT, f"cluster={CLUSTER}", "description=cnnbench tests",
                 "organization=cnnbench")
        self.run("sacctmgr", "-i", "add", "user", user, f"account={ACCOUNT}", f"cluster={CLUSTER}")

    def _start_slurmctld(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])

        def up() -> bool:
            self._alive("slurmctld")
            return "UP" in self.run("scontrol", "ping", check=False).stdout

        poll(up, START_DEADLINE_S, "slurmctld to answer scontrol ping", self.logs)

    # -- tear-down --------------------------------------------------------------------------
    def ours(self) -> list[int]:
        """Every process that carries this cluster's SLURM_CONF: daemons, slurmstepd, jobs."""
        marker = f"SLURM_CONF={self.conf}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                env = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in env.split(b"\0"):
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        """Cancel every job, end every daemon and every process they started; leave nothing running."""
        if any(n == "slurmctld" and p.poll() is None for n, p in self._daemons):
            try:
                self.cancel_all(deadline_s=30)
            except Exception as exc:  # go on stopping the daemons
                print(f"slurm cluster: {exc}", file=sys.stderr)
        for _, proc in reversed(self._daemons):
            if proc.poll() is None:
                proc.terminate()
        for _, proc in reversed(self._daemons):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        for pid in self.ours():  # slurmstepd and what a job left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        poll(lambda: not self.ours(), 30, "the cluster's processes to end")
        shutil.rmtree(self.root, ignore_errors=True)


def required() -> bool:
    """In CI (``CI=true``, or ``CNNBENCH_REQUIRE_SLURM=1`` as .ci/run sets) the Slurm tests never skip."""
    return (os.environ.get("CI", "").lower() in ("true", "1", "yes")
            or os.environ.get("CNNBENCH_REQUIRE_SLURM") == "1")


def _cluster_or_skip() -> None:
    """Skip (with the reason) where Slurm is not installed; in CI (CI=true) that is a failure instead."""
    missing = missing_binaries()
    if not missing:
        return
    why = f"Slurm is not installed (missing {', '.join(missing)}; apt-get install {PACKAGES})"
    if required():
        pytest.fail(f"{why}, and CI must run the Slurm tests (.ci/run installs Slurm)", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A local Slurm cluster for the session, ``SLURM_CONF`` naming it: started once, stopped at the
    session's end with nothing left running (start-up and tear-down live here only)."""
    _cluster_or_skip()
    cluster = SlurmCluster()
    saved = os.environ.get("SLURM_CONF")
    try:
        cluster.start()
        os.environ["SLURM_CONF"] = str(cluster.conf)
        yield cluster
    finally:
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        cluster.stop()


if __name__ == "__main__":  # bring a cluster up by hand: python tests/slurm_cluster.py
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # kill PID stops it as Ctrl-C does
    cluster = SlurmCluster()
    try:
        t0 = time.monotonic()
        cluster.start()
        print(f"up in {time.monotonic() - t0:.1f} s; export SLURM_CONF={cluster.conf}; Ctrl-C (or SIGTERM) stops it",
              flush=True)
        print(cluster.run("sinfo").stdout)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


def _every_cpu() -> None:
    """A daemon (and so every job) may use all of the machine's cores, whatever this process was pinned to."""
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
