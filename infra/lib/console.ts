/**
 * Baton's web console on AWS: the single-page app of `web/` (Vite, built into
 * `web/dist`) in a private bucket, behind a CloudFront distribution that also
 * routes `/v1/*` to the stack's HTTP API, so the console and the API share one
 * origin (no CORS, and the bearer token never leaves the console's origin).
 *
 * The files come from a `BucketDeployment`: by default its source is `web/`
 * itself, built at synth (`npm ci && npm run build`, local bundling: no
 * Docker), so deploying needs no manual build step; `consoleDir` deploys a
 * directory of built files instead (tests: a fixture; CI: a `web/dist` built
 * beforehand).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { Annotations, DockerImage, ILocalBundling, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as origins from 'aws-cdk-lib/aws-cloudfront-origins';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3deploy from 'aws-cdk-lib/aws-s3-deployment';
import { Construct } from 'constructs';

import { RepoPaths } from './repo';
import { Naming } from './resources';

/** The path pattern of the distribution's behaviour that forwards to the HTTP API (every route of resources.json is under it). */
export const CONSOLE_API_PATH_PATTERN = '/v1/*';

/**
 * The CloudFront Function (viewer request, default behaviour only) that makes
 * client-side routes work: a path whose last segment has no extension
 * (`/runs/abc`, `/`) is a route of the app, not a file, and gets the app's
 * shell, `/index.html`; a path with one (`/assets/index-3f2a.js`,
 * `/favicon.svg`) is asked of the bucket as is, so a missing file stays an
 * error instead of HTML with a 200. The query string is untouched (it is not
 * part of `uri`). cloudfront-js-2.0 is ES 5.1 plus a few ES6 features: `var`.
 */
export const SPA_REWRITE_CODE = `function handler(event) {
  var request = event.request;
  var last = request.uri.substring(request.uri.lastIndexOf('/') + 1);
  if (last.indexOf('.') === -1) {
    request.uri = '/index.html';
  }
  return request;
}
`;

/**
 * IAM actions CDK's `BucketDeployment` grants its handler on `Resource: "*"`.
 * Its handler only ever invalidates the console's distribution (the
 * `DistributionId` of its custom resource), but CDK writes the statement
 * itself and an Allow cannot be narrowed by another; the console test checks
 * that nothing else of that role is on "*".
 */
export const CONSOLE_DEPLOYMENT_WILDCARD_EXCEPTIONS: readonly string[] = ['cloudfront:GetInvalidation', 'cloudfront:CreateInvalidation'];

/**
 * What the asset of `web/` leaves out: its hash is the sources', so a change
 * to the app (or its lock file) rebuilds and redeploys it, and nothing the
 * build or the dev server writes does.
 */
export const WEB_EXCLUDE: readonly string[] = ['node_modules', 'dist', '.vite', 'coverage', '*.log', '.DS_Store'];

export interface BatonConsoleProps {
  readonly naming: Naming;
  /** The HTTP API; its `$default` stage serves at the root of its execute-api domain. */
  readonly api: apigwv2.IHttpApi;
  /** The console's files (see `consoleSource`). */
  readonly source: s3deploy.ISource;
  /** Retention of the deployment handler's log group. */
  readonly logRetention: logs.RetentionDays;
}

/** The console: bucket, distribution (S3 by default, the API on `/v1/*`), SPA rewrite and deployment. */
export class BatonConsole extends Construct {
  readonly bucket: s3.Bucket;
  readonly distribution: cloudfront.Distribution;
  /** The viewer-request function of the default behaviour (`SPA_REWRITE_CODE`). */
  readonly spaRewrite: cloudfront.Function;
  readonly deployment: s3deploy.BucketDeployment;
  /** The role of the deployment's handler (a Lambda function CDK adds). */
  readonly deploymentRole: iam.Role;

  constructor(scope: Construct, id: string, props: BatonConsoleProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const naming = props.naming;

    // Private: no website hosting and every public access blocked; CloudFront
    // reads it through Origin Access Control. Only build output lives here,
    // so it goes with the stack: the deployment empties it first
    // (retainOnDelete: false below), or CloudFormation could not delete it.
    this.bucket = new s3.Bucket(this, 'Bucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      encryption: s3.BucketEncryption.S3_MANAGED,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      versioned: false,
      removalPolicy: RemovalPolicy.DESTROY,
    });

