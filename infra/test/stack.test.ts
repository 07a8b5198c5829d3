/**
 * Structural assertions on the synthesized template: everything in
 * resources.json is there, wired as the design says, for the real file and for
 * the fuller fixture.
 */
import * as assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Match } from 'aws-cdk-lib/assertions';

import { KEEPALIVE_REPLY, PENDING_JOB_METRIC, RUN_STATE_MACHINE } from '../lib/baton-stack';
import { Naming, Resources, allBuckets, allQueues, placeholders } from '../lib/resources';
import { assertPrivateBucket } from '../lib/testing/buckets';
import { synth } from '../lib/testing/synth';
import { TemplateView, asArray } from '../lib/testing/template';
import { FIXTURE, REAL, VARIANTS, readDefinition, synthVariant } from '../lib/testing/variants';

const naming = new Naming('test');

const ENV_KEYS = [
  'BATON_TABLE',
  'BATON_BUS',
  'BATON_STAGE',
  'BATON_LEASE_DURATION_S',
  'BATON_HEARTBEAT_INTERVAL_S',
  'BATON_FIRST_HEARTBEAT_GRACE_S',
  'BATON_REAPER_PERIOD_S',
  'BATON_DEMAND_METRICS_PERIOD_S',
  'BATON_SESSION_TTL_S',
  'BATON_POLL_INTERVAL_S',
  'RUST_LOG',
  'BATON_PUSH_URL',
];

/** The URLs of the push socket's stage, as deployed (see `TemplateView.render`). */
const pushUrl = (apiId: string) => `wss://{${apiId}}.execute-api.us-east-1.amazonaws.com/test`;
const pushEndpoint = (apiId: string) => `https://{${apiId}}.execute-api.us-east-1.amazonaws.com/test`;
/** The URI a WebSocket Lambda integration invokes a function through. */
const invocationsUri = (fnId: string) => `arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/{${fnId}.Arn}/invocations`;

/** The route whose target is an integration, and that integration. */
function routeIntegration(t: TemplateView, route: Record<string, any>): [string, Record<string, any>] {
  const target = route.Properties!.Target as { 'Fn::Join': [string, [string, { Ref: string }]] };
  assert.equal(target['Fn::Join'][1][0], 'integrations/');
  const id = target['Fn::Join'][1][1].Ref;
  const integration = t.get(id);
  assert.equal(integration.Type, 'AWS::ApiGatewayV2::Integration');
  return [id, integration];
}

