"""A training step as data: torch's joint forward + backward program plus the optimizer's update.

A user's question is usually about a training step, not a forward pass. :func:`training_step`
builds one for a torch module the way eager PyTorch runs it:

* the **joint program** (:func:`joint_program`): ``torch.export`` of ``loss(module(*inputs))`` made
  into a forward + backward program by ``torch.export``'s own joint pass, **without** the core-ATen
  decompositions that ``torch.export.experimental._export_forward_backward`` applies: eager autograd
  runs ``native_batch_norm_backward``, ``threshold_backward`` and ``convolution_backward`` as one
  kernel each, and the decomposed program (a batch-norm backward as a dozen ``mul``/``sub``/``sum``
  ops) runs 1.3-2x slower than the eager step it stands for. Without decompositions the program,
  run node by node, takes the eager step's time (ResNet-50, batch 1: 109 vs 110 ms);
* the **optimizer's update of every parameter** (:func:`add_optimizer_ops`): one op per parameter
  (``<parameter>.<optimizer>``, type :data:`UPDATE_TYPES`), reading the parameter's gradient, its
  weights the parameter and the optimizer's state (SGD with momentum: one buffer; Adam: two
  moments), FLOPs per element as torch's single-tensor update computes them (:data:`UPDATE_FLOPS`:
  SGD ``buf = m buf + g; p -= lr buf``; Adam ``lerp``, ``mul`` + ``addcmul``, ``sqrt`` / ``add``,
  ``addcdiv``). On a CPU torch runs these per parameter (``foreach`` is for CUDA tensors), so each
  update is a separate, timed op.

Training-mode batch norms (which compute the batch's statistics) are typed
``BatchNormalizationTraining`` and dropout is marked ``attrs["training"]`` (it does work), so that a
cost model calibrated on inference never prices them as their inference twins.

:func:`time_training_step` measures a step: every node of the joint program timed as it runs, every
parameter's update timed on its own (``torch.optim`` with that one parameter), and the eager step
end to end (``zero_grad``, forward, ``backward``, ``step``): a :class:`~hetsched.io.profile.Profile`
whose ``iteration_s`` is the eager step.

>>> import torch
>>> torch.manual_seed(0) is not None
True
>>> m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
>>> step = training_step(m, (torch.randn(4, 8),), optimizer="adam")
>>> sorted(o for o in step.graph.ops if o.endswith(".adam"))
['0.bias.adam', '0.weight.adam', '2.bias.adam', '2.weight.adam']
>>> step.graph.op("0.weight.adam").op_type, step.graph.op("0.weight.adam").weight_bytes   # weights + 2 moments
('AdamUpdate', 1536)
>>> p = time_training_step(step, repeats=2, warmup=1)
>>> p.metrics["match_rate"], p.metrics["iteration_s"] > 0
(1.0, True)
"""

from __future__ import annotations

import operator
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..errors import FormatError, HetschedError
from ..graph import OpGraph

__all__ = ["training_step", "TrainingStep", "joint_program", "add_optimizer_ops", "time_training_step",
           "OPTIMIZERS", "UPDATE_TYPES", "UPDATE_FLOPS", "STATE_COPIES"]

#: The optimizers a step can take, as ``torch.optim`` builds them (lr and momentum do not change the time).
OPTIMIZERS: Mapping[str, Callable[[Any], Any]] = {
    "sgd": lambda params: __import__("torch").optim.SGD(params, lr=0.01, momentum=0.9),
    "adam": lambda params: __import__("torch").optim.Adam(params, lr=1e-3),
}
#: Op type of one parameter's update.
UPDATE_TYPES: Mapping[str, str] = {"sgd": "SGDUpdate", "adam": "AdamUpdate"}
#: FLOPs per parameter element of one update (torch's single-tensor implementations, op by op).
UPDATE_FLOPS: Mapping[str, float] = {"sgd": 4.0, "adam": 13.0}
#: Tensors of the parameter's size the optimizer keeps (SGD momentum buffer; Adam's two moments).
STATE_COPIES: Mapping[str, int] = {"sgd": 1, "adam": 2}
_TRAIN_BN = ("_native_batch_norm_legit_functional", "_native_batch_norm_legit", "native_batch_norm")


def _optimizer(name: str) -> Callable[[Any], Any]:
    if name not in OPTIMIZERS:
        raise HetschedError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name!r}", field="optimizer")
    return OPTIMIZERS[name]


