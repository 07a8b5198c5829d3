/**
 * The AWS reference provisioner is optional: absent without its props; with
 * them, a scheduled function whose role can run instances only from the
 * operator's launch template, tag only on create, terminate only the stage's
 * instances and touch only the stage's runner tokens; an instance role that
 * may read and delete those tokens only; alarms on failed launches and
 * orphans.
 */
import * as assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Match } from 'aws-cdk-lib/assertions';

import { PROVISIONER_METRICS } from '../lib/baton-stack';
import { REAL, synthVariant } from '../lib/testing/variants';

const PROPS = {
  provisioner: {
    tokenParameterName: '/ops/baton/provisioner-token',
    launchTemplateId: 'lt-0123456789abcdef0',
    maxInstances: 20,
  },
} as const;

/** Every IAM statement of the role of the function named `name`. */
function statementsOf(json: any, functionName: string): any[] {
  const fn = Object.values<any>(json.Resources).find(
    (r) => r.Type === 'AWS::Lambda::Function' && r.Properties?.FunctionName === functionName,
  );
  assert.ok(fn, `function ${functionName}`);
  const roleId = fn.Properties.Role['Fn::GetAtt'][0];
  return Object.values<any>(json.Resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && r.Properties.Roles.some((x: any) => x.Ref === roleId))
    .flatMap((r) => r.Properties.PolicyDocument.Statement);
}

const actionsOf = (s: any): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const statementFor = (statements: any[], action: string) => {
  const found = statements.filter((s) => actionsOf(s).includes(action));
  assert.equal(found.length, 1, `one statement grants ${action}: ${JSON.stringify(found)}`);
  return found[0];
};
const arnText = (v: unknown): string => JSON.stringify(v);

