# Herald: a multi-stage build. The first stage compiles the release binary
# (LTO, stripped); the second is a small Debian image with the binary, the
# bundled skills and the tools their scripts use.
#
#   docker build -t herald .
#   docker run --rm -e OPENAI_API_KEY -v herald-data:/data herald
#
# The image reads /etc/herald/herald.yaml; mount your own over it. State
# (the SQLite file, unless storage.url points at PostgreSQL) lives in /data.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock rustfmt.toml ./
COPY crates crates
COPY migrations migrations
RUN cargo build --release --locked -p herald \
    && cp target/release/herald /usr/local/bin/herald

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /data --create-home --shell /usr/sbin/nologin herald
COPY --from=build /usr/local/bin/herald /usr/local/bin/herald
COPY skills /usr/share/herald/skills
COPY docker/herald.yaml /etc/herald/herald.yaml
USER herald
WORKDIR /data
ENV HERALD_CONFIG=/etc/herald/herald.yaml
EXPOSE 9090
HEALTHCHECK --interval=30s --timeout=3s CMD curl -fsS http://127.0.0.1:9090/healthz || exit 1
ENTRYPOINT ["herald"]
CMD ["run"]
