"""Dynamic batching: jobs grouped into batches, each answered its own, one bad job
isolated."""

import threading
import time
import unittest

from ldr_opennmt.serving import batching


def _run_batch(calls):
    """A run_batch that doubles numbers and fails the whole batch on a string."""

    def run(key, items):
        calls.append(list(items))
        if any(isinstance(item, str) for item in items):
            raise ValueError("bad item in the batch")
        return [2 * item for item in items]

    return run


class BatchQueueTest(unittest.TestCase):
    def _queue(self, calls, **kwargs):
        queue = batching.BatchQueue("test", _run_batch(calls), 64, 200.0, **kwargs)
        self.addCleanup(queue.close)
        return queue

    def test_jobs_share_a_batch_and_get_their_own_results(self):
        calls = []
        queue = self._queue(calls)
        jobs = [batching.Job([i, i + 10]) for i in range(4)]
        for job in jobs:
            queue.put(job)
        results = [job.future.result(timeout=10) for job in jobs]
        self.assertEqual(results, [[2 * i, 2 * (i + 10)] for i in range(4)])
        self.assertEqual(len(calls), 1)  # All within max_wait_ms: one batch.
        self.assertEqual(queue.stats()["largest_batch"], 8)

    def test_one_bad_job_does_not_fail_the_jobs_batched_with_it(self):
        # Several clients at once, one of them bad: the batch fails, each job is run
        # again alone, and only the bad one gets the error.
        calls, seen = [], []
        queue = self._queue(calls)
        queue.on_batch = lambda name, size, seconds: seen.append((name, size))
        jobs = [batching.Job([1, 2]), batching.Job([3, "bad"]), batching.Job([5])]
        barrier = threading.Barrier(len(jobs))

        def _client(job):
            barrier.wait()
            queue.put(job)

        threads = [threading.Thread(target=_client, args=(job,)) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(jobs[0].future.result(timeout=10), [2, 4])
        self.assertEqual(jobs[2].future.result(timeout=10), [10])
        with self.assertRaisesRegex(ValueError, "bad item"):
            jobs[1].future.result(timeout=10)
        self.assertEqual(len(calls[0]), 5)  # The shared batch, then each job alone.
        self.assertEqual(sorted(map(len, calls[1:])), [1, 2, 2])
        stats = queue.stats()
        self.assertEqual((stats["failed_batches"], stats["batches"]), (2, 2))
        self.assertEqual(sorted(seen), [("test", 1), ("test", 2)])  # Successful batches only.
        # The queue goes on.
        job = batching.Job([7])
        queue.put(job)
        self.assertEqual(job.future.result(timeout=10), [14])

    def test_a_metrics_callback_that_fails_does_not_fail_the_batch(self):
        queue = self._queue([])
        queue.on_batch = lambda *args: 1 / 0
        job = batching.Job([4])
        queue.put(job)
        self.assertEqual(job.future.result(timeout=10), [8])


class ActivityTest(unittest.TestCase):
    """A batch waits for more jobs only while a request in progress may still queue one."""

    # A minute: a batch that waited for it would be unmistakable, whatever the machine's load
    # (the bounds below are 30 s).
    def _queue(self, calls, activity, max_wait_ms=60000.0):
        queue = batching.BatchQueue("test", _run_batch(calls), 64, max_wait_ms)
        queue.activity = activity
        self.addCleanup(queue.close)
        return queue

    def test_a_lone_request_does_not_wait_for_a_batch_to_fill(self):
        # Issue 58: one client's request waited --max_wait_ms for requests that did not exist.
        activity = batching.Activity()
        activity.track_requests()
        queue = self._queue([], activity)
        activity.request_started()
        job = batching.Job([3])
        start = time.monotonic()
        queue.put(job)
        self.assertEqual(job.future.result(timeout=10), [6])
        self.assertLess(time.monotonic() - start, 30.0)  # Not max_wait_ms (60 s).
        activity.request_done()
        self.assertEqual((activity.requests, activity.jobs), (0, 0))

    def test_a_batch_waits_for_a_request_in_progress(self):
        calls = []
        activity = batching.Activity()
        activity.track_requests()
        queue = self._queue(calls, activity)
        activity.request_started()
        activity.request_started()  # Its job comes later.
        first, second = batching.Job([1]), batching.Job([2])
        queue.put(first)
        time.sleep(0.2)
        self.assertFalse(first.future.done())  # It waits: one more request in progress.
        start = time.monotonic()
        queue.put(second)
        self.assertEqual(first.future.result(timeout=10), [2])
        self.assertEqual(second.future.result(timeout=10), [4])
        self.assertLess(time.monotonic() - start, 30.0)  # Run once every request had its job.
        self.assertEqual(calls, [[1, 2]])
        self.assertEqual(activity.jobs, 0)

    def test_without_counted_requests_a_batch_waits_as_before(self):
        calls = []
        # 2 s of waiting: the second job, put 50 ms after the first, joins its batch even on
        # a loaded machine.
        queue = self._queue(calls, batching.Activity(), max_wait_ms=2000.0)
        first, second = batching.Job([1]), batching.Job([2])
        queue.put(first)
        time.sleep(0.05)
        queue.put(second)
        self.assertEqual(second.future.result(timeout=30), [4])
        self.assertEqual(calls, [[1, 2]])

    def test_a_cancelled_job_is_no_longer_counted(self):
        activity = batching.Activity()
        job = batching.Job([1])
        activity.job_queued(job)
        self.assertEqual(activity.jobs, 1)
        job.future.cancel()
        self.assertEqual(activity.jobs, 0)


if __name__ == "__main__":
    unittest.main()
