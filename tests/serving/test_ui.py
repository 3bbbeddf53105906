"""The page of ``ldr-serve`` (``GET /``, :mod:`ldr_opennmt.serving.ui`; issue 58).

In process: the page and its files, their headers, nothing from another host, outside the
OpenAPI schema, and ``--no-ui`` (404). In a real browser (headless Chromium from Debian,
``/usr/bin/chromium``, driven by Playwright; skipped where either is missing): a real
``ldr-serve`` application over HTTP, with a model whose domains translate a word differently
and a classifier, typed into by keyboard; the answers are read from the page, the compare
view marks the word that differs, the page fits a phone's width, and a screenshot is taken
(written over ``docs/_static/serving-page.png``, which docs/serving.md shows, only with
``LDR_UPDATE_SCREENSHOT=1``).
"""

import contextlib
import os
import re
import shutil
import tempfile
import unittest

from starlette.testclient import TestClient

from ldr_opennmt.cli import serve as serve_cli
from ldr_opennmt.data import terms
from ldr_opennmt.serving import ui
from tests.serving import fake_backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCREENSHOT = os.path.join(ROOT, "docs", "_static", "serving-page.png")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # The test extra is not installed.
    sync_playwright = None

#: Word for word, English to French; a domain's own words replace the generic ones.
LEXICON = {
    "generic": {
        "a": "un",
        "bug": "insecte",
        "is": "est",
        "in": "dans",
        "the": "le",
        "code": "code",
        "here": "ici",
    },
    "medical": {"bug": "microbe"},
    "software": {"bug": "bogue"},
}
SENTENCES = ["a bug is in the code", "the code is here"]


class LexiconModel(fake_backend.FakeModel):
    """A domain's model that translates word for word with :data:`LEXICON`."""

    def translate(self, tokens, beam_size=1, num_hypotheses=1, **kwargs):
        words = dict(LEXICON["generic"], **LEXICON.get(self.name, {}))
        results = []
        for sentence in tokens:
            # A glossary's annotation (｟term｠ SOURCE ｟trans｠ TARGET ｟/term｠): TARGET, as a
            # model trained with terminology writes it.
            translation, skipping, copying = [], False, False
            for token in sentence:
                if token == terms.START:
                    skipping = True
                elif token == terms.TRANSLATION:
                    skipping, copying = False, True
                elif token == terms.END:
                    copying = False
                elif copying:
                    translation.append(token)
                elif not skipping:
                    translation.append(words.get(token.lower(), token))
            results.append(([translation] * num_hypotheses, [-1.0] * num_hypotheses))
        return results


class CodeClassifier(fake_backend.FakeClassifier):
    """``software`` (0.92) for a text about code, else ``medical`` (0.9)."""

    def __call__(self, token_lists):
        results = []
        for tokens in token_lists:
            posterior = [0.08, 0.92] if "code" in tokens else [0.9, 0.1]
            results.append((self.domains[posterior.index(max(posterior))], posterior))
        return results


def lexicon_app(classifier=CodeClassifier(), **kwargs):
    """The application over :class:`LexiconModel` s, English to French, at most 12 tokens a
    sentence."""
    models = {name: LexiconModel(name) for name in fake_backend.DOMAINS}
    return fake_backend.app(
        models=models,
        classifier=classifier,
        source_language="en",
        target_language="fr",
        max_sentence_tokens=12,
        **kwargs,
    )