for (const v of VARIANTS) {
  describe(`stack from ${v.label}`, () => {
    const { template, json } = synthVariant(v);
    const t = new TemplateView(json);
    const r = v.resources;

    it('has the table: keys, GSIs (projection ALL unless KEYS_ONLY), stream, TTL, PITR, on-demand, deletion protection', () => {
      const [, table] = t.byProp('AWS::DynamoDB::Table', 'TableName', naming.physical(r.table.name));
      const p = table.Properties!;
      assert.deepEqual(p.KeySchema, [
        { AttributeName: r.table.partition_key, KeyType: 'HASH' },
        { AttributeName: r.table.sort_key, KeyType: 'RANGE' },
      ]);
      assert.equal(p.BillingMode, 'PAY_PER_REQUEST');
      assert.deepEqual(p.StreamSpecification, { StreamViewType: r.table.stream_view_type });
      assert.deepEqual(p.TimeToLiveSpecification, { AttributeName: r.table.ttl_attribute, Enabled: true });
      assert.deepEqual(p.PointInTimeRecoverySpecification, { PointInTimeRecoveryEnabled: true });
      assert.equal(p.DeletionProtectionEnabled, true);
      assert.equal(table.DeletionPolicy, 'Retain');
      const gsis = p.GlobalSecondaryIndexes ?? [];
      assert.equal(gsis.length, r.table.global_secondary_indexes.length);
      const attributes = new Map<string, string>(
        p.AttributeDefinitions.map((a: { AttributeName: string; AttributeType: string }) => [a.AttributeName, a.AttributeType]),
      );
      assert.equal(attributes.get(r.table.partition_key), 'S');
      assert.equal(attributes.get(r.table.sort_key), 'S');
      for (const gsi of r.table.global_secondary_indexes) {
        const found = gsis.find((g: { IndexName: string }) => g.IndexName === gsi.name);
        assert.ok(found, `GSI ${gsi.name}`);
        assert.deepEqual(found.KeySchema, [
          { AttributeName: gsi.partition_key.name, KeyType: 'HASH' },
          { AttributeName: gsi.sort_key.name, KeyType: 'RANGE' },
        ]);
        assert.deepEqual(found.Projection, { ProjectionType: gsi.projection ?? 'ALL' }, `GSI ${gsi.name} projection`);
        assert.equal(attributes.get(gsi.partition_key.name), gsi.partition_key.type);
        assert.equal(attributes.get(gsi.sort_key.name), gsi.sort_key.type);
      }
    });

    it('has the bus and an archive of it with the retention of resources.json', () => {
      const [busId] = t.byProp('AWS::Events::EventBus', 'Name', naming.physical(r.bus.name));
      template.hasResourceProperties('AWS::Events::Archive', {
        SourceArn: { 'Fn::GetAtt': [busId, 'Arn'] },
        RetentionDays: r.bus.archive_retention_days,
      });
    });

    it('has one private, encrypted, expiring bucket per resources.json bucket, named by CloudFormation and given to every function', () => {
      // Besides the web console's, which is not one of resources.json (test/console.test.ts).
      const buckets = t.dataBuckets();
      assert.equal(buckets.length, allBuckets(r).length);
      const seen = new Set<string>();
      for (const b of allBuckets(r)) {
        // Every function gets the bucket's name (a Ref) as its variable.
        const id = t.bucketByEnv(b.env);
        seen.add(id);
        const bucket = t.get(id);
        const p = bucket.Properties!;
        assert.equal(p.BucketName, undefined, `${b.name}: S3 names are global, CloudFormation picks it`);
        assertPrivateBucket(p);
        assert.equal(p.VersioningConfiguration, undefined, `${b.name}: unversioned, so expired logs are gone`);
        assert.equal(p.CorsConfiguration, undefined, `${b.name}: runners are not browsers`);
        assert.deepEqual(p.LifecycleConfiguration, {
          Rules: [
            {
              Id: 'expire',
              Status: 'Enabled',
              ExpirationInDays: b.retention_days,
              AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
            },
          ],
        });
        assert.equal(bucket.DeletionPolicy, 'Retain');
        assert.equal(bucket.UpdateReplacePolicy, 'Retain');
        // The bucket policy only refuses plain HTTP: it allows nothing to anyone.
        const policies = t.ofType('AWS::S3::BucketPolicy').filter(([, x]) => t.refs(x.Properties?.Bucket).has(id));
        assert.equal(policies.length, 1, `${b.name}: one bucket policy`);
        const statements = policies[0][1].Properties?.PolicyDocument.Statement as Record<string, any>[];
        assert.deepEqual(
          statements.map((st) => [st.Effect, st.Action, st.Condition]),
          [['Deny', 's3:*', { Bool: { 'aws:SecureTransport': 'false' } }]],
        );
      }
      assert.equal(seen.size, allBuckets(r).length, 'each bucket has a variable of its own');
    });

    it('builds one arm64 provided.al2023 function per entry, named baton-test-<name>, with the whole configuration', () => {
      const [pushApiId] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical(r.push.name));
      // Besides the console deployment's handler, which CDK adds (test/console.test.ts).
      const functions = t.batonFunctions();
      assert.equal(functions.length, r.functions.length);
      const machines = t.ofType('AWS::StepFunctions::StateMachine');
      const run = machines.find(([, m]) => m.Properties?.StateMachineName === naming.physical(RUN_STATE_MACHINE));
      for (const fn of r.functions) {
        const [, f] = t.byProp('AWS::Lambda::Function', 'FunctionName', naming.physical(fn.name));
        const p = f.Properties!;
        assert.deepEqual(p.Architectures, ['arm64']);
        assert.equal(p.Runtime, 'provided.al2023');
        assert.equal(p.Handler, 'bootstrap');
        const vars = p.Environment.Variables;
        for (const key of ENV_KEYS) {
          assert.ok(key in vars, `${fn.name} lacks ${key}`);
        }
        assert.equal(vars.BATON_STAGE, 'test');
        assert.equal(vars.BATON_LEASE_DURATION_S, '180');
        assert.equal(vars.BATON_HEARTBEAT_INTERVAL_S, '15');
        assert.equal(vars.BATON_FIRST_HEARTBEAT_GRACE_S, '60');
        assert.equal(vars.BATON_REAPER_PERIOD_S, '60');
        assert.equal(vars.BATON_SESSION_TTL_S, '3600');
        assert.equal(vars.BATON_POLL_INTERVAL_S, '5');
        assert.equal(vars.RUST_LOG, 'info');
        assert.equal(t.render(vars.BATON_PUSH_URL), pushUrl(pushApiId));
        assert.equal(t.get(t.target(vars.BATON_TABLE)).Type, 'AWS::DynamoDB::Table');
        assert.equal(t.get(t.target(vars.BATON_BUS)).Type, 'AWS::Events::EventBus');
        if (run) {
          assert.deepEqual(vars.BATON_RUN_STATE_MACHINE_ARN, { Ref: run[0] });
        } else {
          assert.ok(!('BATON_RUN_STATE_MACHINE_ARN' in vars));
        }
        // Its own log group, and a role of its own.
        assert.equal(t.get(t.target(p.LoggingConfig.LogGroup)).Properties?.LogGroupName, `/aws/lambda/${naming.physical(fn.name)}`);
        const role = t.get(t.target(p.Role, 'Arn'));
        assert.equal(role.Type, 'AWS::IAM::Role');
        assert.equal(role.Properties?.ManagedPolicyArns, undefined, `${fn.name}: no managed policies`);
        // A queue-fed function has at most a sixth of its queues' visibility
        // timeout, so a batch in progress is never delivered again meanwhile.
        for (const q of allQueues(r).filter((x) => x.function === fn.name)) {
          assert.ok(p.Timeout * 6 <= q.visibility_timeout_s, `${fn.name} timeout ${p.Timeout} × 6 > ${q.name} visibility`);
        }
      }
    });

    it('routes every resources.json route to its function (Lambda proxy, payload 2.0)', () => {
      const [apiId, api] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical('api'));
      assert.equal(api.Properties?.ProtocolType, 'HTTP');
      const routes = t.ofType('AWS::ApiGatewayV2::Route').filter(([, x]) => t.target(x.Properties?.ApiId) === apiId);
      assert.equal(routes.length, r.routes.length);
      for (const route of r.routes) {
        const [, rt] = t.byProp('AWS::ApiGatewayV2::Route', 'RouteKey', `${route.method} ${route.path}`);
        assert.deepEqual(rt.Properties?.ApiId, { Ref: apiId });
        const [, integration] = routeIntegration(t, rt);
        assert.equal(integration.Properties?.IntegrationType, 'AWS_PROXY');
        assert.equal(integration.Properties?.PayloadFormatVersion, '2.0');
        const fnId = t.target(integration.Properties?.IntegrationUri, 'Arn');
        assert.equal(fnId, t.functionNamed(naming.physical(route.function)), `${route.method} ${route.path}`);
        // API Gateway may invoke the function for this route.
        const permissions = t
          .ofType('AWS::Lambda::Permission')
          .filter(([, p]) => t.refs(p.Properties?.FunctionName).has(fnId) && p.Properties?.Principal === 'apigateway.amazonaws.com');
        assert.ok(permissions.length >= 1, `no invoke permission for ${route.function}`);
      }
    });

    it('has a $default stage with auto-deploy, throttling and JSON access logs', () => {
      template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
        StageName: '$default',
        AutoDeploy: true,
        DefaultRouteSettings: { ThrottlingRateLimit: 100, ThrottlingBurstLimit: 200 },
        AccessLogSettings: { DestinationArn: Match.anyValue(), Format: Match.stringLikeRegexp('"requestId":"\\$context.requestId"') },
      });
      // One for the HTTP API, one for the push socket.
      template.resourceCountIs('AWS::ApiGatewayV2::Stage', 2);
    });

    it('has the push socket: a WebSocket API selecting on body.action, a stage named after the stage with auto-deploy', () => {
      const [apiId, api] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical(r.push.name));
      assert.equal(api.Properties?.ProtocolType, 'WEBSOCKET');
      assert.equal(api.Properties?.RouteSelectionExpression, '$request.body.action');
      assert.equal(t.ofType('AWS::ApiGatewayV2::Api').length, 2, 'the HTTP API and the push socket');
      const stages = t.ofType('AWS::ApiGatewayV2::Stage').filter(([, x]) => t.target(x.Properties?.ApiId) === apiId);
      assert.equal(stages.length, 1);
      assert.equal(stages[0][1].Properties?.StageName, 'test');
      assert.equal(stages[0][1].Properties?.AutoDeploy, true);
    });

    it('routes $connect and $disconnect to the push function (Lambda proxy) and answers the keep-alive without any Lambda (MOCK)', () => {
      const [apiId] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical(r.push.name));
      const fnId = t.functionNamed(naming.physical(r.push.function));
      const routes = new Map(
        t
          .ofType('AWS::ApiGatewayV2::Route')
          .filter(([, x]) => t.target(x.Properties?.ApiId) === apiId)
          .map(([id, x]) => [x.Properties?.RouteKey as string, [id, x] as const]),
      );
      assert.deepEqual([...routes.keys()].sort(), ['$connect', '$disconnect', r.push.keepalive_action].sort());
      for (const key of ['$connect', '$disconnect']) {
        const [, integration] = routeIntegration(t, routes.get(key)![1]);
        assert.equal(integration.Properties?.IntegrationType, 'AWS_PROXY', key);
        assert.equal(t.render(integration.Properties?.IntegrationUri), invocationsUri(fnId), key);
        // API Gateway may invoke the function, for this route of this API only.
        const permissions = t
          .ofType('AWS::Lambda::Permission')
          .filter(([, p]) => t.refs(p.Properties?.FunctionName).has(fnId) && p.Properties?.Principal === 'apigateway.amazonaws.com');
        assert.ok(
          permissions.some(([, p]) => t.render(p.Properties?.SourceArn) === `arn:aws:execute-api:us-east-1:123456789012:{${apiId}}/*${key}`),
          `no invoke permission for ${key}`,
        );
      }
      // Only the socket's routes invoke the push function: no HTTP route, queue or schedule does.
      assert.equal(t.ofType('AWS::Lambda::EventSourceMapping').filter(([, m]) => t.refs(m.Properties?.FunctionName).has(fnId)).length, 0);
      assert.ok(
        t.ofType('AWS::Lambda::Permission').every(
          ([, p]) => !t.refs(p.Properties?.FunctionName).has(fnId) || t.refs(p.Properties?.SourceArn).has(apiId),
        ),
        'the push function is invoked by its socket only',
      );

      const [routeId, route] = routes.get(r.push.keepalive_action)!;
      const [integrationId, integration] = routeIntegration(t, route);
      assert.equal(integration.Properties?.IntegrationType, 'MOCK');
      assert.equal(t.refs(integration.Properties).size, 1, 'the mock names its API and nothing else (no function)');
      assert.deepEqual(integration.Properties?.RequestTemplates, { $default: '{"statusCode": 200}' });
      // It answers: a route response, and an integration response with the reply.
      assert.equal(route.Properties?.RouteResponseSelectionExpression, '$default');
      template.hasResourceProperties('AWS::ApiGatewayV2::RouteResponse', {
        ApiId: { Ref: apiId },
        RouteId: { Ref: routeId },
        RouteResponseKey: '$default',
      });
      template.hasResourceProperties('AWS::ApiGatewayV2::IntegrationResponse', {
        ApiId: { Ref: apiId },
        IntegrationId: { Ref: integrationId },
        IntegrationResponseKey: '$default',
        ResponseTemplates: { $default: KEEPALIVE_REPLY },
      });
    });

    it('gives BATON_PUSH_ENDPOINT (the https callback URL) and ManageConnections to the push:post functions, and to no other', () => {
      const [apiId] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical(r.push.name));
      const posters = r.functions.filter((f) => (f.permissions ?? []).includes('push:post')).map((f) => f.name);
      assert.ok(posters.length > 0, 'some function posts');
      for (const fn of r.functions) {
        const f = t.get(t.functionNamed(naming.physical(fn.name)));
        const vars = f.Properties?.Environment.Variables;
        const roleId = t.target(f.Properties?.Role, 'Arn');
        const manages = t
          .roleStatements(roleId)
          .filter(({ statement }) => asArray<string>(statement.Action).includes('execute-api:ManageConnections'));
        if (posters.includes(fn.name)) {
          assert.equal(t.render(vars.BATON_PUSH_ENDPOINT), pushEndpoint(apiId), fn.name);
          assert.deepEqual(
            manages.map(({ statement }) => t.render(statement.Resource)),
            [`arn:aws:execute-api:us-east-1:123456789012:{${apiId}}/test/POST/@connections/*`],
            fn.name,
          );
        } else {
          assert.ok(!('BATON_PUSH_ENDPOINT' in vars), `${fn.name} has BATON_PUSH_ENDPOINT without push:post`);
          assert.deepEqual(manages, [], `${fn.name} may manage connections without push:post`);
        }
      }
    });

    it('routes each subscriber: rule (name, pattern, bus) → queue with DLQ redrive → function, and alarms on the DLQ', () => {
      const [busId] = t.byProp('AWS::Events::EventBus', 'Name', naming.physical(r.bus.name));
      const busRules = t.ofType('AWS::Events::Rule').filter(([, x]) => x.Properties?.EventBusName !== undefined);
      assert.equal(busRules.length, r.subscribers.length);
      for (const s of r.subscribers) {
        const [, rule] = t.byProp('AWS::Events::Rule', 'Name', naming.physical(s.name));
        assert.deepEqual(rule.Properties?.EventBusName, { Ref: busId });
        assert.deepEqual(rule.Properties?.EventPattern, { 'detail-type': s.facts });
        assert.equal(rule.Properties?.State, 'ENABLED');
        assert.equal(rule.Properties?.Targets.length, 1);
        assert.equal(t.queueNameOf(rule.Properties?.Targets[0].Arn, 'Arn'), naming.physical(s.name));
        // The queue lets exactly this rule send to it.
        const queueId = t.queueNamed(naming.physical(s.name));
        const policies = t.ofType('AWS::SQS::QueuePolicy').filter(([, p]) => t.refs(p.Properties?.Queues).has(queueId));
        const allowsRule = policies.some(([, p]) =>
          p.Properties?.PolicyDocument.Statement.some(
            (st: any) =>
              st.Effect === 'Allow' &&
              st.Principal?.Service === 'events.amazonaws.com' &&
              t.refs(st.Condition).size === 1,
          ),
        );
        assert.ok(allowsRule, `queue ${s.name} does not let its rule send`);
      }
    });

    it('gives every queue (subscribers and task queues) a DLQ, redrive, visibility, an event source and a DLQ alarm', () => {
      const queues = allQueues(r);
      const streamFunctions = r.functions.filter((f) => f.trigger === 'stream').length;
      assert.equal(t.ofType('AWS::SQS::Queue').length, 2 * queues.length + streamFunctions, 'plus a failure queue a stream');
      for (const q of queues) {
        const queueId = t.queueNamed(naming.physical(q.name));
        const dlqId = t.queueNamed(naming.dlq(q.name));
        const p = t.get(queueId).Properties!;
        assert.equal(p.VisibilityTimeout, q.visibility_timeout_s);
        assert.deepEqual(p.RedrivePolicy, { deadLetterTargetArn: { 'Fn::GetAtt': [dlqId, 'Arn'] }, maxReceiveCount: q.max_receive_count });
        assert.equal(t.get(dlqId).Properties?.MessageRetentionPeriod, 14 * 86_400);
        template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
          EventSourceArn: { 'Fn::GetAtt': [queueId, 'Arn'] },
          FunctionName: { Ref: t.functionNamed(naming.physical(q.function)) },
          BatchSize: q.batch_size,
          FunctionResponseTypes: ['ReportBatchItemFailures'],
        });
        template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          Namespace: 'AWS/SQS',
          MetricName: 'ApproximateNumberOfMessagesVisible',
          Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [dlqId, 'QueueName'] } }],
          Threshold: 1,
          ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        });
      }
    });

    it('feeds the stream function outbox inserts only, bisects a failing batch and hands what fails for good to an alarmed queue', () => {
      const [tableId] = t.byProp('AWS::DynamoDB::Table', 'TableName', naming.physical(r.table.name));
      for (const fn of r.functions.filter((f) => f.trigger === 'stream')) {
        const failures = `${naming.physical(fn.name)}-stream-failures`;
        const [failuresId] = t.byProp('AWS::SQS::Queue', 'QueueName', failures);
        template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
          EventSourceArn: { 'Fn::GetAtt': [tableId, 'StreamArn'] },
          FunctionName: { Ref: t.functionNamed(naming.physical(fn.name)) },
          StartingPosition: 'TRIM_HORIZON',
          BatchSize: fn.batch_size ?? 100,
          FunctionResponseTypes: ['ReportBatchItemFailures'],
          BisectBatchOnFunctionError: true,
          MaximumRetryAttempts: 10,
          DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [failuresId, 'Arn'] } } },
          FilterCriteria: {
            Filters: [{ Pattern: JSON.stringify({ eventName: ['INSERT'], dynamodb: { NewImage: { type: { S: ['outbox'] } } } }) }],
          },
        });
        template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          AlarmName: `${failures}-not-empty`,
          Threshold: 1,
        });
      }
      const mappings = t.ofType('AWS::Lambda::EventSourceMapping');
      assert.equal(mappings.length, allQueues(r).length + r.functions.filter((f) => f.trigger === 'stream').length);
    });

    it('runs every schedule from a default-bus rule at the rate of its period variable', () => {
      const scheduleRules = t.ofType('AWS::Events::Rule').filter(([, x]) => x.Properties?.ScheduleExpression !== undefined);
      assert.equal(scheduleRules.length, r.schedules.length);
      for (const s of r.schedules) {
        const [, rule] = t.byProp('AWS::Events::Rule', 'Name', naming.physical(s.name));
        assert.equal(rule.Properties?.EventBusName, undefined);
        const fnId = t.functionNamed(naming.physical(s.function));
        // The period is the value of its configuration variable, as the function sees it.
        const minutes = Number(t.get(fnId).Properties?.Environment.Variables[s.period_config]) / 60;
        assert.ok(Number.isInteger(minutes) && minutes >= 1, `${s.name}: ${s.period_config} is not whole minutes`);
        assert.equal(rule.Properties?.ScheduleExpression, minutes === 1 ? 'rate(1 minute)' : `rate(${minutes} minutes)`);
        assert.equal(t.target(rule.Properties?.Targets[0].Arn, 'Arn'), fnId);
        template.hasResourceProperties('AWS::Lambda::Permission', {
          Action: 'lambda:InvokeFunction',
          Principal: 'events.amazonaws.com',
          FunctionName: { 'Fn::GetAtt': [fnId, 'Arn'] },
        });
      }
    });

    it("keeps pipelines' schedules in a schedule group, invoked through a role that may invoke only their target", () => {
      const [groupId] = t.byProp('AWS::Scheduler::ScheduleGroup', 'Name', naming.physical(r.scheduler.group));
      const targetId = t.functionNamed(naming.physical(r.scheduler.target));
      const roles = t.ofType('AWS::IAM::Role').filter(([, role]) =>
        asArray<any>(role.Properties?.AssumeRolePolicyDocument?.Statement).some(
          (s) => s.Principal?.Service === 'scheduler.amazonaws.com',
        ),
      );
      assert.equal(roles.length, 1, 'one role the scheduler assumes');
      const [roleId, role] = roles[0];
      const trust = asArray<any>(role.Properties?.AssumeRolePolicyDocument?.Statement)[0];
      assert.ok(trust.Condition?.StringEquals?.['aws:SourceAccount'], 'only for this account');
      const statements = t.roleStatements(roleId).map(({ statement }) => statement);
      assert.deepEqual(statements.flatMap((s) => asArray<string>(s.Action)), ['lambda:InvokeFunction']);
      const invoked = statements.flatMap((s) => asArray<any>(s.Resource)).map((res) => t.render(res));
      assert.ok(invoked.every((arn) => arn.includes(`{${targetId}.Arn}`)), `invokes only the target: ${invoked}`);

      // Only the scheduler:schedules functions learn where the schedules are,
      // and may touch them (the group's), list them, and pass that role.
      // A tick the scheduler gave up on pages someone.
      const [, dropped] = t.byProp('AWS::CloudWatch::Alarm', 'AlarmName', `${naming.physical(r.scheduler.group)}-ticks-dropped`);
      const alarm = dropped.Properties ?? {};
      assert.equal(alarm.Namespace, 'AWS/Scheduler');
      assert.equal(alarm.MetricName, 'InvocationDroppedCount');
      assert.deepEqual(alarm.Dimensions, [{ Name: 'ScheduleGroup', Value: naming.physical(r.scheduler.group) }]);

      const keepers = r.functions.filter((f) => (f.permissions ?? []).includes('scheduler:schedules')).map((f) => f.name);
      assert.ok(keepers.length > 0, 'a function keeps the schedules');
      for (const fn of r.functions) {
        const f = t.get(t.functionNamed(naming.physical(fn.name)));
        const vars = f.Properties?.Environment.Variables;
        const statements = t.roleStatements(t.target(f.Properties?.Role, 'Arn')).map(({ statement }) => statement);
        const scheduler = statements.filter((s) => asArray<string>(s.Action).some((a) => a.startsWith('scheduler:')));
        const passes = statements.filter((s) => asArray<string>(s.Action).includes('iam:PassRole'));
        if (!keepers.includes(fn.name)) {
          assert.ok(!('BATON_SCHEDULE_GROUP' in vars), `${fn.name} has BATON_SCHEDULE_GROUP`);
          assert.deepEqual([...scheduler, ...passes], [], `${fn.name} may touch schedules`);
          continue;
        }
        assert.equal(t.render(vars.BATON_SCHEDULE_GROUP), naming.physical(r.scheduler.group));
        assert.equal(t.render(vars.BATON_SCHEDULE_TARGET_ARN), `{${targetId}.Arn}`);
        assert.equal(t.render(vars.BATON_SCHEDULE_ROLE_ARN), `{${roleId}.Arn}`);
        const writes = scheduler.find((s) => asArray<string>(s.Action).includes('scheduler:CreateSchedule'))!;
        assert.deepEqual(asArray<string>(writes.Action).sort(), [
          'scheduler:CreateSchedule',
          'scheduler:DeleteSchedule',
          'scheduler:GetSchedule',
          'scheduler:UpdateSchedule',
        ]);
        assert.match(t.render(writes.Resource), new RegExp(`:schedule/${naming.physical(r.scheduler.group)}/\\*$`));
        assert.deepEqual(passes.map((s) => t.render(s.Resource)), [`{${roleId}.Arn}`]);
        assert.deepEqual(passes[0].Condition, { StringEquals: { 'iam:PassedToService': 'scheduler.amazonaws.com' } });
        assert.ok(groupId);
      }
    });

    it('builds each state machine from its .asl.json with every ${Key} substituted by its task queue URL', () => {
      assert.equal(t.ofType('AWS::StepFunctions::StateMachine').length, r.state_machines.length);
      for (const m of r.state_machines) {
        const [, sm] = t.byProp('AWS::StepFunctions::StateMachine', 'StateMachineName', naming.physical(m.name));
        const raw = readDefinition(v, m.definition);
        const p = sm.Properties!;
        assert.deepEqual(JSON.parse(p.DefinitionString), JSON.parse(raw));
        assert.deepEqual(Object.keys(p.DefinitionSubstitutions ?? {}).sort(), placeholders(raw));
        // After substitution, the definition is the file with each queue's URL in place.
        let rendered = p.DefinitionString as string;
        let expected = raw;
        for (const [key, queue] of Object.entries(m.queue_substitutions)) {
          const url = `https://sqs.example/${t.queueNameOf(p.DefinitionSubstitutions[key])}`;
          rendered = rendered.split(`\${${key}}`).join(url);
          expected = expected.split(`\${${key}}`).join(`https://sqs.example/${naming.physical(queue)}`);
        }
        assert.deepEqual(JSON.parse(rendered), JSON.parse(expected));
        assert.equal(p.TracingConfiguration.Enabled, true);
        assert.equal(p.LoggingConfiguration.Level, 'ERROR');
        assert.equal(p.LoggingConfiguration.IncludeExecutionData, true);
        assert.equal(
          t.get(t.target(p.LoggingConfiguration.Destinations[0].CloudWatchLogsLogGroup.LogGroupArn, 'Arn')).Type,
          'AWS::Logs::LogGroup',
        );
        // Its role may send to each of its queues.
        const roleId = t.target(p.RoleArn, 'Arn');
        const statements = t.roleStatements(roleId).map((x) => x.statement);
        for (const queue of new Set(Object.values(m.queue_substitutions))) {
          const queueId = t.queueNamed(naming.physical(queue));
          assert.ok(
            statements.some(
              (st) => [st.Action].flat().includes('sqs:SendMessage') && t.refs(st.Resource).has(queueId),
            ),
            `${m.name} may not send to ${queue}`,
          );
        }
        template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          Namespace: 'AWS/States',
          MetricName: 'ExecutionsFailed',
          Dimensions: [{ Name: 'StateMachineArn', Value: { Ref: t.byProp('AWS::StepFunctions::StateMachine', 'StateMachineName', naming.physical(m.name))[0] } }],
          Threshold: 1,
        });
      }
    });

    it('alarms on every function’s Errors and Throttles (the push function’s too), the push socket’s ExecutionError and the oldest pending job', () => {
      for (const fn of r.functions) {
        const fnId = t.functionNamed(naming.physical(fn.name));
        for (const metric of ['Errors', 'Throttles']) {
          template.hasResourceProperties('AWS::CloudWatch::Alarm', {
            Namespace: 'AWS/Lambda',
            MetricName: metric,
            Dimensions: [{ Name: 'FunctionName', Value: { Ref: fnId } }],
            Threshold: 1,
            ComparisonOperator: 'GreaterThanOrEqualToThreshold',
            TreatMissingData: 'notBreaching',
          });
        }
      }
      const [pushApiId] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical(r.push.name));
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: `${naming.physical(r.push.name)}-execution-errors`,
        Namespace: 'AWS/ApiGateway',
        MetricName: 'ExecutionError',
        Dimensions: [
          { Name: 'ApiId', Value: { Ref: pushApiId } },
          { Name: 'Stage', Value: 'test' },
        ],
        Statistic: 'Sum',
        Threshold: 1,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        TreatMissingData: 'notBreaching',
      });
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: PENDING_JOB_METRIC.namespace,
        MetricName: PENDING_JOB_METRIC.metricName,
        Dimensions: [{ Name: 'stage', Value: 'test' }],
        Statistic: 'Maximum',
        Threshold: 900,
      });
    });

    it('outputs the API URL, the push socket URLs, table, bus, state machine ARNs and DLQ names', () => {
      const outputs = json.Outputs ?? {};
      for (const key of ['ApiUrl', 'PushUrl', 'PushCallbackUrl', 'TableName', 'BusName', 'DlqNames']) {
        assert.ok(key in outputs, key);
      }
      const [pushApiId] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical(r.push.name));
      assert.equal(t.render(outputs.PushUrl.Value), pushUrl(pushApiId));
      assert.equal(t.render(outputs.PushCallbackUrl.Value), pushEndpoint(pushApiId));
      const values = Object.values(outputs).map((o) => JSON.stringify(o.Value));
      for (const q of allQueues(r)) {
        assert.ok(values.includes(JSON.stringify(naming.dlq(q.name))), `no output for ${naming.dlq(q.name)}`);
      }
      for (const m of r.state_machines) {
        const [id] = t.byProp('AWS::StepFunctions::StateMachine', 'StateMachineName', naming.physical(m.name));
        assert.ok(values.includes(JSON.stringify({ Ref: id })), `no output for ${m.name}`);
      }
      for (const b of allBuckets(r)) {
        assert.ok(values.includes(JSON.stringify({ Ref: t.bucketByEnv(b.env) })), `no output for bucket ${b.name}`);
      }
    });
  });
}

