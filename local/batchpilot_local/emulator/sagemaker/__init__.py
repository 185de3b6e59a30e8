"""Emulated SageMaker training jobs (:mod:`.models`), their JSON 1.1 wire format
(:mod:`.responses`) and errors (:mod:`.exceptions`)."""
