/**
 * Least privilege: every IAM statement attached to a function's role (or a
 * state machine's role) is implied by what resources.json says it may do (its
 * `permissions`, its trigger, and writing its own log group), names only the
 * resources those permissions are about, and uses `Resource: "*"` only for the
 * documented exceptions. Conversely, every declared permission is granted.
 *
 * The mapping below is written out independently of the stack's grant code.
 */
import * as assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { STATE_MACHINE_WILDCARD_EXCEPTIONS, WILDCARD_EXCEPTIONS } from '../lib/baton-stack';
import { FunctionSpec, Naming, Resources, allQueues } from '../lib/resources';
import { TemplateView, asArray } from '../lib/testing/template';
import { VARIANTS, synthVariant } from '../lib/testing/variants';

const naming = new Naming('test');

/** Actions allowed on some resources (logical ids), or on "*". */
interface Allowance {
  readonly why: string;
  readonly actions: readonly string[];
  readonly on: readonly string[] | '*';
  /**
   * When set, the granted resource must be exactly one of these expressions,
   * not merely name the resources of `on` (e.g. a key prefix of a bucket).
   */
  readonly exactly?: readonly unknown[];
  /**
   * A condition the statement granting these actions must carry, exactly (a
   * condition only narrows a grant; any other is an unexpected shape).
   */
  readonly condition?: unknown;
  /**
   * For a resource no template resource names (SSM parameters under a
   * path): the ARN it must render to, exactly.
   */
  readonly arn?: string;
  /** Actions that must actually be granted when the permission is declared. */
  readonly required: readonly string[];
}

const TABLE_READ = [
  'dynamodb:BatchGetItem',
  'dynamodb:Query',
  'dynamodb:GetItem',
  'dynamodb:Scan',
  'dynamodb:ConditionCheckItem',
  'dynamodb:GetRecords',
  'dynamodb:GetShardIterator',
  'dynamodb:DescribeTable',
];
const TABLE_WRITE = [
  'dynamodb:BatchWriteItem',
  'dynamodb:PutItem',
  'dynamodb:UpdateItem',
  'dynamodb:DeleteItem',
  'dynamodb:ConditionCheckItem',
  'dynamodb:DescribeTable',
];
const STREAM_READ = ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'];
const SQS_CONSUME = [
  'sqs:ReceiveMessage',
  'sqs:ChangeMessageVisibility',
  'sqs:GetQueueUrl',
  'sqs:DeleteMessage',
  'sqs:GetQueueAttributes',
];
const SQS_SEND = ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'];
const STATES_READ = [
  'states:DescribeStateMachine',
  'states:ListExecutions',
  'states:DescribeExecution',
  'states:GetExecutionHistory',
  'states:DescribeStateMachineForExecution',
];
const CALLBACK = ['states:SendTaskSuccess', 'states:SendTaskFailure', 'states:SendTaskHeartbeat'];
/** Every workspace's secrets of stage "test" (`secretsPath`). */
const SECRETS_ARN = 'arn:aws:ssm:us-east-1:123456789012:parameter/baton/test/secrets/*';
const HOOK_SECRETS_ARN = 'arn:aws:ssm:us-east-1:123456789012:parameter/baton/test/hooks/*';

