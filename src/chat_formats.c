/* chat_formats.c - the built-in chat formats as Jinja texts: one per
   infer_chat_kind, rendered by jinja.c's interpreter like a model's own
   template, so chat formatting has one path (chat.c builds the context).

   Each text sees: messages (a list of {role, content}),
   add_generation_prompt, bos_token, eos_token, and the template's settings:
   default_system (ChatML's system message when there is none), date
   (Llama 3.1's and SmolLM3's "Today Date"), no_think (Qwen3, SmolLM3).
   Every message's text depends only on the messages before it: chat.c
   renders messages from k on as the whole minus the rendering up to k.
   Newlines in the texts only follow block tags ("%}", removed as
   trim_blocks does) or "-}}", so only '\n' in string literals is output.
   "Trim" below is strip(' \t\n\r\v\f'): the ASCII blanks the formats
   always stripped (Jinja's trim would also take \x1c..\x1f). */
#include "internal.h"

#define INFER__CF_BLANKS "' \\t\\n\\r\\v\\f'"

/* <|im_start|>role\ntext<|im_end|>\n; the template's default system
   message first where the conversation has none */
static const char infer__cf_chatml[] =
    "{% for m in messages %}\n"
    "{% if loop.first and m.role != 'system' and default_system %}\n"
    "{{- '<|im_start|>system\\n' + default_system + '<|im_end|>\\n' -}}\n"
    "{% endif %}\n"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* Llama-2-chat: the system message inside the first [INST], BOS before
   every later one; other roles are not written */
static const char infer__cf_llama2[] =
    "{% set has_system = messages[0].role == 'system' if messages else false %}\n"
    "{% set state = namespace(seen_user=false) %}\n"
    "{% for m in messages %}\n"
    "{% if m.role == 'user' %}\n"
    "{% if state.seen_user %}{{ bos_token }}{% endif %}\n"
    "{% if not state.seen_user and has_system %}\n"
    /* Python's strip() of the whole: its start is <<SYS>> */
    "{{- '[INST] <<SYS>>\\n' + messages[0].content + '\\n<</SYS>>\\n\\n' + m.content.rstrip(" INFER__CF_BLANKS
    ") + ' [/INST]' -}}\n"
    "{% else %}\n"
    "{{- '[INST] ' + m.content.strip(" INFER__CF_BLANKS ") + ' [/INST]' -}}\n"
    "{% endif %}\n"
    "{% set state.seen_user = true %}\n"
    "{% elif m.role == 'assistant' %}\n"
    "{{- ' ' + m.content.strip(" INFER__CF_BLANKS ") + ' ' + eos_token -}}\n"
    "{% endif %}\n"
    "{% endfor %}";

/* The [INST] formats without a system role: the system message heads the
   first user turn. open, sep (after the system text), close and the
   assistant's lead differ from one Mistral version to the next. */
#define INFER__CF_MISTRAL(open, sep, close, lead, reply)                                               \
    "{% set has_system = messages[0].role == 'system' if messages else false %}\n"                   \
    "{% set state = namespace(seen_user=false) %}\n"                                                 \
    "{% for m in messages %}\n"                                                                      \
    "{% if m.role == 'user' %}\n"                                                                    \
    "{{- '" open "' -}}\n"                                                                           \
    "{% if not state.seen_user and has_system %}{{ messages[0].content + '" sep "' }}{% endif %}\n"  \
    "{{- m.content + '" close "' -}}\n"                                                              \
    "{% set state.seen_user = true %}\n"                                                             \
    "{% elif m.role == 'assistant' %}\n"                                                             \
    "{{- '" lead "' + " reply " + eos_token -}}\n"                                                   \
    "{% endif %}\n"                                                                                  \
    "{% endfor %}"

