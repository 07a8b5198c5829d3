/**
 * The typed model of `infra/resources.json`, the one source of truth for
 * Baton's resources (the Rust side reads the same file in
 * `localstack/src/resources.rs`). Everything the stack creates is derived from it
 * by iteration: nothing here or in the stack lists functions, routes, queues or
 * state machines by name.
 *
 * The CDK side adds one optional key that the Rust parser ignores:
 * `functions[].permissions` (see {@link Permission}), and understands the same
 * key on `state_machines[]` entries for machines whose definition calls AWS
 * services other than their task queues.
 *
 * `buckets` is optional on both sides (serde `default`): a file without it
 * has no buckets. `push` is required on both sides.
 */
import * as fs from 'node:fs';

/** `websocket`: the `$connect` / `$disconnect` routes of the push socket (`push.function`). */
export type Trigger = 'http' | 'stream' | 'sqs' | 'schedule' | 'websocket' | 'scheduler';
export const TRIGGERS: readonly Trigger[] = ['http', 'stream', 'sqs', 'schedule', 'websocket', 'scheduler'];

export interface KeyAttribute {
  readonly name: string;
  /** `S` or `N`. */
  readonly type: 'S' | 'N';
}

/** What an index copies of an item (`ProjectionType`). */
export type GsiProjection = 'ALL' | 'KEYS_ONLY';
export const GSI_PROJECTIONS: readonly GsiProjection[] = ['ALL', 'KEYS_ONLY'];

export interface GsiSpec {
  readonly name: string;
  readonly partition_key: KeyAttribute;
  readonly sort_key: KeyAttribute;
  /** Absent means `ALL`, as the serde default of the Rust side. */
  readonly projection?: GsiProjection;
}

export interface TableSpec {
  readonly name: string;
  readonly partition_key: string;
  readonly sort_key: string;
  readonly ttl_attribute: string;
  readonly stream_view_type: 'NEW_AND_OLD_IMAGES' | 'NEW_IMAGE' | 'OLD_IMAGE' | 'KEYS_ONLY';
  readonly global_secondary_indexes: readonly GsiSpec[];
}

export interface BusSpec {
  readonly name: string;
  readonly archive_retention_days: number;
}

export interface BucketSpec {
  /** Logical name; the local provisioner names the bucket `baton-<stage>-<name>`, CloudFormation names it on AWS. */
  readonly name: string;
  /** Objects expire this many days after they are written. */
  readonly retention_days: number;
  /** The variable that gives every function the bucket's name, e.g. `BATON_LOGS_BUCKET`. */
  readonly env: string;
}

/** The bucket the `logs:write` / `logs:read` permissions are about. */
export const LOGS_BUCKET = 'logs';

/**
 * The key pattern `logs:write` / `logs:read` are scoped to: every key the
 * functions write starts with `logs/` (`execution_prefix` in
 * `service/src/usecases/logs.rs`).
 */
export const LOGS_KEY_PATTERN = 'logs/*';

/** The bucket the `artifacts:write` / `artifacts:read` permissions are about. */
export const ARTIFACTS_BUCKET = 'artifacts';

/**
 * The key pattern `artifacts:write` / `artifacts:read` are scoped to: every
 * key of a job artifact (a tar.gz archive) starts with `artifacts/`.
 */
export const ARTIFACTS_KEY_PATTERN = 'artifacts/*';

/**
 * The runners' push socket: an API Gateway WebSocket API whose `$connect` and
 * `$disconnect` routes invoke `function` (trigger `websocket`), and whose
 * `keepalive_action` route the gateway answers itself.
 */
export interface PushSpec {
  /** Logical name; the API is named `baton-<stage>-<name>`. */
  readonly name: string;
  readonly function: string;
  /** The `action` of the keep-alive message (route selection is `$request.body.action`). */
  readonly keepalive_action: string;
}

export interface FunctionSpec {
  readonly name: string;
  readonly trigger: Trigger;
  readonly batch_size?: number;
  /** CDK only: what the function may do beyond its trigger (see {@link parsePermission}). */
  readonly permissions?: readonly string[];
}

export interface RouteSpec {
  readonly method: string;
  readonly path: string;
  readonly function: string;
}

export interface QueueSpec {
  readonly name: string;
  readonly function: string;
  readonly max_receive_count: number;
  readonly visibility_timeout_s: number;
  readonly batch_size: number;
}

export interface SubscriberSpec extends QueueSpec {
  /** The `detail-type`s the subscriber's rule routes to its queue. */
  readonly facts: readonly string[];
}