/** The ARN of a bucket's objects under `logs/` (every key the functions write). */
const logsObjects = (bucketId: string) => ({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, '/logs/*']] });
const bucketArn = (bucketId: string) => ({ 'Fn::GetAtt': [bucketId, 'Arn'] });
/** The ARN of a bucket's objects under `artifacts/` (every key of a job artifact). */
const artifactsObjects = (bucketId: string) => ({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, '/artifacts/*']] });
/** POST on every connection of the push API's stage "test" (PostToConnection), in the test env's region and account. */
const pushConnections = (apiId: string) => ({
  'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':execute-api:us-east-1:123456789012:', { Ref: apiId }, '/test/POST/@connections/*']],
});

class Ids {
  constructor(
    readonly t: TemplateView,
    private readonly r: Resources,
  ) {}

  get table(): string {
    return this.t.byProp('AWS::DynamoDB::Table', 'TableName', naming.physical(this.r.table.name))[0];
  }

  get bus(): string {
    return this.t.byProp('AWS::Events::EventBus', 'Name', naming.physical(this.r.bus.name))[0];
  }

  machine(name: string): string {
    return this.t.byProp('AWS::StepFunctions::StateMachine', 'StateMachineName', naming.physical(name))[0];
  }

  queue(name: string): string {
    return this.t.queueNamed(naming.physical(name));
  }

  get pushApi(): string {
    return this.t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical(this.r.push.name))[0];
  }

  get secretsKey(): string {
    return this.t.ofType('AWS::KMS::Key')[0][0];
  }

  bucket(name: string): string {
    const spec = (this.r.buckets ?? []).find((b) => b.name === name);
    if (!spec) {
      throw new Error(`no bucket ${name} in resources.json`);
    }
    return this.t.bucketByEnv(spec.env);
  }
}

/** What one permission string allows. */
function allowancesOf(raw: string, ids: Ids, r: Resources): Allowance[] {
  const [service, verb, target] = raw.split(':');
  const machines = (m?: string) => (m ? [ids.machine(m)] : r.state_machines.map((x) => ids.machine(x.name)));
  switch (`${service}:${verb}`) {
    case 'table:read':
      return [{ why: raw, actions: TABLE_READ, on: [ids.table], required: ['dynamodb:GetItem', 'dynamodb:Query'] }];
    case 'table:write':
      return [{ why: raw, actions: TABLE_WRITE, on: [ids.table], required: ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:ConditionCheckItem'] }];
    case 'table:describe':
      return [{ why: raw, actions: ['dynamodb:DescribeTable'], on: [ids.table], required: ['dynamodb:DescribeTable'] }];
    case 'stream:read':
      return [
        { why: raw, actions: STREAM_READ, on: [ids.table], required: STREAM_READ },
        { why: raw, actions: ['dynamodb:ListStreams'], on: '*', required: [] },
      ];
    case 'bus:put':
      return [{ why: raw, actions: ['events:PutEvents'], on: [ids.bus], required: ['events:PutEvents'] }];
    case 'bus:describe':
      return [{ why: raw, actions: ['events:DescribeEventBus'], on: [ids.bus], required: ['events:DescribeEventBus'] }];
    case 'states:start':
      return [{ why: raw, actions: ['states:StartExecution'], on: machines(target), required: ['states:StartExecution'] }];
    case 'states:stop':
      return [{ why: raw, actions: ['states:StopExecution'], on: machines(target), required: ['states:StopExecution'] }];
    case 'states:read':
      return r.state_machines.length === 0 ? [] : [{ why: raw, actions: STATES_READ, on: machines(target), required: ['states:DescribeExecution'] }];
    case 'states:describe':
      return [
        ...(r.state_machines.length === 0
          ? []
          : [{ why: raw, actions: ['states:DescribeStateMachine'], on: machines(), required: ['states:DescribeStateMachine'] }]),
        { why: raw, actions: ['states:ListStateMachines'], on: '*', required: ['states:ListStateMachines'] },
      ];
    case 'states:callback':
      return [{ why: raw, actions: CALLBACK, on: '*', required: CALLBACK }];
    case 'queue:send':
      return [{ why: raw, actions: SQS_SEND, on: [ids.queue(target)], required: ['sqs:SendMessage'] }];
    case 'queue:list':
      return [{ why: raw, actions: ['sqs:ListQueues'], on: '*', required: ['sqs:ListQueues'] }];
    case 'logs:write': {
      // PutObject only (no ACLs, tagging, retention…), and only under logs/.
      const logs = ids.bucket('logs');
      return [{ why: raw, actions: ['s3:PutObject'], on: [logs], exactly: [logsObjects(logs)], required: ['s3:PutObject'] }];
    }
    case 'logs:read': {
      const logs = ids.bucket('logs');
      return [
        { why: raw, actions: ['s3:GetObject'], on: [logs], exactly: [logsObjects(logs)], required: ['s3:GetObject'] },
        // ListBucket is a bucket-level action: its resource is the bucket itself.
        { why: raw, actions: ['s3:ListBucket'], on: [logs], exactly: [bucketArn(logs)], required: ['s3:ListBucket'] },
      ];
    }
    case 'artifacts:write': {
      // Multipart uploads (Create/UploadPart/Complete are s3:PutObject) and
      // their abort, only under artifacts/: no ACLs, tagging, listing.
      const artifacts = ids.bucket('artifacts');
      return [
        {
          why: raw,
          actions: ['s3:PutObject', 's3:AbortMultipartUpload'],
          on: [artifacts],
          exactly: [artifactsObjects(artifacts)],
          required: ['s3:PutObject', 's3:AbortMultipartUpload'],
        },
      ];
    }
    case 'artifacts:read': {
      // GetObject only (presigned downloads), no ListBucket.
      const artifacts = ids.bucket('artifacts');
      return [{ why: raw, actions: ['s3:GetObject'], on: [artifacts], exactly: [artifactsObjects(artifacts)], required: ['s3:GetObject'] }];
    }
    case 'ssm:secrets': {
      const actions = ['ssm:PutParameter', 'ssm:DeleteParameter', 'ssm:GetParametersByPath'];
      return [
        { why: raw, actions, on: [], arn: SECRETS_ARN, required: actions },
        { why: raw, actions: ['kms:Encrypt', 'kms:GenerateDataKey'], on: [ids.secretsKey], required: ['kms:Encrypt'] },
      ];
    }
    case 'ssm:hook-secrets': {
      const actions = ['ssm:PutParameter', 'ssm:GetParameter', 'ssm:DeleteParameter'];
      return [
        { why: raw, actions, on: [], arn: HOOK_SECRETS_ARN, required: actions },
        {
          why: raw,
          actions: ['kms:Encrypt', 'kms:GenerateDataKey', 'kms:Decrypt'],
          on: [ids.secretsKey],
          required: ['kms:Encrypt', 'kms:Decrypt'],
        },
      ];
    }
    case 'scheduler:schedules': {
      // The stack's group's schedules; listing, which takes no resource; and
      // passing the one role the scheduler invokes their target with.
      const actions = ['scheduler:CreateSchedule', 'scheduler:GetSchedule', 'scheduler:UpdateSchedule', 'scheduler:DeleteSchedule'];
      const roles = ids.t.ofType('AWS::IAM::Role').filter(([, role]) =>
        asArray<any>(role.Properties?.AssumeRolePolicyDocument?.Statement).some((st) => st.Principal?.Service === 'scheduler.amazonaws.com'),
      );
      return [
        { why: raw, actions, on: [], arn: `arn:aws:scheduler:us-east-1:123456789012:schedule/${naming.physical(r.scheduler.group)}/*`, required: actions },
        { why: raw, actions: ['scheduler:ListSchedules'], on: '*', required: ['scheduler:ListSchedules'] },
        {
          why: raw,
          actions: ['iam:PassRole'],
          on: roles.map(([id]) => id),
          required: ['iam:PassRole'],
          condition: { StringEquals: { 'iam:PassedToService': 'scheduler.amazonaws.com' } },
        },
      ];
    }
    case 'ssm:secrets-read':
      return [
        { why: raw, actions: ['ssm:GetParameters'], on: [], arn: SECRETS_ARN, required: ['ssm:GetParameters'] },
        { why: raw, actions: ['kms:Decrypt'], on: [ids.secretsKey], required: ['kms:Decrypt'] },
      ];
    case 'push:post': {
      // ManageConnections only, POST only (no GET or DELETE of a connection), this stage only.
      const api = ids.pushApi;
      return [
        {
          why: raw,
          actions: ['execute-api:ManageConnections'],
          on: [api],
          exactly: [pushConnections(api)],
          required: ['execute-api:ManageConnections'],
        },
      ];
    }
    default:
      throw new Error(`the test does not know permission ${raw}`);
  }
}

/** Everything a function may do: its permissions, its trigger, its own log group. */
function functionAllowances(fn: FunctionSpec, t: TemplateView, r: Resources): { declared: Allowance[]; all: Allowance[] } {
  const ids = new Ids(t, r);
  const declared = (fn.permissions ?? []).flatMap((p) => allowancesOf(p, ids, r));
  const implicit: Allowance[] = [];
  const fnRes = t.get(t.functionNamed(naming.physical(fn.name)));
  const logGroup = t.target(fnRes.Properties?.LoggingConfig.LogGroup);
  implicit.push({ why: 'own log group', actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], on: [logGroup], required: ['logs:PutLogEvents'] });
  if (fn.trigger === 'stream') {
    implicit.push(...allowancesOf('stream:read', ids, r));
    // The event source's failure destination: what the stream gave up on.
    const failures = t.queueNamed(`${naming.physical(fn.name)}-stream-failures`);
    implicit.push({ why: 'stream failure destination', actions: SQS_SEND, on: [failures], required: ['sqs:SendMessage'] });
  }
  for (const q of allQueues(r).filter((x) => x.function === fn.name)) {
    implicit.push({ why: `consume ${q.name}`, actions: SQS_CONSUME, on: [ids.queue(q.name)], required: ['sqs:ReceiveMessage', 'sqs:DeleteMessage'] });
  }
  return { declared, all: [...declared, ...implicit] };
}

/** Checks a role's statements against its allowances; returns the problems found. */
function audit(
  t: TemplateView,
  roleId: string,
  allowances: Allowance[],
  declared: Allowance[],
  wildcardOk: (action: string) => boolean,
): string[] {
  const problems: string[] = [];
  const granted: { action: string; refs: Set<string> | '*'; text?: string }[] = [];
  const role = t.get(roleId);
  if (role.Properties?.ManagedPolicyArns !== undefined) {
    problems.push(`role has managed policies ${JSON.stringify(role.Properties.ManagedPolicyArns)}`);
  }
  for (const { policy, statement } of t.roleStatements(roleId)) {
    const conditionExpected =
      statement.Condition !== undefined &&
      allowances.some(
        (a) =>
          a.condition !== undefined &&
          JSON.stringify(a.condition) === JSON.stringify(statement.Condition) &&
          asArray<string>(statement.Action).every((action) => a.actions.includes(action)),
      );
    if (statement.Effect !== 'Allow' || statement.NotAction || statement.NotResource || (statement.Condition && !conditionExpected)) {
      problems.push(`${policy}: unexpected statement shape ${JSON.stringify(statement)}`);
      continue;
    }
    for (const action of asArray<string>(statement.Action)) {
      if (action.includes('*')) {
        problems.push(`${policy}: wildcard action ${action}`);
      }
      for (const resource of asArray<unknown>(statement.Resource)) {
        if (resource === '*') {
          granted.push({ action, refs: '*' });
          const ok = allowances.some((a) => a.on === '*' && a.actions.includes(action));
          if (!ok || !wildcardOk(action)) {
            problems.push(`${policy}: ${action} on "*" is not a documented exception implied by the permissions`);
          }
          continue;
        }
        const refs = t.refs(resource);
        // Only a resource no template resource names (an SSM path) is matched by its text.
        const text = refs.size === 0 ? t.render(resource) : undefined;
        granted.push({ action, refs, text });
        const byArn = allowances.some((a) => a.arn !== undefined && a.actions.includes(action) && a.arn === text);
        const ok =
          byArn ||
          (refs.size > 0 &&
          allowances.some(
            (a) =>
              a.on !== '*' &&
              a.actions.includes(action) &&
              [...refs].every((id) => a.on.includes(id)) &&
              (a.exactly === undefined || a.exactly.some((x) => JSON.stringify(x) === JSON.stringify(resource))),
          ));
        if (!ok) {
          problems.push(`${policy}: ${action} on ${JSON.stringify(resource)} is not implied by the permissions`);
        }
      }
    }
  }
  for (const a of declared) {
    for (const action of a.required) {
      const found = granted.some(
        (g) =>
          g.action === action &&
          (a.arn !== undefined
            ? g.text === a.arn
            : a.on === '*'
              ? g.refs === '*'
              : g.refs !== '*' && a.on.some((id) => (g.refs as Set<string>).has(id))),
      );
      if (!found) {
        problems.push(`${a.why} is declared but ${action} is not granted`);
      }
    }
  }
  return problems;
}

for (const v of VARIANTS) {
  describe(`least privilege (${v.label})`, () => {
    const { json } = synthVariant(v);
    const t = new TemplateView(json);
    const r = v.resources;

    for (const fn of r.functions) {
      it(`function ${fn.name}: grants exactly ${JSON.stringify(fn.permissions ?? [])} plus its trigger`, () => {
        const fnRes = t.get(t.functionNamed(naming.physical(fn.name)));
        const roleId = t.target(fnRes.Properties?.Role, 'Arn');
        assert.equal(t.get(roleId).Properties?.Policies, undefined, 'no inline policies on the role');
        const { declared, all } = functionAllowances(fn, t, r);
        const problems = audit(t, roleId, all, declared, (action) => action in WILDCARD_EXCEPTIONS);
        assert.deepEqual(problems, []);
      });
    }

    for (const m of r.state_machines) {
      it(`state machine ${m.name}: may send to its queues, plus logging/tracing and its declared permissions`, () => {
        const ids = new Ids(t, r);
        const sm = t.get(ids.machine(m.name));
        const roleId = t.target(sm.Properties?.RoleArn, 'Arn');
        const declared = [
          ...(m.permissions ?? []).flatMap((p) => allowancesOf(p, ids, r)),
          ...[...new Set(Object.values(m.queue_substitutions))].map(
            (q): Allowance => ({ why: `task queue ${q}`, actions: SQS_SEND, on: [ids.queue(q)], required: ['sqs:SendMessage'] }),
          ),
        ];
        const all: Allowance[] = [
          ...declared,
          { why: 'logging and tracing', actions: STATE_MACHINE_WILDCARD_EXCEPTIONS, on: '*', required: [] },
        ];
        const problems = audit(
          t,
          roleId,
          all,
          declared,
          (action) => STATE_MACHINE_WILDCARD_EXCEPTIONS.includes(action) || action in WILDCARD_EXCEPTIONS,
        );
        assert.deepEqual(problems, []);
      });
    }

    it('documents every wildcard exception', () => {
      for (const [action, why] of Object.entries(WILDCARD_EXCEPTIONS)) {
        assert.ok(why.length > 20, action);
      }
    });
  });
}

describe('least privilege audit', () => {
  it('catches a grant beyond the declared permissions', () => {
    const v = VARIANTS[1];
    const { json } = synthVariant(v);
    const t = new TemplateView(json);
    // Pretend the relay declared nothing: its bus:put grant must then be flagged.
    const relay = v.resources.functions.find((f) => f.name === 'relay')!;
    const fnRes = t.get(t.functionNamed(naming.physical('relay')));
    const roleId = t.target(fnRes.Properties?.Role, 'Arn');
    const { all } = functionAllowances({ ...relay, permissions: [] }, t, v.resources);
    const problems = audit(t, roleId, all, [], (a) => a in WILDCARD_EXCEPTIONS);
    assert.ok(problems.some((p) => p.includes('events:PutEvents')), JSON.stringify(problems));
  });

  it('catches a logs grant beyond the logs/ prefix, and one that is missing', () => {
    const v = VARIANTS[1];
    const writer = v.resources.functions.find((f) => (f.permissions ?? []).includes('logs:write'))!;
    const json = JSON.parse(JSON.stringify(synthVariant(v).json));
    const t = new TemplateView(json);
    const fnRes = t.get(t.functionNamed(naming.physical(writer.name)));
    const roleId = t.target(fnRes.Properties?.Role, 'Arn');
    const { declared, all } = functionAllowances(writer, t, v.resources);
    assert.deepEqual(audit(t, roleId, all, declared, (a) => a in WILDCARD_EXCEPTIONS), []);
    // Widen the PutObject statement to every key of the bucket.
    const put = t.roleStatements(roleId).find(({ statement }) => asArray<string>(statement.Action).includes('s3:PutObject'))!;
    const widened = JSON.stringify(put.statement.Resource).replace('/logs/*', '/*');
    put.statement.Resource = JSON.parse(widened);
    const problems = audit(t, roleId, all, declared, (a) => a in WILDCARD_EXCEPTIONS);
    assert.ok(problems.some((p) => p.includes('s3:PutObject') && p.includes('"/*"')), JSON.stringify(problems));
    // Drop it: the declared logs:write is then not granted.
    put.statement.Action = asArray<string>(put.statement.Action).filter((a) => a !== 's3:PutObject');
    const missing = audit(t, roleId, all, declared, (a) => a in WILDCARD_EXCEPTIONS);
    assert.ok(missing.includes('logs:write is declared but s3:PutObject is not granted'), JSON.stringify(missing));
  });

  it('catches an artifacts grant beyond the artifacts/ prefix, on the logs bucket, and one that is missing', () => {
    const v = VARIANTS[0];
    const fn = v.resources.functions.find((f) => f.name === 'artifacts')!;
    const json = JSON.parse(JSON.stringify(synthVariant(v).json));
    const t = new TemplateView(json);
    const roleId = t.target(t.get(t.functionNamed(naming.physical(fn.name))).Properties?.Role, 'Arn');
    const { declared, all } = functionAllowances(fn, t, v.resources);
    const check = () => audit(t, roleId, all, declared, (a) => a in WILDCARD_EXCEPTIONS);
    assert.deepEqual(check(), []);
    const put = t.roleStatements(roleId).find(({ statement }) => asArray<string>(statement.Action).includes('s3:PutObject'))!;
    const original = JSON.stringify(put.statement.Resource);
    // Every key of the bucket.
    put.statement.Resource = JSON.parse(original.replace('/artifacts/*', '/*'));
    const widened = check();
    assert.ok(widened.some((p) => p.includes('s3:PutObject') && p.includes('"/*"')), JSON.stringify(widened));
    // The same keys of the logs bucket.
    const logsId = new Ids(t, v.resources).bucket('logs');
    const artifactsId = new Ids(t, v.resources).bucket('artifacts');
    put.statement.Resource = JSON.parse(original.split(artifactsId).join(logsId));
    const elsewhere = check();
    assert.ok(elsewhere.some((p) => p.includes('s3:PutObject') && p.includes(logsId)), JSON.stringify(elsewhere));
    // Dropped: the declared artifacts:write is then not granted.
    put.statement.Resource = JSON.parse(original);
    put.statement.Action = asArray<string>(put.statement.Action).filter((a) => a !== 's3:AbortMultipartUpload');
    const missing = check();
    assert.ok(missing.includes('artifacts:write is declared but s3:AbortMultipartUpload is not granted'), JSON.stringify(missing));
  });

  it('catches ManageConnections without push:post, widened beyond POST on the stage, and missing', () => {
    const v = VARIANTS[1];
    const poster = v.resources.functions.find((f) => (f.permissions ?? []).includes('push:post'))!;
    const json = JSON.parse(JSON.stringify(synthVariant(v).json));
    const t = new TemplateView(json);
    const roleId = t.target(t.get(t.functionNamed(naming.physical(poster.name))).Properties?.Role, 'Arn');
    const { declared, all } = functionAllowances(poster, t, v.resources);
    const check = (allowances: Allowance[], required: Allowance[]) => audit(t, roleId, allowances, required, (a) => a in WILDCARD_EXCEPTIONS);
    assert.deepEqual(check(all, declared), []);
    // The same role, had the function not declared push:post.
    const without = functionAllowances({ ...poster, permissions: poster.permissions!.filter((p) => p !== 'push:post') }, t, v.resources);
    const undeclared = check(without.all, without.declared);
    assert.ok(undeclared.some((p) => p.includes('execute-api:ManageConnections')), JSON.stringify(undeclared));
    // Every method (GET, DELETE) and every stage, as grantManageConnections would.
    const manage = t
      .roleStatements(roleId)
      .find(({ statement }) => asArray<string>(statement.Action).includes('execute-api:ManageConnections'))!;
    const original = JSON.stringify(manage.statement.Resource);
    manage.statement.Resource = JSON.parse(original.replace('/test/POST/@connections/*', '/*/*/@connections/*'));
    const widened = check(all, declared);
    assert.ok(widened.some((p) => p.includes('execute-api:ManageConnections') && p.includes('/*/*/@connections/*')), JSON.stringify(widened));
    // Dropped: the declared push:post is then not granted.
    manage.statement.Resource = JSON.parse(original);
    manage.statement.Action = asArray<string>(manage.statement.Action).filter((a) => a !== 'execute-api:ManageConnections');
    const missing = check(all, declared);
    assert.ok(missing.includes('push:post is declared but execute-api:ManageConnections is not granted'), JSON.stringify(missing));
  });
});
