"""Memory of torch's joint forward + backward graph against the real allocator (issue 19).

The importer keeps every output of the joint program (the loss and every gradient, weight
gradients included); the memory model's predicted peak is compared with the allocator peak that
``torch.profiler(profile_memory=True)`` records while the program runs node by node; the order
:func:`hetsched.memory.optimize_order` recommends is executed and its measured peak compared.
"""

from __future__ import annotations

import warnings

import pytest

from hetsched.errors import FormatError

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from torch.export.experimental import _export_forward_backward  # noqa: E402

from hetsched.io.profile import load_profile, profile_torch  # noqa: E402
from hetsched.io.torch_import import load_torch  # noqa: E402
from hetsched.memory import optimize_order, peak_memory  # noqa: E402


class WithLoss(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x, y):
        return F.cross_entropy(self.m(x), y)


class BranchCNN(nn.Module):
    """A stem and three parallel conv branches: the execution order decides how many are live."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.a, self.b, self.c = nn.Conv2d(8, 32, 3, padding=1), nn.Conv2d(8, 32, 5, padding=2), nn.Conv2d(8, 32, 1)
        self.fc = nn.Linear(96, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        ys = [F.adaptive_avg_pool2d(torch.relu(conv(x)), 1).flatten(1) for conv in (self.a, self.b, self.c)]
        return self.fc(torch.cat(ys, 1))


def _joint(model, x, n_classes=10):
    torch.manual_seed(0)
    y = torch.randint(0, n_classes, (x.shape[0],))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = _export_forward_backward(torch.export.export(WithLoss(model), (x, y)))
        g = load_torch(ep)
    return ep, g, (x, y)


def _measured_peak(g, trace):
    """Allocator peak during the run plus the graph inputs the caller allocated before it."""
    p = load_profile(trace, g)
    return p.peak_bytes + sum(g.tensor(t).size_bytes for t in g.graph_inputs()), p


def test_joint_graph_keeps_every_gradient():
    torch.manual_seed(0)
    ep, g, _ = _joint(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10)), torch.randn(4, 16))
    outs = g.graph_outputs()
    grads = [s for s in ep.graph_signature.output_specs if s.kind.name == "GRADIENT_TO_PARAMETER"]
    assert len(grads) == 4 and len(outs) == 5  # the loss and the four weight/bias gradients
    # each gradient output has the parameter's size (views resolve to their base storage)
    sizes = sorted(g.tensor(t).size_bytes for t in outs)
    assert sizes == sorted([4] + [p.numel() * 4 for p in ep.state_dict.values()])


def test_mlp_training_peak_within_5_percent():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    ep, g, args = _joint(mlp, torch.randn(256, 512))
    measured, _ = _measured_peak(g, profile_torch(ep, args, memory=True, repeats=1, threads=1))
    predicted = peak_memory(g, list(g.ops))
    assert predicted == pytest.approx(measured, rel=0.05)
    # the weight gradients (4 MB + 16 MB) are what the old importer dropped
    assert predicted > 20e6


def test_cnn_training_peak_and_the_recommended_order():
    torch.manual_seed(0)
    ep, g, args = _joint(BranchCNN(), torch.randn(16, 3, 32, 32))
    measured, prof = _measured_peak(g, profile_torch(ep, args, memory=True, repeats=1, threads=1))
    # without workspace the model misses the convolution backward's scratch buffers
    bare = peak_memory(g, list(g.ops))
    assert 0.8 * measured < bare < measured
    assert prof.workspace_bytes and all(v > 0 for v in prof.workspace_bytes.values())
    # workspace measured on the default order predicts the peak of ANOTHER order
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # backward ATen ops without a FLOP rule: irrelevant to memory
        gw = load_torch(ep, workspace=prof.workspace_bytes)
    assert peak_memory(gw, list(gw.ops)) == pytest.approx(measured, rel=0.05)
    r = optimize_order(gw, method="heuristic", time_limit_s=5)
    assert r.peak_bytes < 0.9 * measured
    measured_opt, _ = _measured_peak(g, profile_torch(ep, args, memory=True, repeats=1, threads=1, order=r.order))
    assert r.peak_bytes == pytest.approx(measured_opt, rel=0.05)
    assert measured_opt < 0.9 * measured  # the recommended order really lowers the allocator's peak


def test_workspace_tensors():
    m = nn.Sequential(nn.Linear(4, 4), nn.Softmax(-1))
    g = load_torch(m, (torch.randn(2, 4),), workspace={"softmax": 1000})
    t = g.tensor("softmax:workspace")
    assert t.producer == "softmax" and t.consumers == () and not t.is_output and t.attrs["kind"] == "workspace"
    # held during its op's step only
    assert peak_memory(g, list(g.ops)) == peak_memory(load_torch(m, (torch.randn(2, 4),)), list(g.ops)) + 1000
    from hetsched.cost import RooflineCost
    from hetsched.io.systems import toy_system

    # memory, not traffic
    assert RooflineCost(toy_system(), g).io_bytes("softmax")[1] == 2 * 4 * 4
    with pytest.raises(FormatError) as e:
        load_torch(m, (torch.randn(2, 4),), workspace={"nope": 1})
    assert e.value.op == "nope"
    with pytest.raises(FormatError):
        load_torch(m, (torch.randn(2, 4),), workspace={"softmax": -1})


def test_dropout_mode_recorded():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
    ev = load_torch(m.eval(), (torch.randn(2, 4),))
    assert [o.attrs.get("training") for o in ev.ops.values() if o.op_type == "Dropout"] in ([False], [])
    tr = load_torch(m.train(), (torch.randn(2, 4),))
    assert [o.attrs.get("training") for o in tr.ops.values() if o.op_type == "Dropout"] == [True]


def test_an_imported_joint_graph_is_split_into_pipeline_stages_as_training():
    """Issue 18: a joint forward + backward torch export is a training graph: its ops carry the
    phase (forward = what the loss depends on), so the stage splitter prices its own backward ops
    instead of building a second backward pass on top of them."""
    import numpy as np

    from hetsched.cost import RooflineCost
    from hetsched.io.systems import toy_system
    from hetsched.pipeline.stages import graph_units, stage_costs

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    _ep, g, _ = _joint(model, torch.randn(8, 16))
    phases = {o: op.attrs.get("phase") for o, op in g.ops.items()}
    assert set(phases.values()) == {"forward", "backward"} and g.meta["training"] is True
    first = g.topological_order()[0]
    assert phases[first] == "forward" and phases[g.topological_order()[-1]] == "backward"
    assert sum(v == "backward" for v in phases.values()) == g.meta["n_backward_ops"]
    s = toy_system()
    u = graph_units(g, s, ["gpu0"])
    assert sorted(o for ms in u.ops for o in ms) == sorted(g.ops)      # the graph's own ops, nothing added
    sc = stage_costs(g, s, devices=["gpu0", "gpu0"], p=2)
    assert (np.atleast_1d(sc.f_s) > 0).all() and (np.atleast_1d(sc.b_s) > 0).all()
    # B is the joint graph's own backward (a rebuilt one on top would be about twice as long)
    one = stage_costs(g, s, devices=["gpu0"], p=1)
    cost = RooflineCost(s)
    own_b = sum(cost.compute_s(g.op(o), "gpu0") for o, ph in phases.items() if ph == "backward")
    assert float(np.sum(one.b_s)) == pytest.approx(own_b, rel=1e-3)
    # an inference export stays untagged
    inf = load_torch(model, (torch.randn(8, 16),))
    assert not any("phase" in op.attrs for op in inf.ops.values())
