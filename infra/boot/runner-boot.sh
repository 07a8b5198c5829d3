#!/bin/bash
# The boot script of a runner instance launched by Baton's AWS provisioner
# (functions/aws-provisioner, docs/provisioners.md). The provisioner hands it
# to the instance as its user data, with these settings written right after
# the first line:
#   BATON_API              the API the runner talks to
#   BATON_LABELS           the reservation's label set (comma-separated)
#   BATON_TOKEN_PARAMETER  the SSM SecureString parameter holding the
#                          reservation's ephemeral registration token (brt_…)
#   BATON_RUNNER_ARGS      more arguments for baton-runner (may be empty)
# The AMI must have `baton-runner` and the AWS CLI on PATH; the instance role
# may read and delete parameters under /baton/<stage>/runner-tokens/ only.
#
# It reads the token, DELETES the parameter at once (a token never waits
# where another process could read it), and runs one ephemeral runner with
# the token in its environment, never in its arguments (visible to every
# local user). When the runner exits (its session is exhausted after
# jobs_per_instance jobs, or it failed), the machine powers off; the
# provisioner launches instances with shutdown behaviour `terminate`, so
# powering off ends it.
set -euo pipefail

log() { printf '{"level":"%s","message":"%s","token_parameter":"%s"}\n' "$1" "$2" "${BATON_TOKEN_PARAMETER:-}" >&2; }

# Whatever happens below, the machine ends: an instance that cannot start
# its runner must not idle (and bill) until Baton's orphan intent.
trap 'log INFO "runner ended; powering off"; shutdown -h now' EXIT

# IMDSv2: the region the instance runs in (the parameter is regional).
imds_token=$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 60')
region=$(curl -sf -H "X-aws-ec2-metadata-token: $imds_token" http://169.254.169.254/latest/meta-data/placement/region)
instance_id=$(curl -sf -H "X-aws-ec2-metadata-token: $imds_token" http://169.254.169.254/latest/meta-data/instance-id)

export BATON_REGISTRATION_TOKEN
BATON_REGISTRATION_TOKEN=$(aws ssm get-parameter --region "$region" --name "$BATON_TOKEN_PARAMETER" \
  --with-decryption --query Parameter.Value --output text)
# Delete before anything else runs: once read, the token lives only in this
# process's memory and the runner's environment. The provisioner deletes a
# parameter this script never read once its instance ends.
aws ssm delete-parameter --region "$region" --name "$BATON_TOKEN_PARAMETER"
log INFO "token read and its parameter deleted"

# A user of its own: the jobs the runner runs cannot read this script's
# environment, and the instance role's credentials stay reachable only
# through IMDS (harden further by limiting IMDS to root with iptables).
id baton >/dev/null 2>&1 || useradd --create-home --shell /bin/bash baton
work_dir=/home/baton/work
mkdir -p "$work_dir" && chown baton: "$work_dir"

# shellcheck disable=SC2086 # BATON_RUNNER_ARGS is a list of words on purpose.
# The token passes through the environment only (an `env X=…` argument
# would show in ps for the life of the runner).
sudo -u baton --preserve-env=BATON_REGISTRATION_TOKEN \
  baton-runner --api "$BATON_API" --labels "$BATON_LABELS" --name "$instance_id" \
  --work-dir "$work_dir" --json-logs $BATON_RUNNER_ARGS || log WARN "baton-runner exited non-zero"
