"""Unit, differential and property tests of hetsched.mapping (seed 000 / H2H and baselines)."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hetsched.errors import CapacityError, HetschedError, Infeasible, UnsupportedOpError
from hetsched.evaluate import Placement, evaluate
from hetsched.graph import OpGraph
from hetsched.io.generators import chain, fork_join, layered, topcuoglu, topcuoglu_costs
from hetsched.io.systems import toy_system
from hetsched.mapping import (
    MappingResult, brute_force, compare, cpop, evaluate_state, fastest_single_device, h2h, heft,
    map_compute_first, optimize_locality, peft, remap,
)
from hetsched.mapping.engine import Ctx, State
from hetsched.system import Device, Link, SupportTable, System
from hetsched.timeline import check_timeline
from strategies import small_dags

GiB = 2**30


def four_devices(mem_scale: float = 1.0) -> System:
    """A host CPU and three accelerators (stand-in for data/systems/h2h_fpga_zoo.yaml)."""
    devs = [
        Device("cpu0", "cpu", {"default": 1e12}, int(256 * GiB), 100e9, 2e-6),
        Device("gpu0", "gpu", {"default": 20e12, "matmul": 100e12, "conv": 80e12}, int(16 * GiB * mem_scale), 900e9, 5e-6),
        Device("fpga0", "fpga", {"default": 2e12, "conv": 30e12, "matmul": 20e12}, int(4 * GiB * mem_scale), 77e9, 1e-6),
        Device("npu0", "npu", {"default": 5e12, "matmul": 60e12}, int(8 * GiB * mem_scale), 200e9, 2e-6),
    ]
    links = [Link("cpu0", d, 16e9, 5e-6) for d in ("gpu0", "fpga0", "npu0")] + [Link("gpu0", "npu0", 32e9, 2e-6)]
    sup = SupportTable({"gpu0": {"*": 1}, "fpga0": {"Conv": 1, "MatMul": 1, "Relu": 2, "Add": 2},
                        "npu0": {"MatMul": 1, "Softmax": 1, "Add": 2, "Conv": 2}, "cpu0": {"*": 3}})
    return System(devs, links, host="cpu0", support=sup, name="four")


def caps(s: System) -> dict[str, float]:
    return {d: float(v.memory_bytes) for d, v in s.devices.items() if d != s.host}


def check(r: MappingResult) -> None:
    check_timeline(r.timeline, r.graph, capacity_bytes=caps(r.system))


def random_state(g: OpGraph, s: System, rng: random.Random) -> State:
    ctx = Ctx(g, s)
    dev = {o: rng.choice(ctx.candidates(o)) for o in g}
    w = {o for o in g if rng.random() < 0.5}
    t = {x for x in g.tensors if g.tensor(x).producer is not None and rng.random() < 0.5}
    return State(dev, w, t)


# ------------------------------------------------------------------ one model: the engine is the evaluator's clock
@pytest.mark.parametrize("seed", range(12))
def test_additive_total_latency_equals_the_timelines_busy_time(seed):
    """Claim 5's sum of per-op and per-tensor terms equals what the timeline's rows add up to.

    (No copy of the model is checked here: ``Ctx`` *is* the clock ``evaluate`` runs. What is
    checked is that the additive decomposition the remap phase relies on holds.)
    """
    rng = random.Random(seed)
    g = [topcuoglu(12, seed=seed), layered(3, 3, seed=seed), fork_join(3, 2, seed=seed)][seed % 3]
    s = four_devices() if seed % 2 else toy_system()
    ctx = Ctx(g, s)
    st = random_state(g, s, rng)
    ev = evaluate(g, s, Placement(st.device, st.w_res, st.t_res), check_memory=False)
    assert ctx.total_latency(st) == pytest.approx(ev.metrics["total_latency_s"], rel=1e-9)
    assert ctx.simulate(st)[0] == ev.metrics["makespan_s"]


def test_engine_is_the_evaluators_clock():
    from hetsched.clock import Clock

    assert issubclass(Ctx, Clock)
    assert Ctx.op_term is Clock.op_busy_s and Ctx.tensor_term is Clock.tensor_busy_s


@pytest.mark.parametrize("objective", ["total_latency", "makespan"])
def test_remap_trial_objective_equals_full_evaluate(objective):
    """Every remap step's 'after' (incremental) equals a full evaluate of the replayed state."""
    key = f"{objective}_s"
    n = 0
    for seed in range(6):
        g = [layered(3, 3, seed=seed), topcuoglu(14, seed=seed), fork_join(3, 3, seed=seed)][seed % 3]
        s = [four_devices(), toy_system()][seed % 2]
        r = h2h(g, s, objective=objective, direction="both", group_size=3)
        for step in r.steps:
            if step.action not in ("remap", "remap_group") or step.after is None:
                continue
            if step.data.get("bound_only"):  # a lower bound that ruled the move out: check it is one
                st = State.from_dict(r.replay(step.index - 1))
                st.apply(step.delta)
                ev = evaluate(g, s, Placement(st.device, st.w_res, st.t_res), check_memory=False)
                assert step.before * (1 - 1e-12) <= step.after <= ev.metrics[key] * (1 + 1e-9)
                continue
            st = State.from_dict(r.replay(step.index - 1))
            st.apply(step.delta)
            ev = evaluate(g, s, Placement(st.device, st.w_res, st.t_res), check_memory=False)
            assert step.after == pytest.approx(ev.metrics[key], rel=1e-9)
            n += 1
    assert n >= 10


