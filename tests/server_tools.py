#!/usr/bin/env python3
"""infer serve for agents, through OpenAI's own Python package: tool calls
(tool_choice required, named and auto, streamed and not: the streamed
deltas, put together as a client does, equal the plain reply, and the
arguments validate against the tool's schema), a tool result's round trip,
parallel_tool_calls, reasoning_content (Qwen3's template) and a reasoning
budget (DeepSeek R1's), logprobs, n > 1, Anthropic's Messages API through
the anthropic package, and the 400s for bad tools.

SmolLM2-135M-Instruct is not trained for tools: forced calls (required,
named) must still be valid, through the grammar. Its own template knows no
tools (they are described in the system message and called in the generic
JSON format); Qwen3's template from ../shared/templates (run with
--chat-template-file) writes Hermes' <tool_call>, and <think>; so do the
hybrid families' own, each with its call format: Qwen3.5-4B's XML-style
<tool_call><function=..>, LFM2.5's <|tool_call_start|>[name(k=v)] and
Granite 4.0's Hermes calls.

usage: server_tools.py INFER MODEL SHARED_DIR"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_check  # noqa: E402  (its Server, check and skip)
from server_check import Server, check  # noqa: E402

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather now in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                   "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Adds two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"], "additionalProperties": False}}}
TOOLS = [WEATHER, ADD]
ASK = [{"role": "user", "content": "What is the weather like in Paris today?"}]
# Replies compared with each other decode their prompts afresh: a reused
# prompt's last token is decoded alone, and its logits may differ in the
# last bits from a batch's (and a greedy reply with them).
FRESH = {"cache_prompt": False}


def schema_of(name):
    return next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)


def valid_call(call, jsonschema):
    """name among the tools, arguments JSON that its schema accepts"""
    try:
        args = json.loads(call["arguments"])
        jsonschema.validate(args, schema_of(call["name"]))
        return True
    except (ValueError, StopIteration, jsonschema.ValidationError):
        return False


def plain_calls(message):
    return [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in (message.tool_calls or [])]


def streamed(client, **kw):
    """(content, reasoning, calls, finish_reason) of a streamed chat, its
    deltas put together as OpenAI's clients do: by tool call index."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        ch = chunk.choices[0]
        d = ch.delta
        content += d.content or ""
        reasoning += getattr(d, "reasoning_content", None) or (d.model_extra or {}).get("reasoning_content") or ""
        for tc in d.tool_calls or []:
            c = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            if tc.id:
                c["id"] = tc.id
            if tc.function and tc.function.name:
                c["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                c["arguments"] += tc.function.arguments
        finish = ch.finish_reason or finish
    return content, reasoning, [calls[i] for i in sorted(calls)], finish


def check_tools(client, label, jsonschema, extra=None, forced_only=False):
    """required, named, auto; streamed and not; parallel_tool_calls
    (extra: more of the request, as chat_template_kwargs; forced_only: the
    forced calls alone, required and named, which test a template's call
    format: the rest is the server's, the same whatever the template)"""
    kw = dict(model="m", messages=ASK, tools=TOOLS, temperature=0, max_tokens=120,
              extra_body=dict(FRESH, **(extra or {})))
    r = client.chat.completions.create(tool_choice="required", **kw)
    m, calls = r.choices[0].message, plain_calls(r.choices[0].message)
    check(len(calls) >= 1 and all(valid_call(c, jsonschema) for c in calls),
          "%s: tool_choice required gives valid calls (%s)" % (label, calls))
    check(r.choices[0].finish_reason == "tool_calls" and m.content is None,
          "%s: a reply of calls has finish_reason tool_calls and no content" % label)
    check(all(c["id"] for c in calls), "%s: each call has an id" % label)
    content, _, s_calls, finish = streamed(client, tool_choice="required", **kw)
    check(s_calls == calls and finish == "tool_calls" and content == "",
          "%s: the streamed call's deltas put together equal the plain reply (%s)" % (label, s_calls))

    named = {"type": "function", "function": {"name": "add"}}
    r = client.chat.completions.create(tool_choice=named, **kw)
    calls = plain_calls(r.choices[0].message)
    check(len(calls) >= 1 and all(c["name"] == "add" and valid_call(c, jsonschema) for c in calls),
          "%s: a named tool_choice calls that tool, with valid arguments (%s)" % (label, calls))
    _, _, s_calls, _ = streamed(client, tool_choice=named, **kw)
    check(s_calls == calls, "%s: streamed, the named call is the same (%s)" % (label, s_calls))
    if forced_only:
        return

    r = client.chat.completions.create(tool_choice="required", parallel_tool_calls=False, **kw)
    check(len(plain_calls(r.choices[0].message)) == 1, "%s: parallel_tool_calls false gives one call" % label)

    # auto: the model may answer or call; either is well-formed
    for stream in (False, True):
        if stream:
            content, _, calls, finish = streamed(client, tool_choice="auto", **kw)
        else:
            r = client.chat.completions.create(tool_choice="auto", **kw)
            content, calls, finish = r.choices[0].message.content, plain_calls(r.choices[0].message), \
                r.choices[0].finish_reason
        ok = (finish == "tool_calls" and calls and all(valid_call(c, jsonschema) for c in calls)) or \
             (finish in ("stop", "length") and not calls and content)
        check(ok, "%s: tool_choice auto%s gives an answer or valid calls (%s, %r, %s)" %
              (label, " streamed" if stream else "", finish, (content or "")[:40], calls))

    # none: tools given, no call
    r = client.chat.completions.create(tool_choice="none", **kw)
    check(not r.choices[0].message.tool_calls and r.choices[0].message.content,
          "%s: tool_choice none answers in text" % label)


def check_round_trip(client, label, extra=None):
    """a call, its result as a tool message, and the model's next reply"""
    kw = dict(model="m", tools=TOOLS, temperature=0, extra_body=extra)
    r = client.chat.completions.create(messages=ASK, tool_choice="required", parallel_tool_calls=False,
                                       max_tokens=120, **kw)
    check(bool(r.choices[0].message.tool_calls), "%s: a forced call to answer (%r)" % (label, r.choices[0].message))
    if not r.choices[0].message.tool_calls:
        return
    call = r.choices[0].message.tool_calls[0]
    history = ASK + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": call.function.name,
                                                         "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "name": call.function.name,
         "content": json.dumps({"temperature": 21, "sky": "sunny"})}]
    r2 = client.chat.completions.create(messages=history, tool_choice="auto", max_tokens=40, **kw)
    m2 = r2.choices[0].message
    check((m2.content and r2.choices[0].finish_reason in ("stop", "length")) or
          (m2.tool_calls and r2.choices[0].finish_reason == "tool_calls"),
          "%s: after a tool result the model replies (%r)" % (label, (m2.content or "")[:50]))
    check(r2.usage.prompt_tokens > r.usage.prompt_tokens + 10,
          "%s: the call and its result are in the next prompt (%d tokens, %d before)" %
          (label, r2.usage.prompt_tokens, r.usage.prompt_tokens))
    # the conversation so far is in a sequence's cache: the second turn reuses it
    check(r2.usage.prompt_tokens_details.cached_tokens >= r.usage.prompt_tokens - 2,
          "%s: the second turn reuses the first's cached prompt (%d of %d tokens)" %
          (label, r2.usage.prompt_tokens_details.cached_tokens, r.usage.prompt_tokens))


