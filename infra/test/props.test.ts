/**
 * Props: defaults, validation (the same bounds as the functions' own start-up
 * checks), and parsing from the CDK context.
 */
import * as assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { App } from 'aws-cdk-lib';

import { BatonStack, resolveProps } from '../lib/baton-stack';
import { contextProps } from '../lib/context';
import { TEST_ENV } from '../lib/testing/synth';
import { FIXTURE, REAL } from '../lib/testing/variants';

const build = (props: Record<string, unknown>) => () =>
  new BatonStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Props', {
    env: TEST_ENV,
    missingCrates: 'placeholder',
    ...props,
  });

describe('stack props', () => {
  it('defaults to the spec’s values', () => {
    const r = resolveProps({}, REAL.resources);
    assert.deepEqual(
      {
        stage: r.stage,
        leaseDurationS: r.leaseDurationS,
        heartbeatIntervalS: r.heartbeatIntervalS,
        firstHeartbeatGraceS: r.firstHeartbeatGraceS,
        reaperPeriodS: r.reaperPeriodS,
        demandMetricsPeriodS: r.demandMetricsPeriodS,
        sessionTtlS: r.sessionTtlS,
        pollIntervalS: r.pollIntervalS,
        unschedulableFailS: r.unschedulableFailS,
        logLevel: r.logLevel,
        deletionProtection: r.deletionProtection,
        archiveRetentionDays: r.archiveRetentionDays,
        bucketRetentionDays: r.bucketRetentionDays,
      },
      {
        stage: 'dev',
        leaseDurationS: 180,
        heartbeatIntervalS: 15,
        firstHeartbeatGraceS: 60,
        reaperPeriodS: 60,
        demandMetricsPeriodS: 60,
        sessionTtlS: 3600,
        pollIntervalS: 5,
        unschedulableFailS: 900,
        logLevel: 'info',
        deletionProtection: true,
        archiveRetentionDays: REAL.resources.bus.archive_retention_days,
        bucketRetentionDays: Object.fromEntries((REAL.resources.buckets ?? []).map((b) => [b.name, b.retention_days])),
      },
    );
  });

  it('applies bucketRetentionDays to every bucket, within 1-3650 days', () => {
    const r = resolveProps({ bucketRetentionDays: 7 }, FIXTURE.resources);
    assert.deepEqual(r.bucketRetentionDays, { logs: 7, artifacts: 7 });
    assert.deepEqual(resolveProps({}, FIXTURE.resources).bucketRetentionDays, { logs: 7, artifacts: 90 });
    for (const days of [0, 3651, 1.5]) {
      assert.throws(build({ bucketRetentionDays: days }), /bucketRetentionDays must be a whole number between 1 and 3650/);
    }
    assert.doesNotThrow(build({ bucketRetentionDays: 3650 }));
  });

  it('applies artifactRetentionDays to the artifacts bucket only, over bucketRetentionDays, within 1-3650 days', () => {
    assert.equal(resolveProps({}, REAL.resources).bucketRetentionDays.artifacts, 30);
    assert.deepEqual(resolveProps({ artifactRetentionDays: 14 }, FIXTURE.resources).bucketRetentionDays, { logs: 7, artifacts: 14 });
    assert.deepEqual(
      resolveProps({ bucketRetentionDays: 5, artifactRetentionDays: 365 }, FIXTURE.resources).bucketRetentionDays,
      { logs: 5, artifacts: 365 },
    );
    for (const days of [0, 3651, 1.5, -1]) {
      assert.throws(build({ artifactRetentionDays: days }), /artifactRetentionDays must be a whole number between 1 and 3650/);
    }
    assert.doesNotThrow(build({ artifactRetentionDays: 1 }));
    assert.doesNotThrow(build({ artifactRetentionDays: 3650 }));
    // Given for a bucket that does not exist, it would silently do nothing.
    const resources = { ...FIXTURE.resources, buckets: FIXTURE.resources.buckets!.filter((b) => b.name !== 'artifacts') };
    assert.throws(
      build({ resources, stateMachineDir: FIXTURE.stateMachineDir, artifactRetentionDays: 7 }),
      /artifactRetentionDays is given but resources.json has no bucket named artifacts/,
    );
    assert.doesNotThrow(build({ resources, stateMachineDir: FIXTURE.stateMachineDir }));
  });

  it('refuses a bucket variable that is already one of the functions’ configuration variables', () => {
    const resources = { ...FIXTURE.resources, buckets: [{ name: 'logs', retention_days: 7, env: 'BATON_TABLE' }] };
    assert.throws(
      build({ resources, stateMachineDir: FIXTURE.stateMachineDir }),
      /bucket logs: env BATON_TABLE is already one of the functions' configuration variables/,
    );
    // The push variables too, including the one only push:post functions get.
    for (const env of ['BATON_PUSH_URL', 'BATON_PUSH_ENDPOINT']) {
      const clash = { ...FIXTURE.resources, buckets: [{ name: 'logs', retention_days: 7, env }] };
      assert.throws(
        build({ resources: clash, stateMachineDir: FIXTURE.stateMachineDir }),
        new RegExp(`bucket logs: env ${env} is already one of the functions' configuration variables`),
      );
    }
  });

  it('throws when the lease is shorter than 3 heartbeats', () => {
    assert.throws(build({ leaseDurationS: 44, heartbeatIntervalS: 15 }), /leaseDurationS \(44\) must be at least 3 × heartbeatIntervalS/);
    assert.throws(build({ leaseDurationS: 180, heartbeatIntervalS: 61 }), /at least 3 × heartbeatIntervalS/);
    assert.doesNotThrow(build({ leaseDurationS: 45, heartbeatIntervalS: 15 }));
  });

  it('throws on the other values the functions would refuse at start-up', () => {
    assert.throws(build({ firstHeartbeatGraceS: 10 }), /firstHeartbeatGraceS \(10\) must be at least heartbeatIntervalS/);
    assert.throws(build({ reaperPeriodS: 90 }), /whole minutes/);
    assert.throws(build({ reaperPeriodS: 30 }), /reaperPeriodS must be a whole number between 60/);
    assert.throws(build({ demandMetricsPeriodS: 150 }), /demandMetricsPeriodS \(150\) must be whole minutes/);
    assert.throws(build({ sessionTtlS: 10 }), /sessionTtlS/);
    assert.throws(build({ unschedulableFailS: 5 }), /unschedulableFailS/);
    assert.throws(build({ pollIntervalS: 0 }), /pollIntervalS/);
    assert.throws(build({ leaseDurationS: 1.5 }), /leaseDurationS must be a whole number/);
    assert.throws(build({ logLevel: 'info; rm -rf' }), /RUST_LOG/);
    assert.throws(build({ stage: 'Prod' }), /stage "Prod"/);
    assert.throws(build({ logRetentionDays: 31 }), /logRetentionDays/);
  });

  it('refuses to build a function whose crate is missing, unless placeholders are allowed', () => {
    const resources = {
      ...REAL.resources,
      // The push socket's function stays: resources.json requires a push socket.
      functions: [{ name: 'no-such-crate', trigger: 'scheduler' as const }, { name: REAL.resources.push.function, trigger: 'websocket' as const }],
      routes: [],
      subscribers: [],
      task_queues: [],
      state_machines: [],
      schedules: [],
      scheduler: { group: 'schedules', target: 'no-such-crate' },
    };
    assert.throws(build({ resources, missingCrates: 'error' }), /functions\/no-such-crate\/Cargo\.toml does not exist/);
    assert.doesNotThrow(build({ resources }));
  });
});

