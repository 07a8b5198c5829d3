/**
 * Baton's AWS stack, built generically from `infra/resources.json`: every
 * function, route, subscriber, task queue, schedule, state machine and bucket
 * in that file becomes resources here by iteration, with the physical names of
 * `Naming` in `localstack/src/resources.rs` (`baton-<stage>-<logical>`, DLQs
 * `baton-<stage>-<logical>-dlq`), so the local provisioner's plan and this
 * stack agree (the agreement test proves it). Buckets are the exception to the
 * naming: S3 names are global, so CloudFormation names them and the functions
 * learn the name from their environment. The push socket (`push`, an API
 * Gateway WebSocket API) exists on AWS only: the dev host serves its own. So
 * does the web console's hosting (`lib/console.ts`): a private bucket behind
 * CloudFront, which also routes `/v1/*` to the HTTP API.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { Annotations, CfnOutput, Duration, RemovalPolicy, Stack, StackProps, Tags } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import {
  HttpLambdaIntegration,
  WebSocketLambdaIntegration,
  WebSocketMockIntegration,
} from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq, SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { RustFunction } from 'cargo-lambda-cdk';
import { Construct } from 'constructs';

import { BatonConsole, consoleSource } from './console';
import { RepoPaths } from './repo';
import {
  AwsProvisionerSpec,
  FunctionSpec,
  PROVISIONER_PERMISSIONS,
  ARTIFACTS_BUCKET,
  ARTIFACTS_KEY_PATTERN,
  LOGS_BUCKET,
  LOGS_KEY_PATTERN,
  Naming,
  Permission,
  QueueSpec,
  Resources,
  allBuckets,
  allQueues,
  loadResources,
  parsePermission,
  pascal,
  placeholders,
  validateResources,
} from './resources';

/** Queue visibility timeout per second of function timeout (AWS: at least 6). */
export const VISIBILITY_PER_TIMEOUT = 6;

/** The state machine whose ARN every function gets as `BATON_RUN_STATE_MACHINE_ARN`. */
export const RUN_STATE_MACHINE = 'run-attempt';

/** The variable that gives every function the push socket's URL (`wss://…`), which `register` hands to runners. */
export const PUSH_URL_ENV = 'BATON_PUSH_URL';

/** The variable that gives the functions with `push:post` the management endpoint that posts to connections. */
export const PUSH_ENDPOINT_ENV = 'BATON_PUSH_ENDPOINT';

/** What the gateway answers a keep-alive message with (runners ignore it). */
export const KEEPALIVE_REPLY = '{"action":"pong"}';

/** The custom metric of the oldest-pending-job alarm (EMF, emitted by the functions). */
export const PENDING_JOB_METRIC = { namespace: 'Baton', metricName: 'OldestPendingJobAgeSeconds' } as const;

/** The EMF metric of events for listening jobs the external-events function dropped (`functions/external-events`). */
export const EXTERNAL_EVENTS_DROPPED_METRIC = { namespace: 'Baton', metricName: 'external_events_dropped' } as const;
/** Run requests of webhook deliveries that could not become runs (`functions/run-requests`). */
export const RUN_REQUESTS_DROPPED_METRIC = { namespace: 'Baton', metricName: 'run_requests_dropped' } as const;
/** Lease shards whose expiry index the lease reaper could not read on a tick (`functions/lease-reaper`). */
export const REAPER_SHARDS_SKIPPED_METRIC = { namespace: 'Baton', metricName: 'expiry_shards_skipped' } as const;
/** Webhook deliveries refused for their signature (`functions/hooks`). */
export const HOOK_BAD_SIGNATURES_METRIC = { namespace: 'Baton', metricName: 'bad_signatures' } as const;

/**
 * IAM actions granted on `Resource: "*"`, and why. These are the only
 * wildcards on a function's role; each is granted only to functions whose
 * permissions (or trigger) ask for it. The test `least-privilege` enforces it.
 */
export const WILDCARD_EXCEPTIONS: Readonly<Record<string, string>> = {
  'dynamodb:ListStreams':
    'stream:read: ListStreams does not support resource-level permissions (granted by grantStreamRead / the stream event source)',
  'sqs:ListQueues': 'queue:list: ListQueues does not support resource-level permissions',
  'states:ListStateMachines': 'states:describe: ListStateMachines does not support resource-level permissions',
  'states:SendTaskSuccess':
    'states:callback: task tokens of service-integration (.waitForTaskToken) tasks cannot be scoped by IAM; the Service Authorization Reference lists no resource type',
  'states:SendTaskFailure': 'states:callback: as SendTaskSuccess',
  'states:SendTaskHeartbeat': 'states:callback: as SendTaskSuccess',
  'ec2:DescribeInstances':
    'ec2:runner-instances (AWS provisioner only): DescribeInstances does not support resource-level permissions; it filters by the baton:stage and baton:provisioner tags',
  'ec2:RunInstances':
    'ec2:runner-instances (AWS provisioner only): on "*" but only with the conditions ec2:LaunchTemplate = the operator\'s template and ec2:IsLaunchTemplateResource = true, so every resource comes from that template',
  'scheduler:ListSchedules':
    'scheduler:schedules: ListSchedules does not support resource-level permissions; the function lists its own group by name prefix',
};

/** The EMF metrics of the AWS provisioner (dimension `stage`) its alarms watch (`functions/aws-provisioner/src/lib.rs`). */
export const PROVISIONER_METRICS = {
  launchFailures: 'ProvisionerLaunchFailures',
  orphans: 'ProvisionerOrphansTerminated',
} as const;

/** Where workspace secrets are kept (`service/src/usecases/secrets.rs`): `<path>/<workspace>/<NAME>`. */
export function secretsPath(stage: string): string {
  return `/baton/${stage}/secrets`;
}

/** Where webhook secrets are kept (`SecretStore::hook_path`): apart from workspace secrets, so no job can name one. */
export function hookSecretsPath(stage: string): string {
  return `/baton/${stage}/hooks`;
}

/** Where the AWS provisioner hands runner tokens to instances (`plan::token_path`). */
export function runnerTokensPath(stage: string): string {
  return `/baton/${stage}/runner-tokens`;
}

/**
 * The AWS reference provisioner (docs/provisioners.md): given, the stack
 * builds `aws_provisioner` of resources.json, its schedule, the runner
 * instances' role and two alarms.
 */
export interface AwsProvisionerProps {
  /** The SSM SecureString parameter (name, starting with `/`) holding the provisioner's `bpt_` token. */
  readonly tokenParameterName: string;
  /** The launch template runner instances are launched from (`lt-…`): IAM allows no other. */
  readonly launchTemplateId: string;
  /** @default "$Default" */
  readonly launchTemplateVersion?: string;
  /** How often it runs, whole minutes. @default resources.json `aws_provisioner.period_s` */
  readonly periodS?: number;
  /** A cap on live instances below the provisioner's `max_instances`. @default none */
  readonly maxInstances?: number;
  /** Expiry asked for each reservation, 1-3600. @default Baton's (900) */
  readonly reservationExpiryS?: number;
  /** More `baton-runner` arguments on every instance (space-separated). @default none */
  readonly runnerArgs?: string;
}

/**
 * Wildcards on a state machine's role, added by CDK because AWS requires them:
 * the CloudWatch Logs vended-delivery APIs (logging) and X-Ray (tracing).
 */
export const STATE_MACHINE_WILDCARD_EXCEPTIONS: readonly string[] = [
  'logs:CreateLogDelivery',
  'logs:GetLogDelivery',
  'logs:UpdateLogDelivery',
  'logs:DeleteLogDelivery',
  'logs:ListLogDeliveries',
  'logs:PutResourcePolicy',
  'logs:DescribeResourcePolicies',
  'logs:DescribeLogGroups',
  'xray:PutTraceSegments',
  'xray:PutTelemetryRecords',
  'xray:GetSamplingRules',
  'xray:GetSamplingTargets',
];

export type StateMachineLogLevel = 'ALL' | 'ERROR';

/** What happens when `functions/<name>/Cargo.toml` does not exist. */
export type MissingCrates = 'error' | 'placeholder';

