# tokentap container image: `docker build -t tokentap .` from the repository root.
#
# Three stages so that the runtime image holds only what `tokentap serve` runs: Node, the compiled
# JavaScript (dist/), the launcher (bin/) and the production dependencies. No TypeScript, no
# sources, no tests, no npm cache.
#
# The base is pinned by tag; pin it by digest too (`node:24.21.0-bookworm-slim@sha256:...`, from
# `docker buildx imagetools inspect`) when your registry policy asks for it. Node 24 is the current
# LTS line (Node 20 left upstream support on 2026-04-30); .ci/run runs the test suite on this exact
# version as well as on Node 20 (package.json engines). Move all three stages together.
# Not 24.22.x yet: from 24.22.1, node:http joins writes made in the same tick into one HTTP chunk
# (measured: 24.21.0 sends "a" and "b" as two chunks, 24.22.1 as one), which breaks the
# simulator's one-event-per-chunk framing (test/unit/simulator/streaming.test.ts and two others).
#
# Build with the commit it is built from, for the tokentap_build_info metric:
#   docker build --build-arg COMMIT=$(git rev-parse --short HEAD) -t tokentap:0.1.0 .

# --- build: dev dependencies + TypeScript -> dist/ ---------------------------------------------
FROM node:24.21.0-bookworm-slim AS build
WORKDIR /app
# Manifests first, as their own layer: a source-only change reuses the installed dependencies.
# --ignore-scripts: package.json's `prepare` runs tsc, which needs the sources not copied yet; the
# build is run explicitly below instead.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# --- prod-deps: production dependencies only, resolved from the same lockfile --------------------
FROM node:24.21.0-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would run tsc, which is a dev dependency and is not installed here.
# The only production dependency with an install script is protobufjs (a version notice), so
# skipping scripts loses nothing.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# --- runtime ---------------------------------------------------------------------------------------
FROM node:24.21.0-bookworm-slim AS runtime
# Declared in this stage only, so a new commit does not invalidate the build stages' cache.
ARG COMMIT=unknown
ENV NODE_ENV=production TOKENTAP_COMMIT=${COMMIT}
WORKDIR /app
# package.json is needed at run time: its "type": "module" makes Node load dist/ as ES modules.
COPY package.json ./
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
# Apache-2.0 section 4(a): a redistributed copy carries the licence.
COPY LICENSE ./

# The image's `node` user, by number: Kubernetes can only verify `runAsNonRoot: true` against a
# numeric user. The files above stay owned by root, so the process cannot rewrite its own code.
USER 1000:1000

# 8080: proxy listener (user traffic). 9464: admin listener (/metrics, /healthz, /readyz).
EXPOSE 8080 9464

# For `docker run` and Compose; Kubernetes ignores HEALTHCHECK and uses the pod's probes instead.
# The slim image has no curl, so Node itself asks /healthz (liveness: the process serves; the
# upstream's health is /readyz's business). Assumes the default admin port 9464.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:9464/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# Node runs as PID 1 and handles SIGTERM itself (graceful drain), so no init wrapper is needed:
# tokentap starts no child processes that would need reaping. --max-semi-space-size=2 keeps V8's
# young generation from growing with the request rate (src/cli/node-flags.ts says why and what it
# costs; the benchmark runs with the same flags, and a test keeps them equal).
ENTRYPOINT ["node", "--max-semi-space-size=2", "bin/tokentap.js"]
CMD ["serve"]