static const char infer__cf_mistral[] = INFER__CF_MISTRAL("[INST] ", "\\n", " [/INST]", "", "m.content");
static const char infer__cf_mistral_v1[] = INFER__CF_MISTRAL(" [INST] ", "\\n\\n", " [/INST]", " ", "m.content");
static const char infer__cf_mistral_v3[] =
    INFER__CF_MISTRAL("[INST] ", "\\n\\n", "[/INST]", " ", "m.content.strip(" INFER__CF_BLANKS ")");
static const char infer__cf_mistral_v3_tekken[] = INFER__CF_MISTRAL("[INST]", "\\n\\n", "[/INST]", "", "m.content");

/* Mistral v7: a system role of its own; space is " " (v7) or "" (tekken) */
#define INFER__CF_MISTRAL_V7(space)                                                       \
    "{% for m in messages %}\n"                                                           \
    "{% if m.role == 'system' %}\n"                                                       \
    "{{- '[SYSTEM_PROMPT]" space "' + m.content + '[/SYSTEM_PROMPT]' -}}\n"               \
    "{% elif m.role == 'user' %}\n"                                                       \
    "{{- '[INST]" space "' + m.content + '[/INST]' -}}\n"                                 \
    "{% elif m.role == 'assistant' %}\n"                                                  \
    "{{- '" space "' + m.content + eos_token -}}\n"                                       \
    "{% endif %}\n"                                                                       \
    "{% endfor %}"

static const char infer__cf_mistral_v7[] = INFER__CF_MISTRAL_V7(" ");
static const char infer__cf_mistral_v7_tekken[] = INFER__CF_MISTRAL_V7("");

/* Llama 3: every role as given, the text trimmed */
#define INFER__CF_LLAMA3_MESSAGE \
    "{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content.strip(" INFER__CF_BLANKS \
    ") + '<|eot_id|>' -}}\n"
#define INFER__CF_LLAMA3_PROMPT \
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"

static const char infer__cf_llama3[] = "{% for m in messages %}\n" INFER__CF_LLAMA3_MESSAGE "{% endfor %}\n"
                                       INFER__CF_LLAMA3_PROMPT;

/* Llama 3.1: a system turn with the dates always opens the conversation,
   the system message (trimmed) ending it */
static const char infer__cf_llama31[] =
    "{% if messages %}\n"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December 2023\\nToday Date: '"
    " + date + '\\n\\n' -}}\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content.strip(" INFER__CF_BLANKS ") }}{% endif %}\n"
    "{{- '<|eot_id|>' -}}\n"
    "{% endif %}\n"
    "{% for m in messages %}\n"
    "{% if not (loop.first and m.role == 'system') %}\n" INFER__CF_LLAMA3_MESSAGE "{% endif %}\n"
    "{% endfor %}\n" INFER__CF_LLAMA3_PROMPT;

/* Gemma: no system role; the system messages just before a user turn head
   it, each followed by a blank line (as Gemma 3 writes its one) */
static const char infer__cf_gemma[] =
    "{% set state = namespace(system='') %}\n"
    "{% for m in messages %}\n"
    "{% if m.role == 'system' %}\n"
    "{% set state.system = state.system + m.content + '\\n\\n' %}\n"
    "{% else %}\n"
    "{% if m.role == 'assistant' %}\n"
    "{{- '<start_of_turn>model\\n' -}}\n"
    "{% else %}\n"
    "{{- '<start_of_turn>' + m.role + '\\n' + state.system -}}\n"
    "{% endif %}\n"
    "{{- m.content.strip(" INFER__CF_BLANKS ") + '<end_of_turn>\\n' -}}\n"
    "{% set state.system = '' %}\n"
    "{% endif %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";

/* Gemma 4, as its template writes a chat without tools: each message its
   own turn, system ones too, the text trimmed; an earlier reply without
   its thinking (<|channel>..<channel|>); the prompt closes an empty
   thinking channel, as the template does where thinking is not asked for */
