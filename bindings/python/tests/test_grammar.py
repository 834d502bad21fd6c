"""Grammar-constrained replies from SmolLM2: a JSON schema (through the
sampler's grammar and through the request API's json_schema) and GBNF."""

import json

import pytest

from conftest import infer

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}},
    "required": ["name", "age"],
}
ASK = [{"role": "user", "content": "Describe a person named Alice, aged 30, as JSON."}]
COLOURS = 'root ::= "red" | "green" | "blue"'


def _check_person(text):
    obj = json.loads(text)
    assert isinstance(obj, dict)
    assert {"name", "age"} <= set(obj)
    assert isinstance(obj["name"], str) and isinstance(obj["age"], int)
    assert set(obj) <= {"name", "age", "city"}


def test_json_schema_reply(smol):
    _, c = smol
    text = c.chat(ASK, 128, temperature=0, json_schema=SCHEMA)
    _check_person(text)
    with c.chat(ASK, 128, temperature=0, json_schema=SCHEMA, stream=True) as s:  # request API's json_schema
        streamed = "".join(s)
    _check_person(streamed)
    assert streamed == text
    _check_person(c.chat(ASK, 128, temperature=0.9, seed=3, json_schema=json.dumps(SCHEMA)))


def test_gbnf_reply(smol):
    _, c = smol
    ask = [{"role": "user", "content": "Name a colour of the sky."}]
    assert c.chat(ask, 8, temperature=0, grammar=COLOURS) in ("red", "green", "blue")
    with c.chat(ask, 8, temperature=0, grammar=COLOURS, stream=True) as s:
        assert "".join(s) in ("red", "green", "blue")
    for seed in range(3):
        assert c.chat(ask, 8, temperature=1.5, seed=seed, grammar=COLOURS) in ("red", "green", "blue")


def test_schema_to_grammar():
    g = infer.json_schema_to_grammar(SCHEMA)
    assert "root ::=" in g
    assert infer.json_schema_to_grammar(json.dumps(SCHEMA)) == g
    with pytest.raises(infer.InferError) as e:
        infer.json_schema_to_grammar({"$ref": "#/definitions/x"})
    assert e.value.code == infer.Status.ARG and str(e.value)


def test_bad_grammar(smol):
    _, c = smol
    with pytest.raises(infer.InferError) as e:
        c.generate("x", 4, grammar='root ::= "a" | undefined_rule')
    assert e.value.code == infer.Status.ARG
    assert "undefined_rule" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(infer.InferError):  # the request API reports it when the request begins
        with c.stream("x", 4, grammar="root ::= (") as s:
            list(s)
    with pytest.raises(ValueError):
        c.generate("x", 4, grammar=COLOURS, json_schema=SCHEMA)
    assert c.generate("Once", 4, temperature=0)  # still usable