def check_reasoning(client):
    """Qwen3's template: <think>...</think> as reasoning_content, streamed as
    deltas of its own. SmolLM2 does not think by itself: llama.cpp's grammar
    field makes it write a thought."""
    grammar = 'root ::= "<think>\\nThe user asks" [a-z ]{3,30} ".\\n</think>\\n\\n" "Paris" [a-z .]{0,20}'
    kw = dict(model="m", messages=[{"role": "user", "content": "Capital of France?"}], temperature=0,
              max_tokens=60, extra_body={"grammar": grammar})
    r = client.chat.completions.create(**kw)
    m = r.choices[0].message
    reasoning = (m.model_extra or {}).get("reasoning_content")
    check(reasoning is not None and reasoning.startswith("The user asks") and "<think>" not in (m.content or "")
          and (m.content or "").startswith("Paris"),
          "Qwen3 template: the thought is reasoning_content, the answer content (%r, %r)" % (reasoning, m.content))
    content, s_reasoning, _, _ = streamed(client, **kw)
    check(s_reasoning == reasoning and content == m.content,
          "Qwen3 template: streamed reasoning_content and content deltas add up to the same (%r, %r)" %
          (s_reasoning, content))
    # enable_thinking false: the template closes the thought itself; all is content
    r = client.chat.completions.create(model="m", messages=kw["messages"], temperature=0, max_tokens=8,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    check(not (r.choices[0].message.model_extra or {}).get("reasoning_content") and r.choices[0].message.content,
          "Qwen3 template: with enable_thinking false the reply is content")


def check_logprobs(client):
    r = client.chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=8, logprobs=True,
                                       top_logprobs=3, extra_body=FRESH)
    lp = r.choices[0].logprobs.content
    check(len(lp) == r.usage.completion_tokens or (len(lp) == r.usage.completion_tokens - 1),
          "logprobs: one entry a token (%d for %d)" % (len(lp), r.usage.completion_tokens))
    check("".join(e.token for e in lp) == r.choices[0].message.content,
          "logprobs: the tokens' texts make the reply")
    check(all(e.logprob <= 0 and len(e.top_logprobs) == 3 and e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob
              for e in lp), "logprobs: log-probabilities, with 3 top alternatives each, best first")
    # greedy: the chosen token is the most probable one
    check(all(e.token == e.top_logprobs[0].token and abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6 for e in lp),
          "logprobs: greedy replies take the top token")
    chunks = list(client.chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=8, logprobs=True,
                                                 top_logprobs=3, stream=True, extra_body=FRESH))
    s_lp = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    check([e.token for e in s_lp] == [e.token for e in lp], "logprobs: streamed, the same tokens")
    c = client.completions.create(model="m", prompt="Once upon a time", temperature=0, max_tokens=6, logprobs=2)
    tl = c.choices[0].logprobs
    check("".join(tl.tokens) == c.choices[0].text and len(tl.top_logprobs) == len(tl.tokens) and
          tl.text_offset[0] == 0 and all(len(d) <= 2 for d in tl.top_logprobs),
          "logprobs: a text completion's tokens, top_logprobs and text_offset")


