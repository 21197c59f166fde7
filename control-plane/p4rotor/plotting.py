"""matplotlib on a file-only backend, imported only when something is drawn (a server has no
display, and most commands draw nothing)."""


def pyplot():
    """matplotlib's pyplot with the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


def save(fig, path, dpi: int = 110) -> None:
    """Write ``fig`` as a PNG of at most 256 colours (:func:`palette`), and close it."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    pyplot().close(fig)
    with open(path, "wb") as f:
        f.write(palette(buf.getvalue()))


def palette(png: bytes) -> bytes:
    """A PNG again with a palette of at most 256 colours.  A plot's anti-aliased edges make
    thousands of colours no reader tells apart; the palette keeps a results folder's plots at
    about a third of the size (results/ has a budget: tests/test_results.py)."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