describe('stack from infra/resources.json: what push relies on', () => {
  const { json } = synthVariant(REAL);
  const t = new TemplateView(json);

  it('has leases-by-expiry as a KEYS_ONLY index', () => {
    const [, table] = t.byProp('AWS::DynamoDB::Table', 'TableName', naming.physical(REAL.resources.table.name));
    const gsi = table.Properties?.GlobalSecondaryIndexes.find((g: { IndexName: string }) => g.IndexName === 'leases-by-expiry');
    assert.deepEqual(gsi?.Projection, { ProjectionType: 'KEYS_ONLY' });
  });

  it('gives register the push socket URL, and the push socket to push-connect', () => {
    const [apiId] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical('push'));
    const register = t.get(t.functionNamed(naming.physical('register')));
    assert.equal(t.render(register.Properties?.Environment.Variables.BATON_PUSH_URL), pushUrl(apiId));
    assert.equal(REAL.resources.push.function, 'push-connect');
    const connect = t.ofType('AWS::ApiGatewayV2::Route').find(([, x]) => x.Properties?.RouteKey === '$connect')!;
    const [, integration] = routeIntegration(t, connect[1]);
    assert.equal(t.render(integration.Properties?.IntegrationUri), invocationsUri(t.functionNamed(naming.physical('push-connect'))));
  });
});