# ------------------------------------------------------------------ phases
def test_compute_first_picks_fastest_with_memory_cleared(toy):
    g = chain(5, seed=3)
    r = map_compute_first(g, toy)
    for step in r.steps:
        lat = step.data["candidates"]
        assert step.data["device"] == min(lat, key=lat.get)
        assert set(lat) == set(toy.candidates(g.op(step.subject).op_type))
    assert r.placement.weights_resident == frozenset() and r.placement.tensors_resident == frozenset()
    check(r)


def test_locality_respects_threshold_and_lowers_latency():
    s = four_devices(mem_scale=0.001)  # tiny memories: the threshold binds
    g = layered(4, 4, seed=5)
    cf = map_compute_first(g, s)
    for thr in (0.1, 0.5, 0.9):
        for pol in ("greedy", "knapsack"):
            lo = optimize_locality(cf, occupancy_threshold=thr, policy=pol)
            used: dict[str, float] = {}
            for o in lo.placement.weights_resident:
                used[lo.placement.device[o]] = used.get(lo.placement.device[o], 0) + g.op(o).weight_bytes
            for t in lo.placement.tensors_resident:
                d = lo.placement.device[g.tensor(t).producer]
                used[d] = used.get(d, 0) + g.tensor(t).size_bytes
            for d, b in used.items():
                assert b <= thr * s.device(d).memory_bytes + 1
            assert lo.metrics["total_latency_s"] <= cf.metrics["total_latency_s"] * (1 + 1e-9)
            check(lo)


def test_knapsack_saves_at_least_as_much_as_greedy_when_binding():
    s = four_devices(mem_scale=0.0005)
    g = layered(5, 4, seed=2)
    cf = map_compute_first(g, s)
    gr = optimize_locality(cf, policy="greedy")
    kn = optimize_locality(cf, policy="knapsack")
    # the knapsack maximises saved time per device (up to its size grid)
    assert kn.metrics["total_latency_s"] <= gr.metrics["total_latency_s"] * 1.02


def test_remap_never_worse_and_h2h_never_worse_than_compute_first():
    s = four_devices()
    for seed in range(5):
        g = topcuoglu(30, seed=seed)
        cf = map_compute_first(g, s)
        lo = optimize_locality(cf)
        for obj in ("total_latency", "makespan"):
            rm = remap(lo, objective=obj, direction="both")
            assert rm.metrics[f"{obj}_s"] <= lo.metrics[f"{obj}_s"] * (1 + 1e-9)
            r = h2h(g, s, objective=obj)
            assert r.metrics[f"{obj}_s"] <= cf.metrics[f"{obj}_s"] * (1 + 1e-9)


