"""The metrics function: AWS Batch and SageMaker job events in, CloudWatch EMF job metrics out.

- :mod:`~batchpilot.metrics.ports`: the metric sink it writes to.
- :mod:`~batchpilot.metrics.service`: one record's body → job metrics in the sink.
- :mod:`~batchpilot.metrics.handler`: the Powertools batch processor (count, log, flush per batch).
"""
