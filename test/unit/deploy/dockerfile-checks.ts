import { DockerfileParser, type Copy, type Instruction, type JSONInstruction } from 'dockerfile-ast';
import { DockerIgnore } from './dockerignore.js';

/**
 * What the Dockerfile must get right, read with dockerfile-ast (the parser behind the Dockerfile
 * language server) since no Docker engine runs here: the stages, what reaches the runtime image,
 * who it runs as, what it exposes and how it starts. Returns the problems found ([] when right).
 */

export interface ImageExpectations {
  /** Ports the image must expose: the proxy and admin listeners' defaults. */
  readonly ports: readonly number[];
  /** The admin port the HEALTHCHECK must ask. */
  readonly adminPort: number;
  readonly entrypoint: readonly string[];
  readonly cmd: readonly string[];
  /** Context-relative path -> the files under it (one entry, itself, for a file; none when missing). */
  readonly listFiles: (contextPath: string) => readonly string[];
}

interface Stage {
  readonly name: string | undefined;
  readonly image: string;
  readonly instructions: Instruction[];
}

function stagesOf(instructions: Instruction[]): Stage[] {
  const stages: Stage[] = [];
  for (const instruction of instructions) {
    if (instruction.getKeyword() === 'FROM') {
      const args = instruction.getArguments().map((a) => a.getValue());
      const as = args.findIndex((a) => a.toUpperCase() === 'AS');
      stages.push({ name: as === -1 ? undefined : args[as + 1], image: args.find((a) => !a.startsWith('--')) ?? '', instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return stages;
}

function execForm(instruction: Instruction | undefined): string[] | undefined {
  const strings = (instruction as JSONInstruction | undefined)?.getJSONStrings?.();
  return strings === undefined || strings.length === 0 ? undefined : strings.map((s) => s.getJSONValue());
}

function fromFlag(copy: Copy): string | undefined {
  return copy.getFromFlag()?.getValue() ?? undefined;
}

export function dockerfileProblems(dockerfile: string, dockerignore: string, expect: ImageExpectations): string[] {
  const problems: string[] = [];
  const parsed = DockerfileParser.parse(dockerfile);
  const stages = stagesOf(parsed.getInstructions());
  const ignore = new DockerIgnore(dockerignore);
  const at = (instruction: Instruction) => `Dockerfile:${instruction.getRange().start.line + 1}`;

  if (stages.length < 2) problems.push('Dockerfile: expected a multi-stage build (build stage + runtime stage)');
  const names = new Set<string>();
  for (const stage of stages) {
    const [, tag] = /^[^@]+?(?::([^/@]+))?(?:@sha256:[0-9a-f]{64})?$/.exec(stage.image) ?? [];
    if (tag === undefined || tag === 'latest') problems.push(`Dockerfile: stage ${stage.name ?? '(unnamed)'} uses ${stage.image}: pin the base image by tag`);
    if (stage.name !== undefined) names.add(stage.name);
  }
  if (new Set(stages.map((s) => s.image)).size > 1) problems.push(`Dockerfile: stages use different base images (${[...new Set(stages.map((s) => s.image))].join(', ')}): build and run on one Node`);

  // What each COPY takes: an earlier stage, or files of the build context that .dockerignore lets through.
  const seenStages = new Set<string>();
  for (const stage of stages) {
    for (const instruction of stage.instructions) {
      if (instruction.getKeyword() !== 'COPY' && instruction.getKeyword() !== 'ADD') continue;
      const copy = instruction as Copy;
      const from = instruction.getKeyword() === 'COPY' ? fromFlag(copy) : undefined;
      if (from !== undefined) {
        if (!seenStages.has(from)) problems.push(`${at(instruction)}: COPY --from=${from} names no earlier stage`);
        continue;
      }
      const sources = copy.getArguments().map((a) => a.getValue()).filter((a) => !a.startsWith('--')).slice(0, -1);
      for (const source of sources) {
        const contextPath = source.replace(/^\.\//, '').replace(/\/$/, '');
        const files = expect.listFiles(contextPath);
        if (files.length === 0) problems.push(`${at(instruction)}: COPY ${source}: no such file in the build context`);
        const left = files.filter((file) => ignore.excludes(file));
        if (left.length > 0) problems.push(`${at(instruction)}: COPY ${source}: .dockerignore leaves out ${left.slice(0, 3).join(', ')}${left.length > 3 ? ', ...' : ''}`);
      }
    }
    if (stage.name !== undefined) seenStages.add(stage.name);
  }

  // npm in stages whose node_modules reach the runtime: production dependencies only, and no
  // `prepare` script (it runs tsc, a dev dependency).
  const runtime = stages.at(-1);
  if (runtime === undefined) return problems;
  const runtimeCopies = runtime.instructions.filter((i) => i.getKeyword() === 'COPY') as Copy[];
  const depsFrom = runtimeCopies.filter((c) => c.getArguments().some((a) => a.getValue().includes('node_modules'))).map((c) => fromFlag(c));
  for (const stage of stages) {
    const shipsDeps = stage === runtime || depsFrom.includes(stage.name);
    for (const instruction of stage.instructions) {
      const command = instruction.getKeyword() === 'RUN' ? (instruction.getArgumentsContent() ?? '') : '';
      for (const npm of command.match(/npm (?:ci|install)\b[^&;|]*/g) ?? []) {
        if (shipsDeps && !/--omit=dev\b/.test(npm)) problems.push(`${at(instruction)}: \`${npm.trim()}\` installs dev dependencies into what the runtime image ships`);
        if (!/--ignore-scripts\b/.test(npm)) problems.push(`${at(instruction)}: \`${npm.trim()}\` runs package.json's prepare (tsc) before the sources are there; use --ignore-scripts`);
      }
    }
  }
  const copiesInto = (pattern: RegExp) => runtimeCopies.some((c) => c.getArguments().some((a) => pattern.test(a.getValue())));
  for (const [pattern, what] of [[/^(\.\/)?package\.json$/, 'package.json (its "type": "module" makes Node load dist/ as ES modules)'], [/dist/, 'dist/ (the compiled program)'], [/^(\.\/)?bin\/?$/, 'bin/ (the launcher)']] as const) {
    if (!copiesInto(pattern)) problems.push(`Dockerfile: the runtime stage does not copy ${what}`);
  }

  const last = (keyword: string) => runtime.instructions.filter((i) => i.getKeyword() === keyword).at(-1);
  const user = last('USER')?.getArgumentsContent()?.trim();
  const uid = user?.split(':')[0];
  if (uid === undefined || uid === 'root' || uid === '0' || !/^\d+$/.test(uid)) {
    problems.push(`Dockerfile: the runtime stage must end as a numeric non-root USER (Kubernetes verifies runAsNonRoot only against a number), got ${user ?? 'none'}`);
  }
  const exposed = runtime.instructions.filter((i) => i.getKeyword() === 'EXPOSE').flatMap((i) => i.getArguments().map((a) => Number(a.getValue().split('/')[0])));
  for (const port of expect.ports) if (!exposed.includes(port)) problems.push(`Dockerfile: the runtime stage does not EXPOSE ${port}`);

  const healthcheck = last('HEALTHCHECK');
  const check = healthcheck?.getArgumentsContent() ?? '';
  if (healthcheck === undefined || !/\bCMD\b/.test(check)) {
    problems.push('Dockerfile: the runtime stage has no HEALTHCHECK CMD');
  } else {
    if (!check.includes(`:${expect.adminPort}/healthz`)) problems.push(`Dockerfile: the HEALTHCHECK does not ask /healthz on the admin port ${expect.adminPort}`);
    if (/\b(curl|wget)\b/.test(check)) problems.push('Dockerfile: the HEALTHCHECK uses curl or wget, which the slim Node image does not have');
  }
  const entrypoint = execForm(last('ENTRYPOINT'));
  if (JSON.stringify(entrypoint) !== JSON.stringify(expect.entrypoint)) {
    problems.push(`Dockerfile: ENTRYPOINT must be the exec form ${JSON.stringify(expect.entrypoint)} (so node is PID 1 and gets SIGTERM), got ${JSON.stringify(entrypoint)}`);
  }
  const cmd = execForm(last('CMD'));
  if (JSON.stringify(cmd) !== JSON.stringify(expect.cmd)) problems.push(`Dockerfile: CMD must be ${JSON.stringify(expect.cmd)}, got ${JSON.stringify(cmd)}`);
  return problems;
}
