"""Behaviours no other fast test protected (issue 17, item 13): each was broken on purpose
and the suite stayed green. Each test here fails when its behaviour is broken.

- the significance verdict's direction check (:func:`cnnbench.analysis.significance.compare_runs`);
- the parameter server's broadcast of batch-norm buffers after each step;
- the per-step slowest-worker rule of multi-device step times (the record's, the all-reduce's,
  and the one the progress lines show);
- records repeated within one call to :func:`cnnbench.results.store.append_new_records`;
- the gradient-exchange options left out of the pairing when comparing ``variable_update``.

The distributed ones run a real Gloo group of two *threads* in this process (over a
``HashStore``), so no worker process is started: :class:`GlooThreads` stands in for the
``torch.distributed`` module of the code under test, sending each collective through the
calling thread's own Gloo group.
"""

from __future__ import annotations

import datetime
import itertools
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

from cnnbench.analysis.pairing import pair_key_fields
from cnnbench.analysis.points import build_points
from cnnbench.analysis.ratio_tests import ALPHA
from cnnbench.analysis.samples import RunSample
from cnnbench.analysis.significance import compare_runs
from cnnbench.config import RunConfig
from cnnbench.config.run_config import dependent_fields
from cnnbench.distributed import parameter_server, process_group
from cnnbench.distributed.parameter_server import ParameterServer
from cnnbench.distributed.process_group import max_over_workers
from cnnbench.distributed.strategy import StrategyContext
from cnnbench.distributed.world import World
from cnnbench.engine.loop import timed_loop
from cnnbench.engine.metrics import WorkerMeasure, measured_metrics
from cnnbench.report.tables.effects import compute_effects
from cnnbench.results.store import append_new_records, read_records
from tests.report_fixtures import record
from tests.test_store import make_record

CPU = torch.device("cpu")


# --------------------------------------------------------------------------- a Gloo group of threads

class GlooThreads:
    """The parts of ``torch.distributed`` the code under test calls, over a real Gloo group
    whose ranks are threads of this process (each thread joins with its rank)."""

    ReduceOp = dist.ReduceOp

    def __init__(self, size: int, timeout_s: float = 20.0) -> None:
        self.size = size
        self.timeout_s = timeout_s
        self._store = dist.HashStore()
        self._local = threading.local()

    def _pg(self) -> Any:
        return self._local.pg

    def broadcast(self, tensor: torch.Tensor, src: int = 0, **_: Any) -> None:
        opts = dist.BroadcastOptions()
        opts.rootRank = src
        self._pg().broadcast([tensor], opts).wait()

    def reduce(self, tensor: torch.Tensor, dst: int = 0, op: Any = dist.ReduceOp.SUM, **_: Any) -> None:
        opts = dist.ReduceOptions()
        opts.rootRank, opts.reduceOp = dst, op
        self._pg().reduce([tensor], opts).wait()

    def all_reduce(self, tensor: torch.Tensor, op: Any = dist.ReduceOp.SUM, **_: Any) -> None:
        opts = dist.AllreduceOptions()
        opts.reduceOp = op
        self._pg().allreduce([tensor], opts).wait()

    def barrier(self, **_: Any) -> None:
        self._pg().barrier().wait()

    def run(self, fn: Callable[[int], Any]) -> list[Any]:
        """``fn(rank)`` on every rank, each in its own thread; the results in rank order."""
        results: list[Any] = [None] * self.size
        errors: list[BaseException] = []

        def worker(rank: int) -> None:
            try:
                self._local.pg = dist.ProcessGroupGloo(dist.PrefixStore("g", self._store), rank, self.size,
                                                       datetime.timedelta(seconds=self.timeout_s))
                results[rank] = fn(rank)
            except BaseException as exc:  # re-raised below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(r,), daemon=True) for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.timeout_s * 2)
        assert not any(t.is_alive() for t in threads), "a rank is stuck in a collective"
        if errors:
            raise errors[0]
        return results


@pytest.fixture
def gloo_pair(monkeypatch) -> GlooThreads:
    group = GlooThreads(2)
    monkeypatch.setattr(parameter_server, "dist", group)
    monkeypatch.setattr(process_group, "dist", group)
    return group


# --------------------------------------------------------------------------- significance: direction

def _blocks(seconds_per_image: float, n: int = 40) -> list[float]:
    """Block means (seconds per image) around ``seconds_per_image``, ±0.5%."""
    return [seconds_per_image * (1 + 0.005 * (1 if i % 2 else -1)) for i in range(n)]