def check_n(client, jsonschema):
    """n replies to one prompt: fed once, copied into n sequences"""
    one = client.chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=12, extra_body=FRESH)
    r = client.chat.completions.create(model="m", messages=ASK, temperature=0, max_tokens=12, n=3, extra_body=FRESH)
    check([c.index for c in r.choices] == [0, 1, 2] and
          all(c.message.content == one.choices[0].message.content for c in r.choices),
          "n = 3, greedy: three replies, each the n = 1 reply (%r)" % [c.message.content[:20] for c in r.choices])
    check(r.usage.prompt_tokens == one.usage.prompt_tokens and
          r.usage.completion_tokens == 3 * one.usage.completion_tokens,
          "n = 3: the prompt counted once, the replies' tokens together (%d, %d)" %
          (r.usage.prompt_tokens, r.usage.completion_tokens))
    kw = dict(model="m", messages=ASK, temperature=1.0, seed=11, max_tokens=16, n=3, extra_body=FRESH)
    r = client.chat.completions.create(**kw)
    texts = [c.message.content for c in r.choices]
    check(len(set(texts)) >= 2, "n = 3, sampled: the replies differ (%r)" % [t[:20] for t in texts])
    streamed_texts = ["", "", ""]
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            streamed_texts[c.index] += c.delta.content or ""
    check(streamed_texts == texts, "n = 3 streamed: each choice's deltas add up to its plain reply")
    r = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", temperature=0.8,
                                       seed=2, max_tokens=120, n=2)
    check(len(r.choices) == 2 and all(c.finish_reason == "tool_calls" and c.message.tool_calls and
                                      all(valid_call(x, jsonschema) for x in plain_calls(c.message))
                                      for c in r.choices), "n = 2 with tool_choice required: valid calls in each")