def test_group_remap_escapes_a_same_device_chain():
    """The MMMT window where single-layer remapping stalls 7% above brute force (bench section 4)."""
    from hetsched.io import load_system
    from hetsched.io.mmmt import mmmt

    zoo = load_system("h2h_fpga_zoo")
    sup = zoo.support.as_dict()
    sup.pop(zoo.host)
    s = zoo.with_support(SupportTable(sup))
    g = mmmt("casia_surf")
    sub = g.subgraph(g.topological_order()[20:30])
    bf = brute_force(sub, s, objective="total_latency").metrics["total_latency_s"]
    single = h2h(sub, s).metrics["total_latency_s"]
    grouped = h2h(sub, s, group_size=4, max_passes=None)  # the extension: group moves, repeated passes
    assert single > 1.05 * bf
    assert grouped.metrics["total_latency_s"] <= 1.01 * bf
    acc = [x for x in grouped.steps if x.action == "remap_group" and x.accepted]
    assert acc and len(acc[0].data["ops"]) >= 2
    assert grouped.replay(grouped.n_steps - 1)["device"] == dict(grouped.placement.device)


def test_remap_steps_say_why():
    r = h2h(layered(4, 4, seed=1), four_devices(), direction="both")
    rm = [x for x in r.steps if x.action == "remap"]
    assert rm and any(x.accepted for x in rm)
    for x in rm:
        assert {"source", "target"} <= set(x.data) and x.reason
        if not x.accepted:
            assert x.reason.startswith(("not better", "does not fit", )) or "does not support" in x.reason


def unsupported_target_case():
    """fpga0 cannot run Softmax: moving a Softmax next to an fpga successor must be refused as unsupported."""
    g = OpGraph("u")
    g.add_op("a", "MatMul", flops=1e9, weight_bytes=1 << 20)
    g.add_op("b", "Softmax", flops=1e3)
    g.add_op("c", "Conv", flops=5e11, weight_bytes=1 << 20)
    g.add_tensor("x", 1 << 20, consumers=["a"])
    g.connect("a", "b", 1 << 20)
    g.connect("b", "c", 1 << 20)
    g.add_tensor("y", 1 << 10, producer="c", is_output=True)
    s = toy_system()
    from hetsched.cost import TableCost

    # measured latencies that put c on the FPGA and b (which the FPGA cannot run) on the GPU
    cost = TableCost(s, {("a", "gpu0"): 1e-3, ("b", "gpu0"): 1e-6, ("c", "fpga0"): 1e-6, ("c", "gpu0"): 1.0,
                         ("a", "fpga0"): 1.0, ("c", "cpu0"): 1.0, ("a", "cpu0"): 1.0, ("b", "cpu0"): 1.0})
    return g, s, cost


def test_remap_reports_unsupported_target():
    g, s, cost = unsupported_target_case()
    cf = map_compute_first(g, s, cost=cost)
    assert cf.placement.device["b"] == "gpu0" and cf.placement.device["c"] == "fpga0"
    r = remap(optimize_locality(cf))
    refused = [x for x in r.steps if x.action == "remap" and x.subject == "b"]
    assert refused and not refused[0].accepted and "does not support" in refused[0].reason


def test_replay_rebuilds_every_phase_state():
    g, s = layered(3, 4, seed=7), four_devices()
    r = h2h(g, s)
    assert r.replay(-1) == {"device": {}, "weights_resident": frozenset(), "tensors_resident": frozenset()}
    b = r.phase_bounds()
    cf_end = b["compute_first"][1]
    st = r.replay(cf_end)
    assert st["device"] == dict(map_compute_first(g, s).placement.device)
    last = r.replay(r.n_steps - 1)
    assert last["device"] == dict(r.placement.device)
    assert last["weights_resident"] == r.placement.weights_resident
    assert last["tensors_resident"] == r.placement.tensors_resident
    ev = evaluate_state(r, r.n_steps - 1)
    assert ev.metrics["total_latency_s"] == pytest.approx(r.metrics["total_latency_s"], rel=1e-12)
    part = evaluate_state(r, 2)  # three ops mapped
    assert part is not None and len(part.op_end_s) == 3
    with pytest.raises(IndexError):
        r.replay(r.n_steps)


