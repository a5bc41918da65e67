"""MachineBar: the machine a tab schedules on, with a picker and an editor (issue 33).

"Same model, another machine" is the basic what-if: what if I had two GPUs instead of a GPU and an
FPGA, a faster link, a card with less memory? Every scheduling tab shows one compact bar: the
machine's name and devices, a picker of the bundled machines and of the ones loaded (a system YAML
file) or edited in this session, an editor (add a device of a bundled model, remove one, change a
device's memory or memory bandwidth, a link's speed or latency) and a download of the machine as a
system YAML file (:func:`hetsched.io.systems.system_to_yaml`, the format ``load_system`` reads).

The machine lives in one place, the panels' :class:`~hetsched.widgets.base.Session`
(``session.system``, set through :meth:`~hetsched.widgets.base.Session.use_machine`): a bar changes
it, and every tab recomputes on the new machine (a hidden tab when next shown). The machine a tab
showed before the change is kept (``session.previous_system``): the Mapping, Memory and Executor
tabs set their result beside the same run on it.

Every edit is input the core checks (:meth:`hetsched.system.System.with_device_values`,
:meth:`~hetsched.system.System.with_link_values`, :meth:`~hetsched.system.System.with_device`,
:meth:`~hetsched.system.System.without_device`, bounds in :data:`hetsched.system.MACHINE_PARAMS`):
a refused edit is shown in the bar with the device and field it names, and the machine stays as it was.

>>> from hetsched.widgets.graph_panel import GraphPanel
>>> p = GraphPanel(); bar = p.machine_bar
>>> bar.machine().name
'gpu_tpu'
>>> bar.set_memory("gpu0", 8.0), p.session.system.name, p.session.system.device("gpu0").memory_bytes // 2**30
(True, 'gpu_tpu (edited)', 8)
>>> bar.set_memory("gpu0", -1.0), "memory = -1 GiB is out of range" in bar.message.value
(False, True)
>>> bar.remove_device("cpu0"), "host" in bar.message.value, p.session.system.device_names
(False, True, ['cpu0', 'gpu0', 'tpu0'])
>>> bar.add_device("NVIDIA Tesla V100 PCIe 32GB"), p.session.system.device_names[-1]
(True, 'gpu1')
>>> bar.pick(""), p.session.system is None, bar.machine().name
(True, True, 'gpu_tpu')
"""

from __future__ import annotations

import html
from typing import Any, Callable

import ipywidgets as W

from hetsched.errors import HetschedError
from hetsched.io.systems import add_device, bundled_systems, device_specs, system_from_yaml, system_to_yaml
from hetsched.system import MACHINE_PARAMS

from .base import download_link, error_html

__all__ = ["MachineBar", "OWN"]

#: the picker's value for "this tab's own machine" (the session holds none)
OWN = ""
_P = MACHINE_PARAMS


def _si(param: str, shown: float) -> float:
    """A value typed in the unit shown (GiB, GB/s, us) in the parameter's SI unit, without the binary
    rounding a plain division leaves (2 GB/s is 2e9 B/s, not 1999999999.9999998)."""
    try:
        return float(f"{shown / _P[param].factor:.12g}")
    except (TypeError, ValueError, OverflowError):
        return shown  # NaN, inf, not a number: the core refuses it with a message


def _describe(system: Any) -> str:
    devs = ", ".join(f"{html.escape(n)} ({html.escape(d.kind)})" for n, d in system.devices.items())
    return f"machine: <b>{html.escape(system.name)}</b> <span style='color:#555'>· {devs}</span>"