describe('stack from infra/resources.json: artifacts', () => {
  const r = REAL.resources;
  const spec = allBuckets(r).find((b) => b.name === 'artifacts')!;
  /** `[action, resource]` of every statement on the role of a function. */
  const grants = (t: TemplateView, fnName: string): [string, unknown][] => {
    const roleId = t.target(t.get(t.functionNamed(naming.physical(fnName))).Properties?.Role, 'Arn');
    return t.roleStatements(roleId).flatMap(({ statement }) =>
      asArray<string>(statement.Action).flatMap((a) => asArray<unknown>(statement.Resource).map((res): [string, unknown] => [a, res])),
    );
  };
  const expiration = (t: TemplateView, env: string) => t.get(t.bucketByEnv(env)).Properties?.LifecycleConfiguration.Rules;
  const rule = (days: number) => [
    { Id: 'expire', Status: 'Enabled', ExpirationInDays: days, AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 } },
  ];

  it('has an artifacts bucket, given to the functions as BATON_ARTIFACTS_BUCKET, whose objects expire after 30 days', () => {
    assert.deepEqual(spec, { name: 'artifacts', retention_days: 30, env: 'BATON_ARTIFACTS_BUCKET' });
    const t = new TemplateView(synthVariant(REAL).json);
    const id = t.bucketByEnv('BATON_ARTIFACTS_BUCKET');
    assert.notEqual(id, t.bucketByEnv('BATON_LOGS_BUCKET'), 'a bucket of its own');
    assert.deepEqual(expiration(t, 'BATON_ARTIFACTS_BUCKET'), rule(30));
  });

  it('expires artifacts after artifactRetentionDays, which overrides bucketRetentionDays for that bucket only', () => {
    const alone = new TemplateView(synthVariant(REAL, { artifactRetentionDays: 7 }).json);
    assert.deepEqual(expiration(alone, 'BATON_ARTIFACTS_BUCKET'), rule(7));
    const logsDays = allBuckets(r).find((b) => b.name === 'logs')!.retention_days;
    assert.deepEqual(expiration(alone, 'BATON_LOGS_BUCKET'), rule(logsDays), 'the logs bucket keeps its retention');
    const both = new TemplateView(synthVariant(REAL, { bucketRetentionDays: 5, artifactRetentionDays: 400 }).json);
    assert.deepEqual(expiration(both, 'BATON_ARTIFACTS_BUCKET'), rule(400));
    assert.deepEqual(expiration(both, 'BATON_LOGS_BUCKET'), rule(5));
    // Without it, bucketRetentionDays applies to every bucket, artifacts included.
    const every = new TemplateView(synthVariant(REAL, { bucketRetentionDays: 5 }).json);
    assert.deepEqual(expiration(every, 'BATON_ARTIFACTS_BUCKET'), rule(5));
    // The artifact items expire with their archives: the function is told.
    const fnEnv = (view: TemplateView) =>
      view.get(view.functionNamed(naming.physical('artifacts'))).Properties?.Environment.Variables;
    assert.equal(fnEnv(alone).BATON_ARTIFACT_RETENTION_DAYS, '7');
    assert.equal(fnEnv(every).BATON_ARTIFACT_RETENTION_DAYS, '5');
  });

  it('lets the artifacts function put, abort uploads of and get keys under artifacts/ of that bucket, and nothing on the logs bucket', () => {
    const t = new TemplateView(synthVariant(REAL).json);
    const artifacts = t.bucketByEnv('BATON_ARTIFACTS_BUCKET');
    const logs = t.bucketByEnv('BATON_LOGS_BUCKET');
    const keys = JSON.stringify({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [artifacts, 'Arn'] }, '/artifacts/*']] });
    const s3 = grants(t, 'artifacts').filter(([a]) => a.startsWith('s3:'));
    assert.deepEqual(
      s3.map(([a, res]) => [a, JSON.stringify(res)]).sort(),
      [
        ['s3:AbortMultipartUpload', keys],
        ['s3:GetObject', keys],
        ['s3:PutObject', keys],
      ],
    );
    for (const [action, res] of grants(t, 'artifacts')) {
      assert.ok(!t.refs(res).has(logs), `${action} on the logs bucket`);
    }
    // Nor does any function without artifacts permissions reach the artifacts bucket.
    for (const fn of r.functions.filter((f) => !(f.permissions ?? []).some((p) => p.startsWith('artifacts:')))) {
      for (const [action, res] of grants(t, fn.name)) {
        assert.ok(!t.refs(res).has(artifacts), `${fn.name}: ${action} on the artifacts bucket`);
      }
    }
  });

  it('routes the runners’ and the workspaces’ artifact routes to the artifacts function', () => {
    const t = new TemplateView(synthVariant(REAL).json);
    const fnId = t.functionNamed(naming.physical('artifacts'));
    const keys = [
      'POST /v1/runners/leases/{execution_id}/artifacts',
      'POST /v1/runners/leases/{execution_id}/artifacts/{name}/complete',
      'GET /v1/runners/leases/{execution_id}/artifacts',
      'GET /v1/runners/leases/{execution_id}/artifacts/{name}',
      'GET /v1/workspaces/{ws}/runs/{run_id}/artifacts',
      'GET /v1/workspaces/{ws}/runs/{run_id}/artifacts/{name}',
    ];
    for (const key of keys) {
      const [, route] = t.byProp('AWS::ApiGatewayV2::Route', 'RouteKey', key);
      const [, integration] = routeIntegration(t, route);
      assert.equal(t.target(integration.Properties?.IntegrationUri, 'Arn'), fnId, key);
    }
    assert.deepEqual(
      r.routes.filter((x) => x.function === 'artifacts').map((x) => `${x.method} ${x.path}`).sort(),
      [...keys].sort(),
      'no other route reaches it',
    );
  });
});

