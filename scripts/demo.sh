#!/bin/sh
# Sets everything up on a fresh machine, builds, and asks the default model
# (SmolLM2-135M-Instruct) a question. Extra arguments go to `infer run`.
set -e
cd "$(dirname "$0")/.."
sh scripts/deps.sh
model=$(python3 scripts/fetch_model.py)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DINFER_BUILD_TESTS=OFF >/dev/null
cmake --build build -j2 --target infer_cli >/dev/null
prompt='<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
<|im_start|>user
What are three good reasons to learn to cook at home?<|im_end|>
<|im_start|>assistant
'
./build/infer run -m "$model" -p "$prompt" -n 200 --temp 0 "$@"
