"""``sam publish``'s own path, offline: the SAM CLI's code (``samcli.lib.package`` and its vendored
``serverlessrepo`` library) run on template.yaml's ``AWS::ServerlessRepo::Application`` section,
with botocore Stubbers in place of Amazon S3 and the AWS Serverless Application Repository.

Run it with the SAM CLI's own Python (it imports ``samcli``, which lives in ``.venv-sam``, never in
the project's venv)::

    .venv-sam/bin/python local/batchpilot_local/testing/sar_publish.py template.yaml

It imports nothing from batchpilot_local, so it runs as a file in that interpreter. What it does,
in the order ``sam package`` then ``sam publish`` would:

1. parse the template with ``serverlessrepo.parser.parse_template`` and read the section with
   ``get_app_metadata`` (``ApplicationMetadataNotFoundError`` when it is missing);
2. check what the library itself checks: ``ApplicationMetadata.validate`` with the properties
   CreateApplication requires (author, description, name) and those CreateApplicationVersion
   requires (semantic_version); LicenseBody/LicenseUrl and ReadmeBody/ReadmeUrl not both;
3. package the section's local files as ``sam package`` does (``METADATA_EXPORTS``: the
   LicenseUrl and ReadmeUrl exporters, through ``S3Uploader`` to a stubbed S3 PutObject), so the
   files must exist beside the template;
4. publish the packaged template with ``serverlessrepo.publish_application`` twice against a
   stubbed ``serverlessrepo`` client: a new application (CreateApplication), then a new version of
   an existing one (CreateApplication answers ConflictException, then GetApplication, which finds
   no such version, UpdateApplication and CreateApplicationVersion, with
   ``fail_on_same_version=True``). The Stubber checks every request against botocore's model of
   the service (names, types, required members) and against the request expected here.

Prints one JSON object on stdout: ``{"metadata": {...}, "packaged": {"LicenseUrl": "s3://...",
"ReadmeUrl": "s3://..."}, "create": [actions], "update": [actions], "template_body_has_metadata":
bool}``; exits 1 with the library's error message on stderr when any step refuses the section.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

APP_ID = "arn:aws:serverlessrepo:us-east-1:111122223333:applications/batchpilot"
BUCKET = "aws-sam-cli-managed-default-samclisourcebucket-example"
CREATE_FIELDS = (
    "Author",
    "Description",
    "HomePageUrl",
    "Labels",
    "LicenseBody",
    "LicenseUrl",
    "Name",
    "ReadmeBody",
    "ReadmeUrl",
    "SemanticVersion",
    "SourceCodeUrl",
    "SpdxLicenseId",
)
"""The section's properties CreateApplication takes (the AWS SAM Developer Guide's table)."""


def _session() -> Any:
    """A session in us-east-1; clients sign nothing (UNSIGNED), so no credentials are needed."""
    import boto3

    return boto3.session.Session(region_name="us-east-1")


def _unsigned() -> Any:
    from botocore import UNSIGNED
    from botocore.config import Config

    return Config(signature_version=UNSIGNED)


def package_metadata(template: dict[str, Any], template_dir: Path) -> dict[str, Any]:
    """A copy of ``template`` (a parsed SAM template) whose SAR section's local files
    (LicenseUrl, ReadmeUrl, relative to ``template_dir``) are uploaded as ``sam package`` uploads
    them, to a stubbed S3, and replaced by their ``s3://`` locations.

    Raises:
        samcli.commands.package.exceptions.ExportFailedError: a file the section names is missing.
        botocore.stub.StubAssertionError: the section names fewer or more files than expected.
    """
    from botocore.stub import Stubber
    from samcli.lib.package.code_signer import CodeSigner
    from samcli.lib.package.packageable_resources import METADATA_EXPORTS
    from samcli.lib.package.s3_uploader import S3Uploader
    from samcli.lib.package.uploaders import Uploaders

    packaged = copy.deepcopy(template)
    s3 = _session().client("s3", config=_unsigned())
    with Stubber(s3) as stub:
        for spec in METADATA_EXPORTS:
            section = packaged.get("Metadata", {}).get(spec.metadata_type)
            if section is None:
                continue
            for name in spec.property_names:
                if section.get(name):
                    stub.add_response("put_object", {"ETag": '"0"'})
            uploader = S3Uploader(s3, BUCKET, prefix="batchpilot", force_upload=True, no_progressbar=True)
            for exporter in spec.exporters:
                exporter(Uploaders(uploader, None), CodeSigner(None, None)).export(
                    spec.metadata_type, section, str(template_dir)
                )
        stub.assert_no_pending_responses()
    return packaged


def publish_offline(packaged: dict[str, Any]) -> dict[str, Any]:
    """Publish ``packaged`` (a template from :func:`package_metadata`) with
    ``serverlessrepo.publish_application`` against stubbed answers, as a new application and as a
    new version of an existing one; returns ``{"create": [actions], "update": [actions]}``.

    Raises:
        samcli.vendor.serverlessrepo.exceptions.ServerlessRepoError: the library refuses the section.
        botocore.exceptions.ParamValidationError: a request does not fit the service's model.
        botocore.stub.StubAssertionError: a request differs from the one expected here.
    """
    from botocore.stub import ANY, Stubber
    from samcli.vendor.serverlessrepo import publish_application
    from samcli.vendor.serverlessrepo.parser import get_app_metadata

    metadata = get_app_metadata(packaged).template_dict
    create = {k: metadata[k] for k in CREATE_FIELDS if metadata.get(k)}
    create["TemplateBody"] = ANY
    sar = _session().client("serverlessrepo", config=_unsigned())
    with Stubber(sar) as stub:
        stub.add_response("create_application", {"ApplicationId": APP_ID}, create)
        created = publish_application(packaged, sar_client=sar)
        stub.assert_no_pending_responses()
    version = metadata["SemanticVersion"]
    with Stubber(sar) as stub:
        stub.add_client_error(
            "create_application",
            service_error_code="ConflictException",
            service_message=f"Application with id {APP_ID} already exists",
            http_status_code=409,
            expected_params=create,
        )
        stub.add_client_error(
            "get_application",
            service_error_code="NotFoundException",
            http_status_code=404,
            expected_params={"ApplicationId": APP_ID, "SemanticVersion": version},
        )
        updatable = ("Author", "Description", "HomePageUrl", "Labels", "ReadmeUrl")
        update = {"ApplicationId": APP_ID, **{k: metadata[k] for k in updatable if metadata.get(k)}}
        stub.add_response("update_application", {"ApplicationId": APP_ID}, update)
        new_version = {"ApplicationId": APP_ID, "SemanticVersion": version, "TemplateBody": ANY}
        if metadata.get("SourceCodeUrl"):
            new_version["SourceCodeUrl"] = metadata["SourceCodeUrl"]
        stub.add_response(
            "create_application_version", {"ApplicationId": APP_ID, "SemanticVersion": version}, new_version
        )
        updated = publish_application(packaged, sar_client=sar, fail_on_same_version=True)
        stub.assert_no_pending_responses()
    return {"create": created["actions"], "update": updated["actions"]}


def main(argv: list[str]) -> int:
    """Check ``argv[1]`` (a SAM template) as described in the module docstring; 0 when accepted."""
    from botocore.exceptions import ParamValidationError
    from botocore.stub import StubAssertionError
    from samcli.commands.package.exceptions import ExportFailedError
    from samcli.vendor.serverlessrepo.exceptions import ServerlessRepoError
    from samcli.vendor.serverlessrepo.parser import get_app_metadata, parse_template, strip_app_metadata
    from samcli.yamlhelper import yaml_dump

    path = Path(argv[1]).resolve()
    try:
        template = parse_template(path.read_text(encoding="utf-8"))
        metadata = get_app_metadata(template)
        metadata.validate(["author", "description", "name"])
        metadata.validate(["semantic_version"])
        packaged = package_metadata(template, path.parent)
        published = publish_offline(packaged)
    except (ServerlessRepoError, ExportFailedError, ParamValidationError, StubAssertionError) as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    section = get_app_metadata(packaged).template_dict
    body = yaml_dump(strip_app_metadata(packaged))
    result = {
        "metadata": dict(metadata.template_dict),
        "packaged": {k: section[k] for k in ("LicenseUrl", "ReadmeUrl") if k in section},
        **published,
        "template_body_has_metadata": "AWS::ServerlessRepo::Application" in body,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