@pytest.mark.parametrize(("cand_blocks", "verdict"), [
    (_blocks(1 / 80), "not significant"),  # the steps say 20% slower: the test's direction is < 1
    (_blocks(1 / 120), "faster"),          # the steps agree with the ratio: a control
])
def test_a_ratio_on_the_other_side_of_1_from_the_test_is_never_significant(cand_blocks, verdict):
    """One run a side: the ratio shown is that of the runs' images/sec (1.10 here), the test
    is on their step times. When the step times find the candidate slower with p ~ 0, the
    verdict is not "faster"."""
    base = [RunSample(100.0, _blocks(1 / 100))]
    cand = [RunSample(110.0, cand_blocks)]
    for interval in (True, False):
        c = compare_runs(base, cand, noise=0.03, interval=interval)
        assert c.basis == "steps" and c.ratio == pytest.approx(1.10)
        assert c.p is not None and c.p < 1e-6
        assert c.verdict == verdict
        assert c.significant == (verdict == "faster")


def test_repeats_whose_median_and_geometric_mean_disagree_in_direction_are_not_significant():
    """Repeats: the ratio shown is of medians (1.04), the test is on the geometric means (~0.92)."""
    base = [RunSample(100.0 * (1 + 0.001 * (i % 3 - 1))) for i in range(41)]
    cand = [RunSample(80.0 + 0.01 * i) for i in range(20)] + [RunSample(104.0 + 0.01 * i) for i in range(21)]
    c = compare_runs(base, cand, noise=0.03)
    assert c.basis == "repeats" and c.ratio == pytest.approx(1.04, abs=0.001)
    assert c.p is not None and c.p < ALPHA
    assert c.high is not None and c.high < 1.0  # the test's interval lies below 1
    assert not c.significant and c.verdict == "not significant"


# --------------------------------------------------------------------------- parameter server: buffers

def _bn_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 3))


@pytest.mark.parametrize("where", [None, "cpu"])
def test_parameter_server_gives_every_worker_rank_0s_batch_norm_statistics_after_each_step(gloo_pair, where):
    """Each worker's batch norm sees its own batch, so its running statistics drift from rank
    0's; after each step the server broadcasts rank 0's (weights and buffers), so every worker
    holds rank 0's statistics, not its own."""
    config = RunConfig(model="trivial", device="cpu", num_devices=2, variable_update="parameter_server")
    # --local-parameter-device cpu is refused on a CPU run (no effect there); the strategy's own
    # path for it (master weights kept apart from the device, as on a GPU) is still exercised here.
    object.__setattr__(config, "local_parameter_device", where)
    models = [_bn_model(), _bn_model()]
    batches = [torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(10 + r)) * (1 + 2 * r) + r
               for r in range(2)]

    def worker(rank: int) -> dict[str, Any]:
        server = ParameterServer(StrategyContext(config, World(rank=rank, world_size=2, process_group=True), CPU))
        model = server.wrap(models[rank])
        optimizer = server.make_optimizer(model, lambda params: torch.optim.SGD(params, lr=0.1))
        own = []
        for _ in range(2):
            model.zero_grad()
            model(batches[rank]).square().mean().backward()
            own.append([b.clone() for b in model.buffers()])  # this worker's own statistics
            server.optimizer_step(optimizer, None)
        return {"own": own, "buffers": [b.clone() for b in model.buffers()],
                "params": [p.detach().clone() for p in model.parameters()]}

    r0, r1 = gloo_pair.run(worker)
    running_mean = 0  # index of BatchNorm2d.running_mean among the buffers
    assert not torch.allclose(r0["own"][0][running_mean], r1["own"][0][running_mean])  # the batches differ
    assert all(torch.equal(a, b) for a, b in zip(r0["buffers"], r1["buffers"], strict=True))
    assert all(torch.equal(a, b) for a, b in zip(r0["buffers"], r0["own"][-1], strict=True))  # rank 0's own
    assert all(torch.equal(a, b) for a, b in zip(r0["params"], r1["params"], strict=True))


# --------------------------------------------------------------------------- the slowest worker per step

def _measure(times: list[float]) -> WorkerMeasure:
    return WorkerMeasure(times, wall_time_s=sum(times), progress_time_s=0.0, input_wait_s=0.0,
                         losses=[1.0] * len(times), images=4 * len(times))


def test_a_steps_time_is_its_slowest_workers_in_the_record():
    m = measured_metrics([_measure([0.1, 0.3, 0.2, 0.1]), _measure([0.2, 0.1, 0.4, 0.1])], 4,
                         first_step_s=None, compiled=False, check_spread=False)
    assert m["step_times_s"] == [0.2, 0.3, 0.4, 0.1]


