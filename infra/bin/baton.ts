#!/usr/bin/env node
/**
 * The CDK app. Every prop of the stack can be set from the CDK context:
 *
 *   npx cdk deploy -c stage=prod -c leaseDurationS=240 -c deletionProtection=true
 *
 * Account and region come from the CLI's profile (CDK_DEFAULT_ACCOUNT /
 * CDK_DEFAULT_REGION); offline synth falls back to dummies.
 * `BATON_SKIP_BUNDLING=1` skips building the Rust functions and the web
 * console; otherwise the console is built from web/ (`npm ci && npm run
 * build`) unless `-c consoleDir=<built files>` is given.
 */
import { App } from 'aws-cdk-lib';

import { BatonStack, BatonStackProps } from '../lib/baton-stack';
import { contextProps } from '../lib/context';

// BATON_SKIP_BUNDLING=1 synthesizes without building the Rust functions nor
// the console (lint, quick checks); the template is the same, the assets are not built.
const skipBundling = ['1', 'true', 'yes'].includes((process.env.BATON_SKIP_BUNDLING ?? '').toLowerCase());
const app = new App(skipBundling ? { postCliContext: { 'aws:cdk:bundling-stacks': [] } } : {});
const props: BatonStackProps = contextProps((key) => app.node.tryGetContext(key));
const stage = props.stage ?? 'dev';

new BatonStack(app, `Baton-${stage}`, {
  ...props,
  stackName: `baton-${stage}`,
  description: `Baton CI job orchestration (${stage})`,
  env: {
    account: process.env.CDK_DEFAULT_ACCOUNT ?? '123456789012',
    region: process.env.CDK_DEFAULT_REGION ?? 'us-east-1',
  },
});
