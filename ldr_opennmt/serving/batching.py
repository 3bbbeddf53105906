"""Dynamic batching for ``ldr-serve``: the jobs of one queue grouped into batches.

A :class:`Job` is one request's sentences for one queue (a domain's CTranslate2 model, the
SavedModel, the domain classifier). A :class:`BatchQueue` has worker threads that each take
the oldest job, then wait for more jobs with the same key (the decoding options, which one
call must share) until the batch holds ``max_batch_size`` sentences or the oldest job came
``max_wait_ms`` ago (a job that queued while the workers were busy does not wait again), and
run the batch in one call. A job's sentences always go into one batch, whole (a job larger
than ``max_batch_size`` runs alone), and each job gets back exactly its own results, in its
order. A job whose request gave up (timed out) before its batch started is cancelled and
not run.

A batch waits for more jobs only when more may come: with an :class:`Activity` (the server's:
the HTTP protocol counts the requests in progress, the queues their jobs), a batch does not
wait when every request in progress already has its jobs queued or running (one client's
request does not wait ``max_wait_ms`` for nothing; issue 58).

A batch that fails is run again one job at a time: a job that fails alone gets the error, the
others their results, so that one bad input cannot fail the requests batched with it.
"""

import collections
import concurrent.futures
import threading
import time


class Job:
    """One request's sentences for one queue, run together in one batch.

    Attributes:
      items: The sentences' inputs (what the queue's ``run_batch`` takes, one per sentence).
      key: Jobs of the same key may share a batch.
      future: Set to the list of results (one per item) or to the batch's exception.
    """

    def __init__(self, items, key=None):
        self.items = list(items)
        self.key = key
        self.future = concurrent.futures.Future()
        self.created = time.monotonic()


