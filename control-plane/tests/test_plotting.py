"""plotting.save: a palette PNG (at most 256 colours), the figure closed."""

from __future__ import annotations

from PIL import Image

from p4rotor.plotting import pyplot, save


def test_save_writes_a_palette_png_and_closes_the_figure(tmp_path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4, 3))
    for k in range(12):
        ax.plot(range(50), [x * k for x in range(50)], label=str(k))
    ax.legend()
    before = len(plt.get_fignums())
    save(fig, tmp_path / "a.png", dpi=80)
    assert len(plt.get_fignums()) == before - 1
    im = Image.open(tmp_path / "a.png")
    assert im.format == "PNG" and im.mode == "P" and im.size == (320, 240)
    assert len(im.getcolors(maxcolors=256) or []) > 1
