"""The unified coding framework (MATH.md §2): public entry point.

See :mod:`elastic_coded.schemes.unified` for the theory, the plans and the reference executor;
the scheme on Ray is :class:`elastic_coded.runtime.unified_runtime.UnifiedCluster`.
"""

from .schemes.unified import (LoadBreakdown, MuLike, RunResult, Segment, ShufflePlan,
                              StorageDesign, Tradeoff, TradeoffPoint, Transmission, as_mu,
                              check_shuffle_plan, decode_packet, encode_packet, encode_storage,
                              latency_load, load_breakdown, lower_bound, map_compute,
                              plot_tradeoff, receive_packet, reduce_assignment, reduce_outputs,
                              reduce_server, rows_multiple, run_in_process,
                              sample_map_latencies, shuffle_plan, simulate_map_latency,
                              storage_design, tradeoff)

__all__ = [
    "MuLike",
    "LoadBreakdown",
    "TradeoffPoint",
    "Tradeoff",
    "StorageDesign",
    "Segment",
    "Transmission",
    "ShufflePlan",
    "RunResult",
    "as_mu",
    "load_breakdown",
    "latency_load",
    "lower_bound",
    "tradeoff",
    "rows_multiple",
    "storage_design",
    "encode_storage",
    "map_compute",
    "reduce_assignment",
    "shuffle_plan",
    "check_shuffle_plan",
    "encode_packet",
    "decode_packet",
    "receive_packet",
    "reduce_outputs",
    "reduce_server",
    "run_in_process",
    "simulate_map_latency",
    "sample_map_latencies",
    "plot_tradeoff",
]
