"""A training run by stock ``onmt-main`` (OpenNMT-tf's own Runner) holds the training lock and
records its domains like ``ldr-main`` (issue 47 item 2), through one wrapper of
``Runner.train`` that leaves ``ldr-main``'s Runner alone (issue 57 item 2). End to end through
``onmt-main``: tests/upstream/test_onmt_main.py."""

import json
import os
from unittest import mock

import opennmt
import tensorflow as tf

from ldr_opennmt import domain_record, locks, models, upstream
from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner
from ldr_opennmt.upstream import patches
from tests import corpus, helpers


class _Recorded(Exception):
    pass


class StockRecordTest(tf.test.TestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.get_temp_dir()
        paths = corpus.write_corpus(os.path.join(self.dir, "data"), count=12)
        self.model_dir = os.path.join(self.dir, "model")
        self.config = {"model_dir": self.model_dir, "data": corpus.data_config(paths)}

    def _runner(self, config=None, runner_class=opennmt.Runner):
        return runner_class(
            lambda: models.ldr_transformer(domain_region_size=2, **helpers.TINY),
            config or self.config,
            auto_config=True,
        )

    def test_records_the_domains_and_regions(self):
        self.assertEqual(
            patches.record_domains(self._runner()), (corpus.DOMAINS, len(corpus.DOMAINS))
        )
        with open(os.path.join(self.model_dir, domain_record.RECORD)) as f:
            self.assertEqual(json.load(f), {"domains": corpus.DOMAINS, "regions": 3})
        # The same list again (a resumed training): kept.
        patches.record_domains(self._runner())
        # Reordered: refused before anything is trained, as under ldr-main.
        config = dict(self.config, data=dict(self.config["data"], domains=corpus.DOMAINS[::-1]))
        with self.assertRaisesRegex(UserError, "domain 'medical' has id 0 in the model"):
            patches.record_domains(self._runner(config))
        self.assertEqual(
            domain_record.read_record(self.model_dir), (corpus.DOMAINS, len(corpus.DOMAINS))
        )

    def test_a_configuration_without_domains_records_nothing(self):
        config = dict(self.config, data=dict(self.config["data"]))
        del config["data"]["domains"]
        self.assertIsNone(patches.record_domains(self._runner(config)))
        self.assertFalse(os.path.exists(os.path.join(self.model_dir, domain_record.RECORD)))

    def test_the_guard_locks_and_records_stock_training_only(self):
        upstream.install()
        self.assertTrue(getattr(opennmt.Runner.train, patches.MARK, False))
        held = []

        def train(self, num_devices=1, with_eval=False, hvd=None):
            held.append(locks.is_held(self.model_dir))
            return "trained"

        wrapped = patches.guard_training(train)
        stock = self._runner()
        with mock.patch.object(patches, "record_domains") as record:
            self.assertEqual(wrapped(stock), "trained")
            record.assert_called_once_with(stock)
            self.assertEqual(held, [True])  # Trained under the lock, released after.
            self.assertFalse(locks.is_held(self.model_dir))
            # Horovod: worker 0 only.
            wrapped(stock, hvd=mock.Mock(rank=lambda: 1))
            self.assertEqual(record.call_count, 1)
            self.assertEqual(held, [True, False])
            # ldr-main's Runner locks and records for itself: the guard leaves it alone.
            ours = object.__new__(Runner)
            with mock.patch.object(type(ours), "model_dir", self.model_dir):
                wrapped(ours)
            self.assertEqual(record.call_count, 1)
            self.assertEqual(held, [True, False, False])


if __name__ == "__main__":
    tf.test.main()
