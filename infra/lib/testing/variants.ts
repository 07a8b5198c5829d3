/**
 * The two resource sets every structural test runs against: the real
 * infra/resources.json of the checkout (whatever it holds today), and a fuller
 * fixture with every kind of entry, so the generic code paths are exercised
 * even while the real file is small.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { BatonStackProps } from '../baton-stack';
import { RepoPaths } from '../repo';
import { Resources, loadResources } from '../resources';
import { Synthesized, synth } from './synth';

export const repo = new RepoPaths();
export const fixtureDir = path.join(repo.infraDir, 'test', 'fixtures');

export interface Variant {
  readonly label: string;
  readonly resources: Resources;
  readonly stateMachineDir: string;
  readonly props: BatonStackProps;
}

export const REAL: Variant = {
  label: 'infra/resources.json',
  resources: loadResources(repo.resourcesJson),
  stateMachineDir: repo.stateMachineDir,
  props: {},
};

export const FIXTURE: Variant = {
  label: 'test fixture',
  resources: loadResources(path.join(fixtureDir, 'resources.json')),
  stateMachineDir: path.join(fixtureDir, 'statemachines'),
  props: {
    resources: loadResources(path.join(fixtureDir, 'resources.json')),
    stateMachineDir: path.join(fixtureDir, 'statemachines'),
  },
};

export const VARIANTS: readonly Variant[] = [REAL, FIXTURE];

const cache = new Map<string, Synthesized>();

/** The synthesized stack of a variant (stage "test", default props), synthesized once. */
export function synthVariant(v: Variant, extra: BatonStackProps = {}): Synthesized {
  const key = `${v.label}|${JSON.stringify(extra)}`;
  let s = cache.get(key);
  if (!s) {
    s = synth({ ...v.props, ...extra });
    cache.set(key, s);
  }
  return s;
}

export function readDefinition(v: Variant, file: string): string {
  return fs.readFileSync(path.join(v.stateMachineDir, file), 'utf-8');
}
