"""``python -m leasehold.bench``: leasehold beside the design guide it grew from.

Two modes, each printing exactly one JSON line on stdout (progress goes to stderr):

``side-by-side --lease-ms 1000 --runs 10 [--blocked-runs 3] [--redis-url URL]``
    One duty, a leader in a child process and a follower in this one, for
    leasehold's :class:`~leasehold.Elector` and for the guide's ``Elector``
    (:mod:`leasehold.bench.guide`), run alternately:

    - ``overshoot_ms``: the leader is SIGKILLed; how long after the lease's real
      expiry in Redis (PTTL read right after the kill) the follower's duty starts;
    - ``handover_ms``: the leader gets SIGTERM and steps down; from the start of its
      step-down to the follower's duty start (wall clock, one machine);
    - ``blocked_loop``: the leader's duty blocks its event loop for three leases
      (``time.sleep``); ``lease_kept`` is whether it still held its lease on
      resuming in every run with the follower never leading meanwhile, ``overlaps``
      the runs in which both duties believed they led at one instant.

``partitions --partitions 1000 --replicas 4 --lease-ms 10000 --seconds 30 [--redis-url URL]``
    N replica processes share P partitions: leasehold's
    :class:`~leasehold.Coordinator`, then the guide's ``lead_partitions`` (one
    elector per partition and replica, no cap, no jitter). Time until every
    partition is owned, then over ``--seconds``: Redis CPU (percent of one core),
    Redis commands per second, and how the partitions spread over the replicas.

Without ``--redis-url`` each run starts a throwaway ``redis-server`` on a free
loopback port (no persistence) and stops it at the end. Every run uses duty and
group names of its own (a random suffix) and deletes its keys afterwards, so an
existing server can be used without FLUSHALL.

Needs the ``redis`` package (``pip install leasehold[bench]``) for the guide's side
and for reading Redis's INFO.
"""
