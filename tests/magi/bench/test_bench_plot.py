"""``--plot``: the box plot writer and the clear error when matplotlib is missing."""

import sys

import pytest

from magi_bench import plot
from magi_bench.__main__ import main


def test_box_plot_writes_a_png(tmp_path, document_factory):
    pytest.importorskip("matplotlib", reason="the plot writer itself needs matplotlib (the bench extra)")
    path = tmp_path / "bench.png"
    plot.write_box_plot(document_factory(), str(path))
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000


def test_box_plot_needs_a_timing_section(tmp_path, document_factory):
    doc = document_factory()
    doc["latency"] = doc["dispatch"] = None
    with pytest.raises(ValueError, match="no timing section"):
        plot.write_box_plot(doc, str(tmp_path / "x.png"))


def test_missing_matplotlib_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(plot.PlotUnavailableError, match=r"pip install 'magi-compiler\[bench\]'"):
        plot.require_matplotlib()


def test_cli_rejects_plot_without_matplotlib_before_timing(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit) as exit_info:
        main(["--device", "cpu", "--plot", str(tmp_path / "x.png"), "--json", str(tmp_path / "x.json")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err
    assert "magi-bench:" in err and "first call" not in err
    assert not (tmp_path / "x.json").exists()