export type TaskQueueSpec = QueueSpec;

/**
 * Pipelines' schedules: an EventBridge Scheduler schedule group whose
 * schedules each invoke `target` (trigger `scheduler`) with a tick's input.
 */
export interface SchedulerSpec {
  /** Logical name; the group is named `baton-<stage>-<group>`. */
  readonly group: string;
  readonly target: string;
}

export interface ScheduleSpec {
  readonly name: string;
  readonly function: string;
  /** The configuration variable holding the period in seconds, e.g. `BATON_REAPER_PERIOD_S`. */
  readonly period_config: string;
}

export interface StateMachineSpec {
  readonly name: string;
  /** File under `infra/statemachines/`. */
  readonly definition: string;
  /** `${Key}` placeholder → task queue whose URL replaces it. */
  readonly queue_substitutions: Readonly<Record<string, string>>;
  /** CDK only, optional: extra permissions of the machine's role (same vocabulary as functions). */
  readonly permissions?: readonly string[];
}

export interface Resources {
  readonly table: TableSpec;
  readonly bus: BusSpec;
  /** Optional, as on the Rust side (see {@link allBuckets}). */
  readonly buckets?: readonly BucketSpec[];
  readonly functions: readonly FunctionSpec[];
  readonly routes: readonly RouteSpec[];
  readonly push: PushSpec;
  readonly subscribers: readonly SubscriberSpec[];
  readonly task_queues: readonly TaskQueueSpec[];
  readonly schedules: readonly ScheduleSpec[];
  readonly scheduler: SchedulerSpec;
  readonly state_machines: readonly StateMachineSpec[];
  /**
   * The AWS reference provisioner: optional, apart from `functions`, so
   * nothing that iterates over the functions (the local stack, every
   * function's alarms and grants) sees it unless the stack is given its
   * `provisioner` props.
   */
  readonly aws_provisioner?: AwsProvisionerSpec;
}

export interface AwsProvisionerSpec {
  /** Trigger `schedule`; its permissions are the `ec2:` / `ssm:` ones below. */
  readonly function: FunctionSpec;
  /** Default period of its schedule, whole minutes (prop `provisioner.periodS` overrides it). */
  readonly period_s: number;
  /** Facts (detail types) that wake it between ticks, through a queue of its own. */
  readonly wake_on?: readonly string[];
  /** How long that queue gathers facts into one batch, one tick (0-300 s). */
  readonly wake_batching_s?: number;
}

/** The permissions only the AWS provisioner may hold (they need its props to be scoped). */
export const PROVISIONER_PERMISSIONS = ['ec2:runner-instances', 'ssm:runner-tokens', 'ssm:provisioner-token'] as const;

/**
 * What a function (or a state machine's role) may do. The vocabulary, as
 * written in `resources.json`:
 *
 * | permission              | grants                                                                   |
 * | ----------------------- | ------------------------------------------------------------------------ |
 * | `table:read`            | read items of the table and its indexes (`grantReadData`)                |
 * | `table:write`           | write items (`grantWriteData`) and `ConditionCheckItem` (transactions)   |
 * | `table:describe`        | `dynamodb:DescribeTable` on the table                                    |
 * | `stream:read`           | read the table's stream (`grantStreamRead`; implicit for `stream`)      |
 * | `bus:put`               | `events:PutEvents` on the bus                                            |
 * | `bus:describe`          | `events:DescribeEventBus` on the bus                                     |
 * | `states:start:<m>`      | `states:StartExecution` on machine `<m>`                                 |
 * | `states:stop:<m>`       | `states:StopExecution` on the executions of `<m>`                        |
 * | `states:read[:<m>]`     | describe `<m>` (or every machine) and its executions and their history  |
 * | `states:describe`       | `DescribeStateMachine` on every machine, `ListStateMachines`            |
 * | `states:callback`       | `SendTaskSuccess`/`SendTaskFailure`/`SendTaskHeartbeat`                  |
 * | `queue:send:<q>`        | `sqs:SendMessage` to queue `<q>` (a subscriber or a task queue)          |
 * | `queue:list`            | `sqs:ListQueues`                                                         |
 * | `logs:write`            | `s3:PutObject` on `logs/*` of the `logs` bucket (presigned uploads)      |
 * | `logs:read`             | `s3:GetObject` on `logs/*` of the `logs` bucket, `s3:ListBucket` on it   |
 * | `artifacts:write`       | `s3:PutObject` and `s3:AbortMultipartUpload` on `artifacts/*` of the `artifacts` bucket (presigned multipart uploads) |
 * | `artifacts:read`        | `s3:GetObject` on `artifacts/*` of the `artifacts` bucket (presigned downloads) |
 * | `push:post`             | `execute-api:ManageConnections` on `POST @connections/*` of the push API |
 * | `ec2:runner-instances`  | AWS provisioner only: run from its launch template, tag on create, terminate `baton:stage`-tagged instances, describe |
 * | `ssm:runner-tokens`     | AWS provisioner only: put/delete/list parameters under `/baton/<stage>/runner-tokens` |
 * | `ssm:provisioner-token` | AWS provisioner only: `ssm:GetParameter` on the token parameter its props name |
 * | `ssm:secrets`           | put/delete/list (never get) parameters under `/baton/<stage>/secrets`, encrypt with the secrets key |
 * | `ssm:secrets-read`      | `ssm:GetParameters` under `/baton/<stage>/secrets`, decrypt with the secrets key (the claim only) |
 * | `ssm:hook-secrets`      | put/get/delete parameters under `/baton/<stage>/hooks`, encrypt and decrypt with the secrets key (the hooks function) |
 * | `scheduler:schedules`   | create/get/update/delete the schedules of the stack's schedule group, list schedules, pass the role that invokes their target |
 */
