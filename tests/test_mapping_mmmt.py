"""The MMMT model builders (hetsched.io.mmmt), their data files, and h2h on the FPGA zoo."""

from __future__ import annotations

import pytest

from hetsched.errors import HetschedError
from hetsched.io import load_graph, load_system
from hetsched.io.mmmt import MMMT_MODELS, mmmt
from hetsched.mapping import h2h, map_compute_first
from hetsched.system import SupportTable
from hetsched.timeline import check_timeline


def _sum(g, prefix, what="flops"):
    return sum(getattr(o, what) for o in g.ops.values() if o.name.startswith(prefix))


def test_layer_shapes_match_the_papers():
    g = mmmt("av_emotion")
    # ResNet-18 at 224x224: 1.8 G multiply-adds (He et al. 2016, Table 1) -> ~3.6 GFLOP, 11.7 M params
    assert _sum(g, "vid.") == pytest.approx(3.64e9, rel=0.05)
    assert _sum(g, "vid.", "weight_bytes") / 4 == pytest.approx(11.2e6, rel=0.05)  # conv part (no FC head)
    # VGGish: ~72 M parameters (Hershey et al. 2017), mostly its 4096-wide FC layers
    assert _sum(g, "aud.", "weight_bytes") / 4 == pytest.approx(72.1e6, rel=0.02)
    # BERT-base: ~7.1 M parameters per encoder layer (Devlin et al. 2019)
    v = mmmt("vqa_mt")
    assert _sum(v, "txt.l0.", "weight_bytes") / 4 == pytest.approx(7.09e6, rel=0.01)
    # ResNet-34: 3.6 G multiply-adds
    assert _sum(v, "img.") == pytest.approx(7.3e9, rel=0.05)


@pytest.mark.parametrize("name", sorted(MMMT_MODELS))
def test_models_are_multi_modal_multi_task(name):
    g = mmmt(name)
    g.validate()
    mods = {o.attrs.get("modality") for o in g.ops.values()}
    assert set(g.meta["modalities"]) <= mods and "fusion" in mods
    assert len(g.graph_inputs()) == len(g.meta["modalities"])
    # the bundled JSON is exactly what the builder makes
    assert load_graph(g.name).summary() == g.summary()
    t = mmmt(name, training=True)
    t.validate()
    assert t.total_flops == pytest.approx(3 * g.total_flops, rel=0.05)
    assert load_graph(t.name).summary() == t.summary()
    b2 = mmmt(name, batch=2)
    assert b2.total_flops == pytest.approx(2 * g.total_flops, rel=1e-9)


def test_unknown_model():
    with pytest.raises(HetschedError) as e:
        mmmt("nope")
    assert e.value.field == "name"
    with pytest.raises(HetschedError):
        mmmt("av_emotion", batch=0)


def test_h2h_on_the_fpga_zoo():
    zoo = load_system("h2h_fpga_zoo")
    sup = zoo.support.as_dict()
    sup.pop(zoo.host)
    s = zoo.with_support(SupportTable(sup))
    g = mmmt("driving_mt")
    cf = map_compute_first(g, s)
    r = h2h(g, s, direction="both")
    caps = {d: float(v.memory_bytes) for d, v in s.devices.items() if d != s.host}
    check_timeline(r.timeline, g, capacity_bytes=caps)
    assert r.metrics["total_latency_s"] <= 0.85 * cf.metrics["total_latency_s"]
