"""Running wfctl in production: its logs, systemd's notify protocol, Prometheus metrics."""