export type Permission =
  | { readonly kind: 'table:read' }
  | { readonly kind: 'table:write' }
  | { readonly kind: 'table:describe' }
  | { readonly kind: 'stream:read' }
  | { readonly kind: 'bus:put' }
  | { readonly kind: 'bus:describe' }
  | { readonly kind: 'states:start'; readonly machine: string }
  | { readonly kind: 'states:stop'; readonly machine: string }
  | { readonly kind: 'states:read'; readonly machine?: string }
  | { readonly kind: 'states:describe' }
  | { readonly kind: 'states:callback' }
  | { readonly kind: 'queue:send'; readonly queue: string }
  | { readonly kind: 'queue:list' }
  | { readonly kind: 'logs:write' }
  | { readonly kind: 'logs:read' }
  | { readonly kind: 'artifacts:write' }
  | { readonly kind: 'artifacts:read' }
  | { readonly kind: 'push:post' }
  | { readonly kind: 'ec2:runner-instances' }
  | { readonly kind: 'ssm:runner-tokens' }
  | { readonly kind: 'ssm:provisioner-token' }
  | { readonly kind: 'ssm:secrets' }
  | { readonly kind: 'ssm:secrets-read' }
  | { readonly kind: 'ssm:hook-secrets' }
  | { readonly kind: 'scheduler:schedules' };

const SIMPLE = new Set([
  'table:read',
  'table:write',
  'table:describe',
  'stream:read',
  'bus:put',
  'bus:describe',
  'states:describe',
  'states:callback',
  'queue:list',
  'states:read',
  'logs:write',
  'logs:read',
  'artifacts:write',
  'artifacts:read',
  'push:post',
  'ssm:secrets',
  'ssm:secrets-read',
  'ssm:hook-secrets',
  'scheduler:schedules',
  ...PROVISIONER_PERMISSIONS,
]);

/** Parses one permission string; throws on anything outside the vocabulary. */
export function parsePermission(raw: string): Permission {
  if (SIMPLE.has(raw)) {
    return { kind: raw } as Permission;
  }
  const parts = raw.split(':');
  if (parts.length === 3 && parts[2].length > 0) {
    const [service, verb, target] = parts;
    const key = `${service}:${verb}`;
    switch (key) {
      case 'states:start':
      case 'states:stop':
      case 'states:read':
        return { kind: key, machine: target };
      case 'queue:send':
        return { kind: key, queue: target };
      default:
        break;
    }
  }
  throw new Error(
    `unknown permission ${JSON.stringify(raw)}; expected one of table:read, table:write, table:describe, stream:read, ` +
      'bus:put, bus:describe, states:start:<machine>, states:stop:<machine>, states:read[:<machine>], states:describe, ' +
      'states:callback, queue:send:<queue>, queue:list, logs:write, logs:read, artifacts:write, artifacts:read, push:post, ' +
      'ssm:secrets, ssm:secrets-read, ssm:hook-secrets, scheduler:schedules, ' +
      PROVISIONER_PERMISSIONS.join(', '),
  );
}

