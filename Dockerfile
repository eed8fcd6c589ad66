# attn-server and attn-client for GKE L4 nodes.
#
#   docker build -t attn-server .            (or Cloud Build: deploy/cloudbuild.yaml)
#   docker build --build-arg ATTN_TARGETS=attn-server -t attn-server .   (the server alone)
#
# CUDA and the node driver: the image is CUDA 13.0 with cuDNN 9, the toolkit attn is developed and
# tested with. CUDA 13.0 needs an NVIDIA R580 driver (580.65 or newer) on the node; GKE's DEFAULT
# driver was still R535 on current GKE versions in 2026, its LATEST driver R580 or newer. So
# terraform/ creates the L4 pool with gpu_driver_version = "LATEST" (variables.tf). On an older
# driver attn-server does not crash: its start-up check logs why the GPU is unusable and it stays
# NOT_SERVING, so the pod never becomes Ready (README, "Deploying on GKE").
#
# Three stages: build (CUDA + cuDNN devel; the Debian/Ubuntu package list scripts/apt-packages.txt
# through scripts/deps.sh, as on a developer's machine), collect (on the runtime image: the two
# binaries and only the shared libraries that image lacks), and the runtime image itself.

ARG CUDA_VERSION=13.0.2
ARG BASE_OS=ubuntu24.04

# --- build -------------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-cudnn-devel-${BASE_OS} AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src

# The same list and installer as the README's set-up, so the two cannot drift. deps.sh also
# fetches the pinned cudnn-frontend headers into .deps/ (nvcc is on PATH here).
COPY scripts/apt-packages.txt scripts/deps.sh scripts/
RUN scripts/deps.sh && rm -rf /var/lib/apt/lists/*

COPY . .
# sm_89 only (L4). Warnings are errors in CI on Debian's g++ 12; this image's newer g++ may warn
# about things CI does not, which should not stop a release build. Parallel jobs: one per 2 GiB
# of memory at most (nvcc on the cuDNN sources is hungry), at most one per core.
ARG ATTN_TARGETS="attn-server attn-client"
RUN jobs=$(awk '/MemTotal/ { print int($2 / 2097152) }' /proc/meminfo); \
    [ "$jobs" -ge 1 ] || jobs=1; [ "$jobs" -le "$(nproc)" ] || jobs=$(nproc); \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=89 \
      -DATTN_ENABLE_CUDA=ON -DATTN_ENABLE_CUDNN=ON -DATTN_BUILD_TESTS=OFF -DATTN_WERROR=OFF \
 && cmake --build build --parallel "$jobs" --target ${ATTN_TARGETS}

# Candidate libraries: everything the binaries link, except glibc, the C++ runtime and the CUDA,
# cuBLAS and cuDNN libraries, which the runtime image has (and the driver's libcuda, which the
# node mounts in).
RUN mkdir -p /out/bin /out/candidates \
 && for t in ${ATTN_TARGETS}; do cp "$(find build -name "$t" -type f -perm -u+x | head -1)" /out/bin/; done \
 && ldd /out/bin/* \
    | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u \
    | grep -vE '/(ld-linux[^/]*|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so' \
    | grep -vE '/lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nvrtc[a-z-]*|nvJitLink)\.so' \
    | xargs -r cp -L -t /out/candidates/

# --- collect -----------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-${BASE_OS} AS collect
COPY --from=build /out/ /out/
# Keep each candidate only if the runtime image cannot resolve it itself; repeat for the
# dependencies of what was added. libcuda.so.1 comes from the node's driver at run time.
RUN set -eu; mkdir -p /opt/attn/bin /opt/attn/lib; cp /out/bin/* /opt/attn/bin/; \
    for round in 1 2 3 4 5; do \
      missing=$(LD_LIBRARY_PATH=/opt/attn/lib ldd /opt/attn/bin/* /opt/attn/lib/* 2>/dev/null \
                | awk '$3 == "not" { print $1 }' | grep -v '^libcuda\.so' | sort -u || true); \
      [ -z "$missing" ] && break; \
      for lib in $missing; do \
        [ -e "/out/candidates/$lib" ] || { echo "no candidate for $lib" >&2; exit 1; }; \
        cp "/out/candidates/$lib" /opt/attn/lib/; \
      done; \
    done; \
    [ -z "$missing" ] || { echo "still unresolved: $missing" >&2; exit 1; }; \
    echo "attn: $(ls /opt/attn/lib | wc -l) shared libraries beyond the runtime image:"; ls /opt/attn/lib

# --- runtime -----------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-cudnn-runtime-${BASE_OS}
ARG CUDA_VERSION
LABEL org.opencontainers.image.title="attn-server" \
      org.opencontainers.image.description="attention service for GPU nodes: attn-server and attn-client (CUDA ${CUDA_VERSION}, cuDNN 9, sm_89)"

COPY --from=collect /opt/attn/ /opt/attn/
# Our libraries after the system's; the node's driver libraries stay first through the base
# image's LD_LIBRARY_PATH (/usr/local/nvidia/lib64 on GKE).
RUN echo /opt/attn/lib > /etc/ld.so.conf.d/zz-attn.conf && ldconfig \
 && groupadd --system --gid 10001 attn \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin attn

ENV PATH=/opt/attn/bin:${PATH}
# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
WORKDIR /tmp
EXPOSE 50051 9464
ENTRYPOINT ["/opt/attn/bin/attn-server"]
