"""``GET /metrics`` of ``ldr-serve`` (Prometheus's text format)."""

import unittest

from tests.serving import fake_backend


class MetricsTest(fake_backend.AppTestCase):
    def test_metrics(self):
        self.post({"sentences": ["a b"], "domain": "medical"})
        self.post({"sentences": ["a b"], "domain": "law"})
        text = self.client.get("/metrics").text
        self.assertRegex(
            text, r'ldr_serve_requests_total\{domain="medical",route="/translate",status="200"\} \d'
        )
        self.assertRegex(
            text, r'ldr_serve_errors_total\{domain="other",route="/translate",status="422"\} \d'
        )
        self.assertRegex(text, r'ldr_serve_request_seconds_bucket\{domain="medical",le=')
        self.assertRegex(text, r'ldr_serve_batch_size_count\{queue="medical"\} [1-9]')
        self.assertIn("ldr_serve_queued_sentences 0.0", text)
        self.assertRegex(text, r"ldr_serve_model_loads_total \d")


if __name__ == "__main__":
    unittest.main()