/** The permissions of a function: those it declares, plus `stream:read` for a stream trigger. */
export function functionPermissions(fn: FunctionSpec): Permission[] {
  const declared = (fn.permissions ?? []).map(parsePermission);
  if (fn.trigger === 'stream' && !declared.some((p) => p.kind === 'stream:read')) {
    declared.push({ kind: 'stream:read' });
  }
  return declared;
}

/** The buckets of the stack (none when the key is absent). */
export function allBuckets(resources: Resources): readonly BucketSpec[] {
  return resources.buckets ?? [];
}

/** Every queue of the stack: subscribers first, then task queues (the order of the Rust plan). */
export function allQueues(resources: Resources): QueueSpec[] {
  return [...resources.subscribers, ...resources.task_queues];
}

function fail(message: string): never {
  throw new Error(`infra/resources.json: ${message}`);
}

function positiveInt(value: unknown, what: string, max?: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || (max !== undefined && value > max)) {
    fail(`${what} must be a whole number between 1 and ${max ?? '∞'}, got ${JSON.stringify(value)}`);
  }
}

/**
 * Checks the references and limits the stack relies on (the Rust unit test
 * checks the same references; this adds the CDK-only keys and AWS limits), so
 * a mistake fails at synth with a message instead of at deploy.
 */
export function validateResources(r: Resources): string[] {
  const warnings: string[] = [];
  const names = (items: readonly { name: string }[], what: string): Set<string> => {
    const set = new Set<string>();
    for (const item of items) {
      if (!/^[a-z0-9][a-z0-9_-]*$/.test(item.name)) {
        fail(`${what} name ${JSON.stringify(item.name)} must be lower-case letters, digits, '-' and '_'`);
      }
      if (set.has(item.name)) {
        fail(`duplicate ${what} ${item.name}`);
      }
      set.add(item.name);
    }
    return set;
  };
  names(r.functions, 'function');
  const queues = names(allQueues(r), 'queue (subscribers and task_queues share one namespace)');
  const machines = names(r.state_machines, 'state machine');
  names(r.schedules, 'schedule');
  const buckets = validateBuckets(r);
  for (const gsi of r.table.global_secondary_indexes) {
    if (gsi.projection !== undefined && !GSI_PROJECTIONS.includes(gsi.projection)) {
      fail(`index ${gsi.name}: projection ${JSON.stringify(gsi.projection)} must be one of ${GSI_PROJECTIONS.join(', ')} (absent means ALL)`);
    }
  }

  const byName = new Map(r.functions.map((f) => [f.name, f]));
  const mustBe = (fnName: string, trigger: Trigger, what: string) => {
    const fn = byName.get(fnName);
    if (!fn) {
      fail(`${what} → unknown function ${fnName}`);
    }
    if (fn.trigger !== trigger) {
      fail(`${what} → function ${fnName} whose trigger is ${fn.trigger}, not ${trigger}`);
    }
  };

  for (const fn of r.functions) {
    if (!TRIGGERS.includes(fn.trigger)) {
      fail(`function ${fn.name}: unknown trigger ${JSON.stringify(fn.trigger)}`);
    }
    if (fn.batch_size !== undefined) {
      positiveInt(fn.batch_size, `function ${fn.name}: batch_size`, 10_000);
    }
    if (fn.permissions !== undefined && !Array.isArray(fn.permissions)) {
      fail(`function ${fn.name}: permissions must be an array of strings`);
    }
    for (const raw of fn.permissions ?? []) {
      checkPermission(raw, `function ${fn.name}`, machines, queues, buckets);
    }
  }

  const routes = new Set<string>();
  for (const route of r.routes) {
    const what = `route ${route.method} ${route.path}`;
    mustBe(route.function, 'http', what);
    if (!/^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS|ANY)$/.test(route.method)) {
      fail(`${what}: unsupported method`);
    }
    if (!route.path.startsWith('/')) {
      fail(`${what}: path must start with /`);
    }
    const key = `${route.method} ${route.path}`;
    if (routes.has(key)) {
      fail(`duplicate ${what}`);
    }
    routes.add(key);
  }

  validatePush(r, mustBe);

  for (const q of allQueues(r)) {
    const what = `queue ${q.name}`;
    mustBe(q.function, 'sqs', what);
    positiveInt(q.max_receive_count, `${what}: max_receive_count`, 1000);
    positiveInt(q.visibility_timeout_s, `${what}: visibility_timeout_s`, 43_200);
    positiveInt(q.batch_size, `${what}: batch_size`, 10);
  }
  for (const s of r.subscribers) {
    if (!Array.isArray(s.facts) || s.facts.length === 0) {
      fail(`subscriber ${s.name} routes no facts`);
    }
  }
  for (const s of r.schedules) {
    mustBe(s.function, 'schedule', `schedule ${s.name}`);
  }
  mustBe(r.scheduler.target, 'scheduler', 'scheduler.target');
  const taskQueues = new Set(r.task_queues.map((q) => q.name));
  for (const m of r.state_machines) {
    if (!/^[A-Za-z0-9._-]+\.asl\.json$/.test(m.definition)) {
      fail(`state machine ${m.name}: definition ${JSON.stringify(m.definition)} must be a *.asl.json file name`);
    }
    for (const [key, queue] of Object.entries(m.queue_substitutions ?? {})) {
      if (!/^[A-Za-z0-9_]+$/.test(key)) {
        fail(`state machine ${m.name}: placeholder key ${JSON.stringify(key)} must be letters, digits and _`);
      }
      if (!taskQueues.has(queue)) {
        fail(`state machine ${m.name}: \${${key}} → unknown task queue ${queue}`);
      }
    }
    for (const raw of m.permissions ?? []) {
      checkPermission(raw, `state machine ${m.name}`, machines, queues, buckets);
    }
  }
  for (const fn of r.functions) {
    const fed =
      fn.trigger === 'http'
        ? r.routes.some((x) => x.function === fn.name)
        : fn.trigger === 'sqs'
          ? allQueues(r).some((x) => x.function === fn.name)
          : fn.trigger === 'schedule'
            ? r.schedules.some((x) => x.function === fn.name)
            : fn.trigger === 'websocket'
              ? r.push.function === fn.name
              : fn.trigger === 'scheduler'
                ? r.scheduler.target === fn.name
                : true;
    if (!fed) {
      warnings.push(`function ${fn.name} (trigger ${fn.trigger}) has nothing that triggers it yet`);
    }
  }
  positiveInt(r.bus.archive_retention_days, 'bus.archive_retention_days', 36_500);
  for (const fn of r.functions) {
    for (const raw of fn.permissions ?? []) {
      if ((PROVISIONER_PERMISSIONS as readonly string[]).includes(raw)) {
        fail(`function ${fn.name}: ${raw} belongs to aws_provisioner only (it is scoped by the provisioner props)`);
      }
    }
  }
  validateAwsProvisioner(r, machines, queues, buckets);
  return warnings;
}