def joint_program(module: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
                  loss: Callable[[Any], Any] | None = None):
    """The joint forward + backward ``ExportedProgram`` of ``loss(module(*args, **kwargs))``, with
    eager's backward kernels (no decompositions; see the module notes).

    ``loss`` defaults to the model's own loss (a transformers model given ``labels``), else the
    mean square of its first float output.
    """
    import torch
    from torch.export.exported_program import _decompose_exported_program

    from .torch_import import drop_unused_inputs, with_loss

    label = type(module).__name__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ep = torch.export.export(with_loss(module, loss), tuple(args), kwargs=dict(kwargs or {}))
        except Exception as e:  # torch's reason, in one line
            raise FormatError(f"torch.export could not trace {label}: {str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
                              field="module") from None
        # a tied weight (GPT-2's, BERT's and T5's embedding and LM head) is lifted under both names, and
        # every use goes to one of them: the joint export refuses the other, which gets no gradient
        drop_unused_inputs(ep)
        try:
            return _decompose_exported_program(ep, cia_to_decomp={}, python_decomp_table={}, joint_loss_index=0,
                                               decompose_custom_triton_ops=False)
        except Exception as e:
            raise FormatError(f"the joint forward + backward program of {label} could not be built: "
                              f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
                              field="module") from None


def add_optimizer_ops(graph: OpGraph, grads: Mapping[str, tuple[str, int, int]], optimizer: str) -> OpGraph:
    """``graph`` (changed in place, and returned) with one update op per parameter.

    ``grads``: ``{gradient tensor: (parameter name, elements, bytes per element)}``. The update op
    ``<parameter>.<optimizer>`` reads the gradient; its ``weight_bytes`` are the parameter and the
    optimizer's state (:data:`STATE_COPIES`), its FLOPs :data:`UPDATE_FLOPS` per element; it writes
    a 0-byte marker output (the update is in place: no new tensor).

    >>> g = OpGraph("m")
    >>> _ = g.add_op("mm", "MatMul"); _ = g.add_tensor("x", 64, consumers=["mm"])
    >>> _ = g.add_tensor("w.grad", 400, producer="mm", is_output=True)
    >>> g = add_optimizer_ops(g, {"w.grad": ("w", 100, 4)}, "sgd")
    >>> o = g.op("w.sgd"); (o.op_type, o.flops, o.weight_bytes, g.inputs_of("w.sgd"))
    ('SGDUpdate', 400.0, 800, ['w.grad'])
    """
    _optimizer(optimizer)
    for gt, (param, numel, elem) in grads.items():
        name = f"{param}.{optimizer}"
        graph.add_op(name, UPDATE_TYPES[optimizer], flops=UPDATE_FLOPS[optimizer] * numel,
                     weight_bytes=int((1 + STATE_COPIES[optimizer]) * numel * elem),
                     attrs={"phase": "optimizer", "param": param, "optimizer": optimizer, "numel": int(numel)})
        graph.add_consumer(gt, name)
        graph.add_tensor(f"{name}:done", 0, producer=name, is_output=True, attrs={"kind": "update"})
    graph.meta["optimizer"] = optimizer
    graph.meta["n_update_ops"] = len(grads)
    return graph


@dataclass(eq=False)
class TrainingStep:
    """One training step of a module: its graph, its joint program and how to run it eagerly.

    Attributes
    ----------
    graph : OpGraph
        The joint program's ops (``phase`` forward/backward) and one update op per parameter
        (``phase`` optimizer); ``meta["model"]`` is ``<name>:train`` (a calibration's layer factors
        of the inference graph never apply to it).
    program : torch.export.ExportedProgram
        The joint program (:func:`joint_program`).
    updates : dict
        ``{update op: parameter name}``.
    """

    graph: OpGraph
    program: Any
    module: Any
    args: tuple
    kwargs: dict
    optimizer: str
    loss: Callable[[Any], Any] | None
    updates: dict[str, str] = field(default_factory=dict)

    def parameters(self) -> dict[str, Any]:
        return dict(self.module.named_parameters())

    def eager(self) -> Callable[[], Any]:
        """A closure running one eager step: ``zero_grad``, forward, loss, ``backward``, ``step``."""
        from .torch_import import default_loss

        opt = _optimizer(self.optimizer)([p for p in self.module.parameters() if p.requires_grad])
        loss_fn = self.loss or default_loss
        m, args, kwargs = self.module, self.args, self.kwargs

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(m(*args, **kwargs)).backward()
            opt.step()

        return step