# ------------------------------------------------------------------ errors
def test_unsupported_op_names_op_and_type(toy):
    g = chain(3)
    g.add_op("weird", "FancyOp", flops=1)
    g.add_consumer("op2:out", "weird")
    s = toy.with_support(SupportTable({"gpu0": {"Conv": 1, "Relu": 1}}))
    for f in (map_compute_first, h2h, heft):
        with pytest.raises(UnsupportedOpError) as e:
            f(g, s)
        assert e.value.op == "weird" and ("weird", "FancyOp") in e.value.details["ops"]


def test_weights_that_fit_nowhere_name_the_device(toy):
    g = OpGraph("big")
    g.add_op("huge", "Conv", flops=1e9, weight_bytes=300 * GiB)
    g.add_tensor("x", 10, consumers=["huge"])
    g.add_tensor("y", 10, producer="huge", is_output=True)
    s = toy.with_support(SupportTable({"gpu0": {"*": 1}, "fpga0": {"Conv": 1}}))
    with pytest.raises(CapacityError) as e:
        h2h(g, s)
    assert e.value.device == "gpu0" and e.value.op == "huge"


def test_bad_options():
    cf = map_compute_first(chain(3), toy_system())
    with pytest.raises(HetschedError):
        optimize_locality(cf, occupancy_threshold=1.5)
    with pytest.raises(HetschedError):
        optimize_locality(cf, policy="magic")
    with pytest.raises(HetschedError):
        remap(cf, objective="energy")
    with pytest.raises(HetschedError):
        remap(cf, direction="sideways")
    with pytest.raises(Infeasible):
        brute_force(topcuoglu(30, seed=1), toy_system(), max_placements=100)


def test_memory_never_exceeded_when_tight():
    s = four_devices(mem_scale=0.002)
    g = layered(5, 4, seed=9)
    r = h2h(g, s, direction="both")
    check(r)
    assert r.metrics["peak_mem_frac"] <= 1 + 1e-9


# ------------------------------------------------------------------ baselines
def test_heft_textbook_properties():
    g, s = topcuoglu(60, seed=4), four_devices()
    c = topcuoglu_costs(g, s, seed=4)
    for f in (heft, cpop, peft):
        r = f(g, s, cost=c)
        check(r)
        order = r.order
        pos = {o: i for i, o in enumerate(order)}
        assert all(pos[u] < pos[v] for u, v in g.nx.edges)
        # the scheduler's own makespan is at least the critical path of the fastest device per op
        assert r.metrics["schedule_makespan_s"] > 0


def test_heft_rank_comm_saga_differs_only_in_ranks():
    g, s = topcuoglu(40, seed=2), four_devices()
    a = heft(g, s, rank_comm_average="pairs")
    b = heft(g, s, rank_comm_average="saga")
    assert a.metrics["schedule_makespan_s"] > 0 and b.metrics["schedule_makespan_s"] > 0
    with pytest.raises(HetschedError):
        heft(g, s, rank_comm_average="mean")


def test_compare_frame():
    df = compare(fork_join(2, 2, seed=1), toy_system())
    assert list(df.columns) == ["label", "makespan_s", "total_latency_s", "energy_J", "bytes_moved", "runtime_s",
                                "optimises", "status"]
    assert "brute_force" in set(df["label"])
    bf = df.set_index("label").loc["brute_force", "total_latency_s"]
    assert (df["total_latency_s"] >= bf * (1 - 1e-9)).all()


def test_fastest_single_device_uses_one_device_when_possible(toy):
    r = fastest_single_device(chain(4, seed=1), toy)
    assert len(set(r.placement.device.values())) == 1
    check(r)