def check_anthropic(url, anthropic, jsonschema, openai_client):
    """Anthropic's Messages API through the anthropic package"""
    client = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0, timeout=300)
    system = "You are a helpful assistant."
    # (temperature goes in extra_body: this package's create() no longer names it)
    kw = dict(model="m", max_tokens=16, system=system, messages=ASK,
              extra_body=dict(FRESH, temperature=0))
    m = client.messages.create(**kw)
    text = "".join(b.text for b in m.content if b.type == "text")
    o = openai_client.chat.completions.create(model="m", max_tokens=16, temperature=0, extra_body=FRESH,
                                              messages=[{"role": "system", "content": system}] + ASK)
    check(m.type == "message" and m.role == "assistant" and text == o.choices[0].message.content.strip() and
          m.stop_reason in ("end_turn", "max_tokens") and m.usage.output_tokens == o.usage.completion_tokens,
          "anthropic: messages.create answers as the same OpenAI chat does (%r)" % text[:40])
    with client.messages.stream(**kw) as stream:
        s_text = "".join(stream.text_stream)
        final = stream.get_final_message()
    check(s_text == text and final.stop_reason == m.stop_reason, "anthropic: the stream's text equals the plain reply")
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in TOOLS]
    tkw = dict(model="m", max_tokens=120, messages=ASK, tools=tools, tool_choice={"type": "any"},
               extra_body=dict(FRESH, temperature=0))
    m = client.messages.create(**tkw)
    uses = [b for b in m.content if b.type == "tool_use"]
    ok = bool(uses) and m.stop_reason == "tool_use"
    for u in uses:
        try:
            jsonschema.validate(u.input, schema_of(u.name))
        except (jsonschema.ValidationError, StopIteration):
            ok = False
    check(ok, "anthropic: tool_choice any gives tool_use blocks whose input validates (%s)" %
          [(u.name, u.input) for u in uses])
    with client.messages.stream(**tkw) as stream:
        final = stream.get_final_message()
    s_uses = [(b.name, b.input) for b in final.content if b.type == "tool_use"]
    check(s_uses == [(u.name, u.input) for u in uses], "anthropic: streamed tool_use blocks equal the plain reply")
    m2 = client.messages.create(model="m", max_tokens=20, extra_body={"temperature": 0}, tools=tools, messages=ASK + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": uses[0].id, "name": uses[0].name,
                                           "input": uses[0].input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                      "content": "21 degrees and sunny"}]}])
    check(m2.content and m2.stop_reason in ("end_turn", "max_tokens", "tool_use"),
          "anthropic: a tool_result round trip is answered (%s)" % m2.stop_reason)
    try:
        client.messages.create(model="m", max_tokens=4, messages=[{"role": "robot", "content": "hi"}])
        check(False, "anthropic: a bad role is a 400")
    except anthropic.BadRequestError as ex:
        check(ex.body.get("type") == "error" and ex.body["error"]["type"] == "invalid_request_error",
              "anthropic: a bad role is a 400 in Anthropic's error shape")


def check_calls_after_thought(client, label, jsonschema):
    """a template that opens <think> in the prompt (Qwen3.5's): a forced call
    comes after the thought closes; with a thinking budget SmolLM2, which
    never closes one by itself, is made to close it and then calls"""
    kw = dict(model="m", messages=ASK, tools=TOOLS, temperature=0, max_tokens=120, tool_choice="required",
              extra_body=dict(FRESH, reasoning_budget=6))
    r = client.chat.completions.create(**kw)
    m, calls = r.choices[0].message, plain_calls(r.choices[0].message)
    reasoning = (m.model_extra or {}).get("reasoning_content") or ""
    check(calls and all(valid_call(c, jsonschema) for c in calls) and reasoning and "</think>" not in reasoning
          and r.choices[0].finish_reason == "tool_calls",
          "%s: after a budget of 6 tokens of thought, required gives valid calls (%r, %s)" % (label, reasoning, calls))
    content, s_reasoning, s_calls, finish = streamed(client, **kw)
    check(s_reasoning == reasoning and s_calls == calls and finish == "tool_calls",
          "%s: streamed, the thought and the calls add up to the same (%r, %s)" % (label, s_reasoning, s_calls))


def check_reasoning_budget(client, anthropic_client):
    """DeepSeek R1's template opens <think> in the prompt: the reply reasons
    until </think>; with a budget of 4 tokens the end is forced after them"""
    kw = dict(model="m", messages=[{"role": "user", "content": "Why is the sky blue?"}], temperature=0, max_tokens=40)
    free = client.chat.completions.create(**kw)
    cut = client.chat.completions.create(extra_body={"reasoning_budget": 4}, **kw)
    r_free = (free.choices[0].message.model_extra or {}).get("reasoning_content") or ""
    r_cut = (cut.choices[0].message.model_extra or {}).get("reasoning_content") or ""
    check(len(r_free) > len(r_cut) > 0 and r_free.startswith(r_cut),
          "reasoning_budget 4: the reasoning is cut after 4 tokens (%r of %r)" % (r_cut, r_free[:60]))
    m = anthropic_client.messages.create(model="m", max_tokens=40, extra_body={"temperature": 0}, messages=kw["messages"],
                                         thinking={"type": "enabled", "budget_tokens": 1024})
    check(m.content and m.content[0].type == "thinking" and m.content[0].thinking,
          "anthropic: the reasoning is a thinking block (%r)" % (m.content[0].type if m.content else None))


