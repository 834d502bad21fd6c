#!/usr/bin/env python3
"""Checks a file written by `infer quantize` with the PyPI gguf package.

    check_quantized.py SOURCE.gguf OURS.gguf OURS_DEQUANTIZED.gguf [REFERENCE.gguf] [--margin M]

SOURCE is the float file OURS was quantized from; OURS_DEQUANTIZED is OURS
turned back into F32 by infer itself (`infer quantize OURS X F32
--allow-requantize`), i.e. what infer's own dequantizer gives.

For every tensor of OURS:
  1. decoding: gguf.quants.dequantize of our blocks equals infer's own
     dequantized values (to float32 rounding);
  2. error: the RMSE of our quantization against the source values is at
     most (1 + M) times the reference's: REFERENCE's tensor (llama.cpp's
     file of the same source) where it has the same format, else
     gguf.quants.quantize's own reference quantizer where the package has
     one for the format. Bit-identical blocks are counted and reported.
     A tensor of 3 dimensions (a stack of experts, [n_embd, n_ff, n_expert])
     is quantized one 2-D slice at a time, as llama.cpp's quantizer does:
     the error bound holds for every slice on its own, so one bad expert
     cannot hide in the average.
And for the file as a whole: OURS has SOURCE's tensors, names and shapes,
every tensor OURS keeps in SOURCE's float format (norms, biases, expert
routers...) holds SOURCE's bytes, and every metadata pair of SOURCE is in
OURS with the same type and value (arrays whole), but general.file_type and
general.quantization_version.
Exits 1 on any failure, 2 when numpy or gguf cannot be imported (they are
needed: scripts/deps.sh installs them).
"""
import sys

try:
    import numpy as np
    import gguf
    from gguf import quants
except ImportError as e:  # a missing dependency fails the test, it does not skip it
    print("check_quantized: numpy and gguf are needed (python3 -m pip install numpy gguf): %s" % e)
    sys.exit(2)

FLOAT_TYPES = {gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16}


def tensors(reader):
    return {t.name: t for t in reader.tensors}


def metadata(reader):
    """key -> (value types, the value's bytes) of every metadata pair."""
    out = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):  # the header's own counts
            continue
        out[key] = (tuple(int(x) for x in f.types), [bytes(f.parts[i]) for i in f.data])
    return out


def values(t):
    """The tensor as float32, shaped (rows, row length)."""
    data = np.asarray(t.data)
    if t.tensor_type == gguf.GGMLQuantizationType.F32:
        out = data.astype(np.float32)
    elif t.tensor_type == gguf.GGMLQuantizationType.F16:
        out = data.view(np.float16).astype(np.float32)
    else:
        out = quants.dequantize(data, t.tensor_type).astype(np.float32)
    n0 = int(t.shape[0])
    return out.reshape(-1, n0)


def can_quantize(qtype):
    try:
        quants.quantize(np.zeros((1, 256), dtype=np.float32), qtype)
        return True
    except (NotImplementedError, quants.QuantError, KeyError, AttributeError, TypeError, ValueError):
        return False


def slices(t):
    """(index, row slice) of each 2-D matrix of the tensor: one for a
    matrix, ne[2] * ne[3] for a stack of experts."""
    n_rows = int(t.shape[1]) if len(t.shape) > 1 else 1
    n_mats = 1
    for d in t.shape[2:]:
        n_mats *= int(d)
    return [(k, slice(k * n_rows, (k + 1) * n_rows)) for k in range(n_mats)]


def raw(t):
    return np.asarray(t.data).view(np.uint8).reshape(-1)


def rmse(a, b):
    return float(np.sqrt(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)))


def main(argv):
    margin = 0.02
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "--margin":
            margin = float(argv[i + 1])
            i += 2
            continue
        args.append(argv[i])
        i += 1
    if len(args) not in (3, 4):
        print(__doc__)
        return 1
    readers = [gguf.GGUFReader(path) for path in args]  # each file parsed once (a vocabulary is slow to read)
    src, ours, deq = tensors(readers[0]), tensors(readers[1]), tensors(readers[2])
    ref = tensors(readers[3]) if len(args) == 4 else {}
    failures = 0
    checked = 0
    meta_src, meta_ours = metadata(readers[0]), metadata(readers[1])
    for key, v in meta_src.items():
        if key in ("general.file_type", "general.quantization_version"):
            continue
        if meta_ours.get(key) != v:
            print("FAIL metadata %s: %s" % (key, "missing" if key not in meta_ours else "another type or value"))
            failures += 1
    if list(ours) != list(src):
        print("FAIL the tensors differ from the source's: %s"
              % (sorted(set(ours) ^ set(src)) or "the same names in another order"))
        failures += 1
    for name, t in ours.items():
        if name not in src:
            continue
        if [int(d) for d in t.shape] != [int(d) for d in src[name].shape]:
            print("FAIL %s: shape %s, the source's %s" % (name, list(t.shape), list(src[name].shape)))
            failures += 1
        if t.tensor_type in FLOAT_TYPES:
            if t.tensor_type == src[name].tensor_type and not np.array_equal(raw(t), raw(src[name])):
                print("FAIL %s %s: kept in the source's format but not its bytes" % (name, t.tensor_type.name))
                failures += 1
            continue
        checked += 1
        qtype = t.tensor_type
        x = values(src[name])
        ours_v = values(t)
        infer_v = values(deq[name])
        # 1. gguf's decoding of our blocks is what infer decodes
        scale = float(np.max(np.abs(infer_v))) or 1.0
        dec_diff = float(np.max(np.abs(ours_v - infer_v)))
        if dec_diff > 1e-6 * scale:
            print("FAIL %s %s: gguf decodes our blocks differently from infer (max diff %.3g, scale %.3g)"
                  % (name, qtype.name, dec_diff, scale))
            failures += 1
        # 2. the quantization error against the reference's
        e_ours = rmse(ours_v, x)
        how, ref_v, exact = None, None, None
        if name in ref and ref[name].tensor_type == qtype and values(ref[name]).shape == x.shape:
            how = "llama.cpp"
            ref_v = values(ref[name])
            exact = np.array_equal(raw(ref[name]), raw(t))
        elif can_quantize(qtype):
            how = "gguf.quants"
            q = quants.quantize(x, qtype)
            ref_v = quants.dequantize(q, qtype).reshape(x.shape)
            exact = np.array_equal(q.view(np.uint8).reshape(-1), raw(t))
        if how is None:
            print("note %-28s %-5s rmse %.6g (no reference quantizer for this format)" % (name, qtype.name, e_ours))
            continue
        e_ref = rmse(ref_v, x)
        ok = e_ours <= e_ref * (1 + margin) + 1e-12
        print("%s %-28s %-5s rmse %.6g vs %s %.6g (ratio %.4f)%s"
              % ("ok  " if ok else "FAIL", name, qtype.name, e_ours, how, e_ref,
                 e_ours / e_ref if e_ref else 1.0, ", bit-identical" if exact else ""))
        failures += not ok
        parts = slices(t)
        if len(parts) > 1:  # each expert's matrix on its own
            bad = [k for k, rows in parts
                   if rmse(ours_v[rows], x[rows]) > rmse(ref_v[rows], x[rows]) * (1 + margin) + 1e-12]
            print("%s %-28s %d slices, %d over the bound%s"
                  % ("ok  " if not bad else "FAIL", name, len(parts), len(bad), (": %s" % bad) if bad else ""))
            failures += len(bad) > 0
    print("%d quantized tensors checked, %d failures" % (checked, failures))
    return 1 if failures or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