# ------------------------------------------------------------------ properties
@settings(max_examples=25)
@given(small_dags(max_ops=25), st.sampled_from(["greedy", "knapsack"]), st.sampled_from(["total_latency", "makespan"]))
def test_property_every_result_is_a_valid_timeline(g, policy, objective):
    s = four_devices()
    r = h2h(g, s, policy=policy, objective=objective, direction="both", group_size=3)
    check(r)
    cf = map_compute_first(g, s)
    assert r.metrics[f"{objective}_s"] <= cf.metrics[f"{objective}_s"] * (1 + 1e-9)


@settings(max_examples=25)
@given(small_dags(min_ops=2, max_ops=6))
def test_property_brute_force_beats_every_heuristic(g):
    if g.n_ops > 8:
        return  # fork_join/layered/randwire draws can exceed 8 ops: brute force is for tiny graphs
    s = toy_system()
    bf_t = brute_force(g, s, objective="total_latency")
    bf_m = brute_force(g, s, objective="makespan")
    check(bf_t)
    heur = [map_compute_first(g, s), h2h(g, s), h2h(g, s, direction="both", group_size=4), fastest_single_device(g, s),
            heft(g, s), cpop(g, s), peft(g, s)]
    for r in heur:
        assert bf_t.metrics["total_latency_s"] <= r.metrics["total_latency_s"] * (1 + 1e-9)
    # makespan: exact over placements in the default op order (list schedulers pick their own order)
    for r in heur[:4] + [h2h(g, s, objective="makespan")]:
        assert bf_m.metrics["makespan_s"] <= r.metrics["makespan_s"] * (1 + 1e-9)


def test_brute_force_total_latency_bnb_matches_enumeration():
    for seed in range(4):
        g = topcuoglu(6, seed=seed)
        s = toy_system()
        bnb = brute_force(g, s, objective="total_latency")
        ctx = Ctx(g, s)
        import itertools

        from hetsched.mapping.engine import best_residency
        from hetsched.mapping.baselines import with_locality
        placements = [dict(zip(ctx.order, c)) for c in itertools.product(*[ctx.candidates(o) for o in ctx.order])]
        best = min(ctx.total_latency(best_residency(ctx, dev)) for dev in placements)
        assert bnb.metrics["total_latency_s"] == pytest.approx(best, rel=1e-9)
        patent = brute_force(g, s, objective="total_latency", residency="patent")
        best_p = min(ctx.total_latency(with_locality(ctx, dev, 0.9)) for dev in placements)
        assert patent.metrics["total_latency_s"] == pytest.approx(best_p, rel=1e-9)
        assert patent.metrics["total_latency_s"] >= bnb.metrics["total_latency_s"] * (1 - 1e-12)


def twins(mem_scale: float = 1.0, gpu1_link_Bps: float = 16e9, reverse_table: bool = False) -> System:
    """A host, three identical GPUs on identical links (gpu1's link is a parameter), a fourth GPU on a
    slower link and two identical FPGAs that run a few op types: interchangeable devices and look-alikes."""
    gpu = dict(kind="gpu", peak_flops={"default": 20e12, "matmul": 100e12, "conv": 80e12},
               memory_bytes=int(16 * GiB * mem_scale), mem_bandwidth_Bps=900e9, launch_overhead_s=5e-6)
    fpga = dict(kind="fpga", peak_flops={"default": 2e12, "conv": 30e12, "matmul": 20e12},
                memory_bytes=int(4 * GiB * mem_scale), mem_bandwidth_Bps=77e9, launch_overhead_s=1e-6)
    devs = [Device("cpu0", "cpu", {"default": 1e12}, int(256 * GiB), 100e9, 2e-6)]
    devs += [Device(f"gpu{i}", **gpu) for i in range(4)] + [Device(f"fpga{i}", **fpga) for i in range(2)]
    bw = {"gpu0": 16e9, "gpu1": gpu1_link_Bps, "gpu2": 16e9, "gpu3": 8e9, "fpga0": 8e9, "fpga1": 8e9}
    links = [Link("cpu0", d, b, 5e-6) for d, b in bw.items()]
    fsup = {"Conv": 1, "MatMul": 1, "Relu": 2, "Add": 2, "Task": 2}
    rows = {**{f"gpu{i}": {"*": 1} for i in range(4)}, "fpga0": fsup, "fpga1": fsup, "cpu0": {"*": 3}}
    # reverse_table: the support table lists the twins last to first, so candidates break ties that way
    sup = SupportTable(dict(reversed(rows.items())) if reverse_table else rows)
    return System(devs, links, host="cpu0", support=sup, name="twins")


