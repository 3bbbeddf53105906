"""What the benchmark's tests share: a tiny size, a run's configuration and measurements."""

import argparse

from ldr_experiments.benchmarks import cli, rows

SIZE = rows.make_size(1, 16, 2)


def results(ldr_tokens=96.0, procedure1_ms=200.0, ldr_tf=10.0, ldr_ct2=31.0, dc_ct2=None):
    """Measurements of vanilla and LDR (``dc_ct2``: DC's CTranslate2 model too)."""
    infer = {
        "tf:vanilla": {"sentences_per_s": 10.0},
        "tf:ldr": {"sentences_per_s": ldr_tf},
        "tf:dc": {"sentences_per_s": 10.0},
        "ct2:ldr": {"sentences_per_s": ldr_ct2},
    }
    if dc_ct2 is not None:
        infer["ct2:dc"] = {"sentences_per_s": dc_ct2}
    return {
        "train": {
            "vanilla": {"tokens_per_s": 100.0, "ms_per_step": 100.0},
            "ldr_joint": {"tokens_per_s": ldr_tokens, "ms_per_step": 104.0},
            "ldr_procedure1": {"tokens_per_s": 50.0, "ms_per_step": procedure1_ms},
        },
        "infer": infer,
    }


def config(**kwargs):
    """The configuration of a ``--quick`` run of every row (the registry's)."""
    args = argparse.Namespace(
        quick=True, threads=2, quantization=None, seed=1, parts=["train", "infer"]
    )
    args = cli.resolve_sizes(argparse.Namespace(**vars(args), **{k: None for k in rows.DEFAULTS}))
    result = cli.make_config(args, "/tmp/none")
    result.update(kwargs)
    return result


def selected(families, user_modules=()):
    """The rows that ``--families`` :obj:`families` selects, at :data:`SIZE`."""
    return rows.select_rows(rows.build_rows(SIZE, user_modules), families)
