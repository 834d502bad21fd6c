#!/usr/bin/env python3
"""Checks replies generated under a JSON schema: each must parse with
Python's json module and validate against the schema (the subset that
infer_json_schema_to_grammar supports, validated by hand here: type, enum,
const, anyOf/oneOf, properties/required with no other keys, items,
minItems/maxItems, minLength/maxLength, pattern, minimum/maximum and their
exclusive forms).

    python3 grammar_json_check.py SCHEMA_FILE REPLIES_FILE

REPLIES_FILE holds the replies (UTF-8) separated by the byte 0x1E, which
JSON text cannot hold raw. Prints "checked N replies, all valid" and exits
0, or prints each failure and exits 1.
"""
import json
import re
import sys


def same(a, b):
    """JSON equality: true is not 1, 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def has_type(v, t):
    if t == "string":
        return isinstance(v, str)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    raise ValueError("unknown type %r in the schema" % t)


def validate(v, s, path="$"):
    """The problems of value v under schema s, as a list of strings."""
    if s is True:
        return []
    if s is False:
        return ["%s: the schema false allows nothing" % path]
    if "const" in s:
        return [] if same(v, s["const"]) else ["%s: %r is not the const %r" % (path, v, s["const"])]
    if "enum" in s:
        return [] if any(same(v, e) for e in s["enum"]) else ["%s: %r is not in the enum" % (path, v)]
    for key in ("anyOf", "oneOf"):
        if key in s:
            ok = [sub for sub in s[key] if not validate(v, sub, path)]
            if not ok or (key == "oneOf" and len(ok) > 1):
                return ["%s: %r matches %d of the %s schemas" % (path, v, len(ok), key)]
            return []
    types = s.get("type")
    if types is None:
        types = ["object"] if "properties" in s else ["array"] if "items" in s else None
    elif isinstance(types, str):
        types = [types]
    if types is not None:
        matching = [t for t in types if has_type(v, t)]
        if not matching:
            return ["%s: %r is not of type %s" % (path, v, "/".join(types))]
    errors = []
    if isinstance(v, dict) and "properties" in s:
        props = s["properties"]
        for k in s.get("required", []):
            if k not in v:
                errors.append("%s: required property %r missing" % (path, k))
        for k, x in v.items():
            if k not in props:
                errors.append("%s: property %r is not in the schema" % (path, k))
            else:
                errors += validate(x, props[k], "%s.%s" % (path, k))
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            errors.append("%s: %d items, fewer than minItems" % (path, len(v)))
        if "maxItems" in s and len(v) > s["maxItems"]:
            errors.append("%s: %d items, more than maxItems" % (path, len(v)))
        if "items" in s:
            for i, x in enumerate(v):
                errors += validate(x, s["items"], "%s[%d]" % (path, i))
    if isinstance(v, str):
        if "minLength" in s and len(v) < s["minLength"]:
            errors.append("%s: %r is shorter than minLength" % (path, v))
        if "maxLength" in s and len(v) > s["maxLength"]:
            errors.append("%s: %r is longer than maxLength" % (path, v))
        # the pattern subset regex.c supports reads the same in Python's re
        if "pattern" in s and not re.search(s["pattern"], v):
            errors.append("%s: %r does not match the pattern %r" % (path, v, s["pattern"]))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        for key, fails in (("minimum", lambda b: v < b), ("maximum", lambda b: v > b),
                           ("exclusiveMinimum", lambda b: v <= b), ("exclusiveMaximum", lambda b: v >= b)):
            bound = s.get(key)
            if isinstance(bound, bool):  # draft 4: makes minimum/maximum exclusive
                continue
            if key in ("minimum", "maximum") and s.get("exclusive" + key[0].upper() + key[1:]) is True:
                fails = (lambda b: v <= b) if key == "minimum" else (lambda b: v >= b)
            if bound is not None and fails(bound):
                errors.append("%s: %r breaks %s %r" % (path, v, key, bound))
    return errors


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key in an object")
    return dict(pairs)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    with open(sys.argv[2], "rb") as f:
        data = f.read()
    replies = data.split(b"\x1e") if data else []
    bad = 0
    for i, raw in enumerate(replies):
        try:
            text = raw.decode("utf-8")
            value = json.loads(text, object_pairs_hook=no_duplicates)
        except (UnicodeDecodeError, ValueError) as e:
            print("reply %d does not parse (%s): %r" % (i, e, raw))
            bad += 1
            continue
        errors = validate(value, schema)
        if errors:
            print("reply %d is invalid: %s: %r" % (i, "; ".join(errors), text))
            bad += 1
    if bad:
        print("checked %d replies, %d invalid" % (len(replies), bad))
        sys.exit(1)
    print("checked %d replies, all valid" % len(replies))


if __name__ == "__main__":
    main()
