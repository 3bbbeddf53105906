"""The Markdown tables and charts every report of the package writes: :func:`markdown_table`,
:func:`bar_chart` (grouped bars, one panel per :class:`Panel`) and :func:`pyplot` (matplotlib
without a display), figures being saved atomically by :func:`ldr_opennmt.utils.save_figure`.

The module imports the standard library only (the rest on first use): the processes that keep
TensorFlow out (the benchmarks' CTranslate2 processes, the GPU check's probes) import it."""

import collections
import math


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def markdown_table(header, rows, align=None):
    """A Markdown table.

    Args:
      header: The column names.
      rows: The rows, each a list of cells (strings, or values written with ``%s``), as
        many as :obj:`header`.
      align: The alignment of each column, ``"l"`` (left) or ``"r"`` (right), as one string
        (``"lrr"``); by default the first column left and the others right.

    Returns:
      The table's lines, joined by newlines (no final newline).

    Raises:
      ValueError: if a row or :obj:`align` has not one entry per column.
    """
    align = align or "l" + "r" * (len(header) - 1)
    rows = list(rows)
    if len(align) != len(header) or any(len(row) != len(header) for row in rows):
        raise ValueError("every row and the alignment need one entry per column")
    lines = [_table_row(header), "|%s|" % "|".join("---:" if a == "r" else "---" for a in align)]
    lines += [_table_row(row) for row in rows]
    return "\n".join(lines)


def _table_row(cells):
    return "|%s|" % "|".join(" %s " % (cell,) if str(cell) else " " for cell in cells)


#: One panel of :func:`bar_chart`: its ``title``, y-axis label (``ylabel``), ``series`` (a
#: list of ``(name, [value per group])``: a bar per series in each group) and y-axis limits
#: (``ylim``, ``None`` for automatic ones).
Panel = collections.namedtuple("Panel", ["title", "ylabel", "series", "ylim"])


def bar_chart(path, groups, panels, figsize, value_format="%.1f", title_size=None, legend_size=7):
    """Writes grouped bar charts as a PNG, atomically
    (:func:`ldr_opennmt.utils.save_figure`).

    The panels are stacked vertically; each has a group of bars per entry of :obj:`groups`
    and, in each group, a bar per series, labelled with its value (a missing or NaN value is
    drawn as 0).

    Args:
      path: The PNG file to write.
      groups: The names of the groups (x axis).
      panels: A list of :class:`Panel`.
      figsize: The figure's size in inches, ``(width, height)``.
      value_format: The format of the values written above the bars.
      title_size: The font size of the panels' titles (``None``: matplotlib's).
      legend_size: The font size of the legends.
    """
    from ldr_opennmt.utils import save_figure  # pylint: disable=import-outside-toplevel

    plt = pyplot()
    figure, axes = plt.subplots(len(panels), 1, figsize=figsize, squeeze=False)
    try:
        for axis, panel in zip(axes[:, 0], panels):
            width = 0.8 / max(1, len(panel.series))
            for i, (name, values) in enumerate(panel.series):
                xs = [g + i * width for g in range(len(groups))]
                heights = [0.0 if v is None or math.isnan(v) else v for v in values]
                bars = axis.bar(xs, heights, width, label=name)
                axis.bar_label(bars, fmt=value_format, fontsize=6, padding=1)
            axis.set_xticks([g + width * (len(panel.series) - 1) / 2 for g in range(len(groups))])
            axis.set_xticklabels(groups)
            if panel.ylim is not None:
                axis.set_ylim(*panel.ylim)
            axis.set_ylabel(panel.ylabel)
            title = axis.set_title(panel.title)
            if title_size is not None:
                title.set_fontsize(title_size)
            if panel.series:
                axis.legend(fontsize=legend_size, ncol=2)
        figure.tight_layout()
        # Under an exclusive temporary name, renamed when complete (PNG named explicitly: the
        # temporary name has no extension).
        save_figure(figure, path, dpi=120, format="png")
    finally:
        plt.close(figure)