describe('the run-attempt state machine: what its orchestration relies on', () => {
  const definition = JSON.parse(readDefinition(REAL, 'run-attempt.asl.json'));
  /** Every Task state that calls a service (an `arn:aws:states:::<service>:…` resource). */
  const integrations = Object.entries<Record<string, any>>(definition.States).filter(
    ([, state]) => state.Type === 'Task' && String(state.Resource).startsWith('arn:aws:states:::'),
  );

  it('retries the service errors of every integration task with backoff, never Baton.Continue', () => {
    assert.ok(integrations.length > 0, 'Step is such a task');
    for (const [name, state] of integrations) {
      const retry: Array<Record<string, any>> = state.Retry ?? [];
      const retried = retry.flatMap((r) => r.ErrorEquals as string[]);
      const service = String(state.Resource).split(':')[5].toUpperCase();
      for (const error of [`${service}.AmazonSQSException`, `${service}.SdkClientException`]) {
        assert.ok(retried.includes(error), `${name} does not retry ${error}`);
      }
      for (const swallowing of ['States.ALL', 'States.TaskFailed', 'Baton.Continue', 'States.Timeout']) {
        assert.ok(!retried.includes(swallowing), `${name} retries ${swallowing}: the loop would never continue`);
      }
      for (const r of retry) {
        assert.ok(r.MaxAttempts >= 2, `${name}: retries more than once`);
        assert.ok(r.BackoffRate > 1 && r.IntervalSeconds >= 1, `${name}: backs off`);
      }
    }
  });

  it('still catches Baton.Continue and States.Timeout on Step', () => {
    const caught = (definition.States.Step.Catch as Array<Record<string, any>>).flatMap((c) => c.ErrorEquals);
    assert.deepEqual(caught.sort(), ['Baton.Continue', 'States.Timeout']);
  });
});

