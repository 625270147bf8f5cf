"""sFlow v5: datagram decoder/encoder, UDP collector, per-flow rate estimation, sFlow-RT backend."""
from monitor.sflow.collector import SflowCollector
from monitor.sflow.decoder import SflowDecodeError, SflowDecoder, decode_datagram
from monitor.sflow.estimator import FlowRateEstimator
from monitor.sflow.records import CounterSample, Datagram, FlowSample, IfCounters

__all__ = [
    "CounterSample",
    "Datagram",
    "FlowRateEstimator",
    "FlowSample",
    "IfCounters",
    "SflowCollector",
    "SflowDecodeError",
    "SflowDecoder",
    "decode_datagram",
]