class MachineBar(W.VBox):
    """One tab's machine bar over its panel's session (see the module docstring).

    Parameters
    ----------
    panel : Panel
        The tab: its ``machine()`` is the machine shown and edited, its ``session`` where a new one goes.
    compare : bool
        Offer "compare with the previous machine" (the panel implements ``machine_metrics``).
    """

    def __init__(self, panel: Any, *, compare: bool = False) -> None:
        self.panel = panel
        self.session = panel.session
        self.title = W.HTML(layout=W.Layout(flex="1 1 auto", min_width="0"))
        self.picker = W.Dropdown(description="use", style={"description_width": "initial"},
                                 layout=W.Layout(width="300px"),
                                 tooltip="every tab schedules on the machine picked here")
        self.edit = W.ToggleButton(description="edit machine", icon="wrench", layout=W.Layout(width="auto"),
                                   tooltip="add or remove devices; change memory, memory bandwidth, link speed")
        self.save = W.Button(description="save as YAML", icon="download", layout=W.Layout(width="auto"),
                             tooltip="a system YAML file of this machine (the format hetsched.load_system reads)")
        self.upload = W.FileUpload(accept=".yaml,.yml", multiple=False, description="load YAML",
                                   layout=W.Layout(width="auto"))
        self.compare = W.Checkbox(value=True, indent=False, layout=W.Layout(width="auto", display="none" if not compare else None),
                                  description="compare with the previous machine")
        self.link = W.HTML()
        self.message = W.HTML()
        self.editor = W.VBox(layout=W.Layout(display="none", border="1px solid #DDD", padding="4px 8px"))
        self._compares = compare
        self._syncing = False
        self._boxes: dict[tuple, W.FloatText] = {}  # the editor's number boxes: (field, device) or (field, src, dst)
        self._editor_shape: tuple | None = None
        self._name_box: W.Text | None = None
        self.picker.observe(lambda ch: None if self._syncing else self.pick(ch["new"]), names="value")
        self.edit.observe(lambda ch: self._show_editor(ch["new"]), names="value")
        self.save.on_click(lambda _b: self.prepare_download())
        self.upload.observe(self._on_upload, names="value")
        self.compare.observe(lambda ch: panel.show_machine_compare(ch["new"]), names="value")
        row = W.HBox([self.title, self.picker, self.edit, self.compare, self.save, self.link, self.upload],
                     layout=W.Layout(flex_flow="row wrap", align_items="center", width="100%"))
        super().__init__([row, self.message, self.editor],
                         layout=W.Layout(border_bottom="1px solid #E0E0E0", padding="0 0 4px 0", margin="0 0 6px 0"))
        self.add_class("hetsched-machine-bar")
        self.session.observe(lambda _ch: self.refresh(), names=["system", "machines", "previous_system"])
        self.refresh()

    # -- reading ------------------------------------------------------------------
    def machine(self) -> Any:
        """The machine this tab schedules on now."""
        return self.panel.machine()

    def refresh(self) -> None:
        """Show the machine in effect: its name and devices, the picker's choice, the editor's rows."""
        try:
            m = self.machine()
        except HetschedError as e:  # a tab that cannot say its machine yet (no graph): say why, keep working
            self.title.value = error_html(e)
            return
        self.title.value = _describe(m)
        own = self.panel.own_machine_name()
        options = [(f"this tab's own ({own})" if own else "this tab's own", OWN)]
        options += [(n, n) for n in bundled_systems()]
        options += [(f"{n} (loaded or edited)", n) for n in self.session.machines if n not in dict(options[1:])]
        cur = OWN if self.session.system is None else self.session.system.name
        if cur not in {v for _l, v in options}:
            options.append((cur, cur))
        self._syncing = True
        try:
            if list(self.picker.options) != options:
                self.picker.options = options
            self.picker.value = cur
        finally:
            self._syncing = False
        prev = self.session.previous_system
        self.compare.description = (f"compare with the previous machine ({prev.name})" if prev is not None
                                    else "compare with the previous machine (none yet)")
        self.compare.disabled = prev is None
        self.link.value = ""
        if self.edit.value:
            self._build_editor(m)

    # -- choosing -------------------------------------------------------------------
    def pick(self, key: str) -> bool:
        """Use a bundled machine, one loaded or edited in this session (by name), or ``""``: each tab its own."""
        before = self.machine()
        if key == OWN:
            self.session.use_machine(None, previous=before)
            return True
        try:
            from hetsched.io.systems import load_system

            system = self.session.machines[key] if key in self.session.machines else load_system(key)
        except HetschedError as e:
            self.message.value = error_html(e)
            self.refresh()
            return False
        self.message.value = ""
        self.session.use_machine(system, previous=before)
        return True

    def use(self, system: Any) -> None:
        """Every tab schedules on ``system`` from now on (kept in the session's machines under its name)."""
        self.message.value = ""
        self.session.use_machine(system, previous=self.machine())

    # -- editing (each edit is checked by the core) -------------------------------------
    def _edited(self, change: Callable[[Any], Any]) -> bool:
        m = self.machine()
        try:
            new = change(m)
            if not m.name.endswith("(edited)"):
                new = new.renamed(f"{m.name} (edited)")
        except HetschedError as e:
            self.message.value = error_html(e)
            self.refresh()  # the boxes show the machine in effect again
            return False
        self.use(new)
        return True

    def set_memory(self, device: str, gib: float) -> bool:
        """A device's memory in GiB (what its box in the editor does)."""
        return self._edited(lambda m: m.with_device_values(device, memory_bytes=_si("memory_bytes", gib)))

    def set_mem_bandwidth(self, device: str, gbps: float) -> bool:
        """A device's memory bandwidth in GB/s."""
        return self._edited(lambda m: m.with_device_values(device, mem_bandwidth_Bps=_si("mem_bandwidth_Bps", gbps)))

    def set_link(self, src: str, dst: str, *, gbps: float | None = None, latency_us: float | None = None) -> bool:
        """A link's speed (GB/s) or latency (us)."""
        values = {}
        if gbps is not None:
            values["bandwidth_Bps"] = _si("bandwidth_Bps", gbps)
        if latency_us is not None:
            values["latency_s"] = _si("latency_s", latency_us)
        return self._edited(lambda m: m.with_link_values(src, dst, **values))

    def add_device(self, model: str) -> bool:
        """Add a device of a bundled model (:func:`hetsched.io.systems.device_specs`), linked to the host."""
        return self._edited(lambda m: add_device(m, model))

    def remove_device(self, name: str) -> bool:
        return self._edited(lambda m: m.without_device(name))

    def rename(self, name: str) -> bool:
        m = self.machine()
        try:
            new = m.renamed(name)
        except HetschedError as e:
            self.message.value = error_html(e)
            return False
        self.use(new)
        return True

    # -- files ------------------------------------------------------------------------
    def prepare_download(self) -> str:
        """The machine as a system YAML download link (built on demand: most visits never save)."""
        m = self.machine()
        self.link.value = download_link(system_to_yaml(m), f"{m.name.replace(' ', '_')}.yaml", f"{m.name}.yaml")
        return self.link.value

    def load_yaml(self, content: bytes, filename: str) -> bool:
        """Use a machine from a system YAML file's content (what "load YAML" does); errors name the field."""
        try:
            system = system_from_yaml(content, source=filename)
        except HetschedError as e:
            self.message.value = error_html(e)
            return False
        if system.name in bundled_systems():
            system = system.renamed(f"{system.name} ({filename})")
        self.use(system)
        return True

    def _on_upload(self, change: dict) -> None:
        files = change["new"]
        if files:
            f = files[0]
            self.load_yaml(bytes(f["content"]), f["name"])

    # -- the editor ------------------------------------------------------------------------
    def _show_editor(self, on: bool) -> None:
        self.editor.layout.display = None if on else "none"
        if on:
            self._build_editor(self.machine())

    @staticmethod
    def _shown(param: str, value: float) -> float:
        # four significant digits, as a person reads a datasheet (40 GB is 37.25 GiB, not 37.252903)
        return float(f"{value * _P[param].factor:.4g}")

    def _number(self, key: tuple, value: float, on_change: Callable[[float], Any], width: str = "110px") -> W.FloatText:
        p = _P[key[0]]
        box = W.FloatText(value=self._shown(key[0], value), layout=W.Layout(width=width),
                          tooltip=f"{p.help}; allowed {p.bounds_text()}")
        box.observe(lambda ch: None if self._syncing else on_change(ch["new"]), names="value")
        self._boxes[key] = box
        return box

    @staticmethod
    def _shape(m: Any) -> tuple:
        """What the editor's rows are made of: a machine of the same shape only changes their values."""
        return (tuple((n, d.kind, str(d.attrs.get("model", "")), n == m.host) for n, d in m.devices.items()),
                tuple((ln.src, ln.dst, ln.duplex) for ln in m.links))

    def _fill_editor(self, m: Any) -> None:
        """The open editor's boxes show machine ``m`` (of the shape they were built for): an edit in a box
        sends its new values, not a new editor (fewer widgets over the websocket, a quicker answer)."""
        values = {**{("memory_bytes", n): d.memory_bytes for n, d in m.devices.items()},
                  **{("mem_bandwidth_Bps", n): d.mem_bandwidth_Bps for n, d in m.devices.items()},
                  **{("bandwidth_Bps", ln.src, ln.dst): ln.bandwidth_Bps for ln in m.links},
                  **{("latency_s", ln.src, ln.dst): ln.latency_s for ln in m.links}}
        self._syncing = True
        try:
            self._name_box.value = m.name
            for key, v in values.items():
                self._boxes[key].value = self._shown(key[0], v)
        finally:
            self._syncing = False

    def _build_editor(self, m: Any) -> None:
        """The editor's rows for machine ``m``: one per device, one per link, and an "add" row."""
        shape = self._shape(m)
        if shape == self._editor_shape and self.editor.children:
            self._fill_editor(m)
            return
        self._boxes = {}
        head = lambda *t: [W.HTML(f"<b>{html.escape(x)}</b>") for x in t]  # noqa: E731
        cells: list[W.Widget] = head("device", "model", f"memory ({_P['memory_bytes'].shown_unit})",
                                     f"memory bandwidth ({_P['mem_bandwidth_Bps'].shown_unit})", "")
        for name, d in m.devices.items():
            rm = W.Button(description="remove", layout=W.Layout(width="auto"), disabled=name == m.host,
                          tooltip="the host holds the inputs and weights: it stays" if name == m.host else f"remove {name}")
            rm.on_click(lambda _b, n=name: self.remove_device(n))
            cells += [W.HTML(f"{html.escape(name)} <span style='color:#555'>({html.escape(d.kind)}"
                             f"{', host' if name == m.host else ''})</span>"),
                      W.HTML(html.escape(str(d.attrs.get("model", "")))),
                      self._number(("memory_bytes", name), d.memory_bytes, lambda v, n=name: self.set_memory(n, v)),
                      self._number(("mem_bandwidth_Bps", name), d.mem_bandwidth_Bps, lambda v, n=name: self.set_mem_bandwidth(n, v)),
                      rm]
        devices = W.GridBox(cells, layout=W.Layout(grid_template_columns="auto auto auto auto auto", grid_gap="2px 10px",
                                                   align_items="center"))
        lcells: list[W.Widget] = head("link", f"speed ({_P['bandwidth_Bps'].shown_unit})",
                                      f"latency ({_P['latency_s'].shown_unit})")
        for ln in m.links:
            lcells += [W.HTML(f"{html.escape(ln.src)} ↔ {html.escape(ln.dst)}" if ln.duplex
                              else f"{html.escape(ln.src)} – {html.escape(ln.dst)} (one lane)"),
                       self._number(("bandwidth_Bps", ln.src, ln.dst), ln.bandwidth_Bps, lambda v, a=ln.src, b=ln.dst: self.set_link(a, b, gbps=v)),
                       self._number(("latency_s", ln.src, ln.dst), ln.latency_s, lambda v, a=ln.src, b=ln.dst: self.set_link(a, b, latency_us=v))]
        links = W.GridBox(lcells, layout=W.Layout(grid_template_columns="auto auto auto", grid_gap="2px 10px",
                                                  align_items="center"))
        specs = list(device_specs())
        model = W.Dropdown(options=specs, description="add a device", style={"description_width": "initial"},
                           layout=W.Layout(width="420px"))
        add = W.Button(description="add", icon="plus", layout=W.Layout(width="auto"),
                       tooltip="a device of this model, linked to the host as in its bundled machine")
        add.on_click(lambda _b: self.add_device(model.value))
        name = W.Text(value=m.name, description="name", style={"description_width": "initial"}, continuous_update=False,
                      layout=W.Layout(width="300px"))
        name.observe(lambda ch: None if self._syncing or ch["new"] == self.machine().name else self.rename(ch["new"]),
                     names="value")
        self._name_box, self._editor_shape = name, shape
        self.editor.children = [
            W.HTML("<div style='color:#444'>Each change makes an edited copy of the machine that every tab schedules "
                   "on; <i>save as YAML</i> keeps it. Allowed: "
                   + "; ".join(f"{html.escape(p.words)} {html.escape(p.bounds_text())}" for p in _P) + ".</div>"),
            name, devices, links, W.HBox([model, add], layout=W.Layout(align_items="center"))]