describe('props reach the template', () => {
  it('applies non-default props', () => {
    const v = VARIANTS[1];
    const { template, json } = synthVariant(v, {
      leaseDurationS: 240,
      heartbeatIntervalS: 20,
      reaperPeriodS: 120,
      logLevel: 'debug',
      deletionProtection: false,
      archiveRetentionDays: 3,
      stateMachineLogLevel: 'ALL',
      bucketRetentionDays: 5,
    });
    const t = new TemplateView(json);
    const [, fn] = t.byProp('AWS::Lambda::Function', 'FunctionName', naming.physical(v.resources.functions[0].name));
    assert.equal(fn.Properties?.Environment.Variables.BATON_LEASE_DURATION_S, '240');
    assert.equal(fn.Properties?.Environment.Variables.BATON_HEARTBEAT_INTERVAL_S, '20');
    assert.equal(fn.Properties?.Environment.Variables.RUST_LOG, 'debug');
    const [, table] = t.byProp('AWS::DynamoDB::Table', 'TableName', naming.physical(v.resources.table.name));
    assert.equal(table.Properties?.DeletionProtectionEnabled, false);
    assert.equal(table.DeletionPolicy, 'Delete');
    template.hasResourceProperties('AWS::Events::Archive', { RetentionDays: 3 });
    template.hasResourceProperties('AWS::Events::Rule', { ScheduleExpression: 'rate(2 minutes)' });
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', { LoggingConfiguration: Match.objectLike({ Level: 'ALL' }) });
    const buckets = t.dataBuckets();
    assert.equal(buckets.length, allBuckets(v.resources).length);
    for (const [id, bucket] of buckets) {
      assert.equal(bucket.Properties?.LifecycleConfiguration.Rules[0].ExpirationInDays, 5, id);
      // Like the table: without deletion protection the bucket goes with the stack.
      assert.equal(bucket.DeletionPolicy, 'Delete', id);
    }
  });
});