export interface BatonStackProps extends StackProps {
  /** Names every resource `baton-<stage>-…`. @default "dev" */
  readonly stage?: string;
  /** `BATON_LEASE_DURATION_S`; at least 3 × `heartbeatIntervalS`. @default 180 */
  readonly leaseDurationS?: number;
  /** `BATON_HEARTBEAT_INTERVAL_S`. @default 15 */
  readonly heartbeatIntervalS?: number;
  /** `BATON_FIRST_HEARTBEAT_GRACE_S`; at least `heartbeatIntervalS`. @default 60 */
  readonly firstHeartbeatGraceS?: number;
  /** `BATON_REAPER_PERIOD_S`, also the rate of every schedule using it; whole minutes (EventBridge). @default 60 */
  readonly reaperPeriodS?: number;
  /**
   * `BATON_DEMAND_METRICS_PERIOD_S`: how often the `demand-metrics` schedule
   * publishes each provisioner-served label set's demand (the metrics an
   * auto scaling group can scale on); whole minutes (EventBridge). @default 60
   */
  readonly demandMetricsPeriodS?: number;
  /** `BATON_SESSION_TTL_S`. @default 3600 */
  readonly sessionTtlS?: number;
  /** `BATON_POLL_INTERVAL_S`. @default 5 */
  readonly pollIntervalS?: number;
  /**
   * `BATON_UNSCHEDULABLE_FAIL_S`: how long a job whose labels no registered
   * runner and no provisioner offers waits (from queueing) before it fails
   * `unschedulable`, 10 s to 7 days. @default 900
   */
  readonly unschedulableFailS?: number;
  /** `RUST_LOG` of every function. @default "info" */
  readonly logLevel?: string;
  /** DynamoDB deletion protection; also keeps (RETAIN) the table when the stack is deleted. @default true */
  readonly deletionProtection?: boolean;
  /** Retention of the bus archive. @default resources.json `bus.archive_retention_days` */
  readonly archiveRetentionDays?: number;
  /** Memory of every function. @default 256 */
  readonly functionMemoryMb?: number;
  /** Timeout of every function, capped by the visibility timeout of the queues feeding it. @default 30 */
  readonly functionTimeoutS?: number;
  /** Retention of every log group of the stack. @default 30 */
  readonly logRetentionDays?: number;
  /**
   * Days after which the objects of every bucket (job logs, job artifacts)
   * expire, 1-3650; `artifactRetentionDays` overrides it for the artifacts
   * bucket. @default each bucket's `retention_days`
   */
  readonly bucketRetentionDays?: number;
  /**
   * Days after which job artifacts (the objects of the `artifacts` bucket)
   * expire, 1-3650. Overrides `bucketRetentionDays` for that bucket only;
   * needs a bucket named `artifacts` in resources.json.
   * @default `bucketRetentionDays` when given, else the artifacts bucket's `retention_days`
   */
  readonly artifactRetentionDays?: number;
  /** Steady-state requests per second of the API's default stage and of the push socket's stage. @default 100 */
  readonly apiThrottleRateLimit?: number;
  /** Burst of the API's default stage and of the push socket's stage. @default 200 */
  readonly apiThrottleBurstLimit?: number;
  /** Log level of the state machines (execution data included). @default "ERROR" */
  readonly stateMachineLogLevel?: StateMachineLogLevel;
  /** Threshold of the oldest-pending-job alarm. @default 900 */
  readonly pendingJobAgeAlarmS?: number;
  /** Retries of a failing stream batch before the relay skips it (records stay in the outbox). @default 10 */
  readonly relayRetryAttempts?: number;
  /** SNS topic that every alarm notifies. @default no action */
  readonly alarmTopicArn?: string;
  /** Resources to build (tests). @default infra/resources.json of the checkout */
  readonly resources?: Resources;
  /** Directory of the `*.asl.json` definitions (tests). @default infra/statemachines */
  readonly stateMachineDir?: string;
  /**
   * `placeholder` builds a function whose crate is missing from an empty
   * asset, and the console from a placeholder page when `web/` is missing
   * (tests, lint). @default "error"
   */
  readonly missingCrates?: MissingCrates;
  /**
   * A directory of the web console's built files (`index.html` at its root),
   * deployed as is: the tests' fixture, or a `web/dist` CI built beforehand.
   * @default `web/` of the checkout, built at synth (`npm ci && npm run build`)
   */
  readonly consoleDir?: string;
  /** Where the checkout is. @default found from process.cwd() */
  readonly repo?: RepoPaths;
  /** The AWS reference provisioner; none unless given. */
  readonly provisioner?: AwsProvisionerProps;
}

/** Props with every default applied. */
export interface ResolvedBatonProps {
  readonly stage: string;
  readonly leaseDurationS: number;
  readonly heartbeatIntervalS: number;
  readonly firstHeartbeatGraceS: number;
  readonly reaperPeriodS: number;
  readonly demandMetricsPeriodS: number;
  readonly sessionTtlS: number;
  readonly pollIntervalS: number;
  readonly unschedulableFailS: number;
  readonly logLevel: string;
  readonly deletionProtection: boolean;
  readonly archiveRetentionDays: number;
  readonly functionMemoryMb: number;
  readonly functionTimeoutS: number;
  readonly logRetentionDays: number;
  /** Bucket name → days after which its objects expire. */
  readonly bucketRetentionDays: Readonly<Record<string, number>>;
  readonly apiThrottleRateLimit: number;
  readonly apiThrottleBurstLimit: number;
  readonly stateMachineLogLevel: StateMachineLogLevel;
  readonly pendingJobAgeAlarmS: number;
  readonly relayRetryAttempts: number;
}

