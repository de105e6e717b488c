"""Crash tests: SIGKILL, simulated power loss, failed fsyncs (marker ``crash``).

Harness: ``tests/helpers.py`` (stores, ``check_consistency``) and ``tests/powerloss.py``
(the disk model). Trial counts are kept small for the default run; soak with more::

    MQSTORE_POWERLOSS_TRIALS=200 MQSTORE_SIGKILL_TRIALS=60 python3 -m pytest tests/crash

Counters (trials, acks, acknowledged-but-lost, page fates) are printed at the end of
the run under "crash trials".
"""