describe('a resources.json without buckets', () => {
  it('has no bucket, no bucket variable and no S3 grant', () => {
    const bucketVars = allBuckets(FIXTURE.resources).map((b) => b.env);
    const raw: any = JSON.parse(JSON.stringify(FIXTURE.resources));
    delete raw.buckets;
    for (const f of raw.functions) {
      f.permissions = f.permissions?.filter((p: string) => !p.startsWith('logs:') && !p.startsWith('artifacts:'));
    }
    const resources = raw as Resources;
    const { json } = synth({ ...FIXTURE.props, resources });
    const t = new TemplateView(json);
    // The web console's bucket is there all the same: it is not one of resources.json.
    assert.equal(t.dataBuckets().length, 0);
    for (const [id, f] of t.batonFunctions()) {
      for (const key of bucketVars) {
        assert.ok(!(key in f.Properties?.Environment.Variables), `${id} has ${key}`);
      }
    }
    // No role has an S3 action but the console deployment's (it copies the console into its own bucket).
    const deploymentRole = t.target(t.get(t.consoleDeploymentHandler()).Properties?.Role, 'Arn');
    const actions = t
      .ofType('AWS::IAM::Policy')
      .filter(([, p]) => !t.refs(p.Properties?.Roles).has(deploymentRole))
      .flatMap(([, p]) =>
        (p.Properties?.PolicyDocument.Statement as Record<string, unknown>[]).flatMap((st) => asArray<string>(st.Action as string | string[])),
      );
    assert.deepEqual(actions.filter((a) => a.startsWith('s3:')), []);
  });
});
