# The Baton image: Baton installed on the Ray image of the same Ray and Python versions, so the
# API (a Ray driver), the Ray head and the Ray workers all run the same code. Agent tools that
# live in your own packages must be installed in this image too (every node imports them).

# The web UI's Mermaid package, installed exactly as locked.
FROM node:22-bookworm-slim AS web
WORKDIR /web
COPY orchestrator/web/package.json orchestrator/web/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error

FROM rayproject/ray:2.60.0-py311
WORKDIR /home/ray/baton
COPY --chown=ray:users pyproject.toml README.md ./
COPY --chown=ray:users agents agents
COPY --chown=ray:users tracing tracing
COPY --chown=ray:users configs configs
COPY --chown=ray:users orchestrator orchestrator
RUN pip install --no-cache-dir . && rm -rf build
COPY --from=web --chown=ray:users /web/node_modules/mermaid/dist /home/ray/mermaid
ENV BATON_MERMAID_DIST=/home/ray/mermaid
EXPOSE 8000
CMD ["baton", "serve", "--host", "0.0.0.0"]
