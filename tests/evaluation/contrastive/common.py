"""What the tests of the contrastive test share: the tiny corpus' training pairs."""

import collections

from tests import corpus as tiny


def pairs(count=30, seed=0, domains=tiny.DOMAINS):
    """``{domain: [(english, french), ...]}`` of the tiny corpus."""
    return collections.OrderedDict((d, tiny.make_pairs(d, count, seed)) for d in domains)
