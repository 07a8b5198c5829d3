/**
 * AGREEMENT: the Rust side's plan (the resources the local provisioner creates
 * on moto, `Plan` in localstack/src/provision.rs) and this stack describe the same
 * resources with the same physical names and settings, for stage "test".
 *
 * The plan comes from the JSON file named by `BATON_PLAN_JSON` when that is set
 * (scripts/test.sh writes it once), else from
 * `cargo run -q -p baton-devhost -- plan --stage test`. If neither works, the
 * test fails and says how to provide it.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { before, describe, it } from 'node:test';

import { TemplateView } from '../lib/testing/template';
import { REAL, repo, synthVariant } from '../lib/testing/variants';

const STAGE = 'test';

/** The serde shape of `Plan` (localstack/src/provision.rs). */
interface Plan {
  prefix: string;
  table: {
    name: string;
    partition_key: string;
    sort_key: string;
    ttl_attribute: string;
    stream_view_type: string;
    global_secondary_indexes: {
      name: string;
      partition_key: { name: string; type: string };
      sort_key: { name: string; type: string };
      /** `ALL` or `KEYS_ONLY` (serde default `ALL`, always written). */
      projection: string;
    }[];
  };
  bus: string;
  /** `name` is the local bucket's; on AWS CloudFormation names it and `env` carries the name. */
  buckets: { logical: string; name: string; retention_days: number; env: string }[];
  queues: {
    logical: string;
    name: string;
    dlq_name: string;
    function: string;
    visibility_timeout_s: number;
    max_receive_count: number;
    batch_size: number;
  }[];
  rules: { name: string; queue: string; event_pattern: unknown }[];
  state_machines: {
    logical: string;
    name: string;
    definition: unknown;
    queue_substitutions: Record<string, string>;
  }[];
  schedules: { name: string; function: string; period_config: string }[];
  routes: { method: string; path: string; function: string }[];
}

