"""The job ledger: one DynamoDB item per job, kept from job events, and the fleet metrics read from it.

- :mod:`~batchpilot.ledger.model`: the pure core (records, order rule, exact aggregate deltas).
- :mod:`~batchpilot.ledger.observe`: job events → observations.
- :mod:`~batchpilot.ledger.fleet`: aggregates and transitions → fleet metrics.
- :mod:`~batchpilot.ledger.ports`: the store, AWS Batch and metric sink it needs.
- :mod:`~batchpilot.ledger.service`: apply an event; reconcile and publish on schedule.
- :mod:`~batchpilot.ledger.handler`: the Powertools batch processor and the scheduled entry.
"""
