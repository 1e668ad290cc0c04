"""A streamed model attempt: the Sender StreamModel's calls run through the one retry engine.

    sender.py        StreamSender: one streamed attempt, judged (the table of what it meets)
    readers.py       a stream's body as (event, data) pairs: server-sent events, event-stream frames
    watch.py         Watch: the attempt's idle, head, first-token and deadline timers on the injected clock
    progress.py      Progress: one attempt's deltas so far, on their way to the Outlet
    outlet.py        Outlet: the stream's only way out, and what the caller holds
    continuation.py  mid_stream continue: the prefill, and the continuation joined to the held text
    prefills.py      PrefillMemory: which deployments continue a prefill (declared, else tried and learned)

``ModelService.stream`` builds the Outlet and a StreamSender per attempt; the formats are read
through their ``Upstream`` (``stream_type``, ``stream_decoder``); a format never imports this package.
"""