describe('AWS provisioner (optional)', () => {
  it('is not in the stack without its props', () => {
    const { json } = synthVariant(REAL);
    const names = Object.values<any>(json.Resources)
      .filter((r) => r.Type === 'AWS::Lambda::Function')
      .map((r) => r.Properties.FunctionName);
    assert.ok(!names.includes('baton-test-aws-provisioner'), names.join(', '));
    assert.ok(!Object.values<any>(json.Resources).some((r) => r.Type === 'AWS::IAM::InstanceProfile'));
  });

  it('runs on a schedule with the settings of its props', () => {
    const { template } = synthVariant(REAL, PROPS);
    template.hasResourceProperties('AWS::Lambda::Function', {
      FunctionName: 'baton-test-aws-provisioner',
      Environment: {
        Variables: Match.objectLike({
          BATON_STAGE: 'test',
          BATON_PROVISIONER_TOKEN_PARAMETER: '/ops/baton/provisioner-token',
          BATON_LAUNCH_TEMPLATE: 'lt-0123456789abcdef0',
          BATON_LAUNCH_TEMPLATE_VERSION: '$Default',
          BATON_PROVISIONER_MAX_INSTANCES: '20',
          BATON_API_URL: Match.anyValue(),
        }),
      },
    });
    template.hasResourceProperties('AWS::Events::Rule', { Name: 'baton-test-aws-provisioner', ScheduleExpression: 'rate(1 minute)' });
  });

  it('is woken between ticks by a queued job, a burst batched into one tick, two at most at once', () => {
    const { template, json } = synthVariant(REAL, PROPS);
    template.hasResourceProperties('AWS::Events::Rule', {
      Name: 'baton-test-aws-provisioner-wake',
      EventPattern: { 'detail-type': ['baton.workflows.job_execution.queued'] },
    });
    template.hasResourceProperties('AWS::SQS::Queue', { QueueName: 'baton-test-aws-provisioner-wake', MessageRetentionPeriod: 600 });
    const mappings = Object.values<any>(json.Resources).filter((r) => r.Type === 'AWS::Lambda::EventSourceMapping');
    const wake = mappings.filter((m) => JSON.stringify(m.Properties.EventSourceArn).includes('WakeAwsProvisioner'));
    assert.equal(wake.length, 1, JSON.stringify(mappings.map((m) => m.Properties.EventSourceArn)));
    assert.equal(JSON.stringify(wake[0].Properties.FunctionName).includes('AwsProvisioner'), true);
    assert.equal(wake[0].Properties.BatchSize, 100);
    assert.equal(wake[0].Properties.MaximumBatchingWindowInSeconds, 2);
    assert.deepEqual(wake[0].Properties.ScalingConfig, { MaximumConcurrency: 2 });
  });

  it('may run instances only from the launch template, tag only on create, terminate only the stage', () => {
    const { json } = synthVariant(REAL, PROPS);
    const statements = statementsOf(json, 'baton-test-aws-provisioner');
    const run = statementFor(statements, 'ec2:RunInstances');
    assert.deepEqual(actionsOf(run), ['ec2:RunInstances']);
    assert.match(arnText(run.Condition.ArnLike['ec2:LaunchTemplate']), /launch-template\/lt-0123456789abcdef0/);
    assert.equal(run.Condition.Bool['ec2:IsLaunchTemplateResource'], 'true');
    const tag = statementFor(statements, 'ec2:CreateTags');
    assert.deepEqual(tag.Condition, { StringEquals: { 'ec2:CreateAction': 'RunInstances' } });
    const terminate = statementFor(statements, 'ec2:TerminateInstances');
    assert.deepEqual(terminate.Condition, { StringEquals: { 'aws:ResourceTag/baton:stage': 'test' } });
    assert.match(arnText(terminate.Resource), /:instance\/\*/);
    const pass = statementFor(statements, 'iam:PassRole');
    assert.deepEqual(pass.Condition, { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } });
    for (const action of ['ssm:PutParameter', 'ssm:DeleteParameter']) {
      assert.match(arnText(statementFor(statements, action).Resource), /parameter\/baton\/test\/runner-tokens\/\*/);
    }
    assert.match(arnText(statementFor(statements, 'ssm:GetParametersByPath').Resource), /parameter\/baton\/test\/runner-tokens"/);
    assert.match(arnText(statementFor(statements, 'ssm:GetParameter').Resource), /parameter\/ops\/baton\/provisioner-token/);
    const granted = statements.flatMap(actionsOf);
    assert.ok(!granted.some((a) => a.startsWith('dynamodb:')), `a provisioner reads Baton through the API: ${granted}`);
    for (const s of statements.filter((x) => x.Resource === '*')) {
      assert.ok(
        actionsOf(s).every((a) => a === 'ec2:DescribeInstances' || (a === 'ec2:RunInstances' && s.Condition)),
        `only DescribeInstances, and RunInstances under its conditions, on "*": ${JSON.stringify(s)}`,
      );
    }
  });

  it('gives runner instances a role that may read and delete their tokens only', () => {
    const { json } = synthVariant(REAL, PROPS);
    const role = Object.entries<any>(json.Resources).find(
      ([, r]) => r.Type === 'AWS::IAM::Role' && arnText(r.Properties.AssumeRolePolicyDocument).includes('ec2.amazonaws.com'),
    );
    assert.ok(role, 'an EC2 role');
    const statements = Object.values<any>(json.Resources)
      .filter((r) => r.Type === 'AWS::IAM::Policy' && r.Properties.Roles.some((x: any) => x.Ref === role[0]))
      .flatMap((r) => r.Properties.PolicyDocument.Statement);
    assert.equal(statements.length, 1, JSON.stringify(statements));
    assert.deepEqual(actionsOf(statements[0]).sort(), ['ssm:DeleteParameter', 'ssm:GetParameter']);
    assert.match(arnText(statements[0].Resource), /parameter\/baton\/test\/runner-tokens\/\*/);
    const profile = Object.values<any>(json.Resources).find((r) => r.Type === 'AWS::IAM::InstanceProfile');
    assert.deepEqual(profile.Properties.Roles, [{ Ref: role[0] }]);
  });

  it('alarms on failed launches and on orphans from its EMF metrics', () => {
    const { template } = synthVariant(REAL, PROPS);
    for (const [name, metric] of [
      ['baton-test-provisioner-launch-failures', PROVISIONER_METRICS.launchFailures],
      ['baton-test-provisioner-orphans', PROVISIONER_METRICS.orphans],
    ]) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        AlarmName: name,
        Namespace: 'Baton',
        MetricName: metric,
        Dimensions: [{ Name: 'stage', Value: 'test' }],
        Threshold: 1,
      });
    }
    template.hasResourceProperties('AWS::CloudWatch::Alarm', { AlarmName: 'baton-test-aws-provisioner-errors' });
  });

  it('refuses props it cannot scope', () => {
    assert.throws(
      () => synthVariant(REAL, { provisioner: { ...PROPS.provisioner, launchTemplateId: 'my-template' } }),
      /launchTemplateId/,
    );
    assert.throws(
      () => synthVariant(REAL, { provisioner: { ...PROPS.provisioner, tokenParameterName: 'no-slash' } }),
      /tokenParameterName/,
    );
    assert.throws(() => synthVariant(REAL, { provisioner: { ...PROPS.provisioner, periodS: 90 } }), /whole minutes/);
  });
});
