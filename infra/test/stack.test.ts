/**
 * Structural assertions on the synthesized template: everything in
 * resources.json is there, wired as the design says, for the real file and for
 * the fuller fixture.
 */
import * as assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Match } from 'aws-cdk-lib/assertions';

import { PENDING_JOB_METRIC, RUN_STATE_MACHINE } from '../lib/baton-stack';
import { Naming, Resources, allBuckets, allQueues, placeholders } from '../lib/resources';
import { synth } from '../lib/testing/synth';
import { TemplateView, asArray } from '../lib/testing/template';
import { FIXTURE, VARIANTS, readDefinition, synthVariant } from '../lib/testing/variants';

const naming = new Naming('test');

const ENV_KEYS = [
  'BATON_TABLE',
  'BATON_BUS',
  'BATON_STAGE',
  'BATON_LEASE_DURATION_S',
  'BATON_HEARTBEAT_INTERVAL_S',
  'BATON_FIRST_HEARTBEAT_GRACE_S',
  'BATON_REAPER_PERIOD_S',
  'BATON_SESSION_TTL_S',
  'BATON_POLL_INTERVAL_S',
  'RUST_LOG',
];

for (const v of VARIANTS) {
  describe(`stack from ${v.label}`, () => {
    const { template, json } = synthVariant(v);
    const t = new TemplateView(json);
    const r = v.resources;

    it('has the table: keys, GSIs (ALL projection), stream, TTL, PITR, on-demand, deletion protection', () => {
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
        assert.deepEqual(found.Projection, { ProjectionType: 'ALL' });
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
      const buckets = t.ofType('AWS::S3::Bucket');
      assert.equal(buckets.length, allBuckets(r).length);
      const seen = new Set<string>();
      for (const b of allBuckets(r)) {
        // Every function gets the bucket's name (a Ref) as its variable.
        const id = t.bucketByEnv(b.env);
        seen.add(id);
        const bucket = t.get(id);
        const p = bucket.Properties!;
        assert.equal(p.BucketName, undefined, `${b.name}: S3 names are global, CloudFormation picks it`);
        assert.deepEqual(p.PublicAccessBlockConfiguration, {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        });
        assert.deepEqual(p.BucketEncryption, {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
        });
        assert.deepEqual(p.OwnershipControls, { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] });
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
      const functions = t.ofType('AWS::Lambda::Function');
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
      const routes = t.ofType('AWS::ApiGatewayV2::Route');
      assert.equal(routes.length, r.routes.length);
      for (const route of r.routes) {
        const [, rt] = t.byProp('AWS::ApiGatewayV2::Route', 'RouteKey', `${route.method} ${route.path}`);
        const target = rt.Properties!.Target as { 'Fn::Join': [string, [string, { Ref: string }]] };
        assert.equal(target['Fn::Join'][1][0], 'integrations/');
        const integration = t.get(target['Fn::Join'][1][1].Ref);
        assert.equal(integration.Type, 'AWS::ApiGatewayV2::Integration');
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
      template.resourceCountIs('AWS::ApiGatewayV2::Stage', 1);
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

    it('alarms on every function’s Errors and Throttles, and on the oldest pending job', () => {
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
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: PENDING_JOB_METRIC.namespace,
        MetricName: PENDING_JOB_METRIC.metricName,
        Dimensions: [{ Name: 'stage', Value: 'test' }],
        Statistic: 'Maximum',
        Threshold: 900,
      });
    });

    it('outputs the API URL, table, bus, state machine ARNs and DLQ names', () => {
      const outputs = json.Outputs ?? {};
      for (const key of ['ApiUrl', 'TableName', 'BusName', 'DlqNames']) {
        assert.ok(key in outputs, key);
      }
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
    const buckets = t.ofType('AWS::S3::Bucket');
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
      f.permissions = f.permissions?.filter((p: string) => !p.startsWith('logs:'));
    }
    const resources = raw as Resources;
    const { json } = synth({ ...FIXTURE.props, resources });
    const t = new TemplateView(json);
    assert.equal(t.ofType('AWS::S3::Bucket').length, 0);
    for (const [id, f] of t.ofType('AWS::Lambda::Function')) {
      for (const key of bucketVars) {
        assert.ok(!(key in f.Properties?.Environment.Variables), `${id} has ${key}`);
      }
    }
    const actions = t.ofType('AWS::IAM::Policy').flatMap(([, p]) =>
      (p.Properties?.PolicyDocument.Statement as Record<string, unknown>[]).flatMap((st) => asArray<string>(st.Action as string | string[])),
    );
    assert.deepEqual(actions.filter((a) => a.startsWith('s3:')), []);
  });
});