def enumerate_placements(g: OpGraph, s: System, objective: str) -> tuple[float, dict[str, str]]:
    """The best placement over every placement (no symmetry, no bound), each with its best residency;
    the first best in ``itertools.product`` order."""
    import itertools

    from hetsched.mapping.engine import best_residency, plan_budget
    ctx = Ctx(g, s)
    budget = plan_budget(ctx)
    best = (float("inf"), {})
    for combo in itertools.product(*[ctx.candidates(o) for o in ctx.order]):
        dev = dict(zip(ctx.order, combo))
        stt = best_residency(ctx, dev, budget)
        v = ctx.total_latency(stt) if objective == "total_latency" else ctx.simulate(stt)[0]
        if v < best[0]:
            best = (v, dev)
    return best


def test_interchangeable_devices_are_found_on_the_prices():
    from hetsched.cost import TableCost
    from hetsched.mapping.baselines import interchangeable_devices
    g = topcuoglu(5, seed=1)
    multi = lambda s, cost=None: [c for c in interchangeable_devices(Ctx(g, s, cost)) if len(c) > 1]  # noqa: E731
    assert multi(twins()) == [["gpu0", "gpu1", "gpu2"], ["fpga0", "fpga1"]]
    # the same specs on a different link are not interchangeable
    assert multi(twins(gpu1_link_Bps=12e9)) == [["gpu0", "gpu2"], ["fpga0", "fpga1"]]
    # a measured table that prices one twin differently splits it off
    s = twins()
    ops = list(g.ops)
    cost = TableCost(s, {(ops[0], "gpu2"): 1e-3}, g)
    assert multi(s, cost) == [["gpu0", "gpu1"], ["fpga0", "fpga1"]]
    # the host is never swapped, and a system of distinct devices has no class
    assert multi(toy_system()) == [] and multi(four_devices()) == []


@settings(max_examples=12, deadline=None)
@given(small_dags(min_ops=1, max_ops=4), st.sampled_from([1.0, 0.02]), st.sampled_from(["total_latency", "makespan"]),
       st.booleans())
def test_brute_force_with_interchangeable_devices_equals_enumeration(g, mem_scale, objective, reverse_table):
    """One placement per orbit of identical devices finds the optimum of every placement (memory to
    spare and binding), and the makespan search the same first best placement, whichever order the
    support table lists the twins in."""
    assume(g.n_ops <= 4)  # fork_join/layered draws can exceed 4 ops: 7 devices ** n placements to enumerate
    s = twins(mem_scale, reverse_table=reverse_table)
    try:
        ref_v, ref_dev = enumerate_placements(g, s, objective)
    except CapacityError:
        return
    try:
        r = brute_force(g, s, objective=objective)
    except CapacityError as err:
        # brute force does not drop placements whose working set overflows a device (a known limit):
        # the full enumeration's best placement overflows the same device, even with nothing resident
        with pytest.raises(CapacityError) as ref_err:
            evaluate(g, s, Placement(ref_dev))
        assert ref_err.value.device == err.device
        return
    check(r)
    key = f"{objective}_s"
    assert r.metrics[key] == pytest.approx(ref_v, rel=1e-12, abs=0.0)
    assert r.params["n_canonical"] <= r.params["n_placements"]
    if objective == "makespan":  # no bound: the same enumeration order, filtered
        assert r.placement.device == ref_dev


def test_brute_force_with_interchangeable_devices_equals_the_ilp():
    from hetsched.mapping import map_ilp
    s = twins()
    for g in (topcuoglu(7, ccr=1.0, seed=3), layered(2, 3, seed=1)):
        bf = brute_force(g, s, objective="total_latency")
        assert bf.params["interchangeable"] == [["gpu0", "gpu1", "gpu2"], ["fpga0", "fpga1"]]
        assert bf.params["n_canonical"] < bf.params["n_placements"] / 5
        r = map_ilp(g, s, time_limit_s=60, warm_evals=300)
        assert r.status == "optimal"
        assert r.metrics["total_latency_s"] == pytest.approx(bf.metrics["total_latency_s"], rel=1e-9)