static const char infer__cf_gemma4[] =
    "{% for m in messages %}\n"
    "{{- '<|turn>' + ('model' if m.role == 'assistant' else m.role) + '\\n' -}}\n"
    "{% if m.role == 'assistant' %}\n"
    "{% set state = namespace(text='') %}\n"
    "{% for part in m.content.split('<channel|>') %}\n"
    "{% set state.text = state.text + part.split('<|channel>')[0] %}\n"
    "{% endfor %}\n"
    "{{- state.text.strip(" INFER__CF_BLANKS ") -}}\n"
    "{% else %}\n"
    "{{- m.content.strip(" INFER__CF_BLANKS ") -}}\n"
    "{% endif %}\n"
    "{{- '<turn|>\\n' -}}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<|turn>model\\n<|channel>thought\\n<channel|>' }}{% endif %}";

/* Phi-3, Phi-3.5 (which skips an empty system message) */
static const char infer__cf_phi3[] =
    "{% for m in messages %}\n"
    "{% if not (m.role == 'system' and m.content == '') %}\n"
    "{{- '<|' + m.role + '|>\\n' + m.content + '<|end|>\\n' -}}\n"
    "{% endif %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

static const char infer__cf_zephyr[] =
    "{% for m in messages %}\n"
    "{{- '<|' + m.role + '|>\\n' + m.content + eos_token + '\\n' -}}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

/* deepseek-coder-instruct: its own system text when none is given; every
   role but system and user is a response */
static const char infer__cf_deepseek[] =
    "{% for m in messages %}\n"
    "{% if loop.first and m.role != 'system' %}\n"
    "{{- 'You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, "
    "and you only answer questions related to computer science. For politically sensitive questions, security and "
    "privacy issues, and other non-computer science questions, you will refuse to answer\\n' -}}\n"
    "{% endif %}\n"
    "{% if m.role == 'system' %}\n"
    "{{- m.content -}}\n"
    "{% elif m.role == 'user' %}\n"
    "{{- '### Instruction:\\n' + m.content + '\\n' -}}\n"
    "{% else %}\n"
    "{{- '### Response:\\n' + m.content + '\\n<|EOT|>\\n' -}}\n"
    "{% endif %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '### Response:\\n' }}{% endif %}";

static const char infer__cf_deepseek2[] =
    "{% for m in messages %}\n"
    "{% if m.role == 'system' %}\n"
    "{{- m.content + '\\n\\n' -}}\n"
    "{% elif m.role == 'user' %}\n"
    "{{- 'User: ' + m.content + '\\n\\n' -}}\n"
    "{% elif m.role == 'assistant' %}\n"
    "{{- 'Assistant: ' + m.content + eos_token -}}\n"
    "{% endif %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";

/* DeepSeek-V3/R1: the markers' bars are U+FF5C (fullwidth) */
#define INFER__CF_DS3_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define INFER__CF_DS3_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
static const char infer__cf_deepseek3[] =
    "{% for m in messages %}\n"
    "{% if m.role == 'system' %}\n"
    "{{- m.content -}}\n"
    "{% elif m.role == 'user' %}\n"
    "{{- '" INFER__CF_DS3_USER "' + m.content -}}\n"
    "{% elif m.role == 'assistant' %}\n"
    "{{- '" INFER__CF_DS3_ASSISTANT "' + m.content + eos_token -}}\n"
    "{% endif %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '" INFER__CF_DS3_ASSISTANT "' }}{% endif %}";

/* Qwen3: ChatML; an assistant message loses its reasoning (the text up to
   the last </think>, then leading newlines), as the template writes one a
   user message follows */
static const char infer__cf_qwen3[] =
    "{% for m in messages %}\n"
    "{% if m.role == 'assistant' and '</think>' in m.content %}\n"
    "{{- '<|im_start|>assistant\\n' + m.content.split('</think>')[-1].lstrip('\\n') + '<|im_end|>\\n' -}}\n"
    "{% else %}\n"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}\n"
    "{% endif %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{% if no_think %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}\n"
    "{% endif %}";

static const char infer__cf_phi4[] =
    "{% for m in messages %}\n"
    "{{- '<|im_start|>' + m.role + '<|im_sep|>' + m.content + '<|im_end|>' -}}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}";

