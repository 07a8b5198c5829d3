/**
 * Reading the stack's props from the CDK context (`-c key=value`, or
 * `cdk.json`'s "context"). Values from the command line are strings; they are
 * parsed and rejected loudly when malformed.
 */
import type { BatonStackProps, MissingCrates, StateMachineLogLevel } from './baton-stack';

const NUMBERS = [
  'leaseDurationS',
  'heartbeatIntervalS',
  'firstHeartbeatGraceS',
  'reaperPeriodS',
  'sessionTtlS',
  'pollIntervalS',
  'unschedulableFailS',
  'archiveRetentionDays',
  'functionMemoryMb',
  'functionTimeoutS',
  'logRetentionDays',
  'bucketRetentionDays',
  'artifactRetentionDays',
  'apiThrottleRateLimit',
  'apiThrottleBurstLimit',
  'pendingJobAgeAlarmS',
  'relayRetryAttempts',
] as const;

/** `consoleDir`: a directory of the console's built files, relative to where `cdk` runs (infra/). */
const STRINGS = ['stage', 'logLevel', 'alarmTopicArn', 'consoleDir'] as const;

/** Context keys of the AWS provisioner's props (`provisioner`), by the prop they set. */
const PROVISIONER_KEYS = {
  provisionerTokenParameter: 'tokenParameterName',
  provisionerLaunchTemplateId: 'launchTemplateId',
  provisionerLaunchTemplateVersion: 'launchTemplateVersion',
  provisionerPeriodS: 'periodS',
  provisionerMaxInstances: 'maxInstances',
  provisionerReservationExpiryS: 'reservationExpiryS',
  provisionerRunnerArgs: 'runnerArgs',
} as const;
const PROVISIONER_NUMBERS: readonly string[] = ['provisionerPeriodS', 'provisionerMaxInstances', 'provisionerReservationExpiryS'];

/** Every context key the app understands. */
export const CONTEXT_KEYS: readonly string[] = [
  ...NUMBERS,
  ...STRINGS,
  'deletionProtection',
  'stateMachineLogLevel',
  'allowMissingCrates',
  ...Object.keys(PROVISIONER_KEYS),
];

function toNumber(key: string, value: unknown): number {
  const n = typeof value === 'number' ? value : Number(String(value).trim());
  if (String(value).trim() === '' || !Number.isFinite(n)) {
    throw new Error(`context ${key}=${JSON.stringify(value)} is not a number`);
  }
  return n;
}

function toBoolean(key: string, value: unknown): boolean {
  if (typeof value === 'boolean') {
    return value;
  }
  const s = String(value).trim().toLowerCase();
  if (s === 'true' || s === '1' || s === 'yes') {
    return true;
  }
  if (s === 'false' || s === '0' || s === 'no') {
    return false;
  }
  throw new Error(`context ${key}=${JSON.stringify(value)} is not a boolean`);
}

/** Props from a context lookup (`app.node.tryGetContext`). */
export function contextProps(get: (key: string) => unknown): BatonStackProps {
  const props: Record<string, unknown> = {};
  for (const key of NUMBERS) {
    const v = get(key);
    if (v !== undefined) {
      props[key] = toNumber(key, v);
    }
  }
  for (const key of STRINGS) {
    const v = get(key);
    if (v !== undefined) {
      props[key] = String(v);
    }
  }
  const dp = get('deletionProtection');
  if (dp !== undefined) {
    props.deletionProtection = toBoolean('deletionProtection', dp);
  }
  const smLevel = get('stateMachineLogLevel');
  if (smLevel !== undefined) {
    props.stateMachineLogLevel = String(smLevel).toUpperCase() as StateMachineLogLevel;
  }
  const allowMissing = get('allowMissingCrates');
  if (allowMissing !== undefined && toBoolean('allowMissingCrates', allowMissing)) {
    props.missingCrates = 'placeholder' as MissingCrates;
  }
  const provisioner: Record<string, unknown> = {};
  for (const [key, prop] of Object.entries(PROVISIONER_KEYS)) {
    const v = get(key);
    if (v !== undefined) {
      provisioner[prop] = PROVISIONER_NUMBERS.includes(key) ? toNumber(key, v) : String(v);
    }
  }
  if (Object.keys(provisioner).length > 0) {
    // Optional as a whole: any of its keys asks for it, and then both names are needed.
    for (const [key, prop] of [['provisionerTokenParameter', 'tokenParameterName'], ['provisionerLaunchTemplateId', 'launchTemplateId']]) {
      if (provisioner[prop] === undefined) {
        throw new Error(`context ${key} is required with any provisioner* key (the AWS provisioner)`);
      }
    }
    props.provisioner = provisioner;
  }
  return props as BatonStackProps;
}
