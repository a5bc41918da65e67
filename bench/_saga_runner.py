"""Run SAGA's HEFT or CPOP on one instance (JSON on stdin); print makespan, runtime and placement (JSON).

Peers venv only (``bench/.venv-peers``). ``inst["algo"]`` is ``"heft"`` (default) or ``"cpop"``.
"""

import json
import logging
import sys
import time

logging.disable(logging.WARNING)  # SAGA warns when it adds a super source/sink

from saga import Network, TaskGraph  # noqa: E402
from saga.schedulers import CpopScheduler, HeftScheduler  # noqa: E402

inst = json.load(sys.stdin)
net = Network.create(nodes=[(n, s) for n, s in inst["nodes"]], edges=[(a, b, s) for a, b, s in inst["links"]])
tg = TaskGraph.create(tasks=[(t, c) for t, c in inst["tasks"]], dependencies=[(a, b, s) for a, b, s in inst["edges"]])
sched = {"heft": HeftScheduler, "cpop": CpopScheduler}[inst.get("algo", "heft")]()
t0 = time.perf_counter()
out = sched.schedule(net, tg)
rt = time.perf_counter() - t0
ms = max(t.end for tasks in out.mapping.values() for t in tasks)
place = {t.name: t.node for tasks in out.mapping.values() for t in tasks}
print(json.dumps({"makespan": ms, "runtime_s": rt, "placement": place}))
