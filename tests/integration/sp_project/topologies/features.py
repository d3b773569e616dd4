from parts.components import BatchCount, DirectSink, Router, Sentences, Split, TicklessCount
from streamparse import Grouping, Topology


class Features(Topology):
    config = {"topology.worker.childopts": "-Xmx768m"}  # Storm's, of no use in stormish
    sentences = Sentences.spec()
    # a replay goes to the task that failed it: each task fails "fail me once" once
    split = Split.spec(inputs={sentences: Grouping.fields("sentence")}, par=2)
    batch_count = BatchCount.spec(
        inputs={split: Grouping.fields("word")},
        par=2,
        config={"topology.tick.tuple.freq.secs": 0.1},
    )
    tickless_count = TicklessCount.spec(inputs={split: Grouping.fields("word")})
    router = Router.spec(inputs=[batch_count])
    direct_sink = DirectSink.spec(inputs={router["direct"]: Grouping.DIRECT}, par=3)
