/**
 * docs/runbook.md has a section for every alarm the stack defines, and no
 * section for an alarm it does not: whoever is paged finds what the alarm
 * means, how to look and how to recover. A section's heading is the
 * alarm's name with its variable parts in angle brackets (`<stage>`,
 * `<function>`, `<queue>`, `<state-machine>`), each standing for exactly
 * the names the stack can put there.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { allQueues } from '../lib/resources';
import { REAL, repo, synthVariant } from '../lib/testing/variants';

// The optional AWS provisioner brings alarms of its own: synthesize with it.
const PROVISIONER = {
  provisioner: {
    tokenParameterName: '/ops/baton/provisioner-token',
    launchTemplateId: 'lt-0123456789abcdef0',
    maxInstances: 20,
  },
} as const;

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Each section heading of the runbook, as a pattern of the alarm names it covers. */
function sections(): { heading: string; pattern: RegExp }[] {
  const text = fs.readFileSync(path.join(repo.root, 'docs', 'runbook.md'), 'utf-8');
  const resources = REAL.resources;
  const names: Record<string, string[]> = {
    stage: ['test'],
    function: [...resources.functions.map((f) => f.name), 'aws-provisioner'],
    queue: allQueues(resources).map((q) => q.name),
    'state-machine': resources.state_machines.map((m) => m.name),
  };
  return [...text.matchAll(/^## `([^`]+)`$/gm)].map((m) => {
    const heading = m[1];
    const source = heading
      .split(/(<[^>]+>)/)
      .map((part) => {
        const slot = /^<([^>]+)>$/.exec(part);
        if (!slot) {
          return escape(part);
        }
        const choices = names[slot[1]];
        assert.ok(choices, `runbook heading ${heading}: unknown placeholder ${part}`);
        return `(?:${choices.map(escape).join('|')})`;
      })
      .join('');
    return { heading, pattern: new RegExp(`^${source}$`) };
  });
}

describe('the runbook', () => {
  const { json } = synthVariant(REAL, PROVISIONER);
  const alarms = Object.values<any>(json.Resources)
    .filter((r) => r.Type === 'AWS::CloudWatch::Alarm')
    .map((r) => r.Properties.AlarmName as string);
  const runbook = sections();

  it('is read from the stack: it has alarms and sections to compare', () => {
    assert.ok(alarms.length > 20, `alarms: ${alarms.length}`);
    assert.ok(runbook.length >= 10, `sections: ${runbook.length}`);
  });

  it('has a section for every alarm the stack defines', () => {
    const missing = alarms.filter((name) => !runbook.some((s) => s.pattern.test(name)));
    assert.deepEqual(missing, [], `alarms with no section in docs/runbook.md: ${missing.join(', ')}`);
  });

  it('has no section for an alarm the stack does not define', () => {
    const stale = runbook.filter((s) => !alarms.some((name) => s.pattern.test(name))).map((s) => s.heading);
    assert.deepEqual(stale, [], `sections naming no alarm of the stack: ${stale.join(', ')}`);
  });
});