function loadPlan(): Plan {
  const tried: string[] = [];
  const file = process.env.BATON_PLAN_JSON;
  if (file) {
    try {
      return JSON.parse(fs.readFileSync(file, 'utf-8')) as Plan;
    } catch (e) {
      tried.push(`BATON_PLAN_JSON=${file}: ${(e as Error).message}`);
    }
  } else {
    tried.push('BATON_PLAN_JSON is not set');
  }
  const cargo = spawnSync('cargo', ['run', '-q', '-p', 'baton-devhost', '--', 'plan', '--stage', STAGE], {
    cwd: repo.root,
    encoding: 'utf-8',
    timeout: 15 * 60 * 1000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (cargo.status === 0) {
    try {
      return JSON.parse(cargo.stdout) as Plan;
    } catch (e) {
      tried.push(`cargo run … plan printed no JSON: ${(e as Error).message}`);
    }
  } else {
    const why = cargo.error ? cargo.error.message : (cargo.stderr || '').trim().split('\n').slice(-5).join(' | ');
    tried.push(`cargo run -q -p baton-devhost -- plan --stage ${STAGE} failed (status ${cargo.status}): ${why}`);
  }
  throw new Error(
    `AGREEMENT: no plan from the Rust side. Tried:\n  - ${tried.join('\n  - ')}\n` +
      `Provide one with: cargo run -q -p baton-devhost -- plan --stage ${STAGE} > plan.json && BATON_PLAN_JSON=$PWD/plan.json npm test`,
  );
}

const byName = <T extends { name: string }>(items: T[]): T[] => [...items].sort((a, b) => a.name.localeCompare(b.name));

describe(`AGREEMENT: the Rust plan and the CDK template (stage ${STAGE})`, () => {
  let plan: Plan;
  const { json } = synthVariant(REAL);
  const t = new TemplateView(json);

  before(() => {
    plan = loadPlan();
  });

  it('uses the same prefix', () => {
    assert.equal(plan.prefix, `baton-${STAGE}-`);
  });

  it('has the same table: name, keys, TTL, stream, GSIs and their projections', () => {
    const [, table] = t.byProp('AWS::DynamoDB::Table', 'TableName', plan.table.name);
    const p = table.Properties!;
    assert.deepEqual(p.KeySchema, [
      { AttributeName: plan.table.partition_key, KeyType: 'HASH' },
      { AttributeName: plan.table.sort_key, KeyType: 'RANGE' },
    ]);
    assert.deepEqual(p.TimeToLiveSpecification, { AttributeName: plan.table.ttl_attribute, Enabled: true });
    assert.deepEqual(p.StreamSpecification, { StreamViewType: plan.table.stream_view_type });
    const types = new Map<string, string>(
      p.AttributeDefinitions.map((a: { AttributeName: string; AttributeType: string }) => [a.AttributeName, a.AttributeType]),
    );
    const fromTemplate = byName(
      (p.GlobalSecondaryIndexes ?? []).map((g: any) => ({
        name: g.IndexName,
        partition_key: { name: g.KeySchema[0].AttributeName, type: types.get(g.KeySchema[0].AttributeName) },
        sort_key: { name: g.KeySchema[1].AttributeName, type: types.get(g.KeySchema[1].AttributeName) },
        projection: g.Projection.ProjectionType,
      })),
    );
    for (const g of plan.table.global_secondary_indexes) {
      assert.ok(typeof g.projection === 'string', `the plan's index ${g.name} has no "projection": the plan predates projections, write it again`);
    }
    const fromPlan = byName(plan.table.global_secondary_indexes);
    assert.deepEqual(fromTemplate, fromPlan);
  });

  it('has the same bus', () => {
    assert.deepEqual(
      t.ofType('AWS::Events::EventBus').map(([, b]) => b.Properties?.Name),
      [plan.bus],
    );
  });

  it('has the same buckets: one per planned bucket, private, encrypted, expiring after retention_days, named to the functions by the same variable', () => {
    assert.ok(Array.isArray(plan.buckets), 'the plan has no "buckets": it predates them, write it again');
    // The web console's bucket exists on AWS only, like the push socket: it holds build output, no data of Baton's.
    const synthesized = t.dataBuckets().map(([id]) => id);
    assert.equal(synthesized.length, plan.buckets.length, 'one bucket per planned bucket');
    const planned = new Set<string>();
    for (const b of plan.buckets) {
      assert.equal(b.name, `${plan.prefix}${b.logical}`, `${b.logical}: local name`);
      // Every function of the stack gets the bucket's name in the variable
      // the Rust side reads (throws otherwise).
      const id = t.bucketByEnv(b.env);
      planned.add(id);
      const p = t.get(id).Properties!;
      assert.equal(p.BucketName, undefined, `${b.logical}: CloudFormation names the bucket on AWS`);
      const rules = p.LifecycleConfiguration.Rules as { Status: string; ExpirationInDays?: number; Prefix?: string; Filter?: unknown }[];
      const expiring = rules.filter((r) => r.Status === 'Enabled' && r.ExpirationInDays !== undefined);
      // The whole bucket expires, as the provisioner's rule (empty prefix) does.
      assert.deepEqual(
        expiring.map((r) => [r.ExpirationInDays, r.Prefix ?? '', r.Filter]),
        [[b.retention_days, '', undefined]],
        `${b.logical}: expiration`,
      );
      assert.deepEqual(p.PublicAccessBlockConfiguration, {
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      });
      assert.equal(p.BucketEncryption.ServerSideEncryptionConfiguration[0].ServerSideEncryptionByDefault.SSEAlgorithm, 'AES256');
    }
    assert.deepEqual([...planned].sort(), [...synthesized].sort());
  });

  it('has the same queues: names, DLQ names, maxReceiveCount, visibility timeouts, consumers and batch sizes', () => {
    const planned = new Set(plan.queues.flatMap((q) => [q.name, q.dlq_name]));
    // A stream event source's failure destination exists on AWS only (the dev
    // host retries a failing stream batch itself).
    const synthesized = new Set(
      t
        .ofType('AWS::SQS::Queue')
        .map(([, q]) => q.Properties?.QueueName as string)
        .filter((name) => !name.endsWith('-stream-failures')),
    );
    assert.deepEqual([...synthesized].sort(), [...planned].sort());
    for (const q of plan.queues) {
      const queueId = t.queueNamed(q.name);
      const p = t.get(queueId).Properties!;
      assert.equal(p.VisibilityTimeout, q.visibility_timeout_s, `${q.name} visibility`);
      assert.equal(p.RedrivePolicy.maxReceiveCount, q.max_receive_count, `${q.name} maxReceiveCount`);
      assert.equal(t.queueNameOf(p.RedrivePolicy.deadLetterTargetArn, 'Arn'), q.dlq_name);
      const mappings = t.ofType('AWS::Lambda::EventSourceMapping').filter(([, m]) => t.refs(m.Properties?.EventSourceArn).has(queueId));
      assert.equal(mappings.length, 1, `${q.name} has one consumer`);
      const m = mappings[0][1].Properties!;
      assert.equal(t.get(t.target(m.FunctionName)).Properties?.FunctionName, `${plan.prefix}${q.function}`);
      assert.equal(m.BatchSize, q.batch_size, `${q.name} batch size`);
    }
  });

  it('has the same rules: names, event patterns, target queues', () => {
    const [busId] = t.byProp('AWS::Events::EventBus', 'Name', plan.bus);
    const synthesized = byName(
      t
        .ofType('AWS::Events::Rule')
        .filter(([, r]) => JSON.stringify(r.Properties?.EventBusName) === JSON.stringify({ Ref: busId }))
        .map(([, r]) => ({
          name: r.Properties?.Name as string,
          queue: t.queueNameOf(r.Properties?.Targets[0].Arn, 'Arn'),
          event_pattern: r.Properties?.EventPattern,
          targets: r.Properties?.Targets.length,
        })),
    );
    assert.deepEqual(synthesized, byName(plan.rules.map((r) => ({ ...r, targets: 1 }))));
  });

  it('has the same state machines: names and definitions after placeholder substitution', () => {
    const synthesized = t.ofType('AWS::StepFunctions::StateMachine');
    assert.deepEqual(
      synthesized.map(([, m]) => m.Properties?.StateMachineName).sort(),
      plan.state_machines.map((m) => m.name).sort(),
    );
    const url = (queueName: string) => `https://sqs.${STAGE}.invalid/123456789012/${queueName}`;
    const substitute = (text: string, subs: Record<string, string>) =>
      Object.entries(subs).reduce((s, [key, queue]) => s.split(`\${${key}}`).join(url(queue)), text);
    for (const m of plan.state_machines) {
      const [, sm] = t.byProp('AWS::StepFunctions::StateMachine', 'StateMachineName', m.name);
      const p = sm.Properties!;
      const cdkSubs: Record<string, string> = Object.fromEntries(
        Object.entries(p.DefinitionSubstitutions ?? {}).map(([k, ref]) => [k, t.queueNameOf(ref)]),
      );
      assert.deepEqual(cdkSubs, m.queue_substitutions, `${m.name}: placeholders → queues`);
      const rendered = JSON.parse(substitute(p.DefinitionString, cdkSubs));
      const expected = JSON.parse(substitute(JSON.stringify(m.definition), m.queue_substitutions));
      assert.deepEqual(rendered, expected, `${m.name}: definition`);
    }
  });

  it('has the same schedules: rule names, targets and periods from their configuration variable', () => {
    const synthesized = t.ofType('AWS::Events::Rule').filter(([, r]) => r.Properties?.ScheduleExpression !== undefined);
    assert.deepEqual(synthesized.map(([, r]) => r.Properties?.Name).sort(), plan.schedules.map((s) => s.name).sort());
    for (const s of plan.schedules) {
      const [, rule] = t.byProp('AWS::Events::Rule', 'Name', s.name);
      const fn = t.get(t.target(rule.Properties?.Targets[0].Arn, 'Arn'));
      assert.equal(fn.Properties?.FunctionName, `${plan.prefix}${s.function}`);
      const minutes = Number(fn.Properties?.Environment.Variables[s.period_config]) / 60;
      assert.equal(rule.Properties?.ScheduleExpression, minutes === 1 ? 'rate(1 minute)' : `rate(${minutes} minutes)`);
    }
  });

  it('has the same routes, each to the same function', () => {
    // The HTTP API's routes: the push socket is AWS's only (the dev host serves its own).
    const [apiId] = t.byProp('AWS::ApiGatewayV2::Api', 'ProtocolType', 'HTTP');
    const httpRoutes = t.ofType('AWS::ApiGatewayV2::Route').filter(([, r]) => t.target(r.Properties?.ApiId) === apiId);
    const synthesized = httpRoutes.map(([, r]) => {
      const [method, path] = (r.Properties?.RouteKey as string).split(' ');
      const integration = t.get(r.Properties?.Target['Fn::Join'][1][1].Ref);
      const fn = t.get(t.target(integration.Properties?.IntegrationUri, 'Arn'));
      return { method, path, function: (fn.Properties?.FunctionName as string).slice(plan.prefix.length) };
    });
    const key = (r: { method: string; path: string }) => `${r.method} ${r.path}`;
    assert.deepEqual(
      synthesized.sort((a, b) => key(a).localeCompare(key(b))),
      [...plan.routes].sort((a, b) => key(a).localeCompare(key(b))),
    );
  });
});