def check_bad(client, openai):
    cases = [
        (dict(tools=[{"type": "function"}]), "tools", "a tool without a function"),
        (dict(tools="get_weather"), "tools", "tools that are not an array"),
        (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "rm"}}), "tool_choice",
         "a tool_choice naming no tool"),
        (dict(tool_choice="required"), "tool_choice", "tool_choice required without tools"),
        (dict(tools=TOOLS, response_format={"type": "json_object"}), "response_format", "tools with response_format"),
        (dict(tools=TOOLS, parallel_tool_calls="yes"), "parallel_tool_calls", "parallel_tool_calls not a boolean"),
        (dict(logprobs=True, top_logprobs=50), "top_logprobs", "top_logprobs over 20"),
    ]
    for extra, param, what in cases:
        try:
            client.chat.completions.create(model="m", messages=ASK, max_tokens=2, **extra)
            check(False, "400 for %s" % what)
        except openai.BadRequestError as ex:
            body = ex.body if isinstance(ex.body, dict) else {}
            check(body.get("param") == param, "400 for %s, naming %s (%s)" % (what, param, body.get("param")))


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    infer, model, shared = sys.argv[1:]
    if not os.path.exists(model):
        server_check.skip("%s is absent (python3 scripts/fetch_model.py fetches it)" % model)
    try:
        import anthropic
        import jsonschema
        import openai
    except ImportError as ex:
        server_check.skip("a package is missing (%s): pip install openai anthropic jsonschema" % ex)
    srv = Server(infer, model, "--parallel", "3", "-c", "2048")
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
        check_tools(client, "SmolLM2's own template (generic calls)", jsonschema)
        check_round_trip(client, "SmolLM2's own template")
        check_logprobs(client)
        check_n(client, jsonschema)
        check_anthropic(srv.url, anthropic, jsonschema, client)
        check_bad(client, openai)
    finally:
        srv.stop()
    qwen3 = os.path.join(shared, "templates", "Qwen-Qwen3-0.6B.jinja")
    if not os.path.exists(qwen3):
        print("SKIPPED (in part): %s is absent: Qwen3's template (Hermes calls, reasoning) not run" % qwen3)
    else:
        srv = Server(infer, model, "--parallel", "2", "-c", "2048", "--chat-template-file", qwen3)
        try:
            check("tools hermes" in srv.text(), "Qwen3's template writes Hermes calls (the server says so)")
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
            check_tools(client, "Qwen3's template (Hermes calls)", jsonschema)
            check_round_trip(client, "Qwen3's template")
            check_reasoning(client)
        finally:
            srv.stop()
        # the hybrid families' own templates and their call formats:
        # Qwen3.5's XML-style calls, LFM2's pythonic list, Granite 4's Hermes
        for name, fmt in (("Qwen3.5-4B", "qwen3-xml"), ("LFM2.5-Instruct", "lfm2"),
                          ("ibm-granite-granite-4.0", "hermes")):
            path = os.path.join(shared, "templates", name + ".jinja")
            if not os.path.exists(path):
                print("SKIPPED (in part): %s is absent: its %s calls not run" % (path, fmt))
                continue
            srv = Server(infer, model, "--parallel", "2", "-c", "2048", "--chat-template-file", path)
            try:
                check("tools %s" % fmt in srv.text(), "%s's template writes %s calls (the server says so)" % (name, fmt))
                client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
                # the thought closed by the template (a tiny model's would never end)
                no_think = {"chat_template_kwargs": {"enable_thinking": False}}
                # the forced calls only: auto, none and parallel_tool_calls
                # are the server's, checked above (a fifth of the test's time)
                check_tools(client, "%s's template (%s calls)" % (name, fmt), jsonschema, no_think, forced_only=True)
                check_round_trip(client, "%s's template" % name, no_think)
                if "reasoning <think>" in srv.text():
                    check_calls_after_thought(client, "%s's template" % name, jsonschema)
            finally:
                srv.stop()
        r1 = os.path.join(shared, "templates", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja")
        srv = Server(infer, model, "--parallel", "2", "-c", "2048", "--chat-template-file", r1)
        try:
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=300)
            check_reasoning_budget(client, anthropic.Anthropic(base_url=srv.url, api_key="none", max_retries=0))
        finally:
            srv.stop()
    if server_check.failures:
        print("%d checks failed: %s" % (len(server_check.failures), "; ".join(server_check.failures)))
        sys.exit(1)
    print("all tool, reasoning and logprobs checks passed")


if __name__ == "__main__":
    main()
