"""Chat through SmolLM2's own template: the prompt is what the model's
Jinja template renders (`infer template`), the reply what `infer run`
gives for that prompt."""

import json

import pytest

from conftest import THREADS, infer, run_cli

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "Name a colour."},
     {"role": "assistant", "content": "Blue."},
     {"role": "user", "content": "Another one?"}],
]


@pytest.mark.parametrize("messages", CONVERSATIONS, ids=["one-turn", "system-and-turns"])
def test_prompt_equals_cli_template(messages, smol, smollm2, cli, tmp_path):
    m, _ = smol
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps({"messages": messages, "add_generation_prompt": True}), encoding="utf-8")
    rc, out, err = run_cli(cli, "template", "-m", smollm2, "--conversation", conv)
    assert rc == 0, err
    assert m.format_chat(messages) == out.decode("utf-8")
    # tuples and the conversation without the assistant prompt
    pairs = [(x["role"], x["content"]) for x in messages]
    assert m.chat_template.format(pairs, add_assistant_prompt=False) == m.format_chat(messages)[:-len(
        "<|im_start|>assistant\n")]


def test_template_facts(smol):
    m, _ = smol
    t = m.chat_template
    assert t.name == "chatml" and not t.fallback
    assert t.end_of_turn == "<|im_end|>\n"
    assert "SmolLM" in t.default_system
    text = m.chat_template_text
    assert text and "im_start" in text
    assert infer.ChatTemplate.from_text(text).name == "chatml"
    assert infer.ChatTemplate.from_text("llama3").name == "llama3"
    t.default_system = "Be brief."
    assert t.format([("user", "hi")]).startswith("<|im_start|>system\nBe brief.<|im_end|>\n")


def test_chat_reply(smol, smollm2, cli):
    m, c = smol
    messages = CONVERSATIONS[0]
    reply = c.chat(messages, 32, temperature=0)
    assert reply.strip()
    assert "<|im_end|>" not in reply
    # the same reply as the CLI's for the formatted prompt (special tokens parsed there too)
    rc, out, err = run_cli(cli, "run", "-m", smollm2, "-p", m.format_chat(messages), "-n", 32, "--temp", "0",
                           "-t", THREADS)
    assert rc == 0, err
    assert reply == out.decode("utf-8", "replace")
    with c.chat(messages, 32, temperature=0, stream=True) as s:
        assert "".join(s) == reply
