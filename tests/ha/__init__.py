"""Tests of store.ha: the sans-IO protocol and its transports."""