describe('context', () => {
  it('parses -c values (strings) into typed props', () => {
    const ctx: Record<string, string> = {
      stage: 'prod',
      leaseDurationS: '240',
      heartbeatIntervalS: '20',
      deletionProtection: 'false',
      stateMachineLogLevel: 'all',
      allowMissingCrates: 'true',
      logLevel: 'baton=debug,info',
      bucketRetentionDays: '7',
      artifactRetentionDays: '90',
    };
    const props = contextProps((k) => ctx[k]);
    assert.deepEqual(props, {
      stage: 'prod',
      leaseDurationS: 240,
      heartbeatIntervalS: 20,
      deletionProtection: false,
      stateMachineLogLevel: 'ALL',
      missingCrates: 'placeholder',
      logLevel: 'baton=debug,info',
      bucketRetentionDays: 7,
      artifactRetentionDays: 90,
    });
  });

  it('rejects malformed values', () => {
    assert.throws(() => contextProps((k) => (k === 'leaseDurationS' ? 'soon' : undefined)), /leaseDurationS="soon" is not a number/);
    assert.throws(() => contextProps((k) => (k === 'deletionProtection' ? 'maybe' : undefined)), /not a boolean/);
  });

  it('leaves unset keys to the defaults', () => {
    assert.deepEqual(contextProps(() => undefined), {});
  });
});
