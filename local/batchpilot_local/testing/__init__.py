"""Test support shared by ``tests/`` and ``benchmarks/``: where the repository is, its sample
events and builders of real-shaped events (:mod:`.samples`), a function's handler loaded as Lambda
loads it and what it prints (:mod:`.harness`), template.yaml as CloudFormation sees it
(:mod:`.templates`), the recovery function's worlds and harness (:mod:`.recovery`), and what
the callers of two clients saw, one on botocore's HTTP path and one on the replay's direct path
(:mod:`.twin`).

Tests and benchmarks import these modules, never each other (``from tests. ...``), so that a test
file can be moved or deleted without breaking another. Needs the dev extras (pytest; the template
helpers also aws-sam-translator).
"""
