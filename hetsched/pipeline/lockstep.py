"""PaddlePaddle's blocking p2p as it runs: steps, paired send/recv exchanges and the patent's cache queues.

Paddle's ``PipelineParallelWithInterleave`` (the patent ``001``, claims 1, 6-13) does not post
sends and receives freely. Each rank runs *steps* and, after every step, one blocking *exchange*
with its ring neighbours (``send_forward_recv_forward``, ``send_forward_backward_recv_forward_backward``,
``send_backward_recv_backward``: a batch of ``isend``/``irecv`` then ``wait``):

* a warm-up step is one forward, a steady step a forward then a backward, a cool-down step one
  backward (here: a forward immediately followed by a backward on a rank's list forms one step,
  every other action is a step of its own);
* the exchange after a step **receives the cross-rank inputs of the rank's next step** (Paddle
  receives one step ahead; the first step's inputs come in an initial exchange) and **sends**
  outputs;
* a send completes only when the receiver has posted the matching receive (a rendezvous, as with
  NCCL), and the exchange completes when all its sends and receives have, so a rank is blocked
  until then.

Where a send goes (:func:`lower`):

``cache=None``
    in the exchange right after the step that produced it. When the receiver posts its receive
    later, the sender blocks (``blocked_send_s``); with the patent's schedule that happens exactly
    when ``m % p != 0`` (the last rank finishes chunk ``c`` of micro-batch ``j`` ``r = m % p`` steps
    before the first rank asks for it), and can deadlock.
``cache="sender"`` (the patent)
    the output waits in the sender's cache queue and is sent in the sender's exchange that meets
    the receiver's receive, found on the unit-time grid (every action one unit, free links). For
    the patent's schedule this is exactly its rule (the last rank's forward queue and the first
    rank's backward queue, sent inside the send interval: :func:`~hetsched.pipeline.patent_queues`;
    ``tests/test_pipeline_lockstep.py`` checks the depths step by step on the torch/Paddle grids).
``cache="receiver"``
    sends do not block: the message is buffered at the receiver (Megatron's receive buffers).

Examples
--------
>>> from hetsched.pipeline import interleaved_1f1b
>>> s = interleaved_1f1b(4, 2, 10, grouping="paddle")
>>> prog = lower(s, "sender")
>>> int((prog.send_ex != prog.default_ex).sum())        # outputs that wait in a cache queue: (p + r)(v - 1) x 2
12
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .deps import checked_dependencies, deadlock_error
from .ir import B, F, I, Schedule

__all__ = ["Program", "paddle_steps", "lower", "run"]


def paddle_steps(s: Schedule) -> np.ndarray:
    """Step id of every action: one action per step, except the interleaved runtime's steady pairs.

    Paddle's (and Megatron's) interleaved 1F1B runs a steady-phase forward and the backward right
    after it as one step with one exchange; schedules made that way say so
    (``meta["paired_steps"]``, with each rank's warm-up count in ``meta["warmup"]``: forwards
    after the warm-up pair up, and when every forward is warm-up the last one keeps its own
    step). Every other schedule (Paddle's 1F1B, FthenB...) exchanges after every action. Step ids
    are global and increase along each rank's list, rank 0's first.

    >>> from hetsched.pipeline import interleaved_1f1b, one_f_one_b
    >>> paddle_steps(one_f_one_b(2, 2)).tolist()
    [0, 1, 2, 3, 4, 5, 6, 7]
    >>> paddle_steps(interleaved_1f1b(2, 1, 3)).tolist()   # rank 0: 0F0 0F1 | 0F2 0B0 | 0B1 | 0B2
    [0, 1, 2, 2, 3, 4, 5, 5, 6, 6, 7, 7]
    """
    n = s.n_actions
    kd = s.kind
    warm = s.meta.get("warmup")
    if not s.meta.get("paired_steps") or warm is None or len(warm) != s.p or not n:
        return np.arange(n)
    nonempty = np.diff(s.offsets) > 0
    first = np.zeros(n, bool)
    first[s.offsets[:-1][nonempty]] = True
    # a forward is never the second of a pair nor a backward the first, so pairs never overlap
    pair = np.zeros(n, bool)
    pair[np.flatnonzero(((kd == B) | (kd == I))[1:] & (kd == F)[:-1] & ~first[1:]) + 1] = True
    isf = (kd == F).astype(np.int64)
    nf = np.cumsum(isf) - isf  # forwards before each action, then made per rank
    nf -= np.repeat(nf[s.offsets[:-1][nonempty]], np.diff(s.offsets)[nonempty])
    steady_f = nf >= np.asarray(warm, np.int64)[s.rank]
    pair[1:] &= steady_f[:-1]
    return np.cumsum(~pair) - 1


@dataclass(frozen=True)
class Program:
    """A schedule lowered to steps and exchanges (see the module docstring).

    Attributes
    ----------
    step : ndarray
        Step id of every action (:func:`paddle_steps`).
    ex_lo : ndarray
        ``ex_lo[r] + k`` is rank ``r``'s exchange before its ``k``-th step; ``ex_lo[r] + n_r`` its
        final exchange (``ex_lo[p]`` = number of exchanges).
    src, dst : ndarray
        Per message (a cross-rank input): producing and consuming action.
    default_ex, send_ex, recv_ex : ndarray
        Per message: the exchange right after the producer's step, the exchange that sends it,
        the exchange that receives it (before the consumer's step).
    blocking : bool
        Whether a send waits for its receive (``False`` for the receiver-buffer design).
    cache : str or None
        The cache design the sends were placed by.
    """

    step: np.ndarray
    ex_lo: np.ndarray
    ex_rank: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    default_ex: np.ndarray
    send_ex: np.ndarray
    recv_ex: np.ndarray
    blocking: bool
    cache: str | None = None


def _base(s: Schedule) -> Program:
    dep = checked_dependencies(s)
    rank = s.rank
    step = paddle_steps(s)
    n_steps = int(step[-1]) + 1 if s.n_actions else 0
    # first step id of each rank (ranks with no action own no step)
    step_lo = np.zeros(s.p + 1, np.int64)
    counts = np.bincount(rank[np.r_[True, np.diff(step) > 0]] if s.n_actions else np.zeros(0, np.int64), minlength=s.p)
    np.cumsum(counts, out=step_lo[1:])
    ex_lo = step_lo + np.arange(s.p + 1)  # one more exchange per rank (the final one)
    assert ex_lo[-1] == n_steps + s.p
    ex_rank = np.repeat(np.arange(s.p), counts + 1)
    y = np.flatnonzero(dep >= 0)
    x = dep[y]
    cross = rank[x] != rank[y]
    x, y = x[cross], y[cross]
    default_ex = step[x] + rank[x] + 1
    recv_ex = step[y] + rank[y]
    return Program(step, ex_lo, ex_rank, x, y, default_ex, default_ex, recv_ex, True)


def lower(s: Schedule, cache: str | None = None) -> Program:
    """Lower ``s`` to Paddle's steps and exchanges, placing each send by the ``cache`` design.

    >>> from hetsched.pipeline import one_f_one_b
    >>> prog = lower(one_f_one_b(2, 2))
    >>> prog.src.tolist(), prog.dst.tolist()        # in consumer order: 1B0->0B0, 1B1->0B1, 0F0->1F0, 0F1->1F1
    ([5, 7, 0, 1], [2, 3, 4, 6])
    """
    prog = Program(**{**_base(s).__dict__, "cache": cache})
    if cache == "receiver":
        return Program(**{**prog.__dict__, "blocking": False})
    if cache != "sender" or not len(prog.src):
        return prog
    from .schedules import is_patent_schedule

    if is_patent_schedule(s):
        return Program(**{**prog.__dict__, "send_ex": _patent_sends(s, prog)})
    # the same idea for any other schedule (an extension): an output waits in the sender's queue
    # until the sender's last exchange posted before the receive, on the unit-time grid (a dry
    # run with buffered sends, every action one unit, free links)
    P, _, _, _, _ = run(s, Program(**{**prog.__dict__, "blocking": False}), np.ones(s.n_actions), np.zeros(len(prog.src)))
    send_ex = prog.default_ex.copy()
    t_recv = P[prog.recv_ex]
    rank_x = prog.ex_rank[prog.default_ex]
    for r in np.unique(rank_x).tolist():
        sel = np.flatnonzero(rank_x == r)
        lo, hi = int(prog.ex_lo[r]), int(prog.ex_lo[r + 1])
        k = np.searchsorted(P[lo:hi], t_recv[sel] + 1e-9, side="right") - 1 + lo
        send_ex[sel] = np.maximum(k, prog.default_ex[sel])
    return Program(**{**prog.__dict__, "send_ex": send_ex})


def _patent_sends(s: Schedule, prog: Program) -> np.ndarray:
    """The patent's literal rule (claims 7-9 and 11-13; Paddle's ``_process_fwd_buffer`` /
    ``_process_bwd_buffer``): which exchange sends each output of the last rank's forwards and the
    first rank's backwards.

    At its ``k``-th forward micro-step the last rank pushes the output (unless it is of the last
    chunk: the loss needs no sending) into the forward cache queue while ``k < (p + r) v``, and
    sends the queue head only while ``r <= k < r + (p + r)(v - 1)``; afterwards it sends directly.
    The first rank does the same with its backward micro-steps and input gradients (nothing to
    send from chunk 0).
    """
    from .cache import send_interval

    p, v, m = s.p, s.v, s.m
    lo, hi = send_interval(p, v, m)
    first_steps = (p + m % p) * v
    send_ex = prog.default_ex.copy()
    by_src = {int(x): i for i, x in enumerate(prog.src.tolist())}
    for rank, kind in ((p - 1, F), (0, B)):
        sl = s.rank_slice(rank)
        idx = np.arange(sl.start, sl.stop)[s.kind[sl] == kind]
        queue: list[int] = []
        for k, a in enumerate(idx.tolist()):
            after = int(prog.step[a]) + rank + 1  # the exchange after micro-step k's step
            mi = by_src.get(a)  # None: an output nobody on another rank reads (last chunk / chunk 0)
            if k < first_steps:
                if mi is not None:
                    queue.append(mi)
                if lo <= k < hi:
                    send_ex[queue.pop(0)] = after
            elif mi is not None:
                send_ex[mi] = after
        assert not queue, "the patent's queue ends empty"
    return send_ex


def run(s: Schedule, prog: Program, dur: np.ndarray, tt: np.ndarray):
    """Time the lowered program: ``(post, start, end, xfer_start, blocked)``.

    ``post[e]`` is when exchange ``e`` is posted (its rank finished the step before it),
    ``start``/``end`` per action, ``xfer_start`` per message (both sides posted, or the send
    posted when sends are buffered), ``blocked[e]`` how much longer exchange ``e`` lasted because
    one of its sends waited for the receiver to post (beyond what its own receives waited). ``tt`` is each message's transfer time. Raises a
    ``deadlock`` :class:`~hetsched.errors.ScheduleError` when exchanges wait on each other forever.
    """
    n_ex = int(prog.ex_lo[-1])
    nmsg = len(prog.src)
    # messages of each exchange, as (message, is_send)
    ex_of = np.concatenate([prog.send_ex, prog.recv_ex])
    order = np.argsort(ex_of, kind="stable")
    bounds = np.searchsorted(ex_of[order], np.arange(n_ex + 1))
    msgl = (order % nmsg).tolist() if nmsg else []
    sendl = (order < nmsg).tolist()
    bl = bounds.tolist()
    send_exl, recv_exl, ttl = prog.send_ex.tolist(), prog.recv_ex.tolist(), np.asarray(tt, float).tolist()
    blocking = prog.blocking
    # actions of each step, in list order
    stepl = prog.step.tolist()
    n_steps = (stepl[-1] + 1) if stepl else 0
    step_first = np.searchsorted(prog.step, np.arange(n_steps + 1)).tolist()
    durl = np.asarray(dur, float).tolist()
    ex_lo = prog.ex_lo.tolist()
    post = [-1.0] * n_ex
    held = [0.0] * n_ex
    start = [0.0] * s.n_actions
    end = [0.0] * s.n_actions
    waiters: list[list[int]] = [[] for _ in range(n_ex)]
    cur = ex_lo[:-1]
    t_of = [0.0] * s.p
    waits_on = [-1] * s.p
    stack = [r for r in range(s.p - 1, -1, -1)]
    while stack:
        r = stack.pop()
        e, t, last = cur[r], t_of[r], ex_lo[r + 1] - 1
        while e <= last:
            if post[e] < 0.0:
                post[e] = t
                if waiters[e]:
                    stack.extend(waiters[e])
                    waiters[e] = []
            pe = t
            done = True
            t_recv = t_send = pe
            for j in range(bl[e], bl[e + 1]):
                mi = msgl[j]
                if sendl[j]:
                    if not blocking:
                        continue  # a buffered send leaves at once
                    other = recv_exl[mi]
                else:
                    other = send_exl[mi]
                po = post[other]
                if po < 0.0:
                    waiters[other].append(r)
                    waits_on[r] = other
                    done = False
                    break
                if blocking:  # a rendezvous: both sides posted, then the transfer
                    c = (po if po > pe else pe) + ttl[mi]
                else:  # the receive of a buffered send: it arrives a transfer after the send
                    c = po + ttl[mi]
                if sendl[j]:
                    t_send = c if c > t_send else t_send
                else:
                    t_recv = c if c > t_recv else t_recv
            if not done:
                break
            t = t_recv if t_recv > t_send else t_send
            # how much longer the exchange took because a receiver had not posted yet
            if t_send > t_recv:
                held[e] = t_send - t_recv
            k = e - r  # global step id after this exchange (ex id = step id + rank)
            if e < last:
                for a in range(step_first[k], step_first[k + 1]):
                    start[a] = t
                    t += durl[a]
                    end[a] = t
            e += 1
        cur[r], t_of[r] = e, t
    stuck = [r for r in range(s.p) if cur[r] < ex_lo[r + 1]]
    if stuck:
        raise _stuck_error(s, prog, cur, waits_on, stuck)
    P = np.asarray(post)
    xs = np.maximum(P[prog.send_ex], P[prog.recv_ex]) if blocking else P[prog.send_ex]
    return P, np.asarray(start), np.asarray(end), xs, np.asarray(held)


def _stuck_error(s: Schedule, prog: Program, cur: list[int], waits_on: list[int], stuck: list[int]):
    """A deadlock error naming the blocked exchange and the message it cannot hand over."""
    step_first = np.searchsorted(prog.step, np.arange(int(prog.step[-1]) + 2))
    ptr, why, wo = [], {}, [-1] * s.p
    for r in range(s.p):
        e = cur[r]
        if r not in stuck:
            ptr.append(int(s.offsets[r + 1]))
            continue
        k = e - r
        nxt = int(step_first[k]) if e < prog.ex_lo[r + 1] - 1 else int(s.offsets[r + 1]) - 1
        ptr.append(nxt)
        other = waits_on[r]
        orank = int(prog.ex_rank[other]) if other >= 0 else -1
        o_next = int(step_first[other - orank]) if other >= 0 and other < prog.ex_lo[orank + 1] - 1 else None
        mine = np.flatnonzero(((prog.send_ex == e) & (prog.recv_ex == other)) | ((prog.recv_ex == e) & (prog.send_ex == other)))
        if len(mine):
            mi = int(mine[0])
            item = _txt(s, int(prog.src[mi]))
            if prog.send_ex[mi] == e:
                what = f"its send of {item}'s output to rank {orank} waits for rank {orank} to post the receive"
            else:
                what = f"its receive of {item}'s output from rank {orank} waits for rank {orank} to post the send"
        else:
            what = f"its exchange waits for rank {orank}"
        where_o = f" (rank {orank} is itself blocked before {_txt(s, o_next)})" if o_next is not None else ""
        design = "without a cache" if prog.cache is None else f"with the {prog.cache} cache"
        why[r] = f"cannot start: the blocking exchange before it never completes: {what}{where_o} (lock-step p2p {design})"
        wo[r] = int(prog.src[mine[0]]) if len(mine) else -1
    return deadlock_error(s, ptr, wo, why=why)


def _txt(s: Schedule, i: int) -> str:
    return f"{s.stage[i]}{'FBIW'[s.kind[i]]}{s.microbatch[i]}"