/**
 * The push socket: one API, whose `$connect` / `$disconnect` function is the
 * one `websocket` function (a second one would have no route), and a
 * keep-alive action that is a plain route key (`$…` keys are API Gateway's).
 */
function validatePush(r: Resources, mustBe: (fnName: string, trigger: Trigger, what: string) => void): void {
  const push = r.push;
  if (typeof push !== 'object' || push === null || Array.isArray(push)) {
    fail('push is missing or not an object (the Rust side requires it too)');
  }
  if (typeof push.name !== 'string' || !/^[a-z0-9][a-z0-9_-]*$/.test(push.name)) {
    fail(`push name ${JSON.stringify(push.name)} must be lower-case letters, digits, '-' and '_'`);
  }
  mustBe(push.function, 'websocket', 'push');
  if (typeof push.keepalive_action !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(push.keepalive_action)) {
    fail(
      `push: keepalive_action ${JSON.stringify(push.keepalive_action)} must be 1-64 letters, digits, '_', '.' and '-', ` +
        "not starting with '$' ($connect, $disconnect and $default are API Gateway's route keys)",
    );
  }
  for (const fn of r.functions) {
    if (fn.trigger === 'websocket' && fn.name !== push.function) {
      fail(`function ${fn.name}: trigger websocket, but push.function is ${push.function} (the push socket has one function)`);
    }
  }
}

/** The optional AWS provisioner: a scheduled function of its own name, permissions from the vocabulary. */
function validateAwsProvisioner(r: Resources, machines: Set<string>, queues: Set<string>, buckets: Set<string>): void {
  const p = r.aws_provisioner;
  if (p === undefined) {
    return;
  }
  const fn = p.function;
  if (typeof fn !== 'object' || fn === null || typeof fn.name !== 'string' || !/^[a-z0-9][a-z0-9_-]*$/.test(fn.name)) {
    fail('aws_provisioner.function must be a function with a lower-case name');
  }
  if (r.functions.some((f) => f.name === fn.name)) {
    fail(`aws_provisioner.function ${fn.name} is also in functions`);
  }
  if (fn.trigger !== 'schedule') {
    fail(`aws_provisioner.function ${fn.name}: trigger must be schedule, got ${JSON.stringify(fn.trigger)}`);
  }
  for (const raw of fn.permissions ?? []) {
    checkPermission(raw, `aws_provisioner.function ${fn.name}`, machines, queues, buckets);
  }
  positiveInt(p.period_s, 'aws_provisioner.period_s', 86_400);
  if (p.period_s % 60 !== 0) {
    fail(`aws_provisioner.period_s (${p.period_s}) must be whole minutes (EventBridge's finest rate)`);
  }
}

