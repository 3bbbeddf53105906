"""Tiny exported models and a real ``ldr-serve`` process, shared by the serving tests.

The translation models have random weights (large for the domain weights, so that the
domain visibly changes the output) and raw-text tokenizers; the domain classifier is
trained for a few seconds on sentences with domain cue words, so that it labels them right
(:mod:`tests.builds`, built once per session and shared with ``tests/models/
test_classifier.py``).
"""

import contextlib
import http.client
import io
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import opennmt

from ldr_opennmt import models
from ldr_opennmt.cli import translate as translate_cli
from ldr_opennmt.export import ct2_export
from ldr_opennmt.models import ttm
from tests import builds, corpus, helpers

MAX_LENGTH = 10
TOKENIZATION = {
    "type": "OpenNMTTokenizer",
    "params": {"mode": "aggressive", "joiner_annotate": True},
}
#: Sentences the classifier labels (one cue word of each domain, see
#: :data:`tests.builds.CLASSIFIER_CUES`).
CUE_SENTENCES = {
    "medical": "the patient dose is a tumour.",
    "religious": "the lord and the prophet in the temple",
    "software": "click the file on the server",
}


def run_client(*args, stdin=""):
    """Runs ldr-translate in this process: (exit status, stdout, stderr)."""
    stderr = io.StringIO()
    fake_stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    fake_stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    status = 0
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(fake_stdout):
        sys.stdin, saved_stdin = fake_stdin, sys.stdin
        try:
            translate_cli.main(list(args))
        except SystemExit as e:
            status = e.code
        finally:
            sys.stdin = saved_stdin
        fake_stdout.flush()
        stdout = fake_stdout.buffer.getvalue().decode("utf-8")
    return status, stdout, stderr.getvalue()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tiny_model(directory, family="ldr_transformer", params=None, seed=5, languages=None):
    """A built tiny model of :obj:`family` with random weights and raw-text tokenizers.

    Args:
      languages: ``(source, target)``: the vocabularies are named and placed as those of a
        corpus of ``ldr-data build files`` (``vocab.SRC``, ``vocab.TGT`` beside its
        ``corpus.json``), whose export records the language pair.

    Returns:
      ``(model, data configuration)``.
    """
    corpus_dir = os.path.join(directory, "corpus")
    paths = corpus.write_corpus(corpus_dir, count=20)
    if languages:
        for key, lang in zip(("src_vocab", "tgt_vocab"), languages):
            vocabulary = os.path.join(corpus_dir, "vocab.%s" % lang)
            os.replace(paths[key], vocabulary)
            paths[key] = vocabulary
        with open(os.path.join(corpus_dir, "corpus.json"), "w") as f:
            json.dump(
                {"domains": list(corpus.DOMAINS), "source_lang": languages[0],
                 "target_lang": languages[1]},
                f,
            )  # fmt: skip
    model = helpers.FAMILIES[family]()
    if isinstance(model, models.TTMTransformer):  # Its domain tokens in the vocabulary.
        with open(paths["tgt_vocab"], "a") as f:
            f.write("".join(t + "\n" for t in ttm.domain_tokens(corpus.DOMAINS)))
    data = corpus.data_config(paths)
    data["source_tokenization"] = TOKENIZATION
    data["target_tokenization"] = TOKENIZATION
    model_params = {"beam_width": 1, "maximum_decoding_length": MAX_LENGTH}
    model_params.update(params or {})
    model.initialize(data, params=model_params)
    model.create_variables()
    helpers.randomize_weights(model, seed)
    return model, data


#: The client tests' input sentences and their labels (one per domain, and generic).
CLIENT_SENTENCES = ["the cell is here.", "the lord is here.", "click the file", "the cell"]
CLIENT_LABELS = ["medical", "religious", "software", "generic"]


def client_inputs(directory):
    """Writes ``in.en`` and ``in.domain`` (:data:`CLIENT_SENTENCES`, :data:`CLIENT_LABELS`)
    in :obj:`directory`; returns their paths."""
    paths = os.path.join(directory, "in.en"), os.path.join(directory, "in.domain")
    for path, lines in zip(paths, (CLIENT_SENTENCES, CLIENT_LABELS)):
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    return paths


def ct2_directory(model, directory):
    """``ldr-export ctranslate2`` of :obj:`model` (after saving a checkpoint, as it runs)."""
    model_dir = os.path.join(directory, "model")
    checkpoint = opennmt.utils.checkpoint.Checkpoint(model, model_dir=model_dir)
    checkpoint_path = checkpoint.save(step=1)
    output_dir = os.path.join(directory, "ct2")
    ct2_export.export(model, output_dir, checkpoint_path=checkpoint_path)
    return output_dir


def saved_model(model, directory):
    """The SavedModel export of :obj:`model` (what ``ldr-main export`` writes)."""
    export_dir = os.path.join(directory, "export")
    model.export(export_dir)
    return export_dir


def classifier_export():
    """The tiny domain classifier trained for 80 steps, exported with a tokenizer (built once
    per session, :func:`tests.builds.trained_classifier`)."""
    return builds.trained_classifier()[1]


class ServerProcess:
    """``ldr-serve`` in a subprocess on a free port (:meth:`wait` until it answers)."""

    def __init__(self, model_dir, *options):
        self.port = free_port()
        executable = shutil.which("ldr-serve")
        command = [executable] if executable else [sys.executable, "-m", "ldr_opennmt.cli.serve"]
        command += ["--model_dir", model_dir, "--port", str(self.port), "--log_level", "warning"]
        command += ["--max_decoding_length", str(MAX_LENGTH), "--intra_threads", "1"]
        command += list(options)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
        )
        self.ready = False
        self._printed = ""  # What output_so_far read.

    def wait(self, timeout=180):
        """Waits until ``GET /health`` answers (raises if the server exits first)."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            if self.process.poll() is not None:
                raise AssertionError("ldr-serve exited: %s" % self.process.stdout.read())
            try:
                self.ready = self.get("/health")[0] == 200
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError("ldr-serve did not answer within %d s" % timeout)
                time.sleep(0.2)
        return self

    def stop(self):
        """Stops the server; returns what it printed."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        output = self._printed + self.process.stdout.read()
        self.process.stdout.close()
        return output

    def output_so_far(self):
        """What the server has printed so far (stdout and stderr), without waiting for it to
        end."""
        descriptor = self.process.stdout.fileno()
        chunks = []
        while select.select([descriptor], [], [], 0.2)[0]:
            chunk = os.read(descriptor, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        self._printed += b"".join(chunks).decode("utf-8", "replace")
        return self._printed

    def _request(self, request):
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def get(self, path):
        return self._request("http://127.0.0.1:%d%s" % (self.port, path))

    def post(self, body, path="/translate"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(
            "http://127.0.0.1:%d%s" % (self.port, path),
            data=data,
            headers={"Content-Type": "application/json"},
        )
        return self._request(request)

    def post_head_first(self, body, pause_s, ready=None, path="/translate"):
        """Posts :obj:`body` in two sends: the head (after ``ready()``, if given), then the
        body :obj:`pause_s` later; the request is in progress at the server from its head.

        Returns:
          ``(status, answer)``.
        """
        data = json.dumps(body).encode("utf-8")
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.putrequest("POST", path)
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", str(len(data)))
            if ready is not None:
                ready()
            connection.endheaders()
            time.sleep(pause_s)
            connection.send(data)
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()
