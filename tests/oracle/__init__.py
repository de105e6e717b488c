"""Differential tests against the real Apache RocketMQ 4.9.8 (``shared/oracles/rocketmq-4.9.8``):
the same scenario runs against the real name server / broker / Java client / mqadmin and
against mqstore's, and the answers are compared."""
