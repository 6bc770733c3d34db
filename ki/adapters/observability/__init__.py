"""What ki exports for monitoring: Prometheus metrics (:mod:`.metrics`, :mod:`.scrape`, :mod:`.exposition`)
and OpenTelemetry traces (:mod:`.tracing`). See ``docs/metrics.md``."""
