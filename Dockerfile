# paimond container image: slim Python, non-root user, `paimond` as the entrypoint.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md __init__.py errors.py ./
COPY format ./format
COPY table ./table
COPY lsm ./lsm
COPY maintenance ./maintenance
COPY daemon ./daemon
COPY config ./config
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 paimond
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER paimond
WORKDIR /home/paimond
ENTRYPOINT ["paimond"]
CMD ["--help"]
