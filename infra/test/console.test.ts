/**
 * The web console: its files in a private bucket that only the console's
 * CloudFront distribution may read (Origin Access Control), the SPA rewrite
 * on the default behaviour, `/v1/*` forwarded to the HTTP API uncached, the
 * BucketDeployment that copies the files (and what its handler may touch),
 * the `ConsoleUrl` output, and where the files come from (`consoleDir`, the
 * built `web/`, a placeholder). The tests deploy a fixture
 * (test/fixtures/console): they never build the web app.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';

import { App, Stack } from 'aws-cdk-lib';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as s3assets from 'aws-cdk-lib/aws-s3-assets';

import { BatonStack } from '../lib/baton-stack';
import { CONSOLE_API_PATH_PATTERN, CONSOLE_DEPLOYMENT_WILDCARD_EXCEPTIONS, SPA_REWRITE_CODE, consoleSource, webBundling } from '../lib/console';
import { contextProps } from '../lib/context';
import { RepoPaths } from '../lib/repo';
import { Naming } from '../lib/resources';
import { assertPrivateBucket } from '../lib/testing/buckets';
import { TEST_ENV, consoleFixtureDir } from '../lib/testing/synth';
import { TemplateView, asArray } from '../lib/testing/template';
import { FIXTURE, VARIANTS, repo, synthVariant } from '../lib/testing/variants';

const naming = new Naming('test');

/** The managed policies' ids, as the library names them (plain strings, no tokens). */
const CACHING_DISABLED = cloudfront.CachePolicy.CACHING_DISABLED.cachePolicyId;
const CACHING_OPTIMIZED = cloudfront.CachePolicy.CACHING_OPTIMIZED.cachePolicyId;
const ALL_VIEWER_EXCEPT_HOST_HEADER = cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER.originRequestPolicyId;

/** The SPA rewrite's handler, run as CloudFront would run it. */
const rewrite = new Function(`${SPA_REWRITE_CODE}; return handler;`)() as (event: unknown) => { uri: string; querystring?: unknown };
const viewerRequest = (uri: string) => rewrite({ request: { method: 'GET', uri, querystring: { tab: { value: 'logs' } }, headers: {} } });