def test_deterministic_across_hash_seeds():
    code = (
        "from hetsched.io.generators import topcuoglu; from hetsched.mapping import h2h, heft;"
        "from hetsched.io.systems import toy_system; g=topcuoglu(80, seed=3); s=toy_system();"
        "r=h2h(g,s,direction='both'); h=heft(g,s);"
        "print(sorted(r.placement.device.items()), sorted(r.placement.tensors_resident), r.metrics['total_latency_s'],"
        " [(x.subject, x.accepted) for x in r.steps], sorted(h.placement.device.items()))"
    )
    outs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    assert len(outs) == 1



@pytest.mark.parametrize("seed", range(4))
def test_makespan_suffix_retimer_equals_full_simulation(seed):
    """Random moves, some committed: re-timing from the checkpoint equals a full re-simulation to the bit."""
    from hetsched.mapping.engine import Mover, occupancy_limit

    rng = random.Random(seed)
    g = [topcuoglu(80, seed=seed), layered(8, 6, seed=seed)][seed % 2]
    s = four_devices()
    ctx = Ctx(g, s)
    st = random_state(g, s, rng)
    mv = Mover(ctx, st, "makespan", occupancy_limit(ctx, 0.9), keep=["patent", "per_byte"][seed % 2])
    ops = list(g)
    n_checked = 0
    for _ in range(60):
        o = rng.choice(ops)
        dst = rng.choice(ctx.candidates(o))
        if dst == st.device[o]:
            continue
        rec = mv.move(o, dst)
        before = mv.makespan
        fast = mv.value(bound=True)
        full = ctx.simulate(st)[0]
        if mv.pruned:  # only a lower bound, and it must rule the move out soundly
            assert before * (1 - 1e-12) <= fast <= full * (1 + 1e-12)
            mv.undo(rec)
            continue
        assert fast == full
        n_checked += 1
        if rng.random() < 0.4:
            mv.commit()
            assert mv.makespan == ctx.simulate(st)[0] and mv.value() == mv.makespan
        else:
            mv.undo(rec)
    assert n_checked > 20


@pytest.mark.parametrize("keep", ["patent", "per_byte"])
def test_mover_terms_plan_and_undo_agree_with_a_fresh_count(keep):
    """After any sequence of moves, offers and undos: the running total is the clock's total latency,
    the memory plan is a fresh count (a kept tensor on every device holding a copy), and an undo
    restores the state exactly; a move's delta replays it."""
    from hetsched.mapping.engine import MemoryPlan, Mover, plan_budget

    rng = random.Random(7)
    g, s = topcuoglu(40, seed=2, ccr=1.0), four_devices(0.02)
    ctx = Ctx(g, s)
    st = State({o: rng.choice(ctx.servable(o)) for o in g})
    mv = Mover(ctx, st, "total_latency", plan_budget(ctx), keep=keep)
    for _ in range(150):
        before = st.copy()
        o = rng.choice(list(g))
        if rng.random() < 0.2:
            kind = rng.choice("wt")
            rec = mv.offer(kind, o if kind == "w" else rng.choice(list(g.tensors)))
            if rec is None:
                continue
        else:
            rec = mv.move(o, rng.choice(ctx.servable(o)))
        replay = before.copy()
        replay.apply(mv.delta([rec]))
        assert replay == st
        assert mv.total == pytest.approx(ctx.total_latency(st), rel=1e-9)
        assert mv.plan.used == pytest.approx(MemoryPlan(ctx, st, {}).used, abs=1e-3)
        if rng.random() < 0.5:
            mv.undo(rec)
            assert st == before and mv.total == pytest.approx(ctx.total_latency(st), rel=1e-9)
    assert mv.plan.within()  # every keep stayed within the budget


