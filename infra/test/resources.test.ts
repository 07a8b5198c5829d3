/**
 * resources.json: the real file is valid, its references and permissions are
 * checked, names follow `Naming` of the Rust side, every function has its
 * crate, and the repository root is found from anywhere inside the checkout.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { RepoPaths, findRepoRoot } from '../lib/repo';
import { Naming, Resources, parsePermission, placeholders, validateResources } from '../lib/resources';
import { FIXTURE, REAL, repo } from '../lib/testing/variants';

const clone = (r: Resources): any => JSON.parse(JSON.stringify(r));

describe('resources.json', () => {
  it('is valid, and so is the fixture', () => {
    assert.doesNotThrow(() => validateResources(REAL.resources));
    assert.deepEqual(validateResources(FIXTURE.resources), []);
  });

  it('has a crate functions/<name> building binary baton-<name> for every function', () => {
    for (const fn of REAL.resources.functions) {
      const manifest = repo.functionManifest(fn.name);
      assert.ok(fs.existsSync(manifest), `${manifest} is missing`);
      const toml = fs.readFileSync(manifest, 'utf-8');
      const bin = new RegExp(`^\\s*name\\s*=\\s*"baton-${fn.name}"\\s*$`, 'm');
      assert.match(toml, bin, `${manifest} names no package or [[bin]] baton-${fn.name}`);
    }
  });

  it('has a definition file with exactly the declared placeholders for every state machine', () => {
    for (const m of REAL.resources.state_machines) {
      const raw = fs.readFileSync(repo.stateMachineDefinition(m.definition), 'utf-8');
      assert.doesNotThrow(() => JSON.parse(raw), m.definition);
      assert.deepEqual(placeholders(raw), Object.keys(m.queue_substitutions).sort(), m.definition);
    }
  });

  it('rejects unknown permissions and dangling references', () => {
    const bad = (mutate: (r: any) => void, message: RegExp) => {
      const r = clone(FIXTURE.resources);
      mutate(r);
      assert.throws(() => validateResources(r), message);
    };
    bad((r) => (r.functions[0].permissions = ['table:*']), /unknown permission "table:\*"/);
    bad((r) => (r.functions[0].permissions = ['states:start:nope']), /unknown state machine nope/);
    bad((r) => (r.functions[0].permissions = ['queue:send:nope']), /unknown queue nope/);
    bad((r) => (r.routes[0].function = 'nope'), /unknown function nope/);
    bad((r) => (r.routes[0].function = 'relay'), /trigger is stream, not http/);
    bad((r) => r.routes.push({ ...r.routes[0] }), /duplicate route/);
    bad((r) => (r.subscribers[0].batch_size = 11), /batch_size must be a whole number between 1 and 10/);
    bad((r) => (r.subscribers[0].facts = []), /routes no facts/);
    bad((r) => (r.state_machines[0].queue_substitutions = { X: 'orchestrate' }), /unknown task queue orchestrate/);
    bad((r) => r.task_queues.push({ ...r.task_queues[0], name: 'orchestrate' }), /duplicate queue/);
  });

  it('validates the push socket: its function is the one websocket function, its keep-alive a plain route key', () => {
    const bad = (mutate: (r: any) => void, message: RegExp) => {
      const r = clone(FIXTURE.resources);
      mutate(r);
      assert.throws(() => validateResources(r), message);
    };
    bad((r) => delete r.push, /push is missing/);
    bad((r) => (r.push = []), /push is missing or not an object/);
    bad((r) => (r.push.function = 'nope'), /push → unknown function nope/);
    bad((r) => (r.push.function = 'health'), /push → function health whose trigger is http, not websocket/);
    bad((r) => r.functions.push({ name: 'another-socket', trigger: 'websocket' }), /function another-socket: trigger websocket, but push.function is runner-socket/);
    bad((r) => (r.routes[0].function = 'runner-socket'), /trigger is websocket, not http/);
    bad((r) => (r.push.name = 'Push'), /push name "Push" must be lower-case/);
    for (const action of ['', '$default', '$connect', 'a b', 'x'.repeat(65), 7]) {
      bad((r) => (r.push.keepalive_action = action), /push: keepalive_action .* must be 1-64 letters/);
    }
    bad((r) => (r.functions[0].permissions = ['push:post:runner-push']), /unknown permission "push:post:runner-push"/);
    // A websocket function is triggered by the socket: no warning.
    assert.deepEqual(validateResources(clone(FIXTURE.resources)), []);
    assert.equal(REAL.resources.functions.find((f) => f.name === REAL.resources.push.function)?.trigger, 'websocket');
  });

  it('validates index projections: ALL or KEYS_ONLY, absent meaning ALL', () => {
    for (const projection of ['INCLUDE', 'keys_only', '', null]) {
      const r = clone(FIXTURE.resources);
      r.table.global_secondary_indexes[0].projection = projection;
      assert.throws(() => validateResources(r), /index leases-by-expiry: projection .* must be one of ALL, KEYS_ONLY/, String(projection));
    }
    const r = clone(FIXTURE.resources);
    delete r.table.global_secondary_indexes[0].projection;
    assert.deepEqual(validateResources(r), []);
    assert.equal(REAL.resources.table.global_secondary_indexes.find((g) => g.name === 'leases-by-expiry')?.projection, 'KEYS_ONLY');
  });

  it('validates buckets: names, retention, variables', () => {
    const bad = (mutate: (r: any) => void, message: RegExp) => {
      const r = clone(FIXTURE.resources);
      mutate(r);
      assert.throws(() => validateResources(r), message);
    };
    const retention = /bucket logs: retention_days must be a whole number between 1 and 3650/;
    bad((r) => (r.buckets[0].retention_days = 0), retention);
    bad((r) => (r.buckets[0].retention_days = 3651), retention);
    bad((r) => (r.buckets[0].retention_days = 1.5), retention);
    bad((r) => (r.buckets[0].retention_days = '30'), retention);
    bad((r) => delete r.buckets[0].retention_days, retention);
    bad((r) => (r.buckets[0].env = 'LOGS_BUCKET'), /env "LOGS_BUCKET" must match/);
    bad((r) => (r.buckets[0].env = 'BATON_logs'), /must match/);
    bad((r) => (r.buckets[0].env = 'BATON_LOGS_1'), /must match/);
    bad((r) => (r.buckets[1].env = r.buckets[0].env), /env BATON_LOGS_BUCKET is already another bucket's/);
    bad((r) => r.buckets.push({ ...r.buckets[0], env: 'BATON_OTHER' }), /duplicate bucket logs/);
    // Local bucket names are baton-<stage>-<name>: S3 refuses '_', upper case and a trailing '-'.
    for (const name of ['Logs', 'job_logs', 'logs-', '-logs', '', 'x'.repeat(37)]) {
      bad((r) => (r.buckets[1].name = name), /bucket name .* must be 1-36 lower-case letters/);
    }
    bad((r) => (r.buckets = { logs: {} }), /buckets must be an array/);
    assert.doesNotThrow(() => {
      const r = clone(FIXTURE.resources);
      r.buckets[0].retention_days = 3650;
      r.buckets[1].name = 'x'.repeat(36);
      validateResources(r);
    });
  });

  it('refuses logs:write and logs:read without a bucket named logs', () => {
    const without = (mutate: (r: any) => void, permission: string, message: RegExp) => {
      const r = clone(FIXTURE.resources);
      mutate(r);
      assert.throws(() => validateResources(r), message, permission);
    };
    for (const permission of ['logs:write', 'logs:read']) {
      const message = new RegExp(`function health: permission ${permission} needs a bucket named logs`);
      without((r) => {
        delete r.buckets;
        r.functions[0].permissions = [permission];
      }, permission, message);
      without((r) => {
        r.buckets = r.buckets.filter((b: any) => b.name !== 'logs');
        r.functions[0].permissions = [permission];
      }, permission, message);
      without((r) => {
        r.buckets = [];
        r.functions = r.functions.map((f: any) => ({ ...f, permissions: [] }));
        r.state_machines[0].permissions = [permission];
      }, permission, new RegExp(`state machine run-attempt: permission ${permission} needs a bucket named logs`));
    }
  });

  it('refuses artifacts:write and artifacts:read without a bucket named artifacts', () => {
    const without = (mutate: (r: any) => void, permission: string, message: RegExp) => {
      const r = clone(FIXTURE.resources);
      mutate(r);
      assert.throws(() => validateResources(r), message, permission);
    };
    for (const permission of ['artifacts:write', 'artifacts:read']) {
      const message = new RegExp(`function health: permission ${permission} needs a bucket named artifacts`);
      without((r) => {
        delete r.buckets;
        r.functions[0].permissions = [permission];
      }, permission, message);
      without((r) => {
        r.buckets = r.buckets.filter((b: any) => b.name !== 'artifacts');
        r.functions[0].permissions = [permission];
      }, permission, message);
      without((r) => {
        r.buckets = r.buckets.filter((b: any) => b.name !== 'artifacts');
        r.functions = r.functions.map((f: any) => ({ ...f, permissions: [] }));
        r.state_machines[0].permissions = [permission];
      }, permission, new RegExp(`state machine run-attempt: permission ${permission} needs a bucket named artifacts`));
      // With the artifacts bucket, it is accepted.
      const r = clone(FIXTURE.resources);
      r.functions[0].permissions = [permission];
      assert.deepEqual(validateResources(r), [], permission);
    }
  });

  it('accepts a file without buckets (the key is optional, as on the Rust side)', () => {
    const r = clone(FIXTURE.resources);
    delete r.buckets;
    for (const f of r.functions) {
      f.permissions = (f.permissions ?? []).filter((p: string) => !p.startsWith('logs:') && !p.startsWith('artifacts:'));
    }
    assert.deepEqual(validateResources(r), []);
  });

  it('warns about a function that nothing triggers yet', () => {
    const r = clone(FIXTURE.resources);
    r.functions.push({ name: 'lonely', trigger: 'sqs' });
    assert.deepEqual(validateResources(r), ['function lonely (trigger sqs) has nothing that triggers it yet']);
  });

  it('parses the permission vocabulary', () => {
    assert.deepEqual(parsePermission('table:read'), { kind: 'table:read' });
    assert.deepEqual(parsePermission('states:start:run-attempt'), { kind: 'states:start', machine: 'run-attempt' });
    assert.deepEqual(parsePermission('states:read'), { kind: 'states:read' });
    assert.deepEqual(parsePermission('states:read:job'), { kind: 'states:read', machine: 'job' });
    assert.deepEqual(parsePermission('queue:send:enqueue'), { kind: 'queue:send', queue: 'enqueue' });
    assert.deepEqual(parsePermission('logs:write'), { kind: 'logs:write' });
    assert.deepEqual(parsePermission('logs:read'), { kind: 'logs:read' });
    assert.deepEqual(parsePermission('artifacts:write'), { kind: 'artifacts:write' });
    assert.deepEqual(parsePermission('artifacts:read'), { kind: 'artifacts:read' });
    assert.deepEqual(parsePermission('push:post'), { kind: 'push:post' });
    assert.throws(() => parsePermission('artifacts:delete'), /unknown permission "artifacts:delete"; expected one of .*artifacts:write, artifacts:read/);
    assert.throws(() => parsePermission('artifacts:write:artifacts'), /unknown permission/);
    assert.throws(() => parsePermission('push:*'), /unknown permission/);
    assert.throws(() => parsePermission('push:manage'), /unknown permission/);
    assert.throws(() => parsePermission('logs:delete'), /unknown permission/);
    assert.throws(() => parsePermission('logs:write:logs'), /unknown permission/);
    assert.throws(() => parsePermission('queue:send:'), /unknown permission/);
    assert.throws(() => parsePermission('*'), /unknown permission/);
  });
});

describe('naming', () => {
  it('matches localstack/src/resources.rs', () => {
    const dev = new Naming('dev');
    assert.equal(dev.physical('state'), 'baton-dev-state');
    assert.equal(dev.dlq('enqueue'), 'baton-dev-enqueue-dlq');
    assert.equal(dev.prefix, 'baton-dev-');
  });
});

describe('repository root', () => {
  it('is found by walking up from any directory inside the checkout', () => {
    assert.equal(findRepoRoot(path.join(repo.root, 'infra', 'lib')), repo.root);
    assert.equal(findRepoRoot(repo.root), repo.root);
    assert.equal(new RepoPaths(repo.root).resourcesJson, path.join(repo.root, 'infra', 'resources.json'));
  });

  it('is an error outside a checkout', { skip: process.env.BATON_REPO_ROOT ? 'BATON_REPO_ROOT is set' : false }, () => {
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-outside-'));
    try {
      assert.throws(() => findRepoRoot(outside), /no Cargo workspace/);
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
    }
  });
});
