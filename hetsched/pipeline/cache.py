"""The patent's cache queues, traced step by step, and order-based memory counts.

The interleaved pipeline patent (``docs/patents.md``; PaddlePaddle ``PipelineParallelWithInterleave``)
runs interleaved 1F1B with a lock-step ring exchange: at the end of every step each rank sends one
tensor to its neighbour and receives one. With ``r = m % p`` the first micro-batch group holds
``p + r`` micro-batches, so the last rank finishes chunk ``c`` of micro-batch ``j`` ``r`` steps before
the first rank can start chunk ``c + 1`` of it. The last rank therefore pushes its forward outputs
into a *forward cache queue* and sends the queue head only at forward micro-steps inside the *send
interval* ``[r, r + (p + r)(v - 1))`` (:func:`send_interval`); the first rank mirrors this with a
*backward cache queue* for input gradients. Both queues are empty at the end.

:func:`cache_trace` reproduces this for *any* schedule on a unit-step grid (every action one step,
the ``step x rank`` grid of torch's ``_format_pipeline_order``): an output made at step ``t_x`` and
consumed at step ``t_y`` must cross in the exchange at the end of step ``t_y - 1``.

* ``design="sender"`` (the patent): the producer keeps it from ``t_x`` until it sends it at
  ``t_y - 1`` (depth 0 when ``t_y = t_x + 1``: sent at once).
* ``design="receiver"`` (Megatron's receive buffers): it is sent at once and waits in the
  receiver's buffer until ``t_y``.

On this grid the last rank's forward queue of the ``paddle`` schedule is exactly the patent's:
``(p + r)(v - 1)`` outputs wait, at most ``r`` at once, and they leave at forward micro-steps inside
the send interval (``tests/test_pipeline_cache.py`` checks it for every ``p <= 7, v <= 4``). The
grid is finer than Paddle's exchange (one steady-state exchange there carries a forward *and* a
backward), so the first rank's backward queue also shows waits caused by 1F1B's alternation and is
deeper than ``r`` here. :func:`patent_queues` replays both queues by the patent's literal rule, in
micro-steps; the tests check that its FIFO hands every receiver its inputs in the order the
schedule consumes them.

Examples
--------
>>> from hetsched.pipeline import interleaved_1f1b
>>> s = interleaved_1f1b(4, 2, 10, grouping="paddle")
>>> send_interval(4, 2, 10)
(2, 8)
>>> tr = cache_trace(s)
>>> last_fwd = tr[(tr["rank"] == 3) & (tr["direction"] == "forward")]
>>> int(last_fwd["depth"].max()), int(last_fwd["sent"].sum()), int(tr.groupby(["rank", "direction"])["depth"].last().sum())
(2, 10, 0)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ScheduleError
from .deps import unit_steps
from .ir import B, F, W, Schedule

__all__ = ["cache_trace", "patent_parameters", "patent_queues", "send_interval", "peak_in_flight", "unit_steps"]

DESIGNS = ("sender", "receiver")


def send_interval(p: int, v: int, m: int) -> tuple[int, int]:
    """The patent's send interval ``[r, r + (p + r)(v - 1))`` with ``r = m % p`` (forward micro-steps).

    >>> send_interval(4, 3, 13)
    (1, 11)
    """
    r = m % p
    return r, r + (p + r) * (v - 1)


def cache_trace(schedule: Schedule, design: str = "sender") -> pd.DataFrame:
    """Step-by-step cache queue activity: ``step, rank, direction, queued, sent, depth``.

    One row per ``(step, rank, direction)`` where something enters or leaves a queue; ``rank`` holds
    the queue (the sender for ``"sender"``, the receiver for ``"receiver"``), ``direction`` is
    ``"forward"`` (activations) or ``"backward"`` (input gradients), ``depth`` the queue length after
    the step. Extra columns: ``peer`` (the other rank) and ``items`` (the cached outputs after the
    step, oldest first, in action text). Every queue ends empty.

    >>> from hetsched.pipeline import one_f_one_b
    >>> tr = cache_trace(one_f_one_b(3, 4))
    >>> tr.loc[tr["depth"] > 0, ["step", "rank", "items"]].values.tolist()  # warm-up forwards wait one step
    [[2, 0, ['0F2']], [2, 1, ['1F1']]]
    """
    if design not in DESIGNS:
        raise ScheduleError(f"design must be one of {DESIGNS}, got {design!r}", field="design")
    s = schedule
    step, dep = unit_steps(s)
    rank = s.rank
    y = np.flatnonzero(dep >= 0)
    x = dep[y]
    cross = rank[x] != rank[y]
    y, x = y[cross], x[cross]
    direction = np.where(s.kind[y] == F, "forward", "backward")
    if design == "sender":
        holder, peer = rank[x], rank[y]
        t_in, t_out = step[x], step[y] - 1
    else:
        holder, peer = rank[y], rank[x]
        t_in, t_out = step[x], step[y]
    names = [f"{s.stage[i]}{'FBIW'[s.kind[i]]}{s.microbatch[i]}" for i in x.tolist()]
    rows = []
    keyed: dict[tuple[int, str], list[int]] = {}
    for j, (h, d) in enumerate(zip(holder.tolist(), direction.tolist())):
        keyed.setdefault((h, d), []).append(j)
    for (h, d), js in sorted(keyed.items()):
        js = np.array(js)
        ev_t = np.concatenate([t_in[js], t_out[js]])
        steps = np.unique(ev_t)
        q = np.searchsorted(np.sort(t_in[js]), steps, side="right") - np.searchsorted(np.sort(t_in[js]), steps, side="left")
        sn = np.searchsorted(np.sort(t_out[js]), steps, side="right") - np.searchsorted(np.sort(t_out[js]), steps, side="left")
        depth = np.cumsum(q) - np.cumsum(sn)
        order = js[np.lexsort((t_out[js], t_in[js]))]
        pr = int(peer[js[0]]) if len(set(peer[js].tolist())) == 1 else -1
        for t, qq, ss, dd in zip(steps.tolist(), q.tolist(), sn.tolist(), depth.tolist()):
            held = [names[k] for k in order if t_in[k] <= t < t_out[k]] if dd else []
            rows.append((t, h, d, qq, ss, dd, pr, held))
    df = pd.DataFrame(rows, columns=["step", "rank", "direction", "queued", "sent", "depth", "peer", "items"])
    return df.sort_values(["step", "rank", "direction"], kind="stable").reset_index(drop=True)


def peak_in_flight(schedule: Schedule, held_bytes: np.ndarray | None = None) -> np.ndarray:
    """Per rank, the most micro-batch chunks whose forward ran and whose backward has not (list order).

    An activation is freed by ``B``, or by ``W`` when the backward is split. With ``held_bytes``
    (one value per global stage: what a rank holds per in-flight micro-batch of the stage,
    ``StageCosts.arrays(...)["held"]``) the peak is in bytes instead: the per-rank activation
    memory a memory cap bounds (:func:`~hetsched.pipeline.synthesize`); it equals the simulator's
    ``peak_activation_bytes`` per rank, since a rank runs one action at a time.

    >>> from hetsched.pipeline import gpipe, one_f_one_b
    >>> peak_in_flight(gpipe(3, 4)).tolist(), peak_in_flight(one_f_one_b(3, 4)).tolist()
    ([4, 4, 4], [3, 2, 1])
    >>> peak_in_flight(one_f_one_b(3, 4), held_bytes=[1e6, 2e6, 4e6]).tolist()
    [3000000.0, 4000000.0, 4000000.0]
    """
    s = schedule
    kd = s.kind
    delta = np.where(kd == F, 1, np.where((kd == B) | (kd == W), -1, 0)).astype(np.int64)
    out = np.zeros(s.p, np.int64)
    if held_bytes is not None:
        held = np.asarray(held_bytes, float)
        if held.shape != (s.n_stages,):
            raise ScheduleError(f"held_bytes needs one value per global stage ({s.n_stages}), got shape {held.shape}", field="held_bytes")
        delta = delta * held[s.stage]
        out = np.zeros(s.p)
    for r in range(s.p):
        sl = s.rank_slice(r)
        if sl.stop > sl.start:
            out[r] = np.cumsum(delta[sl]).max()
    return out


def patent_queues(p: int, v: int, m: int) -> pd.DataFrame:
    """The patent's two cache queues, step by step, by its own rule (PaddlePaddle's ``_process_fwd_buffer``).

    With ``r = m % p``, ``g0 = p + r`` and the send interval ``[lo, hi)`` of :func:`send_interval`:
    at each of its forward micro-steps ``k`` (its ``k``-th forward) the **last rank** pushes its
    output into the forward cache queue when ``k < g0 * v`` and the output is not of the last chunk,
    and sends the queue head only when ``lo <= k < hi``; after the first group it sends directly.
    The **first rank** does the same with its backward micro-steps and input gradients (pushing
    unless the chunk is 0). Returns ``micro_step, rank, direction, queued, sent, depth, item_in,
    item_out`` (items in action text). Both queues end empty.

    >>> q = patent_queues(4, 2, 10)
    >>> q.groupby("direction")["depth"].max().to_dict()
    {'backward': 2, 'forward': 2}
    >>> q[(q.direction == "forward") & (q.micro_step < 4)][["micro_step", "queued", "sent", "depth", "item_out"]].fillna("-").values.tolist()
    [[0, 1, 0, 1, '-'], [1, 1, 0, 2, '-'], [2, 1, 1, 2, '3F0'], [3, 1, 1, 2, '3F1']]
    """
    if m < p:
        raise ScheduleError(f"the patent's grouping needs m >= p (got m={m}, p={p})", field="m")
    r = m % p
    g0 = p + r
    first_steps = g0 * v
    lo, hi = send_interval(p, v, m)
    rows = []
    for direction, rank, kind in (("forward", p - 1, "F"), ("backward", 0, "B")):
        q: list[str] = []
        for k in range(m * v):
            if k < first_steps:
                chunk, mb = k // g0, k % g0
            else:
                kk = k - first_steps
                chunk, mb = (kk % (p * v)) // p, g0 + (kk // (p * v)) * p + kk % p
            if direction == "backward":
                chunk = v - 1 - chunk
            item = f"{chunk * p + rank}{kind}{mb}"
            final = chunk == (v - 1 if direction == "forward" else 0)  # nothing to send onwards
            queued = sent = 0
            out = None
            if k < first_steps:
                if not final:
                    q.append(item)
                    queued = 1
                if lo <= k < hi:
                    out = q.pop(0)
                    sent = 1
            elif not final:
                queued = sent = 1
                out = item
            rows.append((k, rank, direction, queued, sent, len(q), item if queued else None, out))
    return pd.DataFrame(rows, columns=["micro_step", "rank", "direction", "queued", "sent", "depth", "item_in", "item_out"])


def patent_parameters(p: int, v: int, m: int) -> dict:
    """The patent's micro-batch scheduling parameters from ``p`` (pipeline degree), ``v``
    (interleave degree) and ``m`` (accumulation steps), step 1 of its method.

    ``r = m % p``; the first group has ``p + r`` micro-batches (``first_group``) and covers
    ``(p + r) v`` micro-steps; rank ``k`` starts with ``2 (p - 1 - k) + (v - 1)(p + r)`` warm-up
    forwards (capped at ``m v``); the send interval is :func:`send_interval`.

    >>> patent_parameters(4, 2, 10)["warmup"], patent_parameters(4, 2, 10)["send_interval"]
    ([12, 10, 8, 6], (2, 8))
    """
    if m < p:
        raise ScheduleError(f"the patent's grouping needs m >= p (got m={m}, p={p})", field="m")
    r = m % p
    g0 = p + r
    return {
        "r": r,
        "first_group": g0,
        "first_group_steps": g0 * v,
        "groups": [g0] + [p] * (m // p - 1),
        "warmup": [min(2 * (p - 1 - k) + (v - 1) * g0, m * v) for k in range(p)],
        "send_interval": send_interval(p, v, m),
        "n_cached": g0 * (v - 1) if r else 0,
    }