function wholeInRange(name: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be a whole number between ${min} and ${max}, got ${value}`);
  }
}

/**
 * Applies defaults and checks the props with the same bounds as the functions'
 * own start-up validation (`service/src/config.rs`), so a deploy can never give
 * the functions a configuration they would refuse.
 */
export function resolveProps(props: BatonStackProps, resources: Resources): ResolvedBatonProps {
  const r: ResolvedBatonProps = {
    stage: props.stage ?? 'dev',
    leaseDurationS: props.leaseDurationS ?? 180,
    heartbeatIntervalS: props.heartbeatIntervalS ?? 15,
    firstHeartbeatGraceS: props.firstHeartbeatGraceS ?? 60,
    reaperPeriodS: props.reaperPeriodS ?? 60,
    demandMetricsPeriodS: props.demandMetricsPeriodS ?? 60,
    sessionTtlS: props.sessionTtlS ?? 3600,
    pollIntervalS: props.pollIntervalS ?? 5,
    unschedulableFailS: props.unschedulableFailS ?? 900,
    logLevel: props.logLevel ?? 'info',
    deletionProtection: props.deletionProtection ?? true,
    archiveRetentionDays: props.archiveRetentionDays ?? resources.bus.archive_retention_days,
    functionMemoryMb: props.functionMemoryMb ?? 256,
    functionTimeoutS: props.functionTimeoutS ?? 30,
    logRetentionDays: props.logRetentionDays ?? 30,
    bucketRetentionDays: Object.fromEntries(
      allBuckets(resources).map((b) => [
        b.name,
        (b.name === ARTIFACTS_BUCKET ? props.artifactRetentionDays : undefined) ?? props.bucketRetentionDays ?? b.retention_days,
      ]),
    ),
    apiThrottleRateLimit: props.apiThrottleRateLimit ?? 100,
    apiThrottleBurstLimit: props.apiThrottleBurstLimit ?? 200,
    stateMachineLogLevel: props.stateMachineLogLevel ?? 'ERROR',
    pendingJobAgeAlarmS: props.pendingJobAgeAlarmS ?? 900,
    relayRetryAttempts: props.relayRetryAttempts ?? 10,
  };
  wholeInRange('leaseDurationS', r.leaseDurationS, 3, 86_400);
  wholeInRange('heartbeatIntervalS', r.heartbeatIntervalS, 1, 3_600);
  wholeInRange('firstHeartbeatGraceS', r.firstHeartbeatGraceS, 1, 86_400);
  if (r.leaseDurationS < 3 * r.heartbeatIntervalS) {
    throw new Error(
      `leaseDurationS (${r.leaseDurationS}) must be at least 3 × heartbeatIntervalS (${r.heartbeatIntervalS} × 3 = ${3 * r.heartbeatIntervalS})`,
    );
  }
  if (r.firstHeartbeatGraceS < r.heartbeatIntervalS) {
    throw new Error(
      `firstHeartbeatGraceS (${r.firstHeartbeatGraceS}) must be at least heartbeatIntervalS (${r.heartbeatIntervalS})`,
    );
  }
  for (const [name, period] of [
    ['reaperPeriodS', r.reaperPeriodS],
    ['demandMetricsPeriodS', r.demandMetricsPeriodS],
  ] as const) {
    wholeInRange(name, period, 60, 3_600);
    if (period % 60 !== 0) {
      throw new Error(`${name} (${period}) must be whole minutes: EventBridge schedules run at most once a minute`);
    }
  }
  wholeInRange('sessionTtlS', r.sessionTtlS, 60, 7 * 86_400);
  wholeInRange('pollIntervalS', r.pollIntervalS, 1, 300);
  wholeInRange('unschedulableFailS', r.unschedulableFailS, 10, 7 * 86_400);
  if (!/^[A-Za-z0-9_=,:.-]+$/.test(r.logLevel)) {
    throw new Error(`logLevel ${JSON.stringify(r.logLevel)} is not a RUST_LOG filter`);
  }
  wholeInRange('archiveRetentionDays', r.archiveRetentionDays, 1, 36_500);
  if (props.bucketRetentionDays !== undefined) {
    wholeInRange('bucketRetentionDays', props.bucketRetentionDays, 1, 3_650);
  }
  if (props.artifactRetentionDays !== undefined) {
    wholeInRange('artifactRetentionDays', props.artifactRetentionDays, 1, 3_650);
    if (!allBuckets(resources).some((b) => b.name === ARTIFACTS_BUCKET)) {
      throw new Error(`artifactRetentionDays is given but resources.json has no bucket named ${ARTIFACTS_BUCKET}`);
    }
  }
  wholeInRange('functionMemoryMb', r.functionMemoryMb, 128, 10_240);
  wholeInRange('functionTimeoutS', r.functionTimeoutS, 1, 900);
  wholeInRange('apiThrottleRateLimit', r.apiThrottleRateLimit, 1, 10_000);
  wholeInRange('apiThrottleBurstLimit', r.apiThrottleBurstLimit, 1, 5_000);
  wholeInRange('pendingJobAgeAlarmS', r.pendingJobAgeAlarmS, 1, 7 * 86_400);
  wholeInRange('relayRetryAttempts', r.relayRetryAttempts, 0, 10_000);
  if (!(r.logRetentionDays in RETENTION)) {
    throw new Error(`logRetentionDays must be one of ${Object.keys(RETENTION).join(', ')}, got ${r.logRetentionDays}`);
  }
  if (r.stateMachineLogLevel !== 'ALL' && r.stateMachineLogLevel !== 'ERROR') {
    throw new Error(`stateMachineLogLevel must be ALL or ERROR, got ${r.stateMachineLogLevel}`);
  }
  return r;
}

const RETENTION: Record<number, logs.RetentionDays> = {
  1: logs.RetentionDays.ONE_DAY,
  3: logs.RetentionDays.THREE_DAYS,
  5: logs.RetentionDays.FIVE_DAYS,
  7: logs.RetentionDays.ONE_WEEK,
  14: logs.RetentionDays.TWO_WEEKS,
  30: logs.RetentionDays.ONE_MONTH,
  60: logs.RetentionDays.TWO_MONTHS,
  90: logs.RetentionDays.THREE_MONTHS,
  180: logs.RetentionDays.SIX_MONTHS,
  365: logs.RetentionDays.ONE_YEAR,
};

/** The ARN `push:post` is scoped to: POST on every connection of one stage of the push API. */
export function pushConnectionsArn(stack: Stack, apiId: string, stageName: string): string {
  return stack.formatArn({ service: 'execute-api', resource: apiId, resourceName: `${stageName}/POST/@connections/*` });
}

let placeholderAsset: string | undefined;

/** An empty asset directory standing in for a crate that does not exist yet. */
function placeholderAssetDir(): string {
  if (!placeholderAsset) {
    placeholderAsset = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-missing-crate-'));
    fs.writeFileSync(path.join(placeholderAsset, 'README'), 'placeholder for a function crate that does not exist yet\n');
  }
  return placeholderAsset;
}

export class BatonStack extends Stack {
  readonly config: ResolvedBatonProps;
  readonly naming: Naming;
  readonly resources: Resources;
  readonly table: dynamodb.Table;
  readonly bus: events.EventBus;
  readonly api: apigwv2.HttpApi;
  readonly apiStage: apigwv2.HttpStage;
  /** The push socket (`push` in resources.json). */
  readonly pushApi: apigwv2.WebSocketApi;
  readonly pushStage: apigwv2.WebSocketStage;
  /** Logical name → function. */
  readonly functions = new Map<string, lambda.Function>();
  /** Logical queue name (subscriber or task queue) → queue and DLQ. */
  readonly queues = new Map<string, { queue: sqs.Queue; dlq: sqs.Queue }>();
  /** Logical name → state machine. */
  readonly stateMachines = new Map<string, sfn.StateMachine>();
  /** Logical name → bucket. */
  readonly buckets = new Map<string, s3.Bucket>();
  /** The role of the AWS provisioner's runner instances (with props `provisioner` only). */
  runnerInstanceRole?: iam.Role;
  /** The web console: its bucket and the CloudFront distribution in front of it and of the API. */
  readonly console: BatonConsole;
  /** The configuration every function gets. */
  readonly functionEnvironment: Readonly<Record<string, string>>;
  /** The key workspace secrets are encrypted with (SSM SecureStrings). */
  readonly secretsKey: kms.Key;
  /** Pipelines' schedules (`scheduler` in resources.json). */
  readonly scheduleGroup: scheduler.CfnScheduleGroup;
  /** The role EventBridge Scheduler invokes the schedules' target with. */
  readonly schedulerRole: iam.Role;
  /** `secretsPath(stage)`. */
  private readonly secretsRoot: string;
  /** `hookSecretsPath(stage)`. */
  private readonly hookSecretsRoot: string;

  private readonly repo: RepoPaths;
  private readonly alarmAction?: cloudwatch.IAlarmAction;

  constructor(scope: Construct, id: string, props: BatonStackProps = {}) {
    super(scope, id, props);
    this.repo = props.repo ?? new RepoPaths();
    this.resources = props.resources ?? loadResources(this.repo.resourcesJson);
    for (const warning of validateResources(this.resources)) {
      Annotations.of(this).addWarningV2('baton:resources', warning);
    }
    this.config = resolveProps(props, this.resources);
    this.naming = new Naming(this.config.stage);
    const cfg = this.config;
    const naming = this.naming;
    Tags.of(this).add('baton:stage', cfg.stage);
    if (props.alarmTopicArn) {
      this.alarmAction = new cwActions.SnsAction(sns.Topic.fromTopicArn(this, 'AlarmTopic', props.alarmTopicArn));
    }

    // ---- the table
    const spec = this.resources.table;
    this.table = new dynamodb.Table(this, 'Table', {
      tableName: naming.physical(spec.name),
      partitionKey: { name: spec.partition_key, type: dynamodb.AttributeType.STRING },
      sortKey: { name: spec.sort_key, type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      stream: dynamodb.StreamViewType[spec.stream_view_type],
      timeToLiveAttribute: spec.ttl_attribute,
      deletionProtection: cfg.deletionProtection,
      removalPolicy: cfg.deletionProtection ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    const attributeType = (t: string) => (t === 'N' ? dynamodb.AttributeType.NUMBER : dynamodb.AttributeType.STRING);
    for (const gsi of spec.global_secondary_indexes) {
      this.table.addGlobalSecondaryIndex({
        indexName: gsi.name,
        partitionKey: { name: gsi.partition_key.name, type: attributeType(gsi.partition_key.type) },
        sortKey: { name: gsi.sort_key.name, type: attributeType(gsi.sort_key.type) },
        // KEYS_ONLY where a query needs the keys only: every write of an
        // indexed item is billed again on the index, by what it copies.
        projectionType: gsi.projection === 'KEYS_ONLY' ? dynamodb.ProjectionType.KEYS_ONLY : dynamodb.ProjectionType.ALL,
      });
    }

    // ---- the bus and its archive
    this.bus = new events.EventBus(this, 'Bus', { eventBusName: naming.physical(this.resources.bus.name) });
    this.bus.archive('Archive', {
      archiveName: naming.physical(`${this.resources.bus.name}-archive`),
      description: `Every fact published on ${naming.physical(this.resources.bus.name)}, for replay`,
      eventPattern: { account: [this.account] },
      retention: Duration.days(cfg.archiveRetentionDays),
    });

    // ---- buckets (job logs, job artifacts)
    for (const b of allBuckets(this.resources)) {
      const days = cfg.bucketRetentionDays[b.name];
      this.buckets.set(
        b.name,
        // No bucketName: S3 names are global across accounts, so a fixed
        // baton-<stage>-<name> may already belong to someone else, and a
        // RETAINed bucket would block the next deployment of the stage. The
        // functions get the name CloudFormation picks through `b.env`.
        new s3.Bucket(this, `Bucket${pascal(b.name)}`, {
          blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
          enforceSSL: true,
          encryption: s3.BucketEncryption.S3_MANAGED,
          // ACLs off: every object belongs to the bucket owner, including
          // those runners PUT through presigned URLs.
          objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
          // Unversioned, so expiration deletes a log for good instead of
          // leaving a noncurrent version behind.
          versioned: false,
          lifecycleRules: [
            {
              id: 'expire',
              expiration: Duration.days(days),
              // A runner that dies mid-upload leaves parts nobody completes.
              abortIncompleteMultipartUploadAfter: Duration.days(1),
            },
          ],
          // Like the table: job logs outlive the stack unless protection is lifted.
          // CloudFormation cannot delete a bucket that still holds objects.
          removalPolicy: cfg.deletionProtection ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
        }),
      );
    }

    // ---- queues (subscribers, then task queues), each with its DLQ
    for (const q of allQueues(this.resources)) {
      const dlq = new sqs.Queue(this, `Dlq${pascal(q.name)}`, {
        queueName: naming.dlq(q.name),
        retentionPeriod: Duration.days(14),
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
      });
      const queue = new sqs.Queue(this, `Queue${pascal(q.name)}`, {
        queueName: naming.physical(q.name),
        visibilityTimeout: Duration.seconds(q.visibility_timeout_s),
        deadLetterQueue: { queue: dlq, maxReceiveCount: q.max_receive_count },
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
      });
      this.queues.set(q.name, { queue, dlq });
    }

    // ---- state machines (before the functions: they get the run machine's ARN)
    const machineDir = props.stateMachineDir ?? this.repo.stateMachineDir;
    for (const m of this.resources.state_machines) {
      this.stateMachines.set(m.name, this.buildStateMachine(m.name, m.definition, m.queue_substitutions, machineDir));
    }

    // ---- the push socket, before the functions (they get its URLs); its
    // routes come after them. Functions → API is the only direction of
    // reference: the API itself names no function (the routes, integrations
    // and invoke permission do), so there is no cycle.
    const push = this.resources.push;
    this.pushApi = new apigwv2.WebSocketApi(this, 'PushApi', {
      apiName: naming.physical(push.name),
      description: `Baton push socket for runners (${cfg.stage})`,
      routeSelectionExpression: '$request.body.action',
    });
    // Named after the stage: the URLs end in /<stage>. No access logs: a
    // WebSocket stage logs only through the account-wide API Gateway
    // CloudWatch role, which this stack does not own.
    this.pushStage = new apigwv2.WebSocketStage(this, 'PushStage', {
      webSocketApi: this.pushApi,
      stageName: cfg.stage,
      autoDeploy: true,
      throttle: { rateLimit: cfg.apiThrottleRateLimit, burstLimit: cfg.apiThrottleBurstLimit },
    });

    // ---- workspace secrets: SecureStrings under secretsPath, this key's
    this.secretsRoot = secretsPath(cfg.stage);
    this.hookSecretsRoot = hookSecretsPath(cfg.stage);
    this.secretsKey = new kms.Key(this, 'SecretsKey', {
      description: `Baton (${cfg.stage}): workspace secrets`,
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // ---- functions
    const env: Record<string, string> = {
      BATON_SECRETS_KMS_KEY_ID: this.secretsKey.keyArn,
      BATON_TABLE: this.table.tableName,
      BATON_BUS: this.bus.eventBusName,
      BATON_STAGE: cfg.stage,
      BATON_LEASE_DURATION_S: String(cfg.leaseDurationS),
      BATON_HEARTBEAT_INTERVAL_S: String(cfg.heartbeatIntervalS),
      BATON_FIRST_HEARTBEAT_GRACE_S: String(cfg.firstHeartbeatGraceS),
      BATON_REAPER_PERIOD_S: String(cfg.reaperPeriodS),
      BATON_DEMAND_METRICS_PERIOD_S: String(cfg.demandMetricsPeriodS),
      BATON_SESSION_TTL_S: String(cfg.sessionTtlS),
      BATON_POLL_INTERVAL_S: String(cfg.pollIntervalS),
      BATON_UNSCHEDULABLE_FAIL_S: String(cfg.unschedulableFailS),
      RUST_LOG: cfg.logLevel,
      // Read by register (it hands the URL to runners); harmless elsewhere.
      [PUSH_URL_ENV]: this.pushStage.url,
    };
    const runMachine = this.stateMachines.get(RUN_STATE_MACHINE);
    if (runMachine) {
      env.BATON_RUN_STATE_MACHINE_ARN = runMachine.stateMachineArn;
    }
    for (const b of allBuckets(this.resources)) {
      if (b.env in env || b.env === PUSH_ENDPOINT_ENV) {
        throw new Error(`bucket ${b.name}: env ${b.env} is already one of the functions' configuration variables`);
      }
      env[b.env] = this.bucket(b.name).bucketName;
    }
    // An artifact's item expires with its archive (the bucket's lifecycle).
    const artifactDays = cfg.bucketRetentionDays[ARTIFACTS_BUCKET];
    if (artifactDays !== undefined) {
      env.BATON_ARTIFACT_RETENTION_DAYS = String(artifactDays);
    }
    this.functionEnvironment = env;
    for (const fn of this.resources.functions) {
      this.functions.set(fn.name, this.buildFunction(fn, props.missingCrates ?? 'error'));
    }

    // ---- pipelines' schedules: EventBridge Scheduler invokes their target
    // through a role that may invoke only it; `scheduler:schedules` keeps them.
    this.scheduleGroup = new scheduler.CfnScheduleGroup(this, 'ScheduleGroup', {
      name: naming.physical(this.resources.scheduler.group),
    });
    this.schedulerRole = new iam.Role(this, 'SchedulerRole', {
      description: `Baton (${cfg.stage}): EventBridge Scheduler invokes the pipelines' schedules' target`,
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': this.account } },
      }),
    });
    this.fn(this.resources.scheduler.target).grantInvoke(this.schedulerRole);

    // ---- permissions: functions, then state machines' extra permissions
    for (const fn of this.resources.functions) {
      const f = this.fn(fn.name);
      for (const raw of fn.permissions ?? []) {
        const p = parsePermission(raw);
        // The stream event source grants stream reading itself.
        if (p.kind === 'stream:read' && fn.trigger === 'stream') {
          continue;
        }
        this.grant(f, p);
        // Only a function that may post learns where to: without the
        // variable its Pusher is disabled instead of failing on AccessDenied.
        if (p.kind === 'push:post') {
          f.addEnvironment(PUSH_ENDPOINT_ENV, this.pushStage.callbackUrl);
        }
        // Only what keeps the schedules learns where they are (the target's
        // own ARN in its own variables would be a cycle).
        if (p.kind === 'scheduler:schedules') {
          f.addEnvironment('BATON_SCHEDULE_GROUP', this.scheduleGroup.name!);
          f.addEnvironment('BATON_SCHEDULE_TARGET_ARN', this.fn(this.resources.scheduler.target).functionArn);
          f.addEnvironment('BATON_SCHEDULE_ROLE_ARN', this.schedulerRole.roleArn);
        }
      }
    }
    for (const m of this.resources.state_machines) {
      for (const raw of m.permissions ?? []) {
        this.grant(this.stateMachines.get(m.name)!, parsePermission(raw));
      }
    }

    // ---- triggers
    const streamFunctions = this.resources.functions.filter((f) => f.trigger === 'stream');
    for (const fn of streamFunctions) {
      // A batch that keeps failing is split until the failing record is
      // alone, then handed to this queue after the retries, so one poison
      // record never holds up the single ordered stream for every
      // workspace. The facts of a batch that lands there are still in the
      // outbox (kept 7 days): `baton-ops republish-outbox` publishes them
      // again (docs/limits.md).
      const failures = new sqs.Queue(this, `StreamFailures${pascal(fn.name)}`, {
        queueName: `${naming.physical(fn.name)}-stream-failures`,
        retentionPeriod: Duration.days(14),
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
      });
      this.alarm(`AlarmStreamFailures${pascal(fn.name)}`, {
        alarmName: `${naming.physical(fn.name)}-stream-failures-not-empty`,
        alarmDescription: `Stream batches ${naming.physical(fn.name)} gave up on: replay them from the outbox`,
        metric: failures.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum' }),
        threshold: 1,
      });
      this.fn(fn.name).addEventSource(
        new DynamoEventSource(this.table, {
          startingPosition: lambda.StartingPosition.TRIM_HORIZON,
          batchSize: fn.batch_size ?? 100,
          reportBatchItemFailures: true,
          bisectBatchOnError: true,
          retryAttempts: cfg.relayRetryAttempts,
          onFailure: new SqsDlq(failures),
          // Only new outbox items invoke the relay: heartbeats, leases and
          // attempt writes no longer do.
          filters: [
            lambda.FilterCriteria.filter({
              eventName: lambda.FilterRule.isEqual('INSERT'),
              dynamodb: { NewImage: { type: { S: lambda.FilterRule.isEqual('outbox') } } },
            }),
          ],
        }),
      );
    }
    for (const q of allQueues(this.resources)) {
      this.fn(q.function).addEventSource(
        new SqsEventSource(this.queue(q.name).queue, { batchSize: q.batch_size, reportBatchItemFailures: true }),
      );
    }
    for (const s of this.resources.subscribers) {
      new events.Rule(this, `Rule${pascal(s.name)}`, {
        ruleName: naming.physical(s.name),
        description: `Facts for subscriber ${s.name} → ${naming.physical(s.name)}`,
        eventBus: this.bus,
        eventPattern: { detailType: [...s.facts] },
        targets: [new targets.SqsQueue(this.queue(s.name).queue)],
      });
    }
    for (const s of this.resources.schedules) {
      const period = env[s.period_config];
      if (period === undefined) {
        throw new Error(
          `schedule ${s.name}: period_config ${s.period_config} is not one of the configuration variables (${Object.keys(env).join(', ')})`,
        );
      }
      const seconds = Number(period);
      if (!Number.isInteger(seconds) || seconds < 60 || seconds % 60 !== 0) {
        throw new Error(`schedule ${s.name}: ${s.period_config}=${period} is not whole minutes (EventBridge's finest rate)`);
      }
      new events.Rule(this, `Schedule${pascal(s.name)}`, {
        ruleName: naming.physical(s.name),
        description: `Runs ${s.function} every ${s.period_config} (${seconds} s)`,
        schedule: events.Schedule.rate(Duration.seconds(seconds)),
        targets: [new targets.LambdaFunction(this.fn(s.function))],
      });
    }

    // ---- the HTTP API
    const accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', {
      logGroupName: `/aws/vendedlogs/apigateway/${naming.physical('api')}`,
      retention: RETENTION[cfg.logRetentionDays],
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.api = new apigwv2.HttpApi(this, 'Api', {
      apiName: naming.physical('api'),
      description: `Baton API (${cfg.stage})`,
      createDefaultStage: false,
    });
    this.apiStage = new apigwv2.HttpStage(this, 'ApiDefaultStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: cfg.apiThrottleRateLimit, burstLimit: cfg.apiThrottleBurstLimit },
      accessLogSettings: {
        destination: new apigwv2.LogGroupLogDestination(accessLogs),
        format: apigw.AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            ip: '$context.identity.sourceIp',
            requestTime: '$context.requestTime',
            method: '$context.httpMethod',
            routeKey: '$context.routeKey',
            path: '$context.path',
            status: '$context.status',
            protocol: '$context.protocol',
            responseLength: '$context.responseLength',
            latencyMs: '$context.responseLatency',
            integrationLatencyMs: '$context.integrationLatency',
            integrationError: '$context.integrationErrorMessage',
            userAgent: '$context.identity.userAgent',
          }),
        ),
      },
    });
    const integrations = new Map<string, HttpLambdaIntegration>();
    for (const route of this.resources.routes) {
      let integration = integrations.get(route.function);
      if (!integration) {
        integration = new HttpLambdaIntegration(`Integration${pascal(route.function)}`, this.fn(route.function), {
          payloadFormatVersion: apigwv2.PayloadFormatVersion.VERSION_2_0,
        });
        integrations.set(route.function, integration);
      }
      this.api.addRoutes({
        path: route.path,
        methods: [apigwv2.HttpMethod[route.method as keyof typeof apigwv2.HttpMethod]],
        integration,
      });
    }

    // ---- the push socket's routes: $connect / $disconnect invoke the push
    // function (proxy: its answer, e.g. 401, decides the upgrade); the
    // keep-alive message is answered by the gateway (MOCK), so an idle
    // socket kept open costs no invocation.
    const pushIntegration = new WebSocketLambdaIntegration('PushIntegration', this.fn(push.function));
    this.pushApi.addRoute('$connect', { integration: pushIntegration });
    this.pushApi.addRoute('$disconnect', { integration: pushIntegration });
    const keepalive = this.pushApi.addRoute(push.keepalive_action, {
      integration: new WebSocketMockIntegration('PushKeepaliveIntegration', {
        // A MOCK integration answers with the status code its request template
        // yields; the integration response below turns it into the reply.
        requestTemplates: { $default: '{"statusCode": 200}' },
        templateSelectionExpression: '\\$default',
      }),
      // A route response: the gateway replies on the socket.
      returnResponse: true,
    });
    const keepaliveIntegration = keepalive.node.findChild('PushKeepaliveIntegration') as apigwv2.WebSocketIntegration;
    new apigwv2.CfnIntegrationResponse(this, 'PushKeepaliveIntegrationResponse', {
      apiId: this.pushApi.apiId,
      integrationId: keepaliveIntegration.integrationId,
      integrationResponseKey: '$default',
      responseTemplates: { $default: KEEPALIVE_REPLY },
      templateSelectionExpression: '\\$default',
    });

    // ---- the web console (web/), on the API's origin: after the functions,
    // so a missing crate is reported before a missing console.
    this.console = new BatonConsole(this, 'Console', {
      naming,
      api: this.api,
      source: consoleSource(this, this.repo, props.consoleDir, props.missingCrates ?? 'error'),
      logRetention: RETENTION[cfg.logRetentionDays],
    });

    // ---- the AWS provisioner (optional), before the alarms: its function
    // gets the errors and throttles alarms of every function.
    if (props.provisioner) {
      if (!this.resources.aws_provisioner) {
        throw new Error('props.provisioner is given but resources.json has no aws_provisioner');
      }
      this.buildAwsProvisioner(this.resources.aws_provisioner, props.provisioner, props.missingCrates ?? 'error');
    }

    // ---- alarms
    for (const [name, { dlq }] of this.queues) {
      this.alarm(`AlarmDlq${pascal(name)}`, {
        alarmName: `${naming.dlq(name)}-not-empty`,
        alarmDescription: `Messages in ${naming.dlq(name)}: ${name} gave up on them after max_receive_count attempts`,
        metric: dlq.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum' }),
        threshold: 1,
      });
    }
    for (const [name, f] of this.functions) {
      this.alarm(`AlarmErrors${pascal(name)}`, {
        alarmName: `${naming.physical(name)}-errors`,
        alarmDescription: `Function ${naming.physical(name)} failed invocations`,
        metric: f.metricErrors({ period: Duration.minutes(5), statistic: 'Sum' }),
        threshold: 1,
      });
      this.alarm(`AlarmThrottles${pascal(name)}`, {
        alarmName: `${naming.physical(name)}-throttles`,
        alarmDescription: `Function ${naming.physical(name)} was throttled`,
        metric: f.metricThrottles({ period: Duration.minutes(5), statistic: 'Sum' }),
        threshold: 1,
      });
    }
    for (const fn of streamFunctions) {
      this.alarm(`AlarmIteratorAge${pascal(fn.name)}`, {
        alarmName: `${naming.physical(fn.name)}-iterator-age`,
        alarmDescription: `Facts wait more than 5 minutes in the table stream before ${naming.physical(fn.name)} relays them`,
        metric: this.fn(fn.name).metric('IteratorAge', { period: Duration.minutes(5), statistic: 'Maximum' }),
        threshold: 300_000,
      });
    }
    for (const [name, m] of this.stateMachines) {
      this.alarm(`AlarmExecutionsFailed${pascal(name)}`, {
        alarmName: `${naming.physical(name)}-executions-failed`,
        alarmDescription: `Executions of ${naming.physical(name)} failed (Baton's orchestration never fails on purpose)`,
        metric: m.metricFailed({ period: Duration.minutes(5), statistic: 'Sum' }),
        threshold: 1,
      });
    }
    // ExecutionError: the gateway could not call an integration (invoke
    // permission, throttled or failed invocation, bad mock). Not
    // IntegrationError: it also counts every 401 the push function answers
    // a bad token with, which is the client's error.
    this.alarm('AlarmPushExecutionErrors', {
      alarmName: `${naming.physical(push.name)}-execution-errors`,
      alarmDescription: `The push socket ${naming.physical(push.name)} failed to call its integrations (runners fall back to their safety poll)`,
      metric: this.pushStage.metric('ExecutionError', { period: Duration.minutes(5), statistic: 'Sum' }),
      threshold: 1,
    });
    this.alarm('AlarmOldestPendingJob', {
      alarmName: `${naming.prefix}oldest-pending-job-age`,
      alarmDescription: `A job has been pending for more than ${cfg.pendingJobAgeAlarmS} s (no runner claimed it)`,
      metric: new cloudwatch.Metric({
        ...PENDING_JOB_METRIC,
        dimensionsMap: { stage: cfg.stage },
        statistic: 'Maximum',
        period: Duration.minutes(1),
      }),
      threshold: cfg.pendingJobAgeAlarmS,
      evaluationPeriods: 3,
    });
    // Events producers put on the bus for listening jobs that the
    // external-events function dropped (another workspace's run, malformed,
    // a job that does not listen): acknowledged, so no dead-letter queue
    // shows them; the function logs why.
    this.alarm('AlarmExternalEventsDropped', {
      alarmName: `${naming.prefix}external-events-dropped`,
      alarmDescription: 'Events for listening jobs were dropped (another workspace\'s run, malformed, or not listening): see the external-events logs',
      metric: new cloudwatch.Metric({
        ...EXTERNAL_EVENTS_DROPPED_METRIC,
        dimensionsMap: { function: 'external-events' },
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      threshold: 1,
    });
    // The reaper skips a shard whose expiry index read was throttled past
    // the SDK's retries and goes on with the others; one skip is the next
    // tick's to make up. Skips in every period for 15 minutes mean leases of
    // dead runners are not expiring: their jobs hold and nothing else fails.
    this.alarm('AlarmReaperShardsSkipped', {
      alarmName: `${naming.prefix}reaper-shards-skipped`,
      alarmDescription: 'The lease reaper could not read a shard of the lease expiry index for 15 minutes: leases of dead runners may not expire',
      metric: new cloudwatch.Metric({
        ...REAPER_SHARDS_SKIPPED_METRIC,
        dimensionsMap: { function: 'lease-reaper' },
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      threshold: 1,
      evaluationPeriods: 3,
    });
    // Runs a forge's delivery asked for (its answer named them) that
    // could not be created: acknowledged, so no dead-letter queue shows them.
    this.alarm('AlarmRunRequestsDropped', {
      alarmName: `${naming.prefix}run-requests-dropped`,
      alarmDescription: 'Runs webhook deliveries asked for were not created (pipeline deleted or refused, label sets full): see the run-requests logs',
      metric: new cloudwatch.Metric({
        ...RUN_REQUESTS_DROPPED_METRIC,
        dimensionsMap: { function: 'run-requests' },
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      threshold: 1,
    });
    // A tick the scheduler could not deliver within its retry policy (the
    // target throttled or failing for as long as the tick could still
    // fire) is dropped by the scheduler: a scheduled run that silently never
    // started. The target's own errors have their alarm; this is the rest.
    this.alarm('AlarmScheduleTicksDropped', {
      alarmName: `${naming.physical(this.resources.scheduler.group)}-ticks-dropped`,
      alarmDescription: "EventBridge Scheduler gave up delivering pipelines' schedule ticks: scheduled runs did not start",
      metric: new cloudwatch.Metric({
        namespace: 'AWS/Scheduler',
        metricName: 'InvocationDroppedCount',
        dimensionsMap: { ScheduleGroup: naming.physical(this.resources.scheduler.group) },
        statistic: 'Sum',
        period: Duration.minutes(5),
      }),
      threshold: 1,
    });
    // A forge whose secret no longer matches gets 401s in its own delivery
    // log, which nobody reads: pushes silently stop starting runs.
    this.alarm('AlarmHookBadSignatures', {
      alarmName: `${naming.prefix}hook-bad-signatures`,
      alarmDescription: 'Webhook deliveries were refused for their signature: a forge with a stale secret, or someone probing a hook URL',
      metric: new cloudwatch.Metric({
        ...HOOK_BAD_SIGNATURES_METRIC,
        dimensionsMap: { function: 'hooks' },
        statistic: 'Sum',
        period: Duration.minutes(15),
      }),
      threshold: 5,
    });

    // ---- outputs
    new CfnOutput(this, 'ApiUrl', { value: this.apiStage.url, description: 'Base URL of the HTTP API' });
    new CfnOutput(this, 'ConsoleUrl', { value: this.console.url, description: 'The web console (its CloudFront distribution; /v1/* is the API)' });
    new CfnOutput(this, 'PushUrl', { value: this.pushStage.url, description: 'WebSocket URL of the push socket (runners connect to it)' });
    new CfnOutput(this, 'PushCallbackUrl', {
      value: this.pushStage.callbackUrl,
      description: 'Management endpoint of the push socket (posts to its connections)',
    });
    new CfnOutput(this, 'TableName', { value: this.table.tableName });
    new CfnOutput(this, 'BusName', { value: this.bus.eventBusName });
    for (const [name, b] of this.buckets) {
      new CfnOutput(this, `BucketName${pascal(name)}`, { value: b.bucketName, description: `Bucket ${name}` });
    }
    for (const [name, m] of this.stateMachines) {
      new CfnOutput(this, `StateMachineArn${pascal(name)}`, { value: m.stateMachineArn, description: `State machine ${name}` });
    }
    for (const name of this.queues.keys()) {
      new CfnOutput(this, `DlqName${pascal(name)}`, { value: naming.dlq(name), description: `DLQ of ${name}` });
    }
    new CfnOutput(this, 'DlqNames', {
      value: [...this.queues.keys()].map((n) => naming.dlq(n)).join(',') || '-',
      description: 'Every DLQ, comma-separated',
    });
  }

  /** The function of a logical name. */
  fn(name: string): lambda.Function {
    const f = this.functions.get(name);
    if (!f) {
      throw new Error(`no function ${name}`);
    }
    return f;
  }

  queue(name: string): { queue: sqs.Queue; dlq: sqs.Queue } {
    const q = this.queues.get(name);
    if (!q) {
      throw new Error(`no queue ${name}`);
    }
    return q;
  }

  private bucket(name: string): s3.Bucket {
    const b = this.buckets.get(name);
    if (!b) {
      throw new Error(`no bucket ${name}`);
    }
    return b;
  }

  private machine(name: string): sfn.StateMachine {
    const m = this.stateMachines.get(name);
    if (!m) {
      throw new Error(`no state machine ${name}`);
    }
    return m;
  }

  private alarm(
    id: string,
    props: Omit<cloudwatch.AlarmProps, 'evaluationPeriods' | 'comparisonOperator' | 'treatMissingData'> & {
      evaluationPeriods?: number;
    },
  ): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(this, id, {
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      ...props,
    });
    if (this.alarmAction) {
      alarm.addAlarmAction(this.alarmAction);
    }
    return alarm;
  }

  private buildStateMachine(
    name: string,
    file: string,
    substitutions: Readonly<Record<string, string>>,
    dir: string,
  ): sfn.StateMachine {
    const definitionPath = path.join(dir, file);
    if (!fs.existsSync(definitionPath)) {
      throw new Error(`state machine ${name}: ${definitionPath} does not exist`);
    }
    const raw = fs.readFileSync(definitionPath, 'utf-8');
    try {
      JSON.parse(raw);
    } catch (e) {
      throw new Error(`state machine ${name}: ${definitionPath} is not JSON: ${(e as Error).message}`);
    }
    const used = placeholders(raw);
    const declared = Object.keys(substitutions).sort();
    const undeclared = used.filter((k) => !declared.includes(k));
    const unused = declared.filter((k) => !used.includes(k));
    if (undeclared.length > 0 || unused.length > 0) {
      throw new Error(
        `state machine ${name}: placeholders of ${file} (${used.join(', ') || 'none'}) and queue_substitutions (${declared.join(', ') || 'none'}) differ`,
      );
    }
    const logGroup = new logs.LogGroup(this, `StateMachineLogs${pascal(name)}`, {
      logGroupName: `/aws/vendedlogs/states/${this.naming.physical(name)}`,
      retention: RETENTION[this.config.logRetentionDays],
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const definitionSubstitutions: Record<string, string> = {};
    for (const [key, queueName] of Object.entries(substitutions)) {
      definitionSubstitutions[key] = this.queue(queueName).queue.queueUrl;
    }
    const machine = new sfn.StateMachine(this, `StateMachine${pascal(name)}`, {
      stateMachineName: this.naming.physical(name),
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromString(raw),
      definitionSubstitutions,
      logs: {
        destination: logGroup,
        level: this.config.stateMachineLogLevel === 'ALL' ? sfn.LogLevel.ALL : sfn.LogLevel.ERROR,
        includeExecutionData: true,
      },
      tracingEnabled: true,
    });
    for (const queueName of new Set(Object.values(substitutions))) {
      this.queue(queueName).queue.grantSendMessages(machine);
    }
    return machine;
  }

  private buildFunction(spec: FunctionSpec, missingCrates: MissingCrates): lambda.Function {
    const id = `Function${pascal(spec.name)}`;
    const functionName = this.naming.physical(spec.name);
    const logGroup = new logs.LogGroup(this, `${id}Logs`, {
      logGroupName: `/aws/lambda/${functionName}`,
      retention: RETENTION[this.config.logRetentionDays],
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // An explicit role without the AWSLambdaBasicExecutionRole managed policy
    // (whose logs actions are on "*"): the function may write its own log group only.
    const role = new iam.Role(this, `${id}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Execution role of ${functionName}`,
    });
    logGroup.grantWrite(role);

    // A function fed by queues gets at most a sixth of their visibility
    // timeout (AWS's guidance for SQS event sources): a batch still being
    // handled, or retried by the Lambda service after a throttle, must not
    // become visible and be delivered a second time meanwhile.
    const feeding = allQueues(this.resources).filter((q: QueueSpec) => q.function === spec.name);
    const timeoutS = Math.min(
      this.config.functionTimeoutS,
      ...feeding.map((q) => Math.floor(q.visibility_timeout_s / VISIBILITY_PER_TIMEOUT)),
    );
    const common = {
      functionName,
      description: `Baton ${spec.name} (${spec.trigger})`,
      architecture: lambda.Architecture.ARM_64,
      memorySize: this.config.functionMemoryMb,
      timeout: Duration.seconds(timeoutS),
      environment: { ...this.functionEnvironment },
      role,
      logGroup,
    };
    const manifestPath = this.repo.functionManifest(spec.name);
    if (fs.existsSync(manifestPath)) {
      return new RustFunction(this, id, {
        ...common,
        manifestPath,
        binaryName: `baton-${spec.name}`,
        bundling: {
          architecture: lambda.Architecture.ARM_64,
          profile: 'release',
          // Build exactly what Cargo.lock says.
          cargoLambdaFlags: ['--locked'],
        },
      });
    }
    if (missingCrates === 'placeholder') {
      const f = new lambda.Function(this, id, {
        ...common,
        runtime: lambda.Runtime.PROVIDED_AL2023,
        handler: 'bootstrap',
        code: lambda.Code.fromAsset(placeholderAssetDir()),
      });
      Annotations.of(f).addWarningV2('baton:missing-crate', `${manifestPath} does not exist: placeholder code`);
      return f;
    }
    throw new Error(
      `function ${spec.name}: ${manifestPath} does not exist (every function of resources.json is the crate functions/<name> with binary baton-<name>)`,
    );
  }

  /**
   * The AWS provisioner: its function (a provisioner calling the API with its
   * token, no table access), its schedule and its wake-up on demand, its scoped grants, the runner
   * instances' role and profile, and alarms on failed launches and orphans.
   */
  private buildAwsProvisioner(spec: AwsProvisionerSpec, p: AwsProvisionerProps, missingCrates: MissingCrates): void {
    const naming = this.naming;
    const stage = this.config.stage;
    if (!/^\/[A-Za-z0-9_.\-/]+$/.test(p.tokenParameterName)) {
      throw new Error(`provisioner.tokenParameterName ${JSON.stringify(p.tokenParameterName)} must be an SSM parameter path starting with /`);
    }
    if (!/^lt-[0-9a-f]{8,17}$/.test(p.launchTemplateId) && !p.launchTemplateId.startsWith('${Token[')) {
      throw new Error(`provisioner.launchTemplateId ${JSON.stringify(p.launchTemplateId)} must be a launch template id (lt-…)`);
    }
    const periodS = p.periodS ?? spec.period_s;
    wholeInRange('provisioner.periodS', periodS, 60, 86_400);
    if (periodS % 60 !== 0) {
      throw new Error(`provisioner.periodS (${periodS}) must be whole minutes: EventBridge schedules run at most once a minute`);
    }
    if (p.maxInstances !== undefined) {
      wholeInRange('provisioner.maxInstances', p.maxInstances, 1, 10_000);
    }
    if (p.reservationExpiryS !== undefined) {
      wholeInRange('provisioner.reservationExpiryS', p.reservationExpiryS, 1, 3_600);
    }
    for (const raw of spec.function.permissions ?? []) {
      if (!(PROVISIONER_PERMISSIONS as readonly string[]).includes(raw)) {
        throw new Error(`aws_provisioner.function: ${raw} is not one of its permissions (${PROVISIONER_PERMISSIONS.join(', ')})`);
      }
    }
    const f = this.buildFunction(spec.function, missingCrates);
    this.functions.set(spec.function.name, f);
    f.addEnvironment('BATON_API_URL', this.apiStage.url);
    f.addEnvironment('BATON_PROVISIONER_TOKEN_PARAMETER', p.tokenParameterName);
    f.addEnvironment('BATON_LAUNCH_TEMPLATE', p.launchTemplateId);
    f.addEnvironment('BATON_LAUNCH_TEMPLATE_VERSION', p.launchTemplateVersion ?? '$Default');
    if (p.maxInstances !== undefined) {
      f.addEnvironment('BATON_PROVISIONER_MAX_INSTANCES', String(p.maxInstances));
    }
    if (p.reservationExpiryS !== undefined) {
      f.addEnvironment('BATON_RESERVATION_EXPIRY_S', String(p.reservationExpiryS));
    }
    if (p.runnerArgs) {
      f.addEnvironment('BATON_RUNNER_ARGS', p.runnerArgs);
    }

    // The runner instances' role: read and delete their own token, nothing
    // else. The operator's launch template names its instance profile.
    const tokens = runnerTokensPath(stage);
    const tokenArn = (name: string) => this.formatArn({ service: 'ssm', resource: 'parameter', resourceName: name.replace(/^\//, '') });
    const role = new iam.Role(this, 'RunnerInstanceRole', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      description: `Runner instances of Baton's AWS provisioner (${stage}): read and delete their token`,
    });
    role.addToPolicy(new iam.PolicyStatement({ actions: ['ssm:GetParameter', 'ssm:DeleteParameter'], resources: [tokenArn(`${tokens}/*`)] }));
    this.runnerInstanceRole = role;
    const profile = new iam.CfnInstanceProfile(this, 'RunnerInstanceProfile', {
      instanceProfileName: naming.physical('runner'),
      roles: [role.roleName],
    });

    for (const raw of spec.function.permissions ?? []) {
      switch (raw) {
        case 'ec2:runner-instances': {
          const templateArn = this.formatArn({ service: 'ec2', resource: 'launch-template', resourceName: p.launchTemplateId });
          const instances = this.formatArn({ service: 'ec2', resource: 'instance', resourceName: '*' });
          f.addToRolePolicy(new iam.PolicyStatement({
            actions: ['ec2:RunInstances'],
            resources: ['*'],
            conditions: { ArnLike: { 'ec2:LaunchTemplate': templateArn }, Bool: { 'ec2:IsLaunchTemplateResource': 'true' } },
          }));
          // Tags only as part of the launch (TagSpecifications).
          f.addToRolePolicy(new iam.PolicyStatement({
            actions: ['ec2:CreateTags'],
            resources: [instances],
            conditions: { StringEquals: { 'ec2:CreateAction': 'RunInstances' } },
          }));
          f.addToRolePolicy(new iam.PolicyStatement({
            actions: ['ec2:TerminateInstances'],
            resources: [instances],
            conditions: { StringEquals: { 'aws:ResourceTag/baton:stage': stage } },
          }));
          f.addToRolePolicy(new iam.PolicyStatement({ actions: ['ec2:DescribeInstances'], resources: ['*'] }));
          // The template's instance profile is this stack's: launching with it passes its role.
          f.addToRolePolicy(new iam.PolicyStatement({
            actions: ['iam:PassRole'],
            resources: [role.roleArn],
            conditions: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
          }));
          break;
        }
        case 'ssm:runner-tokens':
          f.addToRolePolicy(new iam.PolicyStatement({ actions: ['ssm:PutParameter', 'ssm:DeleteParameter'], resources: [tokenArn(`${tokens}/*`)] }));
          f.addToRolePolicy(new iam.PolicyStatement({ actions: ['ssm:GetParametersByPath'], resources: [tokenArn(tokens)] }));
          break;
        case 'ssm:provisioner-token':
          f.addToRolePolicy(new iam.PolicyStatement({ actions: ['ssm:GetParameter'], resources: [tokenArn(p.tokenParameterName)] }));
          break;
        default:
          throw new Error(`aws_provisioner.function: unknown permission ${raw}`);
      }
    }

    new events.Rule(this, `Schedule${pascal(spec.function.name)}`, {
      ruleName: naming.physical(spec.function.name),
      description: `Runs ${spec.function.name} every ${periodS} s`,
      schedule: events.Schedule.rate(Duration.seconds(periodS)),
      targets: [new targets.LambdaFunction(f)],
    });

    // Woken between ticks when demand changes (a job queued), so a run
    // on an empty fleet waits seconds for its machine, not up to a period.
    // A queue gathers a burst into one batch, one tick; two ticks at most at
    // once (reserving is a conditional write: racing ticks never reserve
    // one job twice). A wake carries nothing: the tick reads demand itself,
    // so a failed one needs no dead-letter queue (the message is tried
    // again, and dropped after its short retention; the schedule goes on).
    const wakeOn = spec.wake_on ?? [];
    if (wakeOn.length > 0) {
      const batching = spec.wake_batching_s ?? 0;
      wholeInRange('aws_provisioner.wake_batching_s', batching, 0, 300);
      const wake = new sqs.Queue(this, `Wake${pascal(spec.function.name)}`, {
        queueName: naming.physical(`${spec.function.name}-wake`),
        visibilityTimeout: Duration.seconds(Math.max(this.config.functionTimeoutS * 2, 60)),
        retentionPeriod: Duration.minutes(10),
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
      });
      new events.Rule(this, `Wake${pascal(spec.function.name)}Rule`, {
        ruleName: naming.physical(`${spec.function.name}-wake`),
        description: `Wakes ${spec.function.name} when demand changes`,
        eventBus: this.bus,
        eventPattern: { detailType: [...wakeOn] },
        targets: [new targets.SqsQueue(wake)],
      });
      f.addEventSource(
        new SqsEventSource(wake, { batchSize: 100, maxBatchingWindow: Duration.seconds(batching), maxConcurrency: 2 }),
      );
    }

    const metric = (metricName: string) =>
      new cloudwatch.Metric({ namespace: 'Baton', metricName, dimensionsMap: { stage }, statistic: 'Sum', period: Duration.minutes(5) });
    this.alarm('AlarmProvisionerLaunchFailures', {
      alarmName: `${naming.prefix}provisioner-launch-failures`,
      alarmDescription: `The AWS provisioner could not launch an instance from ${p.launchTemplateId} (capacity, quota, template or IAM): its jobs wait`,
      metric: metric(PROVISIONER_METRICS.launchFailures),
      threshold: 1,
    });
    this.alarm('AlarmProvisionerOrphans', {
      alarmName: `${naming.prefix}provisioner-orphans`,
      alarmDescription: 'Instances whose runner never registered (orphan intents) were terminated: check the AMI, the boot script and the instance profile',
      metric: metric(PROVISIONER_METRICS.orphans),
      threshold: 1,
    });
    new CfnOutput(this, 'RunnerInstanceProfileArn', {
      value: profile.attrArn,
      description: 'Instance profile the launch template of the AWS provisioner must use',
    });
  }

  /** Grants one permission of the vocabulary (see `resources.ts`) with CDK grant methods. */
  /** The ARN of parameters under the secrets path (`*`: every workspace's). */
  private secretsArn(below: string): string {
    return this.formatArn({ service: 'ssm', resource: 'parameter', resourceName: `${this.secretsRoot.replace(/^\//, '')}/${below}` });
  }

  private grant(grantee: iam.IGrantable, p: Permission): void {
    switch (p.kind) {
      case 'table:read':
        this.table.grantReadData(grantee);
        return;
      case 'table:write':
        this.table.grantWriteData(grantee);
        // A ConditionCheck inside TransactWriteItems is authorized as ConditionCheckItem.
        this.table.grant(grantee, 'dynamodb:ConditionCheckItem');
        return;
      case 'table:describe':
        this.table.grant(grantee, 'dynamodb:DescribeTable');
        return;
      case 'stream:read':
        this.table.grantStreamRead(grantee);
        return;
      case 'bus:put':
        this.bus.grantPutEventsTo(grantee);
        return;
      case 'bus:describe':
        iam.Grant.addToPrincipal({ grantee, actions: ['events:DescribeEventBus'], resourceArns: [this.bus.eventBusArn] });
        return;
      case 'states:start':
        this.machine(p.machine).grantStartExecution(grantee);
        return;
      case 'states:stop':
        this.machine(p.machine).grantExecution(grantee, 'states:StopExecution');
        return;
      case 'states:read': {
        const machines = p.machine ? [this.machine(p.machine)] : [...this.stateMachines.values()];
        for (const m of machines) {
          m.grant(grantee, 'states:DescribeStateMachine', 'states:ListExecutions');
          m.grantExecution(
            grantee,
            'states:DescribeExecution',
            'states:GetExecutionHistory',
            'states:DescribeStateMachineForExecution',
          );
        }
        return;
      }
      case 'states:describe':
        for (const m of this.stateMachines.values()) {
          m.grant(grantee, 'states:DescribeStateMachine');
        }
        iam.Grant.addToPrincipal({ grantee, actions: ['states:ListStateMachines'], resourceArns: ['*'] });
        return;
      case 'states:callback':
        iam.Grant.addToPrincipal({
          grantee,
          actions: ['states:SendTaskSuccess', 'states:SendTaskFailure', 'states:SendTaskHeartbeat'],
          resourceArns: ['*'],
        });
        return;
      case 'queue:send':
        this.queue(p.queue).queue.grantSendMessages(grantee);
        return;
      case 'queue:list':
        iam.Grant.addToPrincipal({ grantee, actions: ['sqs:ListQueues'], resourceArns: ['*'] });
        return;
      // Not grantPut / grantRead (logs:*, artifacts:*): they add wildcard
      // actions (s3:Abort*, s3:GetObject*, s3:GetBucket*, s3:List*) that
      // least privilege refuses.
      case 'logs:write':
        // Presigned URLs are signed with the function's role: the runner's
        // PUT is authorized as the function's s3:PutObject.
        this.bucket(LOGS_BUCKET).grants.actionsOnObjectKeys(grantee, LOGS_KEY_PATTERN, 's3:PutObject');
        return;
      case 'logs:read':
        this.bucket(LOGS_BUCKET).grants.actionsOnObjectKeys(grantee, LOGS_KEY_PATTERN, 's3:GetObject');
        // ListObjectsV2 is authorized on the bucket, not on keys; every key
        // of the bucket is under logs/ anyway.
        iam.Grant.addToPrincipal({ grantee, actions: ['s3:ListBucket'], resourceArns: [this.bucket(LOGS_BUCKET).bucketArn] });
        return;
      case 'artifacts:write':
        // Multipart uploads through presigned URLs signed with the function's
        // role: CreateMultipartUpload, UploadPart and CompleteMultipartUpload
        // are all authorized as s3:PutObject; abandoning an upload is
        // s3:AbortMultipartUpload, an action of its own.
        this.bucket(ARTIFACTS_BUCKET).grants.actionsOnObjectKeys(
          grantee,
          ARTIFACTS_KEY_PATTERN,
          's3:PutObject',
          's3:AbortMultipartUpload',
        );
        return;
      case 'artifacts:read':
        // Presigned GETs only, no s3:ListBucket: the table, not the bucket,
        // says which artifacts a run has.
        this.bucket(ARTIFACTS_BUCKET).grants.actionsOnObjectKeys(grantee, ARTIFACTS_KEY_PATTERN, 's3:GetObject');
        return;
      // Not grantManageConnections (every stage) nor grantManagementApiAccess:
      // both allow every method, GET and DELETE of a connection too; the
      // functions only post (PostToConnection is POST), on this stage.
      case 'push:post':
        iam.Grant.addToPrincipal({
          grantee,
          actions: ['execute-api:ManageConnections'],
          resourceArns: [pushConnectionsArn(this, this.pushApi.apiId, this.pushStage.stageName)],
        });
        return;
      // Values are written (and listed, never read) by the secrets route;
      // only the claim reads them, for the job it hands out.
      case 'ssm:secrets': {
        iam.Grant.addToPrincipal({
          grantee,
          actions: ['ssm:PutParameter', 'ssm:DeleteParameter', 'ssm:GetParametersByPath'],
          resourceArns: [this.secretsArn('*')],
        });
        // Not grantEncrypt: it adds wildcard actions (kms:ReEncrypt*,
        // kms:GenerateDataKey*); SSM encrypts a SecureString with Encrypt.
        this.secretsKey.grant(grantee, 'kms:Encrypt', 'kms:GenerateDataKey');
        return;
      }
      case 'ssm:secrets-read':
        iam.Grant.addToPrincipal({ grantee, actions: ['ssm:GetParameters'], resourceArns: [this.secretsArn('*')] });
        this.secretsKey.grant(grantee, 'kms:Decrypt');
        return;
      // The hooks function keeps each hook's secret and reads it back to
      // verify a delivery: the only parameters it may touch.
      case 'ssm:hook-secrets': {
        const hooks = this.formatArn({
          service: 'ssm',
          resource: 'parameter',
          resourceName: `${this.hookSecretsRoot.replace(/^\//, '')}/*`,
        });
        iam.Grant.addToPrincipal({
          grantee,
          actions: ['ssm:PutParameter', 'ssm:GetParameter', 'ssm:DeleteParameter'],
          resourceArns: [hooks],
        });
        this.secretsKey.grant(grantee, 'kms:Encrypt', 'kms:GenerateDataKey', 'kms:Decrypt');
        return;
      }
      // The schedules of this stack's group only; the role they invoke
      // their target with may be passed to the scheduler and nothing else.
      case 'scheduler:schedules': {
        const schedules = this.formatArn({
          service: 'scheduler',
          resource: 'schedule',
          resourceName: `${this.scheduleGroup.name}/*`,
        });
        iam.Grant.addToPrincipal({
          grantee,
          actions: ['scheduler:CreateSchedule', 'scheduler:GetSchedule', 'scheduler:UpdateSchedule', 'scheduler:DeleteSchedule'],
          resourceArns: [schedules],
        });
        iam.Grant.addToPrincipal({ grantee, actions: ['scheduler:ListSchedules'], resourceArns: ['*'] });
        grantee.grantPrincipal.addToPrincipalPolicy(
          new iam.PolicyStatement({
            actions: ['iam:PassRole'],
            resources: [this.schedulerRole.roleArn],
            conditions: { StringEquals: { 'iam:PassedToService': 'scheduler.amazonaws.com' } },
          }),
        );
        return;
      }
      case 'ec2:runner-instances':
      case 'ssm:runner-tokens':
      case 'ssm:provisioner-token':
        throw new Error(`${p.kind} is granted by the AWS provisioner's props only (resources.json aws_provisioner)`);
    }
  }
}
