"""GPU activity of running training jobs, read by the ledger function's schedule: per job queue and
share gauges (``GpuActivity``, ``GpuActivityP10``, ``IdleGpuHours``) and ``Job GPU Idle`` for a job
whose GPUs stay idle or stall (:mod:`batchpilot.gpu.policy`, :mod:`batchpilot.gpu.service`)."""
