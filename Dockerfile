# The Baton image: Baton and exactly the versions its suite passed with (deploy/image.lock, hashes
# checked) in a virtualenv at /opt/baton, on the Ray image of the same Ray and Python versions,
# so the API (a Ray driver), the Ray head and the Ray workers all run the same code. Agent tools
# that live in your own packages must be installed in this image too (every node imports them).
#
#   docker build -t baton .
#
# It runs as the Ray image's user `ray` (uid 1000); the code and its packages belong to root.

# The web UI's Mermaid package, installed exactly as locked.
FROM node:22-bookworm-slim AS web
WORKDIR /web
COPY orchestrator/web/package.json orchestrator/web/package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error

# Baton and its locked dependencies, built in a virtualenv the final image copies whole.
FROM rayproject/ray:2.60.0-py311 AS build
USER 0
WORKDIR /src
COPY deploy/image.lock ./
RUN python -m venv /opt/baton \
    && /opt/baton/bin/pip install --no-cache-dir --require-hashes -r image.lock
COPY pyproject.toml README.md ./
COPY agents agents
COPY tracing tracing
COPY configs configs
COPY orchestrator orchestrator
RUN /opt/baton/bin/pip install --no-cache-dir --no-deps . \
    && /opt/baton/bin/python -m compileall -q /opt/baton/lib
USER 1000

FROM rayproject/ray:2.60.0-py311
COPY --from=build /opt/baton /opt/baton
COPY --from=web /web/node_modules/mermaid/dist /opt/mermaid
# The team it serves unless told otherwise: the default team (mount yours over it, or set
# BATON_CONFIG).
COPY configs/default.yaml /etc/baton/team.yaml
# `ray` and `baton` from the virtualenv: KubeRay's `ray start` and every Ray worker use its Python.
ENV PATH=/opt/baton/bin:$PATH \
    BATON_MERMAID_DIST=/opt/mermaid \
    BATON_CONFIG=/etc/baton/team.yaml
USER 1000
WORKDIR /home/ray
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["baton", "serve", "--host", "0.0.0.0"]