def guard_app():
    """:func:`lexicon_app` as an export with a domain guard (" pat" says medical, "file"
    software, sure from 0.9) and calibrated confidence (software 27%, below its 50%
    threshold; generic 88%)."""
    from ldr_opennmt.serving import backends  # pylint: disable=import-outside-toplevel
    from ldr_opennmt.serving import confidence, domain_guard  # pylint: disable=C0415
    from tests.serving import test_domain_guard  # pylint: disable=import-outside-toplevel

    options = fake_backend.options(
        source_language="en", target_language="fr", max_sentence_tokens=12
    )
    models = {name: LexiconModel(name) for name in fake_backend.DOMAINS}
    backend = backends.CTranslate2Backend(options, models=models)
    backend.guard = domain_guard.DomainGuard(test_domain_guard.GUARD)
    backend.terminology_refusal = None  # Trained with terminology: glossaries applied.
    calibration = test_domain_guard.CALIBRATION
    backend.calibrations = {
        "software": confidence.DomainConfidence(dict(calibration, intercept=-1.0), "software"),
        "generic": confidence.DomainConfidence(dict(calibration, intercept=2.0), "generic"),
    }
    return fake_backend.app_lib.create_app(options, backend=backend)


class PageTest(unittest.TestCase):
    """The page's routes in process."""

    @classmethod
    def setUpClass(cls):
        cls.client = TestClient(lexicon_app()).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.client.__exit__(None, None, None)

    def test_the_page_and_its_files(self):
        for path, (name, media_type) in ui.FILES.items():
            response = self.client.get(path)
            self.assertEqual(response.status_code, 200, path)
            self.assertEqual(response.headers["content-type"], media_type + "; charset=utf-8")
            self.assertEqual(response.content, ui.read_asset(name))
            self.assertEqual(
                response.headers["content-security-policy"], ui.CONTENT_SECURITY_POLICY
            )
            self.assertEqual(response.headers["x-content-type-options"], "nosniff")
        page = self.client.get("/").text
        self.assertIn('<script src="ui/page.js" defer></script>', page)
        self.assertIn('<link rel="stylesheet" href="ui/page.css">', page)
        # Labels for the controls a person uses.
        for control in ("text", "domain"):
            self.assertRegex(page, '<label for="%s">' % control)

    def test_nothing_comes_from_another_host(self):
        policy = ui.CONTENT_SECURITY_POLICY
        self.assertIn("default-src 'none'", policy)
        for directive in policy.split("; ")[1:]:
            sources = directive.split()[1:]
            self.assertTrue(set(sources) <= {"'self'", "data:", "'none'"}, directive)
        for name, _ in ui.FILES.values():
            text = ui.read_asset(name).decode("utf-8")
            self.assertNotRegex(text, r"(?i)(https?:)?//[a-z0-9.-]+\.[a-z]", name)
            self.assertNotRegex(text, r"(?i)@import|url\(", name)
        # The script calls only the documented routes, with paths relative to the page.
        script = ui.read_asset("page.js").decode("utf-8")
        called = set(re.findall(r'call\("([a-z_/]+)"', script))
        self.assertEqual(called, {"domains", "languages", "translate", "detect_domain"})
        schema = self.client.get("/openapi.json").json()["paths"]
        for route in called:
            self.assertIn("/" + route, schema)

    def test_not_in_the_api_schema(self):
        schema = self.client.get("/openapi.json").json()["paths"]
        for path in ui.FILES:
            self.assertNotIn(path, schema)

    def test_no_ui(self):
        with TestClient(lexicon_app(ui=False)) as client:
            for path in ui.FILES:
                response = client.get(path)
                self.assertEqual(response.status_code, 404, path)
                self.assertEqual(list(response.json()), ["error"])
                self.assertTrue(response.json()["error"].startswith("not found: GET %s" % path))
            self.assertEqual(client.get("/domains").status_code, 200)

    def test_the_command_line_option(self):
        self.assertTrue(serve_cli.parse_args(["--model_dir", "x"]).ui)
        for flag in ("--no-ui", "--no_ui"):
            self.assertFalse(serve_cli.parse_args(["--model_dir", "x", flag]).ui)
        # ldr-serve passes it to the server's options.
        served = []

        class _App:
            @staticmethod
            def bind(host, port):
                return None

            @staticmethod
            def serve(options, **kwargs):
                served.append(options)
                return 0

        saved = serve_cli._serving_module
        serve_cli._serving_module = lambda name: _App if name == "app" else saved(name)
        try:
            serve_cli.run(serve_cli.parse_args(["--model_dir", "x", "--no-ui"]))
            serve_cli.run(serve_cli.parse_args(["--model_dir", "x"]))
        finally:
            serve_cli._serving_module = saved
        self.assertEqual([options.ui for options in served], [False, True])

    def test_the_files_are_package_data(self):
        with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
            self.assertIn('"ldr_opennmt.serving": ["%s/*"]' % ui.ASSETS, f.read())
        folder = os.path.join(ROOT, "ldr_opennmt", "serving", ui.ASSETS)
        self.assertEqual(sorted(os.listdir(folder)), sorted(name for name, _ in ui.FILES.values()))

    def test_the_docs_show_the_page_and_the_option(self):
        with open(os.path.join(ROOT, "docs", "serving.md"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn("](_static/serving-page.png)", text)
        self.assertIn("--no-ui", text)
        self.assertTrue(os.path.isfile(SCREENSHOT))


@unittest.skipIf(sync_playwright is None, "no Playwright for Python (pip install playwright)")
@unittest.skipUnless(
    os.access(CHROMIUM, os.X_OK), "no Chromium (apt-get install chromium: /usr/bin/chromium)"
)
class BrowserTest(unittest.TestCase):
    """The page in headless Chromium, over HTTP, with the keyboard."""

    def test_translate_switch_domains_and_compare(self):
        with contextlib.ExitStack() as stack:
            server = stack.enter_context(fake_backend.LiveServer(lexicon_app()))
            plain = stack.enter_context(fake_backend.LiveServer(lexicon_app(classifier=None)))
            guarded = stack.enter_context(fake_backend.LiveServer(guard_app()))
            playwright = stack.enter_context(sync_playwright())
            context = playwright.chromium.launch_persistent_context(
                stack.enter_context(tempfile.TemporaryDirectory()),  # A fresh profile.
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1000, "height": 640},
                device_scale_factor=1,
            )
            stack.callback(context.close)
            context.set_default_timeout(10000)
            # Every request the pages make, to these servers only (any other is refused).
            ours, elsewhere = (server.url + "/", plain.url + "/", guarded.url + "/"), []

            def _route(route):
                if route.request.url.startswith(ours):
                    route.continue_()
                else:
                    elsewhere.append(route.request.url)
                    route.abort()

            context.route("**/*", _route)
            self._check_page(context, server.url)
            self._check_without_classifier(context, plain.url)
            self._check_guard_and_confidence(context, guarded.url)
            self.assertEqual(elsewhere, [])

    def _check_guard_and_confidence(self, context, url):
        """An export with a domain guard and calibrated confidence: auto is the guard's pick
        (generic when unsure, said why), and each translation shows its confidence."""
        page = context.new_page()
        page.goto(url + "/")
        page.wait_for_selector("#domain:enabled")
        self.assertEqual(
            page.inner_text("#domain option[value=auto]"),
            "auto: the guard's pick (generic when unsure)",
        )
        model = page.inner_text("#model")
        self.assertIn("with the export's domain guard (generic below 90%)", model)
        self.assertIn("calibrated confidence", model)
        page.fill("#text", "open the file\n" + SENTENCES[1])
        page.click("#translate")
        cells = self._cells(page, "Translation")
        self.assertEqual([c["domain"] for c in cells], ["software", "generic"])
        self.assertIn("guard's pick", cells[0]["title"])
        self.assertIn("domain chosen: guard", cells[0]["title"])
        self.assertIn("low confidence 27%", cells[0]["title"])
        self.assertIn("domain chosen: guard: medical 0.50 below 0.90, generic", cells[1]["title"])
        self.assertIn("confidence 88%", cells[1]["title"])
        self.assertNotIn("low confidence", cells[1]["title"])
        low = page.eval_on_selector_all(".confidence.low", "nodes => nodes.length")
        self.assertEqual(low, 1)
        # The glossary: its field is shown, its terms applied and marked in the translation.
        self.assertTrue(page.is_visible("#glossary"))
        page.fill("#glossary", "bug = bogue\nnot a line")
        page.click("#translate")
        page.wait_for_selector("#error:not([hidden])")
        self.assertEqual(page.inner_text("#error"), "Glossary, line 2: expected source = target")
        page.fill("#glossary", "bug = bogue")
        page.fill("#text", SENTENCES[0])
        page.select_option("#domain", "medical")
        page.click("#translate")
        cells = self._cells(page, "Translation", "un bogue")
        self.assertEqual(cells[0]["text"], "un bogue est dans le code")
        self.assertEqual(
            page.eval_on_selector_all("mark.term", "n => n.map(m => m.textContent)"), ["bogue"]
        )
        page.fill("#glossary", "")
        # A domain without a calibration shows none.
        page.select_option("#domain", "medical")
        page.click("#translate")
        cells = self._cells(page, "Translation", "domain chosen: given")
        self.assertEqual(cells[0]["domain"], "medical")
        self.assertNotIn("confidence", cells[0]["title"])
        page.close()

    def _check_without_classifier(self, context, url):
        """A server without a classifier: no auto, generic by default, no pick."""
        page = context.new_page()
        page.goto(url + "/")
        page.wait_for_selector("#domain:enabled")
        options = page.eval_on_selector_all("#domain option", "nodes => nodes.map(n => n.value)")
        self.assertEqual(options, ["medical", "software", "generic"])
        self.assertEqual(page.input_value("#domain"), "generic")
        page.fill("#text", SENTENCES[0])
        page.click("#compare")
        cells = self._cells(page, "Every domain compared")
        self.assertEqual([c["marked"] for c in cells], [["microbe"], ["bogue"], ["insecte"]])
        self.assertEqual([c["picked"] for c in cells], [False] * 3)
        self.assertEqual(page.locator(".classifier").count(), 0)
        self.assertFalse(page.is_visible("#pick-note"))
        page.close()

    def _check_page(self, context, url):
        """The page with a classifier: keyboard, domains, compare view, phone, errors."""
        problems = []
        page = context.pages[0] if context.pages else context.new_page()
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.on(
            "console",
            lambda message: problems.append(message.text) if message.type == "error" else None,
        )
        page.goto(url + "/")
        page.wait_for_selector("#domain:enabled")
        options = page.eval_on_selector_all("#domain option", "nodes => nodes.map(n => n.value)")
        self.assertEqual(options, ["auto", "medical", "software", "generic"])
        self.assertEqual(page.input_value("#domain"), "auto")
        self.assertIn("en to fr", page.inner_text("#model"))

        # The keyboard: the text box has the focus, then the domain, then the buttons.
        self.assertEqual(page.evaluate("document.activeElement.id"), "text")
        focus = []
        for _ in range(3):
            page.keyboard.press("Tab")
            focus.append(page.evaluate("document.activeElement.id"))
        self.assertEqual(focus, ["domain", "translate", "compare"])
        page.focus("#text")
        page.keyboard.type(SENTENCES[0])
        page.keyboard.press("Enter")  # A new line: one sentence per line.
        page.keyboard.type(SENTENCES[1])

        # Ctrl+Enter: the classifier's pick, and its confidence.
        page.keyboard.press("Control+Enter")
        cells = self._cells(page, "Translation")
        self.assertEqual(
            [(c["domain"], c["text"]) for c in cells],
            [("software", "un bogue est dans le code"), ("software", "le code est ici")],
        )
        self.assertIn("classifier's pick, 92%", cells[0]["title"])
        self.assertIn("domain chosen: classifier", cells[0]["title"])

        # Another domain: Enter on the domain list translates.
        page.select_option("#domain", "medical")
        page.focus("#domain")
        page.keyboard.press("Enter")
        cells = self._cells(page, "Translation", "un microbe")
        self.assertEqual(
            [(c["domain"], c["text"]) for c in cells],
            [("medical", "un microbe est dans le code"), ("medical", "le code est ici")],
        )
        self.assertIn("domain chosen: given", cells[0]["title"])
        page.select_option("#domain", "generic")
        page.click("#translate")
        cells = self._cells(page, "Translation", "un insecte")
        self.assertEqual(cells[0]["text"], "un insecte est dans le code")

        # Ctrl+Shift+Enter: every domain side by side, the word that differs marked.
        page.focus("#text")
        page.keyboard.press("Control+Shift+Enter")
        cells = self._cells(page, "Every domain compared")
        by_domain = {(c["sentence"], c["domain"]): c for c in cells}
        first = {d: by_domain[(0, d)] for d in ("medical", "software", "generic")}
        self.assertEqual(
            {d: (c["text"], c["marked"]) for d, c in first.items()},
            {
                "medical": ("un microbe est dans le code", ["microbe"]),
                "software": ("un bogue est dans le code", ["bogue"]),
                "generic": ("un insecte est dans le code", ["insecte"]),
            },
        )
        self.assertEqual([c["marked"] for c in cells if c["sentence"] == 1], [[], [], []])
        self.assertEqual([d for d, c in first.items() if c["picked"]], ["software"])
        self.assertIn("classifier's pick, 92%", first["software"]["title"])
        self.assertIn(
            "The classifier picks software (92%).", page.inner_text(".sentence .classifier")
        )
        self.assertEqual(
            page.inner_text("#status"), "Compared 3 domains on 2 sentences: they differ on 1."
        )
        # The screenshot docs/serving.md shows: written to a temporary folder, and over the
        # tracked docs/_static/serving-page.png only on request (LDR_UPDATE_SCREENSHOT=1).
        shots = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, shots, ignore_errors=True)
        shot = os.path.join(shots, "serving-page.png")
        page.screenshot(path=shot, full_page=True)
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        if os.environ.get("LDR_UPDATE_SCREENSHOT") == "1":
            partial = SCREENSHOT + ".partial.png"
            shutil.copyfile(shot, partial)
            os.replace(partial, SCREENSHOT)  # Whole: the docs build may read it meanwhile.

        # A phone's width: nothing wider than the window, the domains one under another.
        page.set_viewport_size({"width": 375, "height": 740})
        self.assertLessEqual(
            page.evaluate("document.documentElement.scrollWidth"),
            page.evaluate("document.documentElement.clientWidth"),
        )
        lefts = page.eval_on_selector_all(
            ".sentence:first-child .cell", "nodes => nodes.map(n => n.getBoundingClientRect().x)"
        )
        self.assertEqual(len(set(lefts)), 1, lefts)

        self.assertEqual(problems, [])

        # The server's one-line error, shown (Chromium logs the 422 as a console error).
        page.fill("#text", " ".join(["bug"] * 13))
        page.click("#translate")
        page.wait_for_selector("#error:not([hidden])")
        self.assertEqual(
            page.inner_text("#error"),
            "POST /translate: sentences[0]: 13 tokens, more than this server's limit of 12",
        )

    def _cells(self, page, title, contains=""):
        """The translations on the page once it shows :obj:`title` (and :obj:`contains`)."""
        page.wait_for_function(
            "([title, text]) => !document.querySelector('#results').hidden"
            " && !document.querySelector('#results').hasAttribute('aria-busy')"
            " && document.querySelector('#results-title').textContent === title"
            " && document.querySelector('#output').textContent.includes(text)",
            arg=[title, contains],
        )
        return page.evaluate("""() => [...document.querySelectorAll('#output .sentence')].flatMap(
            (sentence, i) => [...sentence.querySelectorAll('.cell')].map(cell => ({
              sentence: i,
              domain: cell.dataset.domain,
              title: cell.querySelector('dt').textContent,
              text: cell.querySelector('dd').textContent,
              marked: [...cell.querySelectorAll('mark.diff')].map(m => m.textContent),
              picked: cell.classList.contains('picked'),
            })))""")


if __name__ == "__main__":
    unittest.main()
