"""Timer messages: delivery at an arbitrary time (RocketMQ 5's timer wheel; docs/timer.md)."""
