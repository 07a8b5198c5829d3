/**
 * Synthesizing the stack in-process without building the Rust functions, for
 * the tests: `aws:cdk:bundling-stacks = []` skips bundling, and the context of
 * `cdk.json` is applied so the template is the one `cdk synth` produces.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';

import { BatonStack, BatonStackProps } from '../baton-stack';
import { RepoPaths } from '../repo';

export const TEST_ENV = { account: '123456789012', region: 'us-east-1' } as const;

/** The "context" of infra/cdk.json. */
export function cdkJsonContext(repo: RepoPaths = new RepoPaths()): Record<string, unknown> {
  const file = path.join(repo.infraDir, 'cdk.json');
  const json = JSON.parse(fs.readFileSync(file, 'utf-8')) as { context?: Record<string, unknown> };
  return json.context ?? {};
}

export interface Synthesized {
  readonly stack: BatonStack;
  readonly template: Template;
  /** The raw CloudFormation template. */
  readonly json: CfnTemplate;
}

export interface CfnResource {
  readonly Type: string;
  readonly Properties?: Record<string, any>;
  readonly DeletionPolicy?: string;
  readonly UpdateReplacePolicy?: string;
  readonly DependsOn?: string | string[];
}

export interface CfnTemplate {
  readonly Resources: Record<string, CfnResource>;
  readonly Outputs?: Record<string, { Value: unknown; Description?: string }>;
}

/** The web console the tests deploy: a fixture, so they never need `web/` built (or present). */
export function consoleFixtureDir(repo: RepoPaths = new RepoPaths()): string {
  return path.join(repo.infraDir, 'test', 'fixtures', 'console');
}

/**
 * Synthesizes a stack (stage "test", placeholder code for missing crates and
 * the fixture console unless said otherwise).
 */
export function synth(props: BatonStackProps = {}): Synthesized {
  const repo = props.repo ?? new RepoPaths();
  const app = new App({ context: { ...cdkJsonContext(repo), 'aws:cdk:bundling-stacks': [] } });
  const stack = new BatonStack(app, 'BatonTest', {
    stage: 'test',
    missingCrates: 'placeholder',
    consoleDir: consoleFixtureDir(repo),
    env: TEST_ENV,
    ...props,
    repo,
  });
  const template = Template.fromStack(stack);
  return { stack, template, json: template.toJSON() as CfnTemplate };
}
