"""Bytes per element of each dtype, by name: the one table every stage asks. No imports.

TensorFlow's enum names (``float``, ``half``), numpy's, JAX's and torch's (``torch.bfloat16``) all
come to a name here, so "float32 is 4 bytes" is one rule for readers, rules and capture alike.
"""

ALIASES = {"float": "float32", "double": "float64", "half": "float16",
           # the C++ names torch's profiler gives an op's inputs ("Input type": "c10::BFloat16", "long int")
           "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8", "unsigned char": "uint8",
           "unsigned int": "uint32", "unsigned short": "uint16", "complex<float>": "complex64",
           "complex<double>": "complex128", "complex<c10::half>": "complex32"}
# What is not here (string, resource, variant) has no fixed size.
ITEM_BYTES = {"float32": 4, "float64": 8, "int32": 4, "uint8": 1, "int16": 2, "int8": 1, "complex64": 8, "int64": 8,
              "bool": 1, "qint8": 1, "quint8": 1, "qint32": 4, "bfloat16": 2, "qint16": 2, "quint16": 2,
              "uint16": 2, "complex128": 16, "float16": 2, "uint32": 4, "uint64": 8, "float8_e5m2": 1,
              "float8_e4m3fn": 1, "float8_e4m3fnuz": 1, "float8_e4m3b11fnuz": 1, "float8_e5m2fnuz": 1,
              "int4": 1, "uint4": 1, "int2": 1, "uint2": 1, "float4_e2m1fn": 1, "complex32": 4}

# The floating-point ones, which a step computes in (a precision)
FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "float8_e5m2", "float8_e4m3fn"})


def canonical(name: str) -> str:
    """"float" -> "float32", "torch.bfloat16" -> "bfloat16", "c10::Half" -> "float16": the name the table knows."""
    name = name.rpartition(".")[2].lower()
    name = name[len("c10::"):] if name.startswith("c10::") else name
    return ALIASES.get(name, name)


def item_bytes(name: str) -> int:
    """Bytes per element of a dtype by name; 0 when it has no fixed size (or is unknown)."""
    return ITEM_BYTES.get(canonical(name), 0)
