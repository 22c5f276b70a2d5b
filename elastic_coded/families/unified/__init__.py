"""The unified coding framework: coded storage, Map on the fastest ``q`` servers, coded-multicast
Shuffle, Reduce (MATH.md §2).

``K`` servers each store a fraction ``mu`` of ``A`` (``m`` rows), ``N`` input vectors ``x_j``, and
the Map phase ends when the fastest ``q`` servers are done.  Waiting for more servers (larger ``q``)
costs latency ``D(q)`` and saves communication ``L(q)``.  This package gives, from private
topic modules (import the names from here):

* the theory (``_theory``): :func:`latency_load`, :func:`load_breakdown`, :func:`lower_bound`,
  :func:`tradeoff`; the parameter checks (``_params``): :func:`as_mu`;
* the scheme as pure plans (frozen dataclasses): storage (``_storage``): :func:`rows_multiple`,
  :func:`storage_design`, :func:`encode_storage`, :func:`map_compute`, :func:`decoding_rows`,
  :func:`decode_condition`; shuffle (``_shuffle``):
  :func:`reduce_assignment`, :func:`shuffle_plan`, :func:`check_shuffle_plan`,
  :func:`encode_packet`, :func:`decode_packet`, :func:`receive_packet`; reduce (``_reduce``):
  :func:`reduce_outputs`, :func:`reduce_server`, :func:`reduce_groups`, :func:`received_rows`;
* a reference in-process executor (``_inprocess``), :func:`run_in_process`, that defines the
  semantics every other executor of these plans must match;
* the Map latency model (``_inprocess``): one draw per server, :func:`sample_map_latencies`, and
  a Monte Carlo of ``D(q)``, :func:`simulate_map_latency`;
* a plot of the tradeoff (``_plot``), :func:`plot_tradeoff` (needs the optional ``matplotlib``).

Conventions.  Servers are numbered ``0 .. K-1``, coded rows ``0 .. (K/q)m - 1``, outputs
``0 .. N-1`` (the seed counts from 1).  An *intermediate value* is the field element
``c_i x_j`` (coded row ``i`` times input ``j``); communication is counted in such values, a
multicast counted once, and normalised by ``m``.  All theory values are exact
:class:`fractions.Fraction` s.

Storage ``mu``.  ``mu`` may be a :class:`~fractions.Fraction`, an ``int``, a string such as
``"1/3"`` or a float.  A float is read as the decimal it prints as (``0.3`` is ``3/10``), except
that when it lies within ``5e-4`` of a fraction with denominator ``<= K`` it is taken to be that
fraction: a user typing ``0.333`` or ``0.667`` for ``K >= 3`` means ``1/3`` or ``2/3``.  Pass a
``Fraction`` to avoid any rounding.

Divisibility (the seed assumes them; they are checked, with the rule in the message).  With
``r = floor(mu q)`` (so ``mu_bar = r/q``) and ``b = C(K, r)`` batches:

1. ``q`` divides ``N`` (each server in ``Q`` reduces ``N/q`` outputs);
2. ``(K/q) m`` is an integer divisible by ``b``: the batch size ``beta = K m / (q b)`` is an
   integer (then every server stores ``r m / q = mu_bar m`` coded rows);
3. every multicast round ``j`` that the shuffle runs splits each set ``V^k_S`` of
   ``(N/q) C(K-q, r-j) beta`` values into ``j`` equal segments, so ``j`` divides that count.

The valid ``m`` are exactly the multiples of :func:`rows_multiple`.  The theory functions need
none of these (``tradeoff(4, 1/2, 4)`` includes ``q = 3``); the scheme's functions check them.
Values are never split below one field element; the conditions above make every segment a whole
number of values.

Storage code.  A small systematic Reed-Solomon generator (Lagrange basis on ``field.points``),
MDS over every field.  Over the reals any such polynomial code loses accuracy as ``m`` grows:
in the worst fastest set the relative error is about ``1e-12`` for ``m`` up to a few dozen and
reaches ``1e-8 .. 1e-6`` near ``m = 100 .. 200``.  Use a finite field for exact results.

Discrepancies with MATH.md §2: none in the formulas; MATH.md's ``D(q)`` uses ``mu`` (the storage
the latency model is stated for) while the load uses ``mu_bar``, and this package follows that.
The seed defines ``s_q`` as an infimum over ``s`` without a range; here ``s_q`` is the smallest
``s`` in ``1 .. r+1`` (``r+1`` meaning "no greedy round", an empty sum ``0 <= 1 - mu_bar``), and a
tie between unicast and the extra multicast round goes to unicast.
"""

from ._inprocess import RunResult, run_in_process, sample_map_latencies, simulate_map_latency
from ._params import MuLike, as_mu
from ._plot import plot_tradeoff
from ._reduce import received_rows, reduce_groups, reduce_outputs, reduce_server
from ._shuffle import (
                       Segment,
                       ShufflePlan,
                       Transmission,
                       check_shuffle_plan,
                       decode_packet,
                       encode_packet,
                       receive_packet,
                       reduce_assignment,
                       shuffle_plan,
)
from ._storage import (
                       StorageDesign,
                       decode_condition,
                       decoding_rows,
                       encode_storage,
                       map_compute,
                       rows_multiple,
                       storage_design,
)
from ._theory import (
                       LoadBreakdown,
                       Tradeoff,
                       TradeoffPoint,
                       latency_load,
                       load_breakdown,
                       lower_bound,
                       tradeoff,
)

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
    "decoding_rows",
    "decode_condition",
    "reduce_assignment",
    "shuffle_plan",
    "check_shuffle_plan",
    "encode_packet",
    "decode_packet",
    "receive_packet",
    "received_rows",
    "reduce_groups",
    "reduce_outputs",
    "reduce_server",
    "run_in_process",
    "simulate_map_latency",
    "sample_map_latencies",
    "plot_tradeoff",
]
