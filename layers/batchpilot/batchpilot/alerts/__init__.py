"""Alerts: on-call pages (SNS) and chat messages (Slack, Teams) a person can act on.

Pure domain code: the routing policy (:mod:`.policy`), facts and their de-duplication keys
(:mod:`.facts`), the severity decision (:mod:`.severity`), what every message says (:mod:`.render`),
burst grouping (:mod:`.grouping`) and the registry of chat channels (:mod:`.registry`). The service
(:mod:`.service`) drives the adapters through the ports (:mod:`.ports`); the handler
(:mod:`.handler`) is its Powertools batch processor. Adapters: :mod:`batchpilot.io.sns`,
:mod:`batchpilot.io.dynamodb.alerts`, :mod:`batchpilot.io.secrets` and the chat channels of
:mod:`batchpilot.alerts.channels`.
"""
