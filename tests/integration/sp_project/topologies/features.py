from parts.components import BatchCount, DirectSink, Router, Sentences, Split, TicklessCount
from streamparse import Grouping, Topology


class Features(Topology):
    config = {"topology.worker.childopts": "-Xmx768m"}  # Storm's, of no use in stormish
    sentences = Sentences.spec()
    split = Split.spec(inputs=[sentences], par=2)
    batch_count = BatchCount.spec(
        inputs={split: Grouping.fields("word")},
        par=2,
        config={"topology.tick.tuple.freq.secs": 0.1},
    )
    tickless_count = TicklessCount.spec(inputs={split: Grouping.fields("word")})
    router = Router.spec(inputs=[batch_count])
    direct_sink = DirectSink.spec(inputs={router["direct"]: Grouping.DIRECT}, par=3)
