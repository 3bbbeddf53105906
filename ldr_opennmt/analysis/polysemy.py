"""Cross-domain polysemy in LDR embeddings (Pham et al., IWSLT 2019, section 5, Table 7).

For every source unit occurring at least ``min_count`` times in each domain's
training data, its ``k`` nearest neighbours (cosine) are computed in each
domain's embedding space: the fused embedding of the unit with the generic
region and that domain's region active (:meth:`LDREmbedder.fused_table`). The
neighbours are searched among the same units. A unit whose neighbour lists share
few units across domains is polysemous; one whose lists coincide is monosemous.
"""

import collections
import csv

import numpy as np

from ldr_opennmt.errors import UserError
from ldr_opennmt.reports import markdown_table, pyplot
from ldr_opennmt.utils import atomic_output, save_figure

Unit = collections.namedtuple("Unit", ("token", "counts", "neighbours", "intersection"))


def _nearest(table, k):
    """Indices of the k nearest rows (cosine) of each row, excluding itself."""
    norms = np.linalg.norm(table, axis=1, keepdims=True)
    unit = table / np.maximum(norms, 1e-12)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    # Stable sort on the negated similarity: ties keep vocabulary order.
    return np.argsort(-similarity, axis=1, kind="stable")[:, :k]


def analyze(tables, vocabulary, counts, min_count=30, k=10):
    """Neighbours of every frequent unit in every domain, and their intersection.

    Args:
      tables: A dict mapping each domain name to its fused embedding table
        ``[V, D]`` (numpy), in domain order.
      vocabulary: The token of each table row.
      counts: A dict mapping each domain name to a ``Counter`` of source units in
        its training data.
      min_count: Keep units occurring at least this many times in every domain.
      k: Number of neighbours.

    Returns:
      A list of :class:`Unit`, in vocabulary order.

    Raises:
      UserError: if fewer than two units pass the frequency threshold.
    """
    domains = list(tables)
    if min_count < 1 or k < 1:
        raise UserError("min_count and k must be >= 1, got %d and %d" % (min_count, k))
    rows = [
        i
        for i, token in enumerate(vocabulary)
        if all(counts[domain][token] >= min_count for domain in domains)
    ]
    if len(rows) < 2:
        raise UserError(
            "%d unit(s) occur at least %d times in the training data of every domain (%s): "
            "lower --min-count" % (len(rows), min_count, ", ".join(domains))
        )
    k = min(k, len(rows) - 1)
    neighbours = {}
    for domain in domains:
        nearest = _nearest(np.asarray(tables[domain], dtype=np.float64)[rows], k)
        neighbours[domain] = [[vocabulary[rows[j]] for j in line] for line in nearest]
    units = []
    for position, row in enumerate(rows):
        token = vocabulary[row]
        lists = {domain: neighbours[domain][position] for domain in domains}
        shared = set.intersection(*(set(v) for v in lists.values()))
        units.append(Unit(token, {d: counts[d][token] for d in domains}, lists, len(shared)))
    return units


def extremes(units, top=10):
    """(most polysemous, most monosemous) units: smallest and largest intersections.

    Ties are broken by the total frequency (most frequent first).
    """

    def total(unit):
        return sum(unit.counts.values())

    polysemous = sorted(units, key=lambda u: (u.intersection, -total(u), u.token))[:top]
    monosemous = sorted(units, key=lambda u: (-u.intersection, -total(u), u.token))[:top]
    return polysemous, monosemous


def neighbour_table(units, shown=5):
    """A Table 7-shaped Markdown table: unit, intersection, neighbours per domain."""
    if not units:
        return ""
    domains = list(units[0].neighbours)
    rows = [
        [unit.token, "%d" % unit.intersection]
        + [" ".join(unit.neighbours[d][:shown]) for d in domains]
        for unit in units
    ]
    return markdown_table(["unit", "shared"] + domains, rows, align="lr" + "l" * len(domains))


def write_csv(units, path):
    """One row per unit: token, intersection, count and neighbours per domain."""
    domains = list(units[0].neighbours)
    with atomic_output(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["unit", "intersection"]
            + ["count_%s" % d for d in domains]
            + ["neighbours_%s" % d for d in domains]
        )
        for unit in units:
            writer.writerow(
                [unit.token, unit.intersection]
                + [unit.counts[d] for d in domains]
                + [" ".join(unit.neighbours[d]) for d in domains]
            )


def plot_intersections(units, k, path):
    """Histogram of the intersection sizes (0..k)."""
    plt = pyplot()
    sizes = [unit.intersection for unit in units]
    figure, axis = plt.subplots(figsize=(6, 3.5))
    axis.hist(sizes, bins=np.arange(-0.5, k + 1.5, 1), edgecolor="black")
    axis.set_xlabel("neighbours shared by all domains (k = %d)" % k)
    axis.set_ylabel("units")
    axis.set_title("Cross-domain neighbour overlap of %d units" % len(units))
    figure.tight_layout()
    save_figure(figure, path, dpi=120)
    plt.close(figure)