/** Bucket names become part of S3 bucket names locally: `baton-<stage>-<name>`, at most 63 characters. */
function validateBuckets(r: Resources): Set<string> {
  if (r.buckets !== undefined && !Array.isArray(r.buckets)) {
    fail('buckets must be an array');
  }
  const names = new Set<string>();
  const envs = new Set<string>();
  for (const b of allBuckets(r)) {
    // S3 allows no '_' and no trailing '-'; 36 = 63 - "baton-" - a 20-character stage - "-".
    if (typeof b.name !== 'string' || !/^[a-z0-9](?:[a-z0-9-]{0,34}[a-z0-9])?$/.test(b.name)) {
      fail(`bucket name ${JSON.stringify(b.name)} must be 1-36 lower-case letters, digits and '-', starting and ending with a letter or digit`);
    }
    if (names.has(b.name)) {
      fail(`duplicate bucket ${b.name}`);
    }
    names.add(b.name);
    // S3 lifecycle expiration is in whole days; ten years is past any use of a log.
    positiveInt(b.retention_days, `bucket ${b.name}: retention_days`, 3650);
    if (typeof b.env !== 'string' || !/^BATON_[A-Z_]+$/.test(b.env)) {
      fail(`bucket ${b.name}: env ${JSON.stringify(b.env)} must match ^BATON_[A-Z_]+$`);
    }
    if (envs.has(b.env)) {
      fail(`bucket ${b.name}: env ${b.env} is already another bucket's`);
    }
    envs.add(b.env);
  }
  return names;
}

function checkPermission(raw: string, what: string, machines: Set<string>, queues: Set<string>, buckets: Set<string>): void {
  let p: Permission;
  try {
    p = parsePermission(raw);
  } catch (e) {
    fail(`${what}: ${(e as Error).message}`);
  }
  if ('machine' in p && p.machine !== undefined && !machines.has(p.machine)) {
    fail(`${what}: permission ${raw} names unknown state machine ${p.machine}`);
  }
  if (p.kind === 'queue:send' && !queues.has(p.queue)) {
    fail(`${what}: permission ${raw} names unknown queue ${p.queue}`);
  }
  if ((p.kind === 'logs:write' || p.kind === 'logs:read') && !buckets.has(LOGS_BUCKET)) {
    fail(`${what}: permission ${raw} needs a bucket named ${LOGS_BUCKET} in buckets`);
  }
  if ((p.kind === 'artifacts:write' || p.kind === 'artifacts:read') && !buckets.has(ARTIFACTS_BUCKET)) {
    fail(`${what}: permission ${raw} needs a bucket named ${ARTIFACTS_BUCKET} in buckets`);
  }
}

/** Reads `resources.json` (validate it with {@link validateResources}). */
export function loadResources(file: string): Resources {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf-8')) as Resources;
  } catch (e) {
    throw new Error(`cannot read ${file}: ${(e as Error).message}`);
  }
}

/** Physical names, exactly as `Naming` in `localstack/src/resources.rs`. */
export class Naming {
  readonly prefix: string;

  constructor(public readonly stage: string) {
    if (!/^[a-z0-9][a-z0-9-]{0,19}$/.test(stage)) {
      throw new Error(`stage ${JSON.stringify(stage)} must be 1-20 lower-case letters, digits and '-'`);
    }
    this.prefix = `baton-${stage}-`;
  }

  physical(logical: string): string {
    return `${this.prefix}${logical}`;
  }

  dlq(logical: string): string {
    return `${this.prefix}${logical}-dlq`;
  }
}

/** `${Key}` placeholders used in a definition. */
export function placeholders(definition: string): string[] {
  return [...new Set([...definition.matchAll(/\$\{([A-Za-z0-9_]+)\}/g)].map((m) => m[1]))].sort();
}

/** `relay-failures` → `RelayFailures`, for construct ids and output names. */
export function pascal(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .filter((s) => s.length > 0)
    .map((s) => s[0].toUpperCase() + s.slice(1))
    .join('');
}
