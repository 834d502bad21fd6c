/* test_chat.c - chat templates: each format recognized from its real
   template text, conversations formatted exactly as the Jinja templates
   render them, incremental formatting equal to the suffix of the whole, the
   ChatML fallback; `infer chat` over a pipe; the KV cache reused across turns
   giving the same logits as re-reading the whole conversation; `infer chat
   --chat-template-file` (SmolLM2's template from a file replying as the
   built-in format, a template's errors), its reasoning shown apart from the
   answer and cut by --reasoning-budget.

   The expected strings below were made by rendering the real templates with
   Python's jinja2 (as transformers does: trim_blocks, lstrip_blocks), with
   the leading BOS dropped (infer_tokenize adds it); jinja2 is not among what
   scripts/deps.sh installs, so they are written out here. The templates are
   the models' own (Llama-2-chat, Mistral-7B-Instruct v0.2 and the "v1"/"v7"
   ones, Meta-Llama-3-8B-Instruct, gemma-7b-it, Phi-3-vision, zephyr-7b-beta,
   deepseek-coder-instruct, DeepSeek-V2, DeepSeek-R1-Distill without its tool
   branches, OpenHermes ChatML, SmolLM2); for Mistral v3 / v3-tekken the
   parts of Mistral-Large-2407 / Mistral-Nemo-2407's templates that matter.
   The newer families' strings were rendered the same way from Qwen3-0.6B,
   Qwen2.5-7B-Instruct, Phi-3.5-mini-instruct, Phi-4 and Phi-4-mini,
   gemma-3, Llama-3.1/3.2/3.3-Instruct, Mistral-Small-3.2 and SmolLM3-3B's
   templates (the date pinned where they ask the clock). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "tests/status_calls.h"

static const struct { const char *kind, *text; } templates[] = {
    {"chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"llama2",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"},
    {"mistral",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"},
    {"mistral-v1",
     "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n"},
    {"mistral-v7",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and assistant roles are supported!') }}{% endif %}{% endfor %}"},
    {"llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"},
    {"gemma",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"},
    {"phi3",
     "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt and messages[-1]['role'] != 'assistant' %}{{- '<|assistant|>\n' -}}{% endif %}"},
    {"zephyr",
     "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"},
    {"deepseek",
     "{% if not add_generation_prompt is defined %}\n{% set add_generation_prompt = false %}\n{% endif %}\n{%- set ns = namespace(found=false) -%}\n{%- for message in messages -%}\n    {%- if message['role'] == 'system' -%}\n        {%- set ns.found = true -%}\n    {%- endif -%}\n{%- endfor -%}\n{{bos_token}}{%- if not ns.found -%}\n{{'You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you only answer questions related to computer science. For politically sensitive questions, security and privacy issues, and other non-computer science questions, you will refuse to answer\\n'}}\n{%- endif %}\n{%- for message in messages %}\n    {%- if message['role'] == 'system' %}\n{{ message['content'] }}\n    {%- else %}\n        {%- if message['role'] == 'user' %}\n{{'### Instruction:\\n' + message['content'] + '\\n'}}\n        {%- else %}\n{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{% if add_generation_prompt %}\n{{'### Response:'}}\n{% endif %}"},
    {"deepseek2",
     "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\n\n' }}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ message['content'] + '\n\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"},
    {"deepseek3",
     "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<\xef\xbd\x9cUser\xef\xbd\x9c>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- if ns.is_tool %}{{'<\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81" "end\xef\xbd\x9c>' + message['content'] + '<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>'}}{%- set ns.is_tool = false -%}{%- else %}{% set content = message['content'] %}{{'<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>' + content + '<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>'}}{%- endif %}{%- endif %}{%- endfor -%}{% if ns.is_tool %}{{'<\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81" "end\xef\xbd\x9c>'}}{% endif %}{% if add_generation_prompt and not ns.is_tool %}{{'<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>'}}{% endif %}"},
    {"mistral-v3",
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- endif %}\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n        {%- endif %}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n    {%- endif %}\n{%- endfor %}\n"},
    {"mistral-v3-tekken",
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- endif %}\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS][\" }}\n        {%- endif %}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- message[\"content\"] + eos_token}}\n    {%- endif %}\n{%- endfor %}\n"},
    {"chatml",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"},
    {"gemma4", /* Gemma 4's turns, as its template writes them (tools aside) */
     "{%- for message in loop_messages -%}{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
     "{{- '<|turn>' + role + '\\n' }}{{- message['content'] | trim -}}{{- '<turn|>\\n' -}}{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}{%- endif -%}"},
};
/* C1 (system, user, assistant, user) or, for formats without a system role, C2 */
static const struct { const char *kind; int c2; const char *expected; } expected[] = {
    {"chatml", 0,
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n"},
    {"llama2", 0,
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] Who are you [/INST]"},
    {"mistral", 1,
     "[INST] Hello [/INST]  I am an assistant  </s>[INST] Another question [/INST]"},
    {"mistral-v1", 0,
     " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]"},
    {"mistral-v7", 0,
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]"},
    {"llama3", 0,
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"gemma", 1,
     "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
    {"phi3", 0,
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n"},
    {"zephyr", 0,
     "<|system|>\nYou are a helpful assistant</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi there</s>\n<|user|>\nWho are you</s>\n<|assistant|>\n"},
    {"deepseek", 0,
     "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n"},
    {"deepseek2", 0,
     "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>User: Who are you\n\nAssistant:"},
    {"qwen3", 0,
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n"},
    {"phi4", 0,
     "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>"},
    {"phi4-mini", 0,
     "<|system|>You are a helpful assistant<|end|><|user|>Hello<|end|><|assistant|>Hi there<|end|><|user|>Who are you<|end|><|assistant|>"},
    {"llama3.1", 0, /* by name, the date Llama 3.1's template gives when it is not told one */
     "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"mistral-v7-tekken", 0,
     "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]"},
    {"gemma4", 0, /* as Gemma 4's own template renders it */
     "<|turn>system\nYou are a helpful assistant<turn|>\n<|turn>user\nHello<turn|>\n<|turn>model\nHi there<turn|>\n"
     "<|turn>user\nWho are you<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"},
    {"deepseek3", 0,
     "You are a helpful assistant<\xef\xbd\x9cUser\xef\xbd\x9c>Hello<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>Hi there<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c><\xef\xbd\x9cUser\xef\xbd\x9c>Who are you<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"},
};

static infer_chat_kind kind_named(const char *name) {
    int k;
    for (k = 0; k < INFER_CHAT_KIND_COUNT; k++)
        if (!strcmp(infer_chat_template_name((infer_chat_kind)k), name)) return (infer_chat_kind)k;
    cr_assert_fail("no format named %s", name);
    return INFER_CHAT_KIND_CHATML;
}

static const char *eos_of(infer_chat_kind k) {
    switch (k) {
    case INFER_CHAT_KIND_DEEPSEEK: return "<|EOT|>";
    case INFER_CHAT_KIND_DEEPSEEK2:
    case INFER_CHAT_KIND_DEEPSEEK3: return "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    case INFER_CHAT_KIND_GEMMA: return "<eos>";
    case INFER_CHAT_KIND_LLAMA3: return "<|eot_id|>";
    default: return "</s>";
    }
}

static char *format(const infer_chat_template *t, const infer_chat_message *m, int n, int from, int add) {
    int len = sc_chat_format(t, m, n, from, add, NULL, 0);
    char *buf;
    cr_assert_geq(len, 0);
    buf = (char *)malloc((size_t)len + 1);
    cr_assert_eq(sc_chat_format(t, m, n, from, add, buf, (size_t)len + 1), len);
    cr_assert_eq(strlen(buf), (size_t)len);
    return buf;
}

static const infer_chat_message C1[] = {
    {"system", "You are a helpful assistant"}, {"user", "Hello"}, {"assistant", "Hi there"}, {"user", "Who are you"}};
static const infer_chat_message C2[] = {
    {"user", "Hello"}, {"assistant", "  I am an assistant  "}, {"user", "Another question"}};
static const infer_chat_message C3[] = {
    {"user", "Hello"}, {"assistant", "Hi there"}, {"user", "Who are you"}, {"assistant", "   I am an assistant   "},
    {"user", "Another question"}};

Test(chat, detects_each_format_from_its_real_template) {
    size_t i;
    for (i = 0; i < sizeof templates / sizeof templates[0]; i++) {
        infer_chat_template t = infer_chat_template_from_text(templates[i].text, NULL, NULL);
        cr_expect_str_eq(infer_chat_template_name(t.kind), templates[i].kind, "template %zu", i);
        cr_expect_eq(t.fallback, 0, "template %zu (%s)", i, templates[i].kind);
    }
}

Test(chat, names_and_unknown_fall_back_to_chatml) {
    infer_chat_template t;
    int k;
    for (k = 0; k < INFER_CHAT_KIND_COUNT; k++) {
        t = infer_chat_template_from_text(infer_chat_template_name((infer_chat_kind)k), NULL, NULL);
        cr_expect_eq((int)t.kind, k);
        cr_expect_eq(t.fallback, 0);
    }
    t = infer_chat_template_from_text("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}", NULL, NULL);
    cr_expect_eq(t.kind, INFER_CHAT_KIND_CHATML);
    cr_expect_eq(t.fallback, 1);
    t = infer_chat_template_from_text(NULL, NULL, NULL);
    cr_expect_eq(t.kind, INFER_CHAT_KIND_CHATML);
    cr_expect_eq(t.fallback, 1);
    cr_expect_str_eq(t.eos, "</s>");
    cr_expect_str_eq(t.bos, "<s>");
    /* Phi-4 has <|im_start|> but is not ChatML */
    t = infer_chat_template_from_text("{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}", NULL, NULL);
    cr_expect_eq(t.kind, INFER_CHAT_KIND_PHI4);
    cr_expect_eq(t.fallback, 0);
    /* SmolVLM uses <|im_start|> as its BOS: not ChatML */
    t = infer_chat_template_from_text("<|im_start|>{% for m in messages %}{{ m.content }}<end_of_utterance>{% endfor %}", NULL, NULL);
    cr_expect_eq(t.fallback, 1);
    cr_expect_str_eq(infer_chat_template_name(INFER_CHAT_KIND_COUNT), "unknown");
}

Test(chat, formats_as_the_templates_render) {
    size_t i;
    for (i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        infer_chat_kind k = kind_named(expected[i].kind);
        infer_chat_template t = infer_chat_template_from_text(expected[i].kind, NULL, eos_of(k));
        char *s = expected[i].c2 ? format(&t, C2, 3, 0, 1) : format(&t, C1, 4, 0, 1);
        cr_expect_str_eq(s, expected[i].expected, "%s", expected[i].kind);
        free(s);
    }
}

/* Where llama.cpp's rendering and the template differ on purpose. */
Test(chat, formats_without_a_system_role_and_mistral_v3) {
    static const struct { const char *kind, *expected; } cases[] = {
        /* Gemma: system text heads the first user turn (as llama.cpp and Gemma 3's template) */
        {"gemma", "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
                  "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\n"},
        {"mistral", "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]"},
        {"mistral-v3", "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST]"},
        {"mistral-v3-tekken", "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        infer_chat_template t = infer_chat_template_from_text(cases[i].kind, NULL, NULL);
        char *s = format(&t, C1, 4, 0, 1);
        cr_expect_str_eq(s, cases[i].expected, "%s", cases[i].kind);
        free(s);
    }
    {
        /* the jinja renderings from llama.cpp's test-chat-template (no system message) */
        infer_chat_template t = infer_chat_template_from_text("mistral-v3", NULL, NULL);
        char *s = format(&t, C3, 5, 0, 1);
        cr_expect_str_eq(s, "[INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] "
                            "Another question[/INST]");
        free(s);
        t = infer_chat_template_from_text("mistral-v3-tekken", NULL, NULL);
        s = format(&t, C3, 5, 0, 1);
        cr_expect_str_eq(s, "[INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   "
                            "</s>[INST]Another question[/INST]");
        free(s);
    }
}

Test(chat, incremental_formatting_is_the_suffix_of_the_whole) {
    static const infer_chat_message conv[] = {
        {"system", " Be brief. "}, {"user", "Hello"}, {"assistant", "<think>\nhm\n</think>\n\n Hi there "},
        {"user", "  Who are you\n"}, {"assistant", "An assistant."}, {"user", "Bye"}};
    static const infer_chat_message no_sys[] = {
        {"user", "Hello"}, {"assistant", " Hi there "}, {"user", "Who are you"}, {"assistant", "\nAn assistant."}};
    int k, n, from, add, v;
    for (k = 0; k < INFER_CHAT_KIND_COUNT; k++)
        for (v = 0; v < 4; v++) { /* variants: as named; no_think and a default system; each without a system */
            infer_chat_template t = infer_chat_template_from_text(infer_chat_template_name((infer_chat_kind)k), NULL, NULL);
            const infer_chat_message *c = v & 2 ? no_sys : conv;
            int nc = v & 2 ? 4 : 6;
            if (v & 1) {
                t.no_think = 1;
                strcpy(t.default_system, "Default.");
            }
            for (n = 0; n <= nc; n++)
                for (from = 0; from <= n; from++)
                    for (add = 0; add <= 1; add++) {
                        char *whole = format(&t, c, n, 0, add), *head = format(&t, c, from, 0, 0);
                        char *tail = format(&t, c, n, from, add);
                        size_t hl = strlen(head);
                        cr_assert(strncmp(whole, head, hl) == 0 && strcmp(whole + hl, tail) == 0,
                                  "%s/%d n=%d from=%d add=%d:\nwhole %s\nhead  %s\ntail  %s",
                                  infer_chat_template_name((infer_chat_kind)k), v, n, from, add, whole, head, tail);
                        free(whole), free(head), free(tail);
                    }
        }
}

/* Every format is a Jinja text run by the interpreter (chat_formats.c).
   These strings are what the C formatter that came before it wrote for this
   conversation (system, several turns, empty messages, quotes, tabs,
   newlines, a control character, accents, CJK, an emoji), kept so that the
   texts go on rendering the formats byte for byte. */
static const infer_chat_message varied[] = {
    {"system", "Be \"brief\".\nReally. \t"},
    {"user", "Hi!\tWhat's 2+2?"},
    {"assistant", "<think>\nhmm\n</think>\n\n  It's 4. é中"},
    {"user", ""},
    {"assistant", ""},
    {"user", "  Thanks 🙂 \"quoted\" \\ back\x01slash\n"}};
static const struct {
    const char *kind, *expected;
} varied_expected[] = {
    {"chatml",
        "<|im_start|>system\n"
        "Be \"brief\".\n"
        "Really. \t<|im_end|>\n"
        "<|im_start|>user\n"
        "Hi!\tWhat's 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<|im_end|>\n"
        "<|im_start|>user\n"
        "<|im_end|>\n"
        "<|im_start|>assistant\n"
        "<|im_end|>\n"
        "<|im_start|>user\n"
        "  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "<|im_end|>\n"
        "<|im_start|>assistant\n"},
    {"llama2",
        "[INST] <<SYS>>\n"
        "Be \"brief\".\n"
        "Really. \t\n"
        "<</SYS>>\n"
        "\n"
        "Hi!\tWhat's 2+2? [/INST] <think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中 </s><s>[INST]  [/INST]  </s><s>[INST] Thanks 🙂 \"quoted\" \\ back\x01" "slash [/INST]"},
    {"mistral",
        "[INST] Be \"brief\".\n"
        "Really. \t\n"
        "Hi!\tWhat's 2+2? [/INST]<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s>[INST]  [/INST]</s>[INST]   Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        " [/INST]"},
    {"mistral-v1",
        " [INST] Be \"brief\".\n"
        "Really. \t\n"
        "\n"
        "Hi!\tWhat's 2+2? [/INST] <think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s> [INST]  [/INST] </s> [INST]   Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        " [/INST]"},
    {"mistral-v3",
        "[INST] Be \"brief\".\n"
        "Really. \t\n"
        "\n"
        "Hi!\tWhat's 2+2?[/INST] <think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s>[INST] [/INST] </s>[INST]   Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "[/INST]"},
    {"mistral-v3-tekken",
        "[INST]Be \"brief\".\n"
        "Really. \t\n"
        "\n"
        "Hi!\tWhat's 2+2?[/INST]<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s>[INST][/INST]</s>[INST]  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "[/INST]"},
    {"mistral-v7",
        "[SYSTEM_PROMPT] Be \"brief\".\n"
        "Really. \t[/SYSTEM_PROMPT][INST] Hi!\tWhat's 2+2?[/INST] <think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s>[INST] [/INST] </s>[INST]   Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "[/INST]"},
    {"llama3",
        "<|start_header_id|>system<|end_header_id|>\n"
        "\n"
        "Be \"brief\".\n"
        "Really.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
        "\n"
        "Hi!\tWhat's 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
        "\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
        "\n"
        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
        "\n"
        "<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
        "\n"
        "Thanks 🙂 \"quoted\" \\ back\x01" "slash<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
        "\n"},
    {"gemma",
        "<start_of_turn>user\n"
        "Be \"brief\".\n"
        "Really. \t\n"
        "\n"
        "Hi!\tWhat's 2+2?<end_of_turn>\n"
        "<start_of_turn>model\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<end_of_turn>\n"
        "<start_of_turn>user\n"
        "<end_of_turn>\n"
        "<start_of_turn>model\n"
        "<end_of_turn>\n"
        "<start_of_turn>user\n"
        "Thanks 🙂 \"quoted\" \\ back\x01" "slash<end_of_turn>\n"
        "<start_of_turn>model\n"},
    {"phi3",
        "<|system|>\n"
        "Be \"brief\".\n"
        "Really. \t<|end|>\n"
        "<|user|>\n"
        "Hi!\tWhat's 2+2?<|end|>\n"
        "<|assistant|>\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<|end|>\n"
        "<|user|>\n"
        "<|end|>\n"
        "<|assistant|>\n"
        "<|end|>\n"
        "<|user|>\n"
        "  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "<|end|>\n"
        "<|assistant|>\n"},
    {"zephyr",
        "<|system|>\n"
        "Be \"brief\".\n"
        "Really. \t</s>\n"
        "<|user|>\n"
        "Hi!\tWhat's 2+2?</s>\n"
        "<|assistant|>\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s>\n"
        "<|user|>\n"
        "</s>\n"
        "<|assistant|>\n"
        "</s>\n"
        "<|user|>\n"
        "  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "</s>\n"
        "<|assistant|>\n"},
    {"deepseek",
        "Be \"brief\".\n"
        "Really. \t### Instruction:\n"
        "Hi!\tWhat's 2+2?\n"
        "### Response:\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中\n"
        "<|EOT|>\n"
        "### Instruction:\n"
        "\n"
        "### Response:\n"
        "\n"
        "<|EOT|>\n"
        "### Instruction:\n"
        "  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "\n"
        "### Response:\n"},
    {"deepseek2",
        "Be \"brief\".\n"
        "Really. \t\n"
        "\n"
        "User: Hi!\tWhat's 2+2?\n"
        "\n"
        "Assistant: <think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s>User: \n"
        "\n"
        "Assistant: </s>User:   Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "\n"
        "\n"
        "Assistant:"},
    {"deepseek3",
        "Be \"brief\".\n"
        "Really. \t<｜User｜>Hi!\tWhat's 2+2?<｜Assistant｜><think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s><｜User｜><｜Assistant｜></s><｜User｜>  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "<｜Assistant｜>"},
    {"llama3.1",
        "<|start_header_id|>system<|end_header_id|>\n"
        "\n"
        "Cutting Knowledge Date: December 2023\n"
        "Today Date: 1 Jan 2025\n"
        "\n"
        "Be \"brief\".\n"
        "Really.<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
        "\n"
        "Hi!\tWhat's 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
        "\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
        "\n"
        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
        "\n"
        "<|eot_id|><|start_header_id|>user<|end_header_id|>\n"
        "\n"
        "Thanks 🙂 \"quoted\" \\ back\x01" "slash<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n"
        "\n"},
    {"qwen3",
        "<|im_start|>system\n"
        "Be \"brief\".\n"
        "Really. \t<|im_end|>\n"
        "<|im_start|>user\n"
        "Hi!\tWhat's 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
        "  It's 4. é中<|im_end|>\n"
        "<|im_start|>user\n"
        "<|im_end|>\n"
        "<|im_start|>assistant\n"
        "<|im_end|>\n"
        "<|im_start|>user\n"
        "  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "<|im_end|>\n"
        "<|im_start|>assistant\n"},
    {"phi4",
        "<|im_start|>system<|im_sep|>Be \"brief\".\n"
        "Really. \t<|im_end|><|im_start|>user<|im_sep|>Hi!\tWhat's 2+2?<|im_end|><|im_start|>assistant<|im_sep|><think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<|im_end|><|im_start|>user<|im_sep|><|im_end|><|im_start|>assistant<|im_sep|><|im_end|><|im_start|>user<|im_sep|>  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "<|im_end|><|im_start|>assistant<|im_sep|>"},
    {"phi4-mini",
        "<|system|>Be \"brief\".\n"
        "Really. \t<|end|><|user|>Hi!\tWhat's 2+2?<|end|><|assistant|><think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<|end|><|user|><|end|><|assistant|><|end|><|user|>  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "<|end|><|assistant|>"},
    {"smollm3",
        "<|im_start|>system\n"
        "## Metadata\n"
        "\n"
        "Knowledge Cutoff Date: June 2025\n"
        "Today Date: 1 Jan 2025\n"
        "Reasoning Mode: /think\n"
        "\n"
        "## Custom Instructions\n"
        "\n"
        "Be \"brief\".\n"
        "Really.\n"
        "\n"
        "<|im_start|>user\n"
        "Hi!\tWhat's 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<|im_end|>\n"
        "<|im_start|>user\n"
        "<|im_end|>\n"
        "<|im_start|>assistant\n"
        "<|im_end|>\n"
        "<|im_start|>user\n"
        "  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "<|im_end|>\n"
        "<|im_start|>assistant\n"},
    {"mistral-v7-tekken",
        "[SYSTEM_PROMPT]Be \"brief\".\n"
        "Really. \t[/SYSTEM_PROMPT][INST]Hi!\tWhat's 2+2?[/INST]<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中</s>[INST][/INST]</s>[INST]  Thanks 🙂 \"quoted\" \\ back\x01" "slash\n"
        "[/INST]"},
    /* as Gemma 4's own template renders it (jinja2, bos_token "") */
    {"gemma4",
        "<|turn>system\n"
        "Be \"brief\".\n"
        "Really.<turn|>\n"
        "<|turn>user\n"
        "Hi!\tWhat's 2+2?<turn|>\n"
        "<|turn>model\n"
        "<think>\n"
        "hmm\n"
        "</think>\n"
        "\n"
        "  It's 4. é中<turn|>\n"
        "<|turn>user\n"
        "<turn|>\n"
        "<|turn>model\n"
        "<turn|>\n"
        "<|turn>user\n"
        "Thanks 🙂 \"quoted\" \\ back\x01" "slash<turn|>\n"
        "<|turn>model\n"
        "<|channel>thought\n"
        "<channel|>"},
};

Test(chat, every_format_writes_what_the_c_formatter_wrote) {
    size_t i;
    cr_assert_eq(sizeof varied_expected / sizeof varied_expected[0], (size_t)INFER_CHAT_KIND_COUNT);
    for (i = 0; i < sizeof varied_expected / sizeof varied_expected[0]; i++) {
        infer_chat_template t = infer_chat_template_from_text(varied_expected[i].kind, NULL, NULL);
        char small[8], *s;
        int len;
        cr_assert_eq(t.fallback, 0, "%s", varied_expected[i].kind);
        strcpy(t.date, "1 Jan 2025");
        s = format(&t, varied, 6, 0, 1);
        cr_expect_str_eq(s, varied_expected[i].expected, "%s", varied_expected[i].kind);
        /* snprintf-style: a short buffer gets the start, the length is the whole's */
        len = sc_chat_format(&t, varied, 6, 0, 1, small, sizeof small);
        cr_expect_eq(len, (int)strlen(s), "%s", varied_expected[i].kind);
        cr_expect(strlen(small) == sizeof small - 1 && !strncmp(small, s, sizeof small - 1), "%s: %s",
                  varied_expected[i].kind, small);
        free(s);
    }
}

/* The context the texts render reaches them as JSON: quotes, backslashes,
   control characters and bytes that are not UTF-8 come back as they were,
   in roles and the BOS/EOS texts too, and the arguments are checked. */
Test(chat, message_bytes_reach_the_text_as_they_are) {
    static const char odd[] = "\xff\xfe \xc3( \"q\" \\ \x01\x1f\x7f{{ x }}{% if %}\ttab\nline\x1c";
    infer_chat_message m[2] = {{"user", odd}, {"assistant", odd}};
    infer_chat_message odd_role = {"\xe9\"role\\", odd};
    char buf[512];
    int k;
    for (k = 0; k < INFER_CHAT_KIND_COUNT; k++) {
        infer_chat_template t =
            infer_chat_template_from_text(infer_chat_template_name((infer_chat_kind)k), "<\xff\"b>", "</\x01\xc3>");
        char *s = format(&t, m, 2, 0, 1);
        cr_expect(strstr(s, odd) != NULL, "%s: %s", infer_chat_template_name((infer_chat_kind)k), s);
        if (k == INFER_CHAT_KIND_ZEPHYR || k == INFER_CHAT_KIND_MISTRAL || k == INFER_CHAT_KIND_DEEPSEEK2)
            cr_expect(strstr(s, "</\x01\xc3>") != NULL, "%s: %s", infer_chat_template_name((infer_chat_kind)k), s);
        free(s);
    }
    {
        infer_chat_template t = infer_chat_template_from_text("chatml", NULL, NULL);
        cr_expect_eq(sc_chat_format(&t, &odd_role, 1, 0, 0, buf, sizeof buf), (int)(strlen(odd) + 31));
        cr_expect_str_eq(buf, "<|im_start|>\xe9\"role\\\n\xff\xfe \xc3( \"q\" \\ \x01\x1f\x7f{{ x }}{% if %}\ttab\nline\x1c"
                              "<|im_end|>\n");
        cr_expect_eq(sc_chat_format(NULL, m, 2, 0, 1, buf, sizeof buf), -1);
        cr_expect_eq(sc_chat_format(&t, m, 2, 3, 1, buf, sizeof buf), -1);
        cr_expect_eq(sc_chat_format(&t, m, 2, 0, 1, NULL, 4), -1);
        m[1].content = NULL;
        cr_expect_eq(sc_chat_format(&t, m, 2, 0, 1, buf, sizeof buf), -1);
    }
}

/* The built-in texts are trusted: the interpreter's limits for templates
   from files (steps, 16 MiB of output) do not cut a long chat short. */
Test(chat, long_conversations_are_formatted_whole) {
    enum { N = 2001 };
    static infer_chat_message m[N];
    size_t big_len = (size_t)17 << 20;
    char *big = (char *)malloc(big_len + 1), *s;
    int i, k;
    cr_assert_not_null(big);
    for (i = 0; i < N; i++) {
        m[i].role = i == 0 ? "system" : i % 2 ? "user" : "assistant";
        m[i].content = i % 2 ? "What should I wear today?" : "Something warm: a coat and a scarf.";
    }
    for (k = 0; k < INFER_CHAT_KIND_COUNT; k++) {
        infer_chat_template t = infer_chat_template_from_text(infer_chat_template_name((infer_chat_kind)k), NULL, NULL);
        char *whole = format(&t, m, N, 0, 1), *head = format(&t, m, N - 1, 0, 0), *tail = format(&t, m, N, N - 1, 1);
        cr_expect_gt(strlen(whole), (size_t)N * 25, "%s", infer_chat_template_name((infer_chat_kind)k));
        cr_expect(!strncmp(whole, head, strlen(head)) && !strcmp(whole + strlen(head), tail), "%s",
                  infer_chat_template_name((infer_chat_kind)k));
        free(whole), free(head), free(tail);
    }
    memset(big, 'a', big_len);
    big[big_len] = 0;
    {
        infer_chat_template t = infer_chat_template_from_text("llama3", NULL, NULL);
        infer_chat_message one = {"user", big};
        s = format(&t, &one, 1, 0, 0);
        cr_expect_eq(strlen(s), big_len + 52);
        cr_expect(!strncmp(s, "<|start_header_id|>user<|end_header_id|>\n\naaa", 45) &&
                  !strcmp(s + strlen(s) - 11, "a<|eot_id|>"));
        free(s);
    }
    free(big);
}

/* Qwen3 drops the reasoning of earlier replies and, asked for no thinking,
   opens the reply with an empty think block (enable_thinking=false). */
Test(chat, qwen3_reasoning) {
    static const infer_chat_message conv[] = {
        {"system", "You are a helpful assistant"}, {"user", "Hello"},
        {"assistant", "<think>\nLet me think.\n</think>\n\nHi there"}, {"user", "Who are you"}};
    static const char *const want =
        "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n";
    infer_chat_template t = infer_chat_template_from_text("qwen3", NULL, NULL);
    char *s = format(&t, conv, 4, 0, 1), eot[32];
    cr_expect_str_eq(s, want);
    free(s);
    t.no_think = 1;
    s = format(&t, conv, 4, 0, 1);
    cr_expect(!strncmp(s, want, strlen(want)) && !strcmp(s + strlen(want), "<think>\n\n</think>\n\n"), "%s", s);
    free(s);
    infer_chat_end_of_turn(&t, eot, sizeof eot, NULL, NULL);
    cr_expect_str_eq(eot, "<|im_end|>\n");
}

/* SmolLM3: its "## Metadata" system header (left open without tools, as
   the template renders it), "/no_think" in the system message or the
   no_think option, "/system_override". */
Test(chat, smollm3_header_and_modes) {
    static const infer_chat_message nothink[] = {
        {"system", "Be brief. /no_think"}, {"user", "Hello"}, {"assistant", "\nHi there"}, {"user", "Who are you"}};
    static const infer_chat_message override[] = {{"system", "Only this. /system_override /think"}, {"user", "Hello"}};
    static const char *const head = "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 26 July 2024\n";
    infer_chat_template t = infer_chat_template_from_text("smollm3", NULL, NULL);
    char *s, want[4096];
    strcpy(t.date, "26 July 2024");
    s = format(&t, C1, 4, 0, 1);
    snprintf(want, sizeof want, "%sReasoning Mode: /think\n\n## Custom Instructions\n\nYou are a helpful assistant\n\n"
             "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are "
             "you<|im_end|>\n<|im_start|>assistant\n", head);
    cr_expect_str_eq(s, want);
    free(s);
    s = format(&t, nothink, 4, 0, 1);
    snprintf(want, sizeof want, "%sReasoning Mode: /no_think\n\n## Custom Instructions\n\nBe brief.\n\n"
             "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\nHi there<|im_end|>\n"
             "<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n", head);
    cr_expect_str_eq(s, want);
    free(s);
    t.no_think = 1; /* no system message: the option decides, with the template's short instructions */
    s = format(&t, C2, 3, 0, 1);
    snprintf(want, sizeof want, "%sReasoning Mode: /no_think\n\n## Custom Instructions\n\nYou are a helpful AI "
             "assistant named SmolLM, trained by Hugging Face.\n\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>"
             "assistant\n<think>\n\n</think>\n  I am an assistant  <|im_end|>\n<|im_start|>user\nAnother question"
             "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n", head);
    cr_expect_str_eq(s, want);
    free(s);
    t.no_think = 0; /* thinking and no system message: the long default instructions */
    s = format(&t, C2, 1, 0, 0);
    cr_expect(strstr(s, "Reasoning Mode: /think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named "
                        "SmolLM, trained by Hugging Face. Your role as an assistant involves thoroughly exploring") &&
                  strstr(s, "necessary steps needed to reach the conclusion.\n\n<|im_start|>user\nHello<|im_end|>\n"),
              "%s", s);
    free(s);
    s = format(&t, override, 2, 0, 1);
    cr_expect_str_eq(s, "<|im_start|>system\nOnly this.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    free(s);
}

/* Gemma 3 puts the system text, as it is, at the top of the first user
   turn; Phi-3.5 skips an empty system message; Qwen2/2.5 and SmolLM2 write
   their template's own system message when the conversation has none. */
Test(chat, system_messages_as_the_templates_write_them) {
    static const infer_chat_message gem[] = {{"system", " Be brief.\n "}, {"user", " Hello "}, {"assistant", " Hi there "}};
    static const infer_chat_message empty_sys[] = {{"system", ""}, {"user", "Hello"}};
    infer_chat_template t = infer_chat_template_from_text("gemma", NULL, NULL);
    char *s = format(&t, gem, 3, 0, 1);
    cr_expect_str_eq(s, "<start_of_turn>user\n Be brief.\n \n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>model\n");
    free(s);
    t = infer_chat_template_from_text("phi3", NULL, NULL);
    s = format(&t, empty_sys, 2, 0, 1);
    cr_expect_str_eq(s, "<|user|>\nHello<|end|>\n<|assistant|>\n");
    free(s);
    t = infer_chat_template_from_text(
        "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
        "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
        "{%- endif %}", NULL, NULL);
    cr_expect_eq(t.kind, INFER_CHAT_KIND_CHATML);
    cr_expect_str_eq(t.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    s = format(&t, C2, 3, 0, 1);
    cr_expect_str_eq(s, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n  I am an assistant  <|im_end|>\n"
                        "<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    s = format(&t, C1, 2, 0, 0); /* a system message of its own replaces it */
    cr_expect_str_eq(s, "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n");
    free(s);
    t = infer_chat_template_from_text(templates[14].text, NULL, NULL); /* SmolLM2's, a real newline */
    cr_expect_str_eq(t.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    t = infer_chat_template_from_text(templates[0].text, NULL, NULL);
    cr_expect_str_eq(t.default_system, "");
}

/* Short snippets with each newer family's markers. */
Test(chat, detects_the_newer_families) {
    static const struct { const char *kind, *text; } snippets[] = {
        {"qwen3", "{%- if '</think>' in message.content %}{%- set content = message.content.split('</think>')[-1] %}"
                  "{%- endif %}{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"},
        {"smollm3", "{{- \"<|im_start|>system\\n\" -}}{{- \"Knowledge Cutoff Date: June 2025\\n\" -}}"
                    "{{- \"Reasoning Mode: \" + reasoning_mode + \"\\n\\n\" -}}{%- if '</think>' %}{% endif %}"},
        {"phi4", "{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}"},
        {"phi4-mini", "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{{ '<|assistant|>' }}"},
        {"phi3", "{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{{ '<|assistant|>\\n' }}"},
        {"gemma", "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}"
                  "{{ message['content'] | trim }}{{ '<end_of_turn>\\n' }}"},
        {"llama3.1", "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}{{- 'Cutting Knowledge Date: December 2023\\n' }}"},
        {"llama3", "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"},
        {"mistral-v3-tekken", "{{- \"[AVAILABLE_TOOLS][\" }}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}"},
        {"mistral-v7", "{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{{ '[INST] ' + message['content'] + '[/INST]' }}"},
        {"mistral-v7-tekken", "{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}{{- '[INST]' }}{{- '[/INST]' }}"},
        {"chatml", "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"},
    };
    size_t i;
    for (i = 0; i < sizeof snippets / sizeof snippets[0]; i++) {
        infer_chat_template t = infer_chat_template_from_text(snippets[i].text, NULL, NULL);
        cr_expect_str_eq(infer_chat_template_name(t.kind), snippets[i].kind, "snippet %zu", i);
        cr_expect_eq(t.fallback, 0, "snippet %zu", i);
    }
}

/* Llama 3.1's date: its template's own where it never asks the clock,
   today's (in its strftime_now format) where it does, as Llama 3.2's. */
Test(chat, llama31_dates) {
    char today[32];
    time_t now = time(NULL);
    struct tm tm;
    infer_chat_template t = infer_chat_template_from_text(
        "{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
        "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023\\n\" }}",
        NULL, NULL);
    cr_expect_eq(t.kind, INFER_CHAT_KIND_LLAMA31);
    cr_expect_str_eq(t.date, "26 Jul 2024");
    t = infer_chat_template_from_text(
        "{%- if strftime_now is defined %}{%- set date_string = strftime_now(\"%d %b %Y\") %}{%- else %}"
        "{%- set date_string = \"26 Jul 2024\" %}{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}"
        "{{- \"Cutting Knowledge Date: December 2023\\n\" }}",
        NULL, NULL);
    localtime_r(&now, &tm);
    strftime(today, sizeof today, "%d %b %Y", &tm);
    cr_expect_str_eq(t.date, today);
}

Test(chat, snprintf_semantics_and_bad_arguments) {
    infer_chat_template t = infer_chat_template_from_text("chatml", NULL, NULL);
    char small[8];
    infer_chat_message bad = {NULL, "x"};
    int n = sc_chat_format(&t, C1, 2, 0, 0, small, sizeof small);
    cr_expect_eq(n, (int)strlen("<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"));
    cr_expect_str_eq(small, "<|im_st");
    cr_expect_eq(sc_chat_format(&t, C1, 2, 3, 0, NULL, 0), -1);
    cr_expect_eq(sc_chat_format(&t, &bad, 1, 0, 0, NULL, 0), -1);
    cr_expect_eq(sc_chat_format(NULL, C1, 1, 0, 0, NULL, 0), -1);
    cr_expect_eq(sc_chat_format(&t, C1, 0, 0, 1, small, sizeof small), (int)strlen("<|im_start|>assistant\n"));
    cr_expect_eq(sc_chat_end_of_turn(&t, small, sizeof small), (int)strlen("<|im_end|>\n"));
    {
        static const struct { const char *kind, *eot; } eots[] = {
            {"qwen3", "<|im_end|>\n"}, {"smollm3", "<|im_end|>\n"}, {"phi4", "<|im_end|>"}, {"phi4-mini", "<|end|>"},
            {"llama3.1", "<|eot_id|>"}, {"phi3", "<|end|>\n"}, {"gemma", "<end_of_turn>\n"}};
        size_t i;
        for (i = 0; i < sizeof eots / sizeof eots[0]; i++) {
            char eot[32];
            t = infer_chat_template_from_text(eots[i].kind, NULL, NULL);
            infer_chat_end_of_turn(&t, eot, sizeof eot, NULL, NULL);
            cr_expect_str_eq(eot, eots[i].eot, "%s", eots[i].kind);
        }
    }
    t = infer_chat_template_from_text("zephyr", NULL, "<|endoftext|>");
    {
        char eot[32];
        infer_chat_end_of_turn(&t, eot, sizeof eot, NULL, NULL);
        cr_expect_str_eq(eot, "<|endoftext|>\n");
    }
}

/* ---- with a model ---- */

static void need_shared(void) {
    if (!tu_have_shared()) cr_skip_test("../shared is absent: no model to chat with");
}

Test(chat, model_without_template_falls_back) {
    char path[512];
    infer_error err;
    infer_model *m;
    infer_chat_template t;
    need_shared();
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    m = infer_model_load(path, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    t = infer_chat_template_detect(m);
    cr_expect_eq(t.kind, INFER_CHAT_KIND_CHATML);
    cr_expect_eq(t.fallback, 1);
    cr_expect_str_eq(t.bos, "<s>");
    cr_expect_str_eq(t.eos, "</s>");
    infer_model_free(m);
}

/* What a chat feeds after a reply begins with a token that ends generation,
   so the cache holds the same turn boundary generation stops at. The Phi-3
   vocabulary file carries its template (the first Phi-3-mini one). */
Test(chat, end_of_turn_is_an_end_of_generation_token) {
    static const struct { const char *vocab, *kind; } cases[] = {
        {"tokenizer/ggml-vocab-qwen2.gguf", "qwen3"}, {"tokenizer/ggml-vocab-qwen2.gguf", "chatml"},
        {"tokenizer/ggml-vocab-phi-3.gguf", NULL}, {"tokenizer/ggml-vocab-llama-bpe.gguf", "llama3.1"},
        {"tokenizer/ggml-vocab-llama-bpe.gguf", "llama3"}};
    size_t i;
    need_shared();
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512], eot[64];
        infer_error err;
        infer_model_params mp = infer_model_default_params();
        infer_model *m;
        infer_chat_template t;
        infer_token tok[16];
        int n;
        mp.vocab_only = 1;
        tu_shared_path(path, sizeof path, cases[i].vocab);
        m = infer_model_load(path, &mp, &err);
        cr_assert_not_null(m, "%s: %s", path, err.msg);
        t = cases[i].kind ? infer_chat_template_from_text(cases[i].kind, NULL, NULL) : infer_chat_template_detect(m);
        if (!cases[i].kind) cr_expect(t.kind == INFER_CHAT_KIND_PHI3 && !t.fallback, "phi-3's template: %s", infer_chat_template_name(t.kind));
        infer_chat_end_of_turn(&t, eot, sizeof eot, NULL, NULL);
        if (infer_tokenize(m, eot, strlen(eot), tok, 16, 0, 1, &n, NULL) != INFER_OK) n = -1;
        cr_assert_gt(n, 0);
        cr_expect(infer_model_is_eog(m, tok[0]), "%s, %s: \"%s\" starts with %d, not an end of generation", cases[i].vocab,
                  infer_chat_template_name(t.kind), eot, tok[0]);
        infer_model_free(m);
    }
}

static int count_sub(const char *s, const char *sub) {
    int n = 0;
    for (s = strstr(s, sub); s; s = strstr(s + 1, sub)) n++;
    return n;
}

Test(chat, cli_two_turns_from_a_pipe) {
    char model[512], cmd[2048];
    char *out, *err;
    int status = -1;
    need_shared();
    tu_shared_path(model, sizeof model, "models/stories260K.gguf");
    snprintf(cmd, sizeof cmd, "printf 'Hello there\\nTell me a story\\n' | '%s' chat -m '%s' -n 12 --temp 0 2>/dev/null",
             INFER_CLI_PATH, model);
    out = tu_run(cmd, &status);
    cr_assert_not_null(out);
    cr_expect_eq(status, 0, "stdout: %s", out);
    cr_expect_eq(count_sub(out, "\n"), 2, "two replies, one line each expected:\n%s", out);
    snprintf(cmd, sizeof cmd, "printf 'Hello there\\nTell me a story\\n' | '%s' chat -m '%s' -n 12 --temp 0 2>&1 >/dev/null",
             INFER_CLI_PATH, model);
    err = tu_run(cmd, &status);
    cr_assert_not_null(err);
    cr_expect_eq(status, 0, "stderr: %s", err);
    cr_expect_eq(count_sub(err, "warning"), 1, "one fallback warning expected:\n%s", err);
    cr_expect(strstr(err, "ChatML") != NULL, "%s", err);
    cr_expect_eq(count_sub(err, " in context]"), 2, "two turns expected:\n%s", err);
    free(out);
    free(err);
}

Test(chat, cli_reports_a_full_context) {
    char model[512], cmd[2048];
    char *err;
    int status = -1;
    need_shared();
    tu_shared_path(model, sizeof model, "models/stories260K.gguf");
    snprintf(cmd, sizeof cmd, "printf 'Hello there\\nTell me a story\\nAgain\\n' | '%s' chat -m '%s' -n 200 -c 96 --temp 0 2>&1 >/dev/null",
             INFER_CLI_PATH, model);
    err = tu_run(cmd, &status);
    cr_assert_not_null(err);
    cr_expect_eq(status, 0, "stderr: %s", err);
    cr_expect(strstr(err, "context is full") != NULL, "%s", err);
    free(err);
}

/* Tokenizes text (parse_special) onto the end of *toks. Returns how many. */
static int add_tokens(const infer_model *m, const char *text, int add_bos, infer_token **toks, int *n) {
    int k;
    if (infer_tokenize(m, text, strlen(text), NULL, 0, add_bos, 1, &k, NULL) != INFER_OK) k = -1;
    cr_assert_geq(k, 0);
    *toks = (infer_token *)realloc(*toks, (size_t)(*n + k + 1) * sizeof **toks);
    infer_tokenize(m, text, strlen(text), *toks + *n, k, add_bos, 1, NULL, NULL);
    *n += k;
    return k;
}

/* Two turns the way `infer chat` runs them: the second decodes only what it
   adds (n_past grows by exactly that), and its logits equal those of
   re-reading the whole conversation in a fresh context. */
Test(chat, kv_cache_reused_across_turns) {
    char path[512], *text;
    infer_error err;
    infer_model *m;
    infer_context *c, *c2;
    infer_sampler *s;
    infer_sampler_params sp = infer_sampler_default_params();
    infer_chat_template t;
    infer_chat_message msgs[4] = {{"system", "You tell stories."}, {"user", "Hello"}, {"assistant", ""}, {"user", "More"}};
    infer_token *all = NULL, tok;
    int n_all = 0, k, i, past, nv;
    const float *a, *b;
    float *inc;
    need_shared();
    tu_shared_path(path, sizeof path, "models/stories260K.gguf");
    m = infer_model_load(path, NULL, &err);
    cr_assert_not_null(m, "%s", err.msg);
    c = infer_context_new(m, NULL, &err);
    cr_assert_not_null(c, "%s", err.msg);
    sp.temperature = 0;
    s = infer_sampler_new(&sp, infer_model_n_vocab(m), NULL);
    t = infer_chat_template_detect(m);
    nv = infer_model_n_vocab(m);

    /* turn 1: system + user + assistant prompt */
    text = format(&t, msgs, 2, 0, 1);
    k = add_tokens(m, text, infer_model_add_bos(m), &all, &n_all);
    free(text);
    cr_assert_eq(infer_decode(c, all, k, 0, &err), INFER_OK, "%s", err.msg);
    cr_assert_eq(infer_seq_n_past(c, 0), k);
    for (i = 0; i < 8; i++) { /* a short reply */
        tok = infer_sampler_sample(s, infer_context_logits(c, -1));
        if (infer_model_is_eog(m, tok)) break;
        all = (infer_token *)realloc(all, (size_t)(n_all + 1) * sizeof *all);
        all[n_all++] = tok;
        cr_assert_eq(infer_decode(c, &tok, 1, 0, &err), INFER_OK, "%s", err.msg);
    }
    cr_assert_eq(infer_seq_n_past(c, 0), n_all);

    /* turn 2: end of the reply + the new user message + assistant prompt */
    past = infer_seq_n_past(c, 0);
    {
        char eot[64];
        int ne = sc_chat_end_of_turn(&t, eot, sizeof eot);
        char *rest = format(&t, msgs, 4, 3, 1);
        text = (char *)malloc((size_t)ne + strlen(rest) + 1);
        strcpy(text, eot);
        strcat(text, rest);
        free(rest);
    }
    k = add_tokens(m, text, 0, &all, &n_all);
    free(text);
    cr_assert_eq(infer_decode(c, all + n_all - k, k, 0, &err), INFER_OK, "%s", err.msg);
    cr_expect_eq(infer_seq_n_past(c, 0), past + k, "the second turn decoded %d tokens onto %d",
                 infer_seq_n_past(c, 0) - past, past);
    a = infer_context_logits(c, -1);
    inc = (float *)malloc((size_t)nv * sizeof *inc);
    memcpy(inc, a, (size_t)nv * sizeof *inc);

    /* the same tokens read at once */
    c2 = infer_context_new(m, NULL, &err);
    cr_assert_not_null(c2, "%s", err.msg);
    cr_assert_eq(infer_decode(c2, all, n_all, 0, &err), INFER_OK, "%s", err.msg);
    b = infer_context_logits(c2, -1);
    for (i = 0; i < nv; i++) cr_assert_float_eq(inc[i], b[i], 1e-3f, "logit %d: %g vs %g", i, inc[i], b[i]);

    free(inc);
    free(all);
    infer_context_free(c2);
    infer_sampler_free(s);
    infer_context_free(c);
    infer_model_free(m);
}

/* ---- infer chat: Jinja templates from a file, reasoning apart ---- */

/* A file of the test's own in the temporary directory, holding text; its
   path in path. */
static void write_temp(char *path, size_t size, const char *name, const char *text) {
    FILE *f;
    snprintf(path, size, "/tmp/infer_test_chat_%ld_%s", (long)getpid(), name);
    f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* `infer chat` with the turns piped in and extra arguments; stdout returned,
   stderr in *err (both malloc'd), the exit status in *status. */
static char *chat_cli(const char *model, const char *turns, const char *args, char **err, int *status) {
    char cmd[4096], errpath[256];
    char *out;
    snprintf(errpath, sizeof errpath, "/tmp/infer_test_chat_%ld_stderr", (long)getpid());
    snprintf(cmd, sizeof cmd, "printf '%s' | '%s' chat -m '%s' %s 2>'%s'", turns, INFER_CLI_PATH, model, args, errpath);
    out = tu_run(cmd, status);
    cr_assert_not_null(out);
    *err = tu_read_file(errpath, NULL);
    cr_assert_not_null(*err);
    remove(errpath);
    return out;
}

#define SMOLLM2_PATH INFER_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* SmolLM2's own template from a file renders the chat as the built-in
   ChatML format does (its default system message included), so greedy
   replies are the same over two turns: the second turn renders the whole
   conversation again and prompt reuse feeds only what it adds. */
Test(chat, cli_template_file_replies_as_the_builtin_format) {
    char tpl[256], args[512];
    char *a, *b, *ea, *eb;
    int sa = -1, sb = -1;
    FILE *f = fopen(SMOLLM2_PATH, "rb");
    if (!f) cr_skip_test("%s is absent (scripts/test.sh fetches it)", SMOLLM2_PATH);
    fclose(f);
    write_temp(tpl, sizeof tpl, "smollm2.jinja", templates[14].text);
    a = chat_cli(SMOLLM2_PATH, "Hello\\nWhat is 2+2?\\n", "-n 16 --temp 0", &ea, &sa);
    snprintf(args, sizeof args, "-n 16 --temp 0 --chat-template-file '%s'", tpl);
    b = chat_cli(SMOLLM2_PATH, "Hello\\nWhat is 2+2?\\n", args, &eb, &sb);
    cr_expect_eq(sa, 0, "%s", ea);
    cr_expect_eq(sb, 0, "%s", eb);
    cr_expect_eq(count_sub(a, "\n"), 2, "two replies expected:\n%s", a);
    cr_expect_gt(strlen(a), 2, "replies expected:\n%s", a);
    cr_expect_str_eq(b, a, "the template file's replies differ from the built-in format's");
    cr_expect_eq(count_sub(eb, " in context]"), 2, "%s", eb);
    remove(tpl);
    free(a), free(b), free(ea), free(eb);
}

/* A template that raises, or does not parse: one line of error, exit 1,
   before a turn is read. */
Test(chat, cli_template_file_errors) {
    static const struct { const char *text, *says; } cases[] = {
        {"{{ raise_exception('Only user turns, please') }}", "Only user turns, please"},
        {"{% for m in messages %}{{ m.content }", "chat template"},
    };
    char model[512], tpl[256], args[512];
    size_t i;
    need_shared();
    tu_shared_path(model, sizeof model, "models/stories260K.gguf");
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out, *err;
        int status = -1;
        write_temp(tpl, sizeof tpl, "bad.jinja", cases[i].text);
        snprintf(args, sizeof args, "-n 4 --chat-template-file '%s'", tpl);
        out = chat_cli(model, "Hello\\n", args, &err, &status);
        cr_expect_eq(status, 1, "case %zu: exit %d, stderr: %s", i, status, err);
        cr_expect_eq(count_sub(err, "\n"), 1, "case %zu: one line of error expected:\n%s", i, err);
        cr_expect(!strncmp(err, "infer: ", 7) && strstr(err, cases[i].says), "case %zu: %s", i, err);
        cr_expect_str_eq(out, "", "case %zu: nothing on stdout expected", i);
        free(out), free(err);
        remove(tpl);
    }
}

/* A template whose assistant prompt opens <think>: each reply is reasoning
   until </think>. stories260K never writes one, so without a budget the
   whole reply is reasoning (on stderr, every line after "[reasoning] ") and
   the answers on stdout are empty; --reasoning-budget 3 closes the
   reasoning after 3 tokens and an answer follows it on stdout, with no
   think marker in it. --reasoning hide drops the reasoning only. */
Test(chat, cli_reasoning_apart_and_its_budget) {
    static const char think_template[] =
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}";
    char model[512], tpl[256], args[512];
    char *free_out, *free_err, *cut_out, *cut_err, *hid_out, *hid_err;
    const char *line;
    int status = -1, n_lines = 0;
    need_shared();
    tu_shared_path(model, sizeof model, "models/stories260K.gguf");
    write_temp(tpl, sizeof tpl, "think.jinja", think_template);

    snprintf(args, sizeof args, "-n 16 --temp 0 --chat-template-file '%s'", tpl);
    free_out = chat_cli(model, "Hello\\nTell me a story\\n", args, &free_err, &status);
    cr_expect_eq(status, 0, "%s", free_err);
    cr_expect_str_eq(free_out, "\n\n", "all reasoning, no answers expected; stderr:\n%s", free_err);
    cr_expect_geq(count_sub(free_err, "[reasoning] "), 2, "%s", free_err);

    snprintf(args, sizeof args, "-n 16 --temp 0 --chat-template-file '%s' --reasoning-budget 3", tpl);
    cut_out = chat_cli(model, "Hello\\nTell me a story\\n", args, &cut_err, &status);
    cr_expect_eq(status, 0, "%s", cut_err);
    cr_expect_eq(count_sub(cut_out, "\n"), 2, "two answers, one line each expected:\n%s", cut_out);
    for (line = cut_out; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL, n_lines++)
        cr_expect_neq(*line, '\n', "answer %d is empty: the reasoning was not closed\nstdout: %s\nstderr: %s", n_lines,
                      cut_out, cut_err);
    cr_expect(!strstr(cut_out, "think>"), "a think marker in the answers:\n%s", cut_out);
    cr_expect_geq(count_sub(cut_err, "[reasoning] "), 2, "the reasoning apart on stderr expected:\n%s", cut_err);
    /* every stderr line is reasoning, or a turn's summary ("[N tokens read, ...]") */
    for (line = cut_err; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
        cr_expect(!strncmp(line, "[reasoning] ", 12) || (line[0] == '[' && line[1] >= '0' && line[1] <= '9'),
                  "stray stderr line: %.60s", line);
    cr_expect_lt(strlen(cut_err), strlen(free_err), "3 tokens of reasoning should be shorter than 16");

    snprintf(args, sizeof args, "-n 16 --temp 0 --chat-template-file '%s' --reasoning-budget 3 --reasoning hide", tpl);
    hid_out = chat_cli(model, "Hello\\nTell me a story\\n", args, &hid_err, &status);
    cr_expect_eq(status, 0, "%s", hid_err);
    cr_expect_str_eq(hid_out, cut_out, "hiding the reasoning changed the answers");
    cr_expect(!strstr(hid_err, "[reasoning]"), "%s", hid_err);
    cr_expect_eq(count_sub(hid_err, " in context]"), 2, "%s", hid_err);
    remove(tpl);
    free(free_out), free(free_err), free(cut_out), free(cut_err), free(hid_out), free(hid_err);
}

/* --reasoning-effort reaches a Jinja template as reasoning_effort (as
   gpt-oss's writes "Reasoning: high"); here the template raises it back;
   without the flag the variable is not defined; another value is refused. */
Test(chat, cli_reasoning_effort_reaches_the_template) {
    static const char harmony_template[] =
        "{% if reasoning_effort is defined %}{{ raise_exception('Reasoning: ' + reasoning_effort) }}{% endif %}"
        "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
        "{% if add_generation_prompt %}<|start|>assistant<|channel|>final<|message|>{% endif %}";
    static const char *const efforts[] = {"low", "medium", "high"};
    char model[512], tpl[256], args[512], want[64];
    char *out, *err;
    int status = -1;
    size_t i;
    need_shared();
    tu_shared_path(model, sizeof model, "models/stories260K.gguf");
    write_temp(tpl, sizeof tpl, "harmony.jinja", harmony_template);
    for (i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "-n 4 --temp 0 --chat-template-file '%s' --reasoning-effort %s", tpl, efforts[i]);
        out = chat_cli(model, "Hello\\n", args, &err, &status);
        snprintf(want, sizeof want, "Reasoning: %s", efforts[i]);
        cr_expect_eq(status, 1, "%s: exit %d, stderr: %s", efforts[i], status, err);
        cr_expect(strstr(err, want) != NULL, "%s: the template did not see it: %s", efforts[i], err);
        free(out), free(err);
    }
    snprintf(args, sizeof args, "-n 4 --temp 0 --chat-template-file '%s'", tpl);
    out = chat_cli(model, "Hello\\n", args, &err, &status);
    cr_expect_eq(status, 0, "without --reasoning-effort: %s", err);
    free(out), free(err);
    snprintf(args, sizeof args, "-n 4 --chat-template-file '%s' --reasoning-effort extreme", tpl);
    out = chat_cli(model, "Hello\\n", args, &err, &status);
    cr_expect_neq(status, 0);
    cr_expect(strstr(err, "--reasoning-effort") != NULL, "%s", err);
    free(out), free(err);
    remove(tpl);
}

Test(chat, cli_help_names_the_options) {
    char cmd[1024];
    char *out;
    int status = -1;
    snprintf(cmd, sizeof cmd, "'%s' chat --help", INFER_CLI_PATH);
    out = tu_run(cmd, &status);
    cr_assert_not_null(out);
    cr_expect_eq(status, 0);
    cr_expect(strstr(out, "--reasoning show|hide") && strstr(out, "--reasoning-budget N") &&
                  strstr(out, "--chat-template-file") && strstr(out, "--jinja") &&
                  strstr(out, "--reasoning-effort low|medium|high"),
              "%s", out);
    free(out);
}

/* Gemma 4's built-in format drops an earlier reply's thinking channel, as
   its template's strip_thinking does, and its turn ends with <turn|>. */
Test(chat, gemma4_drops_earlier_thinking) {
    static const infer_chat_message m[] = {
        {"user", "Hi"}, {"assistant", "<|channel>thought\nGreet.<channel|> Hello! <|channel>thought\n<channel|>"}};
    infer_chat_template t = infer_chat_template_from_text("gemma4", NULL, NULL);
    char end[32];
    size_t n = 0;
    char *s = format(&t, m, 2, 0, 0);
    cr_expect_str_eq(s, "<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n");
    free(s);
    cr_assert_eq(infer_chat_end_of_turn(&t, end, sizeof end, &n, NULL), INFER_OK);
    cr_expect_str_eq(end, "<turn|>\n");
}