    this.spaRewrite = new cloudfront.Function(this, 'SpaRewrite', {
      functionName: naming.physical('console-spa-rewrite'),
      comment: 'Client-side routes of the console (paths without a file extension) get /index.html',
      code: cloudfront.FunctionCode.fromInline(SPA_REWRITE_CODE),
      runtime: cloudfront.FunctionRuntime.JS_2_0,
    });

    // The API's execute-api domain, as HttpApi.apiEndpoint builds it (minus
    // the scheme). Its stage is `$default`, served at the root: no origin
    // path (a named stage would need originPath `/<stage>`), and `/v1/…`
    // reaches the API as `/v1/…`, the paths of resources.json's routes.
    const apiDomain = `${props.api.apiId}.execute-api.${stack.region}.${stack.urlSuffix}`;

    this.distribution = new cloudfront.Distribution(this, 'Distribution', {
      comment: `Baton console (${naming.stage})`,
      defaultRootObject: 'index.html',
      httpVersion: cloudfront.HttpVersion.HTTP2_AND_3,
      // The app's files. Origin Access Control, not an Origin Access
      // Identity (legacy): OAC signs requests with SigV4, works with SSE-KMS
      // and every region, and the bucket policy names the distribution itself
      // (service principal + AWS:SourceArn) rather than a shared identity.
      defaultBehavior: {
        origin: origins.S3BucketOrigin.withOriginAccessControl(this.bucket),
        viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
        allowedMethods: cloudfront.AllowedMethods.ALLOW_GET_HEAD,
        cachePolicy: cloudfront.CachePolicy.CACHING_OPTIMIZED,
        // HSTS, nosniff, frame-options SAMEORIGIN (no clickjacking of a page
        // that holds a token), referrer policy. The app's responses only:
        // the API's answers pass unchanged.
        responseHeadersPolicy: cloudfront.ResponseHeadersPolicy.SECURITY_HEADERS,
        // SPA routing with a function here rather than the distribution's
        // errorResponses (403/404 → /index.html, 200): those apply to every
        // behaviour, so the API's own 403s and 404s on /v1/* would reach the
        // console as 200s with HTML. The function only touches this
        // behaviour's requests, and leaves real files (and missing ones) alone.
        functionAssociations: [{ function: this.spaRewrite, eventType: cloudfront.FunctionEventType.VIEWER_REQUEST }],
      },
      additionalBehaviors: {
        // The API on the console's origin: nothing cached, every method, and
        // every viewer header (Authorization included), cookie and query
        // string forwarded, except Host: API Gateway routes on its own
        // domain name and refuses another Host.
        [CONSOLE_API_PATH_PATTERN]: {
          origin: new origins.HttpOrigin(apiDomain, {
            protocolPolicy: cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
            originSslProtocols: [cloudfront.OriginSslPolicy.TLS_V1_2],
          }),
          // Not a redirect: a 301 to a POST or a DELETE loses its body or its
          // method, and the console is only ever served over HTTPS anyway.
          viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
          allowedMethods: cloudfront.AllowedMethods.ALLOW_ALL,
          cachePolicy: cloudfront.CachePolicy.CACHING_DISABLED,
          originRequestPolicy: cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
        },
      },
    });

    // The deployment's handler (a Lambda function CDK adds) gets a role of
    // its own without the AWSLambdaBasicExecutionRole managed policy (logs
    // on "*"), as Baton's functions: it may write its own log group, and
    // BucketDeployment adds the rest (read the asset, read and write this
    // bucket, invalidate).
    const deploymentLogs = new logs.LogGroup(this, 'DeploymentLogs', {
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.deploymentRole = new iam.Role(this, 'DeploymentRole', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Copies Baton's web console into its bucket (${naming.stage})`,
    });
    deploymentLogs.grantWrite(this.deploymentRole);
    this.deployment = new s3deploy.BucketDeployment(this, 'Deployment', {
      sources: [props.source],
      destinationBucket: this.bucket,
      // Only the current build: files of an older one are deleted (prune).
      prune: true,
      // Deleting the stack empties the bucket so that it can be deleted.
      retainOnDelete: false,
      // Every file revalidated by browsers (cheap 304s with the ETag): an
      // index.html cached by heuristics would ask for assets the next deploy
      // pruned. CloudFront's copies are refreshed by the invalidation.
      cacheControl: [s3deploy.CacheControl.noCache()],
      distribution: this.distribution,
      distributionPaths: ['/*'],
      role: this.deploymentRole,
      logGroup: deploymentLogs,
    });
  }

