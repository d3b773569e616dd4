"""Between workers: the wire format, the backpressure tracker and the ZeroMQ transport."""