class Activity:
    """Requests in progress and jobs not yet done, shared by a server's queues: whether a
    batch may expect more jobs.

    The HTTP protocol (:class:`ldr_opennmt.serving.http_io.H11Protocol`) counts a request from
    its head to its answer; each queue counts a job from :meth:`BatchQueue.put` to its
    result. Until something counts requests (:meth:`track_requests`), more jobs may always
    come (a batch waits ``max_wait_ms``, as without an activity).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self.tracking = False
        self.requests = 0
        self.jobs = 0

    def track_requests(self):
        """Says that requests are counted (:meth:`request_started`, :meth:`request_done`)."""
        self.tracking = True

    def request_started(self):
        with self._lock:
            self.requests += 1

    def request_done(self):
        with self._lock:
            self.requests -= 1

    def job_queued(self, job):
        """Counts :obj:`job` until its future is done (a result, an error, cancelled)."""
        with self._lock:
            self.jobs += 1
        job.future.add_done_callback(self._job_done)

    def _job_done(self, _):
        with self._lock:
            self.jobs -= 1

    def expect_more(self):
        """Whether a request in progress may still queue a job: more requests than jobs
        (``True`` while requests are not counted)."""
        with self._lock:
            return not self.tracking or self.requests > self.jobs


class BatchQueue:
    """Pending jobs and the worker threads that batch and run them.

    Args:
      name: The queue's name (its threads' names, the statistics).
      run_batch: ``run_batch(key, items) -> results``: runs one batch (the items of its
        jobs, in order) and returns one result per item. If it raises, each job of the
        batch is run alone; a job that still fails gets the exception; later batches run.
      max_batch_size: Most items per batch (a larger job runs alone).
      max_wait_ms: How long a batch waits for more jobs of its key.
      threads: Worker threads (batches run at once).

    Attributes:
      activity: An :class:`Activity` (``None``: a batch always waits ``max_wait_ms`` for
        more jobs while it has room).
    """

    def __init__(self, name, run_batch, max_batch_size, max_wait_ms, threads=1):
        self.name = name
        self.run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.max_wait_ms = max_wait_ms
        self.jobs = collections.deque()
        self.condition = threading.Condition()
        self.closed = False
        self.batches = 0
        self.sentences = 0
        self.largest_batch = 0
        self.busy_s = 0.0
        self.failed_batches = 0
        #: ``on_batch(name, sentences, seconds)``, called after each batch run (metrics).
        self.on_batch = None
        self.activity = None
        self.threads = [
            threading.Thread(target=self._work, name="ldr-serve-%s-%d" % (name, i), daemon=True)
            for i in range(threads)
        ]
        for thread in self.threads:
            thread.start()

    def put(self, job):
        """Queues :obj:`job` (its future is set once its batch has run)."""
        with self.condition:
            if self.activity is not None:
                self.activity.job_queued(job)
            self.jobs.append(job)
            self.condition.notify_all()

    def close(self):
        """Stops the workers once their current batch is done."""
        with self.condition:
            self.closed = True
            self.condition.notify_all()
        for thread in self.threads:
            thread.join(timeout=10)

    def _take(self):
        """The next batch: the oldest job, then jobs of its key that arrive within
        ``max_wait_ms`` while more may come (:attr:`activity`), up to ``max_batch_size``
        items (``None`` once closed)."""
        with self.condition:
            while not self.jobs and not self.closed:
                self.condition.wait()
            if not self.jobs:
                return None
            first = self.jobs.popleft()
            batch, size = [first], len(first.items)
            # No job waits for others longer than max_wait_ms after it came: one that queued
            # while the workers were busy is run with the jobs already there.
            deadline = first.created + self.max_wait_ms / 1000.0
            while size < self.max_batch_size and not self.closed:
                match = next((job for job in self.jobs if job.key == first.key), None)
                if match is not None:
                    if size + len(match.items) > self.max_batch_size:
                        break
                    self.jobs.remove(match)
                    batch.append(match)
                    size += len(match.items)
                    continue
                if self.activity is not None and not self.activity.expect_more():
                    break  # Every request in progress has its jobs: none to wait for.
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.condition.wait(remaining)
            return batch

    def _run(self, jobs):
        """Runs :obj:`jobs` in one batch and sets their futures (raises if it fails)."""
        items = [item for job in jobs for item in job.items]
        start = time.monotonic()
        results = self.run_batch(jobs[0].key, items)
        seconds = time.monotonic() - start
        with self.condition:
            self.busy_s += seconds
            self.batches += 1
            self.sentences += len(items)
            self.largest_batch = max(self.largest_batch, len(items))
        if self.on_batch is not None:
            try:
                self.on_batch(self.name, len(items), seconds)
            except Exception:  # pylint: disable=broad-except
                pass  # Metrics never fail a batch.
        offset = 0
        for job in jobs:
            job.future.set_result(list(results[offset : offset + len(job.items)]))
            offset += len(job.items)

    def _work(self):
        while True:
            batch = self._take()
            if batch is None:
                return
            # Jobs whose request timed out were cancelled: not run.
            batch = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if not batch:
                continue
            try:
                self._run(batch)
                continue
            except Exception as e:  # pylint: disable=broad-except
                with self.condition:
                    self.failed_batches += 1
                if len(batch) == 1:
                    batch[0].future.set_exception(e)
                    continue
            # One job may have failed the batch: each alone, so that the others are answered.
            for job in batch:
                try:
                    self._run([job])
                except Exception as e:  # pylint: disable=broad-except
                    with self.condition:
                        self.failed_batches += 1
                    job.future.set_exception(e)

    def stats(self):
        """Batches and sentences run, the largest batch, the seconds spent running batches
        (all workers together), and the jobs waiting."""
        with self.condition:
            return {
                "batches": self.batches,
                "sentences": self.sentences,
                "largest_batch": self.largest_batch,
                "busy_s": round(self.busy_s, 3),
                "failed_batches": self.failed_batches,
                "queued_jobs": len(self.jobs),
            }