static const char infer__cf_phi4_mini[] =
    "{% for m in messages %}\n"
    "{{- '<|' + m.role + '|>' + m.content + '<|end|>' -}}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";

/* SmolLM3: ChatML under a "## Metadata" system header (left open, without
   <|im_end|>, as its template renders it without tools); the system
   message's "/no_think" or "/think" sets the reasoning mode, else no_think
   does; "/system_override" makes the system message the whole header.
   Other roles than user and assistant are not written. */
static const char infer__cf_smollm3[] =
    "{% set system = messages[0].content if messages and messages[0].role == 'system' else none %}\n"
    "{% set quiet = system is not none and '/no_think' in system"
    " or no_think and not (system is not none and '/think' in system) %}\n"
    "{% if messages %}\n"
    "{{- '<|im_start|>system\\n' -}}\n"
    "{% if system is not none and '/system_override' in system %}\n"
    "{{- system.replace('/no_think', '').replace('/think', '').replace('/system_override', '').rstrip("
    INFER__CF_BLANKS ") + '<|im_end|>\\n' -}}\n"
    "{% else %}\n"
    "{{- '## Metadata\\n\\nKnowledge Cutoff Date: June 2025\\nToday Date: ' + date + '\\nReasoning Mode: ' -}}\n"
    "{{- ('/no_think' if quiet else '/think') + '\\n\\n## Custom Instructions\\n\\n' -}}\n"
    "{% set custom = system.replace('/no_think', '').replace('/think', '').rstrip(" INFER__CF_BLANKS
    ") if system is not none else '' %}\n"
    "{% if custom %}\n"
    "{{- custom -}}\n"
    "{% elif quiet %}\n"
    "{{- 'You are a helpful AI assistant named SmolLM, trained by Hugging Face.' -}}\n"
    "{% else %}\n"
    "{{- 'You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
    "thoroughly exploring questions through a systematic thinking process before providing the final precise and "
    "accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, "
    "reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please "
    "structure your response into two main sections: Thought and Solution using the specified format: <think> "
    "Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. "
    "Each step should include detailed considerations such as analysing questions, summarizing relevant findings, "
    "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
    "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The Solution section should "
    "be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.' -}}\n"
    "{% endif %}\n"
    "{{- '\\n\\n' -}}\n"
    "{% endif %}\n"
    "{% endif %}\n"
    "{% for m in messages %}\n"
    "{% if m.role == 'user' %}\n"
    "{{- '<|im_start|>user\\n' + m.content + '<|im_end|>\\n' -}}\n"
    "{% elif m.role == 'assistant' %}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{% if quiet %}{{ '<think>\\n\\n</think>\\n' }}{% endif %}\n"
    "{{- m.content.lstrip('\\n') + '<|im_end|>\\n' -}}\n"
    "{% endif %}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{% if quiet %}{{ '<think>\\n\\n</think>\\n' }}{% endif %}\n"
    "{% endif %}";

static const char *const infer__chat_format_texts[INFER_CHAT_KIND_COUNT] = {
    infer__cf_chatml,     infer__cf_llama2,     infer__cf_mistral,       infer__cf_mistral_v1,
    infer__cf_mistral_v3, infer__cf_mistral_v3_tekken, infer__cf_mistral_v7, infer__cf_llama3,
    infer__cf_gemma,      infer__cf_phi3,       infer__cf_zephyr,        infer__cf_deepseek,
    infer__cf_deepseek2,  infer__cf_deepseek3,  infer__cf_llama31,       infer__cf_qwen3,
    infer__cf_phi4,       infer__cf_phi4_mini,  infer__cf_smollm3,       infer__cf_mistral_v7_tekken,
    infer__cf_gemma4,
};

static const char *infer__chat_format_text(infer_chat_kind k) {
    return (int)k >= 0 && k < INFER_CHAT_KIND_COUNT ? infer__chat_format_texts[k] : infer__cf_chatml;
}
