/**
 * Reading a synthesized CloudFormation template: finding resources by type and
 * following `Ref` / `Fn::GetAtt` to the resources they name. Used by the tests.
 */
import type { CfnResource, CfnTemplate } from './synth';

export class TemplateView {
  constructor(public readonly json: CfnTemplate) {}

  /** `[logicalId, resource]` of every resource of a type. */
  ofType(type: string): [string, CfnResource][] {
    return Object.entries(this.json.Resources).filter(([, r]) => r.Type === type);
  }

  get(logicalId: string): CfnResource {
    const r = this.json.Resources[logicalId];
    if (!r) {
      throw new Error(`no resource ${logicalId} in the template`);
    }
    return r;
  }

  /** The one resource of `type` whose property `prop` equals `value`. */
  byProp(type: string, prop: string, value: unknown): [string, CfnResource] {
    const found = this.ofType(type).filter(([, r]) => JSON.stringify(r.Properties?.[prop]) === JSON.stringify(value));
    if (found.length !== 1) {
      throw new Error(`expected one ${type} with ${prop}=${JSON.stringify(value)}, found ${found.length}`);
    }
    return found[0];
  }

  /** The logical id a `{Ref}` or `{Fn::GetAtt}` points at (optionally checking the attribute). */
  target(ref: unknown, attribute?: string): string {
    const r = ref as Record<string, unknown>;
    if (r && typeof r === 'object' && typeof r.Ref === 'string') {
      if (attribute !== undefined) {
        throw new Error(`expected Fn::GetAtt ${attribute}, got ${JSON.stringify(ref)}`);
      }
      return r.Ref;
    }
    const getAtt = r?.['Fn::GetAtt'] as [string, string] | undefined;
    if (Array.isArray(getAtt)) {
      if (attribute !== undefined && getAtt[1] !== attribute) {
        throw new Error(`expected attribute ${attribute}, got ${JSON.stringify(ref)}`);
      }
      return getAtt[0];
    }
    throw new Error(`not a reference: ${JSON.stringify(ref)}`);
  }

  /** Every logical id referenced anywhere inside an expression (pseudo parameters excluded). */
  refs(expr: unknown): Set<string> {
    const out = new Set<string>();
    const walk = (e: unknown) => {
      if (Array.isArray(e)) {
        e.forEach(walk);
      } else if (e && typeof e === 'object') {
        const o = e as Record<string, unknown>;
        if (typeof o.Ref === 'string' && !o.Ref.startsWith('AWS::')) {
          out.add(o.Ref);
        }
        const getAtt = o['Fn::GetAtt'];
        if (Array.isArray(getAtt) && typeof getAtt[0] === 'string') {
          out.add(getAtt[0]);
        }
        Object.values(o).forEach(walk);
      }
    };
    walk(expr);
    return out;
  }

  /**
   * An expression as the string it becomes on deploy, with every `Ref` /
   * `Fn::GetAtt` of a resource shown as `{logicalId}` / `{logicalId.Attr}` and
   * the pseudo parameters filled in (`AWS::URLSuffix` → amazonaws.com,
   * region and account from the stack's env).
   */
  render(expr: unknown, env: { account: string; region: string } = { account: '123456789012', region: 'us-east-1' }): string {
    const pseudo: Record<string, string> = {
      'AWS::Partition': 'aws',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::Region': env.region,
      'AWS::AccountId': env.account,
    };
    if (typeof expr === 'string') {
      return expr;
    }
    const o = expr as Record<string, unknown>;
    if (o && typeof o === 'object' && typeof o.Ref === 'string') {
      return pseudo[o.Ref] ?? `{${o.Ref}}`;
    }
    const getAtt = o?.['Fn::GetAtt'] as [string, string] | undefined;
    if (Array.isArray(getAtt)) {
      return `{${getAtt[0]}.${getAtt[1]}}`;
    }
    const join = o?.['Fn::Join'] as [string, unknown[]] | undefined;
    if (Array.isArray(join)) {
      return join[1].map((part) => this.render(part, env)).join(join[0]);
    }
    throw new Error(`cannot render ${JSON.stringify(expr)}`);
  }

  /**
   * `[logicalId, resource]` of Baton's functions: each is named
   * `baton-<stage>-…`. The only other function, the handler CDK adds for the
   * console's BucketDeployment (`consoleDeploymentHandler`), has no name.
   */
  batonFunctions(): [string, CfnResource][] {
    return this.ofType('AWS::Lambda::Function').filter(([, r]) => String(r.Properties?.FunctionName ?? '').startsWith('baton-'));
  }

  /** The web console's CloudFront distribution (there is one). */
  consoleDistribution(): [string, CfnResource] {
    const found = this.ofType('AWS::CloudFront::Distribution');
    if (found.length !== 1) {
      throw new Error(`expected one CloudFront distribution, found ${found.length}`);
    }
    return found[0];
  }