def training_step(module: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *,
                  optimizer: str = "sgd", loss: Callable[[Any], Any] | None = None, name: str | None = None) -> TrainingStep:
    """The training step of ``module`` on ``args`` with ``optimizer`` (``"sgd"`` or ``"adam"``).

    The module is put in ``train()`` mode. ``name`` names the graph (default: the class name); its
    ``meta["model"]`` is ``<name up to "(">:train``.
    """
    from .torch_import import load_torch

    _optimizer(optimizer)
    module.train()
    _freeze_unreached(module, args, kwargs, loss)
    ep = joint_program(module, args, kwargs, loss=loss)
    label = name or type(module).__name__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ATen ops without a FLOP rule: priced as memory-bound
        g = load_torch(ep, name=label)
    for o in list(g.ops.values()):
        aten = str(o.attrs.get("aten", ""))
        if o.op_type == "BatchNormalization" and aten.split(".")[1:2] and aten.split(".")[1] in _TRAIN_BN:
            g.set_op(o.name, op_type="BatchNormalizationTraining")
        elif o.op_type == "Dropout":
            g.set_op(o.name, attrs={**o.attrs, "training": True})
    # every name of a parameter (a tied one has several; the program may keep any of them) and the
    # one its optimizer update is named by: ``named_parameters()``'s first
    params = dict(module.named_parameters(remove_duplicate=False))
    canonical = {id(p): n for n, p in module.named_parameters()}
    nodes = {n.name: n for n in ep.graph.nodes}
    grads: dict[str, tuple[str, int, int]] = {}
    for spec in ep.graph_signature.output_specs:
        if spec.kind.name != "GRADIENT_TO_PARAMETER":
            continue
        t = _tensor_of(nodes.get(spec.arg.name), g) or spec.arg.name
        if t not in g.tensors:
            raise HetschedError(f"the gradient of parameter {spec.target!r} (program node {spec.arg.name!r}) is no "
                                "tensor of the imported graph", tensor=spec.arg.name, field="program")
        target = spec.target[2:] if spec.target.startswith("m.") else spec.target  # the loss wrapper's prefix
        p = params.get(target)
        if p is None:
            raise HetschedError(f"the program has a gradient for {spec.target!r}, which is no parameter of the module",
                                field="program")
        grads[t] = (canonical.get(id(p), target), int(p.numel()), int(p.element_size()))
    add_optimizer_ops(g, grads, optimizer)
    g.meta["model"] = f"{label.split('(')[0].strip()}:train"
    g.meta["training"] = True
    return TrainingStep(graph=g, program=ep, module=module, args=tuple(args), kwargs=dict(kwargs or {}),
                        optimizer=optimizer, loss=loss,
                        updates={f"{param}.{optimizer}": param for param, _, _ in grads.values()})


def _freeze_unreached(module: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None, loss: Any) -> list[str]:
    """Turn off ``requires_grad`` of the parameters the loss does not reach (a BERT pooler under a
    loss of the sequence output): no gradient, no update, as an eager step leaves them; torch's
    joint export refuses a parameter without a gradient. Returns their names."""
    from .torch_import import default_loss

    for p in module.parameters():
        p.grad = None
    (loss or default_loss)(module(*args, **dict(kwargs or {}))).backward()
    frozen = [n for n, p in module.named_parameters() if p.requires_grad and p.grad is None]
    for n, p in module.named_parameters():
        p.grad = None
        if n in frozen:
            p.requires_grad_(False)
    return frozen


def _tensor_of(node: Any, g: OpGraph) -> str | None:
    """The graph tensor an FX node's value is: ``<producer>:<i>`` for a ``getitem`` of a
    multi-output op, else the node's own name."""
    if node is None:
        return None
    if node.target is operator.getitem and node.args and hasattr(node.args[0], "name"):
        base = node.args[0].name
        t = f"{base}:{node.args[1]}"
        return t if t in g.tensors else base
    return node.name


def time_training_step(step: TrainingStep, *, repeats: int = 5, warmup: int = 1, clock: str = "wall",
                       stat: str = "median", device: str = "cpu0", threads: int | None = None):
    """Time ``step`` op by op and end to end (see the module notes).

    Returns a :class:`~hetsched.io.profile.Profile`: ``latency_s`` of every program node and update
    op, ``metrics["iteration_s"]`` the eager step (``stat`` of ``repeats``), ``metrics["program_s"]``
    the per-op sum. ``clock="cpu"`` needs one thread, as for :func:`~hetsched.io.profile.time_torch`.
    """
    import torch

    from .profile import call_s, program_inputs, node_timer, timed_profile, timing

    with timing(clock, stat, repeats, warmup, threads) as (now, n_threads):
        g = step.graph
        gm, flat = program_inputs(step.program, step.args + tuple(step.kwargs.values()))
        timed = node_timer(gm, {o for o in g.ops if o not in step.updates}, now)
        params = step.parameters()
        # one optimizer per parameter: each update timed alone, as torch's per-parameter loop runs it
        opts = {}
        for op, pname in step.updates.items():
            p = params[pname]
            p.grad = torch.randn_like(p)
            opts[op] = _optimizer(step.optimizer)([p])
        eager = step.eager()
        e2e: list[float] = []
        for i in range(warmup + repeats):
            with torch.no_grad():
                timed.run(*flat)
            for op, opt in opts.items():
                timed.times[op].append(call_s(opt.step, now))
            t = call_s(eager, now)
            if i >= warmup:
                e2e.append(t)
    return timed_profile(g, timed.times, e2e, warmup=warmup, repeats=repeats, clock=clock, stat=stat, device=device,
                         threads=n_threads, source=f"time_training_step({clock} clock, {step.optimizer})")
