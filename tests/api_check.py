#!/usr/bin/env python3
"""api_check.py - checks that src/infer_api.h follows the API's convention.

The convention (stated at the top of src/infer_api.h): a call that can
fail returns infer_status, or a pointer that is NULL on failure, and takes
infer_error *err as its last parameter; counts come back through
out-parameters; calls that cannot fail take no err; enum constants start
with their type's name; no public name says get_.
    python3 tests/api_check.py [SOURCE_DIR]
Prints every violation, one a line, and exits 1 when there is one.
"""
import re
import sys

# Every exception this check allows, with why. A name here that the header
# no longer has is itself reported, so the list cannot go stale.
ALLOWED = {
    # The deprecated wrappers, kept for 0.25 only.
    "infer_get_logits": "deprecated in 0.25 (infer_context_logits), removed in 0.26",
    # -1 here is an answer ("none", "absent", "unknown"), not a failure.
    "infer_gguf_find_key": "-1: no such key, an answer",
    "infer_gguf_find_tensor": "-1: no such tensor, an answer",
    "infer_model_bos": "-1: the model has no BOS token, an answer",
    "infer_model_eos": "-1: the model has no EOS token, an answer",
    "infer_device_from_name": "-1: no device of that name, an answer",
    "infer_quant_target_from_name": "-1: no target of that name, an answer",
    "infer_quantize_tensor_type": "-1: that tensor is kept as it is, an answer",
    "infer_sampler_sample": "-1: no token is allowed (grammar or bias), an answer the caller stops on",
    "infer_sampler_token_prob": "-1: no distribution yet, an answer",
    "infer_request_token_prob": "-1: no probability kept for that token, an answer",
    "infer_context_step": "-1: no request running, an answer; a request's failure is its infer_request_status",
    "infer_context_truncate": "deprecated in 0.25 (infer_seq_truncate), removed in 0.26",
}
# Enum constants that need not start with their type's name.
ALLOWED_ENUM = {
    # infer_status's constants are INFER_OK and INFER_ERR_*: the error codes
    # read as such everywhere (if (st != INFER_OK)), as errno's E* do.
    "infer_status": ("INFER_OK", "INFER_ERR_"),
}
# A pointer-returning call whose name says it makes or loads something can
# fail (memory, the file, the input) and so takes infer_error *.
MAKES = re.compile(r"_(new|load\w*|open\w*|render|start)$")


def declarations(text):
    """(name, return type, parameters, doc comment) of each INFERDEF."""
    out = []
    pos = 0
    while True:
        i = text.find("INFERDEF ", pos)
        if i < 0:
            return out
        j = text.index(";", i)
        decl = " ".join(text[i:j].split())
        pos = j + 1
        if decl.startswith("INFERDEF extern") or "#define" in text[text.rfind("\n", 0, i):i]:
            continue
        m = re.match(r"INFERDEF (.+?)\b(infer_\w+)\((.*)\)$", decl)
        if not m:
            continue
        line_start = text.rfind("\n", 0, i) + 1
        prefix = text[line_start:i].strip()
        if prefix.startswith("#"):
            continue
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3)
        ret = ret.replace("INFER_DEPRECATED", "").strip()
        # its doc: the comment block just above, and a comment on its line
        above = text[:line_start].rstrip()
        doc = ""
        opens = above.rfind("/*")
        if above.endswith("*/") and not text[text.rfind("\n", 0, opens) + 1:opens].strip():
            doc = above[opens:]  # a comment block of its own lines, not another line's tail
        tail = text[j:text.find("\n", j)]
        doc += tail
        out.append((name, ret, params, doc))


def enums(text):
    """(type name, [constants]) of each typedef'd enum, and unnamed enums."""
    out = []
    for m in re.finditer(r"typedef enum (\w+) \{(.*?)\} (\w+);", text, re.S):
        body = re.sub(r"/\*.*?\*/", "", m.group(2), flags=re.S)
        out.append((m.group(3), re.findall(r"\b(INFER_\w+)\b\s*(?:=[^,]*)?(?:,|$)", body.strip() + ",")))
    unnamed = [m.start() for m in re.finditer(r"^\s*enum\s*\{", text, re.M)]
    return out, unnamed


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "."
    with open(src + "/src/infer_api.h", encoding="utf-8") as f:
        text = f.read()
    problems = []
    decls = declarations(text)
    names = {d[0] for d in decls}
    for name, ret, params, doc in decls:
        last = params.split(",")[-1].strip()
        takes_err = "infer_error *" in params
        if name in ALLOWED:
            continue
        if ret == "infer_status" and not last.startswith("infer_error *"):
            problems.append("%s returns infer_status but its last parameter is not infer_error *" % name)
        if ret.endswith("*") and ret.startswith(("infer_", "char")) and MAKES.search(name) and not takes_err:
            problems.append("%s returns a %s that can fail but takes no infer_error *" % (name, ret))
        if ret in ("int", "infer_token", "float", "int64_t") and re.search(r"(?<![\w.])-1\b", doc) \
                and not takes_err:
            problems.append("%s returns %s, -1 by its comment, and takes no infer_error *" % (name, ret))
        if ret in ("int", "size_t") and takes_err:
            problems.append("%s takes infer_error * but returns %s: return infer_status and a count "
                            "through an out-parameter" % (name, ret))
        if "_get_" in name or name.startswith("infer_get_"):
            problems.append("%s: no public name says get_" % name)
    for name in ALLOWED:
        if name not in names:
            problems.append("api_check.py's ALLOWED names %s, which the header no longer declares" % name)
    typed, unnamed = enums(text)
    for type_name, consts in typed:
        want = (type_name.upper() + "_",) + ALLOWED_ENUM.get(type_name, ())
        for c in consts:
            if not c.startswith(want):
                problems.append("%s: constant %s does not start with %s" % (type_name, c, type_name.upper() + "_"))
    for at in unnamed:
        problems.append("an unnamed enum at line %d: name it (typedef enum infer_x {...} infer_x)"
                        % (text.count("\n", 0, at) + 1))
    for p in problems:
        print("api_check: " + p)
    if problems:
        print("api_check: FAILED: %d violation(s) of the convention at the top of src/infer_api.h" % len(problems))
        return 1
    print("api_check: ok: %d declarations, %d enums follow the convention (%d named exceptions)"
          % (len(decls), len(typed), len(ALLOWED)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