  /** The console's URL. */
  get url(): string {
    return `https://${this.distribution.distributionDomainName}`;
  }
}

/**
 * Local bundling of `web/`: `npm ci && npm run build` in it, then its `dist/`
 * copied to the asset. Never Docker: it builds or throws (no fallback to a
 * container that the machine may not have).
 */
export function webBundling(webDir: string): ILocalBundling {
  // An object literal whose only member is the method: the bundling options
  // are part of the asset hash, and a field holding the absolute path of the
  // checkout would make the hash differ between machines.
  return {
    tryBundle(outputDir: string): boolean {
      const run = (args: string[]) => {
        process.stderr.write(`console: npm ${args.join(' ')} (in ${webDir})\n`);
        // The build's output to stderr: `cdk synth` prints the template on stdout.
        const r = spawnSync('npm', args, { cwd: webDir, stdio: ['ignore', process.stderr, 'inherit'] });
        if (r.error) {
          throw new Error(`console: npm ${args.join(' ')} could not run (${r.error.message}): building the console needs Node.js and npm on PATH`);
        }
        if (r.status !== 0) {
          throw new Error(`console: npm ${args.join(' ')} failed in ${webDir} (status ${r.status})`);
        }
      };
      run(['ci', '--no-audit', '--no-fund']);
      run(['run', 'build']);
      const dist = path.join(webDir, 'dist');
      if (!fs.existsSync(path.join(dist, 'index.html'))) {
        throw new Error(`console: npm run build wrote no ${path.join(dist, 'index.html')}`);
      }
      fs.cpSync(dist, outputDir, { recursive: true });
      return true;
    },
  };
}

let placeholderConsole: string | undefined;

/** A page standing in for a console that does not exist yet (tests, lint). */
function placeholderConsoleDir(): string {
  if (!placeholderConsole) {
    placeholderConsole = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-missing-console-'));
    fs.writeFileSync(
      path.join(placeholderConsole, 'index.html'),
      '<!doctype html><title>Baton</title><p>Placeholder: web/ did not exist when this stack was synthesized.</p>\n',
    );
  }
  return placeholderConsole;
}

/**
 * The console's files as a deployment source:
 * - `consoleDir` given: that directory of built files, as is (it must hold `index.html`);
 * - else `web/` of the checkout, built at synth by `webBundling` (skipped,
 *   like every bundling, when the stack's bundling is: tests, lint);
 * - else, `web/` missing: a placeholder page with a warning when `placeholder`
 *   (tests, lint, as for a missing crate), an error otherwise.
 */
export function consoleSource(
  scope: Construct,
  repo: RepoPaths,
  consoleDir: string | undefined,
  missing: 'error' | 'placeholder',
): s3deploy.ISource {
  if (consoleDir !== undefined) {
    const dir = path.resolve(consoleDir);
    if (!fs.existsSync(path.join(dir, 'index.html'))) {
      throw new Error(`consoleDir ${consoleDir}: ${path.join(dir, 'index.html')} does not exist (consoleDir is a directory of the console's built files)`);
    }
    return s3deploy.Source.asset(dir);
  }
  const web = repo.webDir;
  if (fs.existsSync(path.join(web, 'package.json'))) {
    return s3deploy.Source.asset(web, {
      exclude: [...WEB_EXCLUDE],
      bundling: {
        // Required by the API, never pulled: the local bundling builds or throws.
        image: DockerImage.fromRegistry('public.ecr.aws/docker/library/node:20'),
        local: webBundling(web),
      },
    });
  }
  if (missing === 'placeholder') {
    Annotations.of(scope).addWarningV2('baton:missing-console', `${path.join(web, 'package.json')} does not exist: placeholder console`);
    return s3deploy.Source.asset(placeholderConsoleDir());
  }
  throw new Error(
    `the console: ${path.join(web, 'package.json')} does not exist (the console is built from web/; -c consoleDir=<dir> deploys a directory of built files instead)`,
  );
}
