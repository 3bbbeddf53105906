"""Property tests of every route of ``ldr-serve`` from its own OpenAPI schema (schemathesis):
what the schema allows is accepted, what it forbids is refused with a 4xx, every answer has
the documented status, content type and shape, and nothing is a 5xx.

The application runs in process (schemathesis's ASGI transport) over the fake backend of
tests/serving/fake_backend.py, with a classifier and a language pair so that every route can
answer; 25 examples per route and kind of data (valid, invalid).
"""

import contextlib
import unittest

import hypothesis
import schemathesis
from schemathesis import DataGenerationMethod, experimental
from schemathesis.checks import ALL_CHECKS
from starlette.testclient import TestClient

from tests.serving import fake_backend

experimental.OPEN_API_3_1.enable()  # FastAPI writes OpenAPI 3.1 (JSON Schema's own nulls).

APP = fake_backend.app(
    classifier=fake_backend.FakeClassifier(),
    max_sentences=4,
    max_beam_size=4,
    max_sentence_tokens=64,
    source_language="en",
    target_language="fr",
    timeout_s=5.0,
)


@contextlib.asynccontextmanager
async def _lifespan(_):
    # schemathesis's ASGI transport runs the application's lifespan around every call; the
    # application's own would close the server's queues after the first one.
    yield


APP.router.lifespan_context = _lifespan
SCHEMA = schemathesis.from_asgi(
    "/openapi.json",
    APP,
    data_generation_methods=[DataGenerationMethod.positive, DataGenerationMethod.negative],
)
CHECKS = [check for check in ALL_CHECKS if check.__name__ != "ignored_auth"]  # No auth here.


@SCHEMA.parametrize()
@hypothesis.settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck),
    database=None,
)
def test_every_route_follows_its_schema(case):
    response = case.call_asgi()
    case.validate_response(response, checks=CHECKS)


class SchemaAgreesWithValidationTest(unittest.TestCase):
    """Deterministic checks of what random examples may miss: ``null`` is accepted exactly
    where the schema allows it, and unknown fields exactly where it allows them (nowhere)."""

    VALID = {
        "TranslateRequest": {"sentences": ["a b"]},
        "LibreTranslateRequest": {"q": "a b", "source": "en", "target": "fr"},
    }

    def test_null_and_unknown_fields(self):
        client = TestClient(APP)
        schemas = client.get("/openapi.json").json()["components"]["schemas"]
        for name, valid in self.VALID.items():
            schema = schemas[name]
            self.assertIs(schema["additionalProperties"], False, name)
            response = client.post("/translate", json=dict(valid, unknown=1))
            self.assertEqual(response.status_code, 422, response.text)
            self.assertRegex(response.json()["error"], "^unknown: unknown field")
            for field, prop in schema["properties"].items():
                nullable = {"type": "null"} in prop.get("anyOf", ())
                response = client.post("/translate", json=dict(valid, **{field: None}))
                self.assertEqual(response.status_code, 200 if nullable else 422, (name, field))
        items = schemas["TranslateRequest"]["properties"]["domains"]["anyOf"][0]["items"]
        self.assertIn({"type": "null"}, items["anyOf"])
        response = client.post("/translate", json={"sentences": ["a"], "domains": [None]})
        self.assertEqual(response.status_code, 200, response.text)
