/**
 * Where things are in the checkout. Paths are resolved from the repository root
 * found at run time (walking up from `process.cwd()` to the directory whose
 * `Cargo.toml` declares `[workspace]`), never from `__dirname`: the code runs
 * compiled from `infra/dist/`, and `cdk`, `npm test` and the scripts may be
 * started from `infra/` or from the repository root.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** `BATON_REPO_ROOT` overrides the search (for unusual layouts only). */
export const REPO_ROOT_ENV = 'BATON_REPO_ROOT';

function isWorkspaceRoot(dir: string): boolean {
  const manifest = path.join(dir, 'Cargo.toml');
  if (!fs.existsSync(manifest)) {
    return false;
  }
  return /^\s*\[workspace\]\s*$/m.test(fs.readFileSync(manifest, 'utf-8'));
}

/** The repository root: the nearest ancestor of `start` holding the Cargo workspace manifest. */
export function findRepoRoot(start: string = process.cwd()): string {
  const override = process.env[REPO_ROOT_ENV];
  if (override) {
    const dir = path.resolve(override);
    if (!isWorkspaceRoot(dir)) {
      throw new Error(`${REPO_ROOT_ENV}=${override} has no Cargo.toml with a [workspace] section`);
    }
    return dir;
  }
  let dir = path.resolve(start);
  for (;;) {
    if (isWorkspaceRoot(dir)) {
      return dir;
    }
    const parent = path.dirname(dir);
    if (parent === dir) {
      throw new Error(
        `no Cargo workspace (Cargo.toml with [workspace]) above ${start}: run from inside the Baton checkout or set ${REPO_ROOT_ENV}`,
      );
    }
    dir = parent;
  }
}

/** Paths derived from the repository root. */
export class RepoPaths {
  constructor(public readonly root: string = findRepoRoot()) {}

  get infraDir(): string {
    return path.join(this.root, 'infra');
  }

  get resourcesJson(): string {
    return path.join(this.infraDir, 'resources.json');
  }

  get stateMachineDir(): string {
    return path.join(this.infraDir, 'statemachines');
  }

  /** The web console's sources (a Vite app: `npm run build` writes `dist/`). */
  get webDir(): string {
    return path.join(this.root, 'web');
  }

  /** The crate of a function: `functions/<name>/Cargo.toml`. */
  functionManifest(name: string): string {
    return path.join(this.root, 'functions', name, 'Cargo.toml');
  }

  stateMachineDefinition(file: string): string {
    return path.join(this.stateMachineDir, file);
  }
}
