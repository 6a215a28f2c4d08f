"""``--plot out.png``: a box plot per contender that ran, one panel per timing section.

matplotlib is optional (the ``bench`` extra); :func:`require_matplotlib` fails before any
timing starts, with the install command, so a long run is not wasted.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

INSTALL_HINT = "pip install 'magi-compiler[bench]' (or: pip install matplotlib)"


class PlotUnavailableError(RuntimeError):
    """matplotlib is not installed."""


def require_matplotlib() -> ModuleType:
    """The ``matplotlib.pyplot`` module on the non-interactive Agg backend."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError as err:
        raise PlotUnavailableError(f"--plot needs matplotlib, which is not installed ({err}); {INSTALL_HINT}") from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def write_box_plot(doc: dict[str, Any], path: str) -> None:
    """Write the box plots of ``doc``'s timing sections to ``path`` (format from its suffix)."""
    sections = [(name, doc[name]) for name in ("latency", "attention", "dispatch") if doc.get(name) is not None]
    if not sections:
        raise ValueError("the document has no timing section to plot")
    plt = require_matplotlib()
    figure, axes = plt.subplots(1, len(sections), figsize=(6 * len(sections), 4.5), squeeze=False)
    env = doc["environment"]
    for axis, (name, section) in zip(axes[0], sections):
        ran = [c for c in section["contenders"] if c["skipped"] is None]
        names = [c["name"] for c in ran]
        axis.boxplot([c["samples"] for c in ran], showfliers=True)
        axis.set_xticks(range(1, len(names) + 1), names, rotation=20)
        axis.set_ylabel(f"per-call time ({section['unit']})")
        axis.set_title(f"{name}: {section['model']}, {section['iterations']} rounds")
        axis.grid(axis="y", alpha=0.3)
    figure.suptitle(f"magi-bench  torch {env['torch']}  {env['device_name']}  {doc['settings']['dtype']}")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