  /** The origin of one of the console distribution's behaviours (the default one unless `pathPattern`). */
  consoleOrigin(pathPattern?: string): Record<string, any> {
    const config = this.consoleDistribution()[1].Properties?.DistributionConfig;
    const behaviour =
      pathPattern === undefined
        ? config.DefaultCacheBehavior
        : (config.CacheBehaviors ?? []).find((b: { PathPattern: string }) => b.PathPattern === pathPattern);
    if (!behaviour) {
      throw new Error(`the console distribution has no behaviour ${pathPattern}`);
    }
    const origin = (config.Origins as Record<string, any>[]).find((o) => o.Id === behaviour.TargetOriginId);
    if (!origin) {
      throw new Error(`no origin ${behaviour.TargetOriginId} in the console distribution`);
    }
    return origin;
  }

  /**
   * The logical id of the web console's bucket: the origin of the
   * distribution's default behaviour. It is not a bucket of resources.json
   * (AWS only, no variable on the functions, build output only).
   */
  consoleBucket(): string {
    return this.target(this.consoleOrigin().DomainName, 'RegionalDomainName');
  }

  /** `[logicalId, resource]` of every bucket but the console's: the buckets of resources.json. */
  dataBuckets(): [string, CfnResource][] {
    const consoleId = this.consoleBucket();
    return this.ofType('AWS::S3::Bucket').filter(([id]) => id !== consoleId);
  }

  /** The logical id of the function behind the console's `Custom::CDKBucketDeployment` (there is one). */
  consoleDeploymentHandler(): string {
    const found = this.ofType('Custom::CDKBucketDeployment');
    if (found.length !== 1) {
      throw new Error(`expected one Custom::CDKBucketDeployment, found ${found.length}`);
    }
    return this.target(found[0][1].Properties?.ServiceToken, 'Arn');
  }

  /** The logical id of the function whose FunctionName is `name`. */
  functionNamed(name: string): string {
    return this.byProp('AWS::Lambda::Function', 'FunctionName', name)[0];
  }

  /** The logical id of the queue whose QueueName is `name`. */
  queueNamed(name: string): string {
    return this.byProp('AWS::SQS::Queue', 'QueueName', name)[0];
  }

  /**
   * The logical id of the bucket every function of Baton gets as variable
   * `env`. Buckets have no physical name in the template (CloudFormation
   * names them), so the variable is what identifies one; it throws unless
   * every function has `env` and all of them point at the same bucket.
   */
  bucketByEnv(env: string): string {
    const functions = this.batonFunctions();
    const ids = new Set<string>();
    for (const [fnId, f] of functions) {
      const value = f.Properties?.Environment?.Variables?.[env];
      if (value === undefined) {
        throw new Error(`function ${fnId} has no ${env}`);
      }
      ids.add(this.target(value));
    }
    if (ids.size !== 1) {
      throw new Error(`${env} names ${ids.size} different resources across the functions: ${[...ids].join(', ')}`);
    }
    const [id] = ids;
    if (this.get(id).Type !== 'AWS::S3::Bucket') {
      throw new Error(`${env} names ${id}, a ${this.get(id).Type}, not a bucket`);
    }
    return id;
  }

  /** The QueueName of the queue a reference points at. */
  queueNameOf(ref: unknown, attribute?: string): string {
    const q = this.get(this.target(ref, attribute));
    if (q.Type !== 'AWS::SQS::Queue') {
      throw new Error(`${JSON.stringify(ref)} is a ${q.Type}, not a queue`);
    }
    return q.Properties?.QueueName;
  }

  /** Statements of every policy attached to a role (inline policies, AWS::IAM::Policy, managed policies). */
  roleStatements(roleId: string): { policy: string; statement: Record<string, any> }[] {
    const out: { policy: string; statement: Record<string, any> }[] = [];
    const role = this.get(roleId);
    for (const p of role.Properties?.Policies ?? []) {
      for (const s of p.PolicyDocument.Statement) {
        out.push({ policy: `${roleId}/${p.PolicyName}`, statement: s });
      }
    }
    for (const [id, p] of [...this.ofType('AWS::IAM::Policy'), ...this.ofType('AWS::IAM::ManagedPolicy')]) {
      const roles: unknown[] = p.Properties?.Roles ?? [];
      if (roles.some((r) => (r as { Ref?: string }).Ref === roleId)) {
        for (const s of p.Properties?.PolicyDocument.Statement ?? []) {
          out.push({ policy: id, statement: s });
        }
      }
    }
    return out;
  }
}

/** A statement's field as an array. */
export function asArray<T>(v: T | T[] | undefined): T[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}
