"""A training run by stock ``onmt-main`` (OpenNMT-tf's own Runner) records its domains like
``ldr-main`` (issue 47 item 2). End to end through ``onmt-main``: tests/test_onmt_main.py."""

import json
import os
from unittest import mock

import opennmt
import tensorflow as tf

from ldr_opennmt import domain_record, hooks, models, stock_record
from ldr_opennmt.errors import UserError
from ldr_opennmt.training.runner import Runner
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
            stock_record.record_domains(self._runner()), (corpus.DOMAINS, len(corpus.DOMAINS))
        )
        with open(os.path.join(self.model_dir, domain_record.RECORD)) as f:
            self.assertEqual(json.load(f), {"domains": corpus.DOMAINS, "regions": 3})
        # The same list again (a resumed training): kept.
        stock_record.record_domains(self._runner())
        # Reordered: refused before anything is trained, as under ldr-main.
        config = dict(self.config, data=dict(self.config["data"], domains=corpus.DOMAINS[::-1]))
        with self.assertRaisesRegex(UserError, "domain 'medical' has id 0 in the model"):
            stock_record.record_domains(self._runner(config))
        self.assertEqual(
            domain_record.read_record(self.model_dir), (corpus.DOMAINS, len(corpus.DOMAINS))
        )

    def test_a_configuration_without_domains_records_nothing(self):
        config = dict(self.config, data=dict(self.config["data"]))
        del config["data"]["domains"]
        self.assertIsNone(stock_record.record_domains(self._runner(config)))
        self.assertFalse(os.path.exists(os.path.join(self.model_dir, domain_record.RECORD)))

    def test_installed_on_stock_training_only(self):
        # The package's hooks (ldr_opennmt.hooks.install) install it on OpenNMT-tf's
        # Runner.train.
        hooks.install()
        self.assertTrue(getattr(opennmt.Runner.train, "_ldr_opennmt_record", False))

        def train(self, num_devices=1, with_eval=False, hvd=None):
            return "trained"

        wrapped = stock_record.wrap(train)
        stock = self._runner()
        with mock.patch.object(stock_record, "record_domains") as record:
            self.assertEqual(wrapped(stock), "trained")
            record.assert_called_once_with(stock)
            # Horovod: worker 0 only.
            wrapped(stock, hvd=mock.Mock(rank=lambda: 1))
            self.assertEqual(record.call_count, 1)
            # ldr-main's Runner (a subclass) writes its own record.
            wrapped(object.__new__(Runner))
            self.assertEqual(record.call_count, 1)


if __name__ == "__main__":
    tf.test.main()
