"""IAM as AWS would evaluate it, for the IAM conformance test and docs/permissions.md: the Service
Authorization Reference (:mod:`.reference`), a policy evaluator (:mod:`.policy`), template.yaml
expanded as CloudFormation would (:mod:`.stack`), recorded API calls (:mod:`.calls`) turned into
authorisations (:mod:`.requests`) and judged (:mod:`.conformance`), and the permissions page
(:mod:`.permissions`). Needs the dev extras (policy_sentry, aws-sam-translator)."""
