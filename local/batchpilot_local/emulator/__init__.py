"""AWS beyond moto, laid out like a moto backend: what moto 5.2 lacks or drops of AWS Batch
(service environments, service jobs, job queues and container jobs with what moto drops) and of
SageMaker (training jobs that stay InProgress), answered in process behind the same boto3 calls
the Lambda code makes. Requests are serialised and validated by botocore as usual; answers are raw
HTTP parsed by botocore's own parser, errors included.

Modules:

- :mod:`.batch` (``models``, ``responses``, ``exceptions``, ``utils``) and :mod:`.sagemaker`
  (``models``, ``responses``, ``exceptions``): per service, the backend state and operations, and
  the wire format;
- :mod:`.routing`: which requests are the emulator's (by host, path or ``X-Amz-Target``);
- :mod:`.overlay`: :class:`Overlay`, the backends of every account and region and their switch;
- :mod:`.patch`: the one place that touches moto's internals (what and why: its docstring);
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
