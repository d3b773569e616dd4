"""The worker runtime: queues, executors, routing and acking. Internal: not public API."""
