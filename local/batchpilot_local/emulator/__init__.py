"""AWS beyond moto, laid out like a moto backend: what moto 5.2 lacks or drops of AWS Batch
(service environments, service jobs, quota shares, job queues and container jobs with what moto
drops) and of SageMaker (training jobs that stay InProgress), answered in process behind the same
boto3 calls the Lambda code makes. Requests are serialised, validated, signed and retried by
botocore as usual; answers are raw HTTP parsed by botocore's own parser, errors included.

Modules:

- :mod:`.batch` (``models``, ``responses``, ``exceptions``, ``utils``) and :mod:`.sagemaker`
  (``models``, ``responses``, ``exceptions``): per service, the backend state and operations, and
  the wire format;
- :mod:`.routing`: the emulator's endpoint, which operations it serves, whose resources a request
  reads;
- :mod:`.overlay`: :class:`Overlay`, the backends of every account and region, and how they stand
  in front of moto through documented seams only (its docstring);
- :mod:`.direct`: for the replay, calls answered at botocore's ``before-call``, without the HTTP hop;
- :mod:`.moto_fixes`: fixes of moto's own inefficiencies for the moto releases they were written
  for (the only module that changes moto's internals; each is offered upstream: ``upstream/``);
- :mod:`.shapes`: values against botocore's shapes; :mod:`.core`: shared error and HTTP types.
"""

from batchpilot_local.emulator.batch.models import EmbeddedBatch, Throttle
from batchpilot_local.emulator.core import ApiError
from batchpilot_local.emulator.overlay import Overlay
from batchpilot_local.emulator.sagemaker.models import EmbeddedTraining
from batchpilot_local.emulator.shapes import service_model, shape_problems

__all__ = [
    "ApiError",
    "EmbeddedBatch",
    "EmbeddedTraining",
    "Overlay",
    "Throttle",
    "service_model",
    "shape_problems",
]
