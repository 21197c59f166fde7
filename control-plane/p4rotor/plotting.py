"""matplotlib on a file-only backend, imported only when something is drawn (a server has no
display, and most commands draw nothing)."""


def pyplot():
    """matplotlib's pyplot with the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot
