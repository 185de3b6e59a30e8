"""batchpilot: metrics, alerts, recovery and capacity for ML training jobs on AWS Batch and SageMaker.

This package is the shared Lambda layer. Domain modules (``events``, ``classification``,
``metrics``) are pure; only ``batchpilot.adapters`` talks to AWS or prints metrics.
"""

__version__ = "0.1.0"
