# snapdiff's image: the snapdiff executable and the Python package (snapdiff,
# its recorder and the pytest plugin) on Debian 12. docs/install.md says how
# to build and push it; docs/ranks.md runs it as a Kubernetes Job.
#   docker build -t snapdiff:latest .      (or: podman build / buildah bud)

# --- build: the same scripts as a checkout (scripts/install-deps.sh, the wheel's CMake build)
FROM debian:bookworm AS build
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3 python3-build python3-setuptools python3-wheel \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN bash scripts/install-deps.sh \
 && python3 -m build --no-isolation --wheel --outdir /dist >/dist.log 2>&1 \
 || { tail -n 60 /dist.log; exit 1; }

# --- runtime: the executable's shared libraries, Python, the wheel unpacked
FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3 zlib1g libzstd1 libre2-9 libsimdjson14 libboost-program-options1.74.0 \
      libgvc6 libcgraph6 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /dist/ /tmp/dist/
# A wheel is a zip: its packages and metadata (the pytest11 entry point) go to
# Python's site directory, its script (the executable) to /usr/local/bin.
RUN site=/usr/local/lib/python3.11/dist-packages \
 && python3 -m zipfile -e /tmp/dist/snapdiff-*.whl "$site" \
 && mv "$site"/snapdiff-*.data/scripts/snapdiff /usr/local/bin/snapdiff \
 && rm -rf "$site"/snapdiff-*.data /tmp/dist \
 && chmod 755 /usr/local/bin/snapdiff \
 && snapdiff --version && python3 -c "import snapdiff, pytest_snapdiff"
WORKDIR /work
CMD ["snapdiff", "--help"]
