"""Alerts: on-call pages (SNS) and Slack messages a person can act on.

Pure domain code: the routing policy (:mod:`.policy`), facts and their de-duplication keys
(:mod:`.facts`), the severity decision (:mod:`.severity`), message rendering (:mod:`.render`),
burst grouping (:mod:`.grouping`), and the batch dispatcher that drives the adapters through
protocols (:mod:`.dispatch`). The adapters are :mod:`batchpilot.io.sns`,
:mod:`batchpilot.alerts.channels.slack` and :mod:`batchpilot.io.dynamodb.alerts`.
"""