for (const v of VARIANTS) {
  describe(`the web console (${v.label})`, () => {
    const { json } = synthVariant(v);
    const t = new TemplateView(json);
    const [distributionId, distribution] = t.consoleDistribution();
    const config = distribution.Properties?.DistributionConfig;
    const bucketId = t.consoleBucket();

    it('keeps its files in a private bucket: public access blocked, TLS only, SSE-S3, no website hosting, deleted with the stack', () => {
      const bucket = t.get(bucketId);
      const p = bucket.Properties!;
      assertPrivateBucket(p);
      assert.equal(p.WebsiteConfiguration, undefined, 'no website hosting: CloudFront reads it through its REST endpoint');
      assert.equal(p.BucketName, undefined);
      // Build output only: it goes with the stack (the deployment empties it first).
      assert.equal(bucket.DeletionPolicy, 'Delete');
      // Not one of resources.json: no function is told about it.
      for (const [fnId, f] of t.ofType('AWS::Lambda::Function')) {
        assert.ok(!t.refs(f.Properties?.Environment).has(bucketId), `${fnId} names the console bucket`);
      }
    });

    it('is read through Origin Access Control only: the bucket policy allows GetObject to CloudFront for this distribution, and denies plain HTTP', () => {
      const oacs = t.ofType('AWS::CloudFront::OriginAccessControl');
      assert.equal(oacs.length, 1);
      const oac = oacs[0][1].Properties?.OriginAccessControlConfig;
      assert.equal(oac.OriginAccessControlOriginType, 's3');
      assert.equal(oac.SigningBehavior, 'always');
      assert.equal(oac.SigningProtocol, 'sigv4');
      const origin = t.consoleOrigin();
      assert.equal(t.target(origin.OriginAccessControlId, 'Id'), oacs[0][0]);
      // No legacy Origin Access Identity.
      assert.deepEqual(origin.S3OriginConfig, { OriginAccessIdentity: '' });
      assert.equal(t.ofType('AWS::CloudFront::CloudFrontOriginAccessIdentity').length, 0);

      const policies = t.ofType('AWS::S3::BucketPolicy').filter(([, x]) => t.refs(x.Properties?.Bucket).has(bucketId));
      assert.equal(policies.length, 1);
      const statements = policies[0][1].Properties?.PolicyDocument.Statement as Record<string, any>[];
      const allows = statements.filter((st) => st.Effect === 'Allow');
      assert.equal(allows.length, 1, JSON.stringify(allows));
      const allow = allows[0];
      assert.deepEqual(allow.Principal, { Service: 'cloudfront.amazonaws.com' });
      assert.deepEqual(asArray(allow.Action), ['s3:GetObject']);
      assert.equal(t.render(allow.Resource), `{${bucketId}.Arn}/*`);
      assert.deepEqual(Object.keys(allow.Condition), ['StringEquals']);
      assert.deepEqual(Object.keys(allow.Condition.StringEquals), ['AWS:SourceArn']);
      assert.equal(
        t.render(allow.Condition.StringEquals['AWS:SourceArn']),
        `arn:aws:cloudfront::123456789012:distribution/{${distributionId}}`,
        'this distribution only, not every CloudFront distribution',
      );
      assert.deepEqual(
        statements.filter((st) => st.Effect !== 'Allow').map((st) => [st.Effect, st.Action, st.Condition]),
        [['Deny', 's3:*', { Bool: { 'aws:SecureTransport': 'false' } }]],
      );
    });

    it('serves the bucket by default: HTTPS redirect, index.html at the root, the SPA rewrite at viewer request, no error responses', () => {
      assert.equal(config.DefaultRootObject, 'index.html');
      assert.equal(config.Enabled, true);
      const b = config.DefaultCacheBehavior;
      assert.equal(t.target(t.consoleOrigin().DomainName, 'RegionalDomainName'), bucketId);
      assert.equal(b.ViewerProtocolPolicy, 'redirect-to-https');
      assert.deepEqual(b.AllowedMethods, ['GET', 'HEAD']);
      assert.equal(b.CachePolicyId, CACHING_OPTIMIZED);
      assert.equal(b.ResponseHeadersPolicyId, cloudfront.ResponseHeadersPolicy.SECURITY_HEADERS.responseHeadersPolicyId);
      assert.equal(b.FunctionAssociations.length, 1);
      const [association] = b.FunctionAssociations;
      assert.equal(association.EventType, 'viewer-request');
      const fn = t.get(t.target(association.FunctionARN, 'FunctionARN'));
      assert.equal(fn.Type, 'AWS::CloudFront::Function');
      assert.equal(fn.Properties?.Name, naming.physical('console-spa-rewrite'));
      assert.equal(fn.Properties?.FunctionConfig.Runtime, 'cloudfront-js-2.0');
      assert.equal(fn.Properties?.FunctionCode, SPA_REWRITE_CODE);
      assert.equal(fn.Properties?.AutoPublish, true);
      // Distribution-wide error responses would turn the API's 403/404 into index.html with a 200.
      assert.equal(config.CustomErrorResponses, undefined);
    });

    it(`forwards ${CONSOLE_API_PATH_PATTERN} to the HTTP API's $default stage: HTTPS only, caching disabled, every viewer header but Host, every method`, () => {
      const [apiId] = t.byProp('AWS::ApiGatewayV2::Api', 'Name', naming.physical('api'));
      const behaviours = config.CacheBehaviors as Record<string, any>[];
      assert.deepEqual(behaviours.map((b) => b.PathPattern), [CONSOLE_API_PATH_PATTERN]);
      const [b] = behaviours;
      assert.equal(b.CachePolicyId, CACHING_DISABLED);
      assert.equal(b.OriginRequestPolicyId, ALL_VIEWER_EXCEPT_HOST_HEADER);
      assert.deepEqual([...b.AllowedMethods].sort(), ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT']);
      assert.equal(b.ViewerProtocolPolicy, 'https-only');
      assert.equal(b.FunctionAssociations, undefined, 'no rewrite of API paths');
      assert.equal(b.ResponseHeadersPolicyId, undefined, 'the API answers as is');
      const origin = t.consoleOrigin(CONSOLE_API_PATH_PATTERN);
      const domain = `{${apiId}}.execute-api.us-east-1.amazonaws.com`;
      assert.equal(t.render(origin.DomainName), domain);
      assert.deepEqual(origin.CustomOriginConfig, { OriginProtocolPolicy: 'https-only', OriginSSLProtocols: ['TLSv1.2'] });
      // $default serves at the root: no origin path, and the API's own URL is that domain.
      assert.equal(origin.OriginPath, undefined);
      const stages = t.ofType('AWS::ApiGatewayV2::Stage').filter(([, s]) => t.target(s.Properties?.ApiId) === apiId);
      assert.deepEqual(stages.map(([, s]) => s.Properties?.StageName), ['$default']);
      assert.equal(t.render(json.Outputs!.ApiUrl.Value), `https://${domain}/`);
      // Every route of the API is reachable on the console's origin.
      const outside = v.resources.routes.filter((r) => !r.path.startsWith(CONSOLE_API_PATH_PATTERN.slice(0, -1)));
      assert.deepEqual(outside, [], `routes the console's ${CONSOLE_API_PATH_PATTERN} does not reach`);
    });

    it('deploys its files with a BucketDeployment into that bucket, pruning, and invalidating the distribution', () => {
      const deployments = t.ofType('Custom::CDKBucketDeployment');
      assert.equal(deployments.length, 1);
      const p = deployments[0][1].Properties!;
      assert.equal(t.target(p.DestinationBucketName), bucketId);
      assert.equal(p.DestinationBucketKeyPrefix, undefined, 'at the root of the bucket');
      assert.equal(p.SourceObjectKeys.length, 1);
      assert.equal(p.Prune, true);
      assert.equal(p.RetainOnDelete, false, 'deleting the stack empties the bucket, so that it can be deleted');
      assert.equal(t.target(p.DistributionId), distributionId);
      assert.deepEqual(p.DistributionPaths, ['/*']);
      assert.deepEqual(p.SystemMetadata, { 'cache-control': 'no-cache' });
    });

    it('gives the deployment handler (the only function besides Baton’s) the console bucket, the asset bucket and its own log group only', () => {
      const handlerId = t.consoleDeploymentHandler();
      const functions = t.ofType('AWS::Lambda::Function').map(([id]) => id);
      assert.deepEqual(functions.sort(), [...t.batonFunctions().map(([id]) => id), handlerId].sort());
      const handler = t.get(handlerId);
      const roleId = t.target(handler.Properties?.Role, 'Arn');
      assert.equal(t.get(roleId).Properties?.ManagedPolicyArns, undefined, 'no AWSLambdaBasicExecutionRole (logs on "*")');
      assert.equal(t.get(roleId).Properties?.Policies, undefined);
      const logGroup = t.target(handler.Properties?.LoggingConfig.LogGroup);
      assert.equal(t.get(logGroup).Properties?.RetentionInDays, 30);
      const assets = 'arn:aws:s3:::cdk-hnb659fds-assets-123456789012-us-east-1';
      const statements = t.roleStatements(roleId);
      assert.ok(statements.length > 0);
      const touched = new Set<string>();
      for (const { policy, statement } of statements) {
        assert.equal(statement.Effect, 'Allow', policy);
        for (const resource of asArray<unknown>(statement.Resource)) {
          if (resource === '*') {
            for (const action of asArray<string>(statement.Action)) {
              assert.ok(CONSOLE_DEPLOYMENT_WILDCARD_EXCEPTIONS.includes(action), `${action} on "*"`);
            }
            continue;
          }
          const refs = t.refs(resource);
          if (refs.size === 0) {
            const text = t.render(resource);
            assert.ok(text === assets || text === `${assets}/*`, `${policy}: ${text}`);
            assert.ok(asArray<string>(statement.Action).every((a) => /^s3:(Get|List)/.test(a)), `${policy}: the asset bucket is read only`);
            touched.add('assets');
            continue;
          }
          for (const id of refs) {
            assert.ok(id === bucketId || id === logGroup, `${policy}: ${JSON.stringify(resource)} is neither the console bucket nor its log group`);
            touched.add(id);
          }
        }
      }
      assert.deepEqual([...touched].sort(), [bucketId, logGroup, 'assets'].sort());
    });

    it('outputs ConsoleUrl, https:// and the distribution’s domain', () => {
      const output = json.Outputs?.ConsoleUrl;
      assert.ok(output, 'ConsoleUrl');
      assert.equal(t.render(output.Value), `https://{${distributionId}.DomainName}`);
    });
  });
}

describe('the SPA rewrite', () => {
  it('gives a client-side route (no file extension) the app’s shell, /index.html, keeping the query string', () => {
    for (const uri of ['/', '/runs', '/runs/abc', '/workspaces/acme/runs/01HZX/jobs/build', '/v1']) {
      const request = viewerRequest(uri);
      assert.equal(request.uri, '/index.html', uri);
      assert.deepEqual(request.querystring, { tab: { value: 'logs' } }, uri);
    }
  });

  it('leaves a file alone, present or missing, so a stale asset is an error and not HTML', () => {
    for (const uri of ['/index.html', '/assets/index-3f2a9c.js', '/assets/index-77aa.css', '/favicon.svg', '/robots.txt']) {
      assert.equal(viewerRequest(uri).uri, uri);
    }
  });
});

describe('the console’s files', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-console-test-'));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** A checkout with no crates (placeholder functions) and, unless `web` is false, a web app. */
  const checkout = (name: string, web: boolean): RepoPaths => {
    const root = path.join(tmp, name);
    fs.mkdirSync(path.join(root, 'infra'), { recursive: true });
    fs.writeFileSync(path.join(root, 'Cargo.toml'), '[workspace]\n');
    if (web) {
      fs.mkdirSync(path.join(root, 'web', 'src'), { recursive: true });
      fs.writeFileSync(path.join(root, 'web', 'package.json'), '{"name":"console","private":true}\n');
      fs.writeFileSync(path.join(root, 'web', 'src', 'main.ts'), 'export {};\n');
    }
    return new RepoPaths(root);
  };
  const stackOf = (paths: RepoPaths, props: Record<string, unknown> = {}) => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new BatonStack(app, 'Console', {
      env: TEST_ENV,
      missingCrates: 'placeholder',
      resources: FIXTURE.resources,
      stateMachineDir: FIXTURE.stateMachineDir,
      repo: paths,
      ...props,
    });
    return { app, stack };
  };
  /** The asset the console's deployment copies from. */
  const sourceAsset = (stack: Stack): s3assets.Asset => {
    const found = stack.node
      .findAll()
      .filter((c): c is s3assets.Asset => c instanceof s3assets.Asset && c.node.path.startsWith(`${stack.node.path}/Console/Deployment/Asset`));
    assert.equal(found.length, 1, found.map((c) => c.node.path).join(', '));
    return found[0];
  };

  it('are consoleDir’s as is when given: the tests deploy the fixture', () => {
    const { app, stack } = stackOf(repo, { consoleDir: consoleFixtureDir(repo) });
    const staged = path.join(app.outdir, sourceAsset(stack).assetPath);
    assert.equal(
      fs.readFileSync(path.join(staged, 'index.html'), 'utf-8'),
      fs.readFileSync(path.join(consoleFixtureDir(repo), 'index.html'), 'utf-8'),
    );
  });

  it('refuses a consoleDir without index.html', () => {
    const empty = fs.mkdtempSync(path.join(tmp, 'empty-'));
    assert.throws(() => stackOf(repo, { consoleDir: empty }), /consoleDir .*index\.html does not exist/);
  });

  it('are built from web/ by default (bundling, skipped here: the asset is web/ itself)', () => {
    const paths = checkout('with-web', true);
    const { stack } = stackOf(paths);
    assert.equal(sourceAsset(stack).assetPath, paths.webDir);
    Annotations.fromStack(stack).hasNoWarning('*', Match.stringLikeRegexp('placeholder console'));
  });

  it('are a placeholder page, with a warning, when web/ is missing and placeholders are allowed; an error otherwise', () => {
    const paths = checkout('without-web', false);
    const { app, stack } = stackOf(paths);
    Annotations.fromStack(stack).hasWarning('/Console', Match.stringLikeRegexp('web/package.json does not exist: placeholder console'));
    const staged = path.join(app.outdir, sourceAsset(stack).assetPath);
    assert.match(fs.readFileSync(path.join(staged, 'index.html'), 'utf-8'), /Placeholder/);
    // What `cdk deploy` does (no allowMissingCrates): it refuses.
    const bare = new Stack(new App(), 'Bare', { env: TEST_ENV });
    assert.throws(() => consoleSource(bare, paths, undefined, 'error'), /web\/package\.json does not exist \(the console is built from web\//);
  });

  it('is consoleDir from the context (-c consoleDir=…)', () => {
    assert.deepEqual(contextProps((k) => (k === 'consoleDir' ? '../web/dist' : undefined)), { consoleDir: '../web/dist' });
  });
});

describe('building web/ (local bundling, no Docker)', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-console-build-'));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** A web app with no dependencies whose build writes `dist/` (or fails). */
  const webApp = (name: string, build: string): string => {
    const dir = path.join(tmp, name);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, version: '0.0.0', private: true, scripts: { build: 'node build.js' } }));
    fs.writeFileSync(
      path.join(dir, 'package-lock.json'),
      JSON.stringify({ name, version: '0.0.0', lockfileVersion: 3, requires: true, packages: { '': { name, version: '0.0.0' } } }),
    );
    fs.writeFileSync(path.join(dir, 'build.js'), build);
    return dir;
  };

  it('runs npm ci and npm run build in web/ and copies dist/ to the asset', () => {
    const dir = webApp(
      'builds',
      `const fs = require('fs');
       fs.mkdirSync('dist/assets', { recursive: true });
       fs.writeFileSync('dist/index.html', '<div id="root"></div>');
       fs.writeFileSync('dist/assets/index-1a2b.js', 'console.log(1)');`,
    );
    const out = fs.mkdtempSync(path.join(tmp, 'out-'));
    assert.equal(webBundling(dir).tryBundle(out, { image: undefined as never }), true);
    assert.deepEqual(fs.readdirSync(out).sort(), ['assets', 'index.html']);
    assert.equal(fs.readFileSync(path.join(out, 'assets', 'index-1a2b.js'), 'utf-8'), 'console.log(1)');
  });

  it('throws when the build fails or writes no index.html, instead of deploying nothing', () => {
    const out = fs.mkdtempSync(path.join(tmp, 'out-'));
    assert.throws(() => webBundling(webApp('fails', 'process.exit(3)')).tryBundle(out, { image: undefined as never }), /npm run build failed .*status 3/);
    assert.throws(
      () => webBundling(webApp('empty', "require('fs').mkdirSync('dist')")).tryBundle(out, { image: undefined as never }),
      /wrote no .*dist\/index\.html/,
    );
  });

  it('hashes the bundling options without the checkout’s path', () => {
    assert.equal(JSON.stringify(webBundling('/some/checkout/web')), '{}');
  });
});