def test_methods_table_passes_options_through_and_names_unknown_ones():
    from hetsched.errors import HetschedError
    from hetsched.io import toy_system
    from hetsched.io.generators import chain
    from hetsched.mapping import METHODS

    g, s = chain(5), toy_system()
    # options used to be dropped by the table's lambdas (only cost went through)
    r = METHODS["heft"](g, s, locality=False)
    assert r.params["locality"] is False
    assert METHODS["h2h_makespan"](g, s).params["objective"] == "makespan"  # the entry's default
    assert METHODS["h2h_makespan"](g, s, objective="total_latency").params["objective"] == "total_latency"
    with pytest.raises(HetschedError) as ei:
        METHODS["cpop"](g, s, policy="knapsack")
    assert ei.value.field == "policy" and "cpop" in str(ei.value)


def test_bad_names_and_sizes_are_named_errors():
    from hetsched.errors import GraphError, HetschedError
    from hetsched.io import toy_system
    from hetsched.io.generators import chain
    from hetsched.mapping import fastest_single_device, h2h, heft, list_schedule

    g, s = chain(4), toy_system()
    for kw, field in ((dict(priority="nope"), "priority"), (dict(selector="nope"), "selector"), (dict(loop="nope"), "loop")):
        with pytest.raises(HetschedError) as ei:
            list_schedule(g, s, **kw)
        assert ei.value.field == field and "nope" in str(ei.value)
    with pytest.raises(HetschedError) as ei:
        fastest_single_device(g, s, objective="total_latncy")
    assert ei.value.field == "objective"
    bad = chain(4)
    op = bad.topological_order()[1]
    object.__setattr__(bad.op(op), "flops", -5e9)  # negative work priced as negative time: never silently
    for fn in (h2h, heft):
        with pytest.raises(GraphError) as ei:
            fn(bad, s)
        assert ei.value.op == op


def test_fastest_single_device_without_a_device_to_choose():
    """A system whose support table lets no device run anything (issue 29: a TypeError before): an
    empty graph has no device to choose (Infeasible), an op no device runs is named."""
    host_only = System([Device("cpu0", "cpu", {"default": 1e12}, 2**30)], [], host="cpu0", support=SupportTable({}))
    with pytest.raises(Infeasible) as ei:
        fastest_single_device(OpGraph("empty"), host_only)
    assert ei.value.field == "system" and "no device" in str(ei.value)
    with pytest.raises(UnsupportedOpError):
        fastest_single_device(chain(2), host_only)
    # every other mapper maps an empty graph to the empty mapping there
    assert h2h(OpGraph("empty"), host_only).metrics["makespan_s"] == 0.0


def test_mappers_keep_ops_off_devices_too_small_for_them():
    """GPUs of 200 kB hold no op's working set: every mapper places on the host-class CPU, none hands
    the evaluator a placement it refuses (brute force stays exact under the binding capacity)."""
    from hetsched.io.generators import topcuoglu
    from hetsched.mapping import METHODS
    from hetsched.mapping.baselines import brute_force
    from hetsched.system import Device, Link, SupportTable, System

    gib = 2**30
    devs = [Device("cpu0", "cpu", {"default": 1e12}, 256 * gib, 100e9, 2e-6)]
    links = []
    for i in range(2):
        devs.append(Device(f"gpu{i}", "gpu", {"default": 20e12}, 2e5, 900e9, 5e-6))
        links.append(Link("cpu0", f"gpu{i}", 16e9, 5e-6))
    s = System(devs, links, host="cpu0", support=SupportTable({"gpu0": {"*": 1}, "gpu1": {"*": 1}, "cpu0": {"*": 3}}))
    g = topcuoglu(6, seed=0)
    for name in ("heft", "cpop", "peft", "fastest_single_device", "h2h", "compute_first"):
        assert set(dict(METHODS[name](g, s).placement.device).values()) == {"cpu0"}, name
    for obj in ("makespan", "total_latency"):
        r = brute_force(g, s, objective=obj)
        assert set(dict(r.placement.device).values()) == {"cpu0"} and r.params["n_canonical"] == 1