def test_max_over_workers_takes_each_values_maximum_over_the_group(gloo_pair):
    mine = {0: [0.1, 0.3, 0.2], 1: [0.2, 0.1, 0.2]}
    out = gloo_pair.run(lambda rank: max_over_workers(mine[rank], CPU))
    assert out == [[0.2, 0.3, 0.2]] * 2


def test_progress_lines_get_the_per_step_maxima_over_workers(gloo_pair):
    """The timed loop on two workers (threads), rank 1 the slower in each step: every progress
    line is given the step times the record keeps, each step's slowest worker's."""
    images, labels = torch.zeros(2, 3, 4, 4), torch.zeros(2, dtype=torch.long)

    def worker(rank: int) -> dict[str, Any]:
        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            if rank == 1:
                time.sleep(0.01)  # rank 1 the slower (so that the maxima are not rank 0's own times)
            return torch.zeros(())

        shown: list[list[float]] = []
        prepared = SimpleNamespace(step=step, source=itertools.repeat((images, labels)))
        loop = timed_loop(prepared, 6, CPU, display_every=2,  # type: ignore[arg-type]
                          on_progress=lambda i, times, loss: shown.append(list(times)),
                          barrier=gloo_pair.barrier, slowest=lambda times: max_over_workers(times, CPU))
        return {"times": loop.step_times_s, "shown": shown}

    r0, r1 = gloo_pair.run(worker)
    slowest = [max(a, b) for a, b in zip(r0["times"], r1["times"], strict=True)]
    assert [len(s) for s in r0["shown"]] == [1, 2, 4, 6]
    assert r0["shown"][-1] == slowest == r1["shown"][-1]
    assert r0["shown"][-1] != r0["times"]  # not rank 0's own times


# --------------------------------------------------------------------------- the store: one call, repeats

def test_a_record_repeated_within_one_append_is_written_once(tmp_path):
    a, b = make_record(0), make_record(1)
    out = append_new_records(tmp_path, [a, b, dict(a), b])
    assert [r["run_id"] for r in out.written] == [a["run_id"], b["run_id"]]
    assert out.already == {a["run_id"]: "box-a", b["run_id"]: "box-a"}
    records, problems = read_records(tmp_path)
    assert problems == [] and sorted(r["run_id"] for r in records) == sorted([a["run_id"], b["run_id"]])
    again = append_new_records(tmp_path, [a])  # and against what is stored, as before
    assert again.written == [] and again.already == {a["run_id"]: "box-a"}


# --------------------------------------------------------------------------- pairing: exchange options

def _exchange(variable_update: str) -> dict[str, Any]:
    """The gradient-exchange options a 2-device run of ``variable_update`` records."""
    recorded = RunConfig(model="trivial", device="cpu", num_devices=2,
                         variable_update=variable_update).with_derived_defaults().recorded()
    return {k: recorded[k] for k in dependent_fields("variable_update")}


def test_variable_update_effect_pairs_runs_whose_exchange_options_differ():
    """replicated records a bucket size, a compression and a back end; parameter_server its
    parameter device; independent none. Comparing variable_update, those options cannot
    agree, so they are left out of the pairing (they still keep other effects apart)."""
    updates = ("replicated", "parameter_server", "independent")
    options = {u: _exchange(u) for u in updates}
    assert len({tuple(sorted(o.items(), key=str)) for o in options.values()}) == 3  # they do differ
    speed = {"replicated": 200.0, "parameter_server": 150.0, "independent": 100.0}
    recs = [record(model, ips=speed[u] * k, num_devices=2, variable_update=u, **options[u])
            for model, k in (("resnet50", 1.0), ("vgg16", 0.5)) for u in updates]
    points = build_points(recs)
    effects, notes = compute_effects(points, ["config.variable_update"], {"config.variable_update": "independent"},
                                     0.03)
    assert notes == []
    assert {(e.a, e.b) for e in effects} == {("parameter_server", "independent"), ("replicated", "independent")}
    for e in effects:
        assert len(e.pairs) == 2
        assert all(r == pytest.approx(speed[e.a] / speed["independent"]) for r in e.ratios)
    knobs = {f"config.{k}" for k in dependent_fields("variable_update")}
    assert not knobs & set(pair_key_fields(points.key_fields, "config.variable_update"))
    assert knobs & set(points.key_fields) <= set(pair_key_fields(points.key_fields, "config.precision"))
