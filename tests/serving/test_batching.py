"""Dynamic batching: jobs grouped into batches, each answered its own, one bad job
isolated."""

import threading
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


if __name__ == "__main__":
    unittest.main()
