"""Per-layer parameter counts with the arithmetic that explains them.

``model.summary()`` says a Dense layer has 3,212,288 parameters; the record
also says why: ``(3136+1)*1024 = 3,212,288``. Derivations come from variable
shapes (and class, for the formula's layout) only, never values. Every
derivation is evaluated and checked against the shapes; a formula that does
not add up falls back to the plain sum of variable shapes.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from tb_modelmem.schema import names, records

Rule = Callable[[Any], Optional[str]]  # layer -> arithmetic expression, or None if it does not apply


def layer_records(model: Any) -> List[records.LayerRecord]:
    """One record per leaf layer of a Keras model or layer, nested models flattened to paths."""
    out = []
    for path, layer, own in _walk(model, model.name):
        params, derivation = derive(layer, own)
        out.append(records.LayerRecord(name=path, class_name=type(layer).__name__, params=params,
                                       derivation=derivation))
    return out


def scope_layer_records(variables: Iterable[records.VariableRecord]) -> List[records.LayerRecord]:
    """Layers of a source without Keras layer objects (TF1 graph, checkpoint, old payload):
    one per variable scope, from stored shapes. A kernel + bias scope reads as an affine
    layer, "(5*5*1+1)*32 = 832"; anything else as the plain sum of its shapes. A shape with
    an unknown (-1) dimension (a TF1 variable of unknown shape) adds no parameters but a
    "?" term, "3*4 + ?*4 = 12 + ?", so the count is never pulled down by a -1."""
    by_layer: Dict[str, Dict[str, List[int]]] = {}
    for v in variables:
        if v.role in (names.WEIGHT, names.NON_TRAINABLE):
            by_layer.setdefault(v.layer, {})[v.name.rsplit("/", 1)[-1]] = [int(d) for d in v.shape]
    out = []
    for layer, shapes in by_layer.items():
        unknown = any(d < 0 for shape in shapes.values() for d in shape)
        params = sum(math.prod(shape) for shape in shapes.values() if all(d >= 0 for d in shape))
        if set(shapes) <= {"kernel", "bias"} and "kernel" in shapes and not unknown:
            expression = _affine_terms(shapes["kernel"], shapes.get("bias"))
        else:
            expression = " + ".join("*".join("?" if d < 0 else str(d) for d in shape) or "1"
                                    for shape in shapes.values())
        total = f"{params:,} + ?" if unknown else f"{params:,}"
        out.append(records.LayerRecord(name=layer, class_name="", params=params,
                                       derivation=f"{expression} = {total}"))
    return out


def variable_layers(model: Any) -> Dict[int, str]:
    """id(variable) -> path of the leaf layer that owns it (same paths as ``layer_records``)."""
    owner: Dict[int, str] = {}
    for path, layer, own in _walk(model, model.name):
        for var in (layer.variables if own is None else own):
            owner.setdefault(id(var), path)
    return owner


def sublayers(layer: Any, recursive: bool = False) -> List[Any]:
    """Keras 3 sublayers of ``layer`` (Sequential, Functional, or layers nested in attributes)."""
    return list(layer._flatten_layers(include_self=False, recursive=recursive))


def derive(layer: Any, variables: Optional[Sequence[Any]] = None) -> Tuple[int, str]:
    """(params, derivation) of ``layer``, or of just ``variables`` of it when given."""
    weights = list(layer.weights if variables is None else variables)
    params = sum(_size(w) for w in weights)
    if not weights:
        return 0, ""
    expression = None
    rule = _rule_for(layer) if variables is None else None
    if rule is not None:
        expression = rule(layer)
        if expression is not None and evaluate(expression) != params:
            expression = None  # e.g. extra LoRA or quantization variables: use the plain sum
    if expression is None:
        expression = " + ".join(_dims(w) for w in weights)
    return params, f"{expression} = {params:,}"


def evaluate(expression: str) -> int:
    """Value of a derivation's arithmetic (integers, +, *, parentheses only)."""
    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return value(node.left) + value(node.right)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return value(node.left) * value(node.right)
        raise ValueError(f"not a derivation: {expression!r}")

    return value(ast.parse(expression, mode="eval"))


def _walk(layer: Any, path: str) -> Iterator[Tuple[str, Any, Optional[List[Any]]]]:
    """Yield (path, layer, own_variables) for leaves; own_variables is None for a whole
    leaf, or a container's variables that none of its sublayers hold."""
    children = [] if _rule_for(layer) is not None else sublayers(layer)
    if not children:
        yield path, layer, None
        return
    below = {id(v) for child in children for v in child.variables}
    own = [v for v in layer.weights if id(v) not in below]
    if own:
        yield path, layer, own
    for child in children:
        if type(child).__name__ != "InputLayer":  # a placeholder, not a layer of the model
            yield from _walk(child, f"{path}/{child.name}")


def layer_paths(model: Any) -> List[Tuple[str, Any]]:
    """(path, layer) of ``model`` and every layer below it down to the leaves ``layer_records``
    names, with the same paths: containers too, so what a container runs outside its sublayers is
    its own (a profile's layer annotations, ``capture.torch_profile``)."""
    out: List[Tuple[str, Any]] = []

    def visit(layer: Any, path: str) -> None:
        out.append((path, layer))
        for child in ([] if _rule_for(layer) is not None else sublayers(layer)):
            if type(child).__name__ != "InputLayer":
                visit(child, f"{path}/{child.name}")

    visit(model, model.name)
    return out


def _rule_for(layer: Any) -> Optional[Rule]:
    for cls in type(layer).__mro__:
        if cls.__name__ in _RULES:
            return _RULES[cls.__name__]
    return None


def _weights(layer: Any) -> Dict[str, Any]:
    return {w.name: w for w in layer.weights}


def _shape(var: Any) -> List[int]:
    return [int(d) for d in var.shape]


def _size(var: Any) -> int:
    return math.prod(_shape(var))


def _dims(var: Any) -> str:
    return "*".join(str(d) for d in _shape(var)) or "1"


def _affine_terms(kernel: List[int], bias: Optional[List[int]]) -> str:
    """"(fan_in+1)*fan_out" when the bias has the kernel's trailing (output) dims."""
    if bias is None:
        return "*".join(map(str, kernel))
    split = len(kernel) - len(bias)
    if split > 0 and kernel[split:] == bias:
        return f"({'*'.join(map(str, kernel[:split]))}+1)*{'*'.join(map(str, bias))}"
    return f"{'*'.join(map(str, kernel))} + {'*'.join(map(str, bias))}"


def _affine(layer: Any) -> Optional[str]:
    """Dense, Conv1D/2D/3D, EinsumDense: kernel (+ bias)."""
    w = _weights(layer)
    if set(w) - {"kernel", "bias"} or "kernel" not in w:
        return None
    return _affine_terms(_shape(w["kernel"]), _shape(w["bias"]) if "bias" in w else None)


def _conv_transpose(layer: Any) -> Optional[str]:
    """Kernel is (*k, filters, in): "(k*k*in+1)*filters"."""
    w = _weights(layer)
    if set(w) - {"kernel", "bias"} or "kernel" not in w:
        return None
    *k, filters, fan_in = _shape(w["kernel"])
    return _affine_terms(k + [fan_in, filters], [filters] if "bias" in w else None)


def _depthwise(layer: Any) -> Optional[str]:
    """Kernel (*k, in, multiplier), bias in*multiplier: "(k*k+1)*in*multiplier"."""
    w = _weights(layer)
    if set(w) - {"kernel", "bias"} or "kernel" not in w:
        return None
    *k, channels, multiplier = _shape(w["kernel"])
    spatial = "*".join(map(str, k))
    return f"({spatial}+1)*{channels}*{multiplier}" if "bias" in w else f"{spatial}*{channels}*{multiplier}"


def _separable(layer: Any) -> Optional[str]:
    """Depthwise k*k*in*multiplier, then pointwise (in*multiplier+1)*filters."""
    w = _weights(layer)
    if "depthwise_kernel" not in w or "pointwise_kernel" not in w:
        return None
    *k, channels, multiplier = _shape(w["depthwise_kernel"])
    filters = _shape(w["pointwise_kernel"])[-1]
    pointwise = _affine_terms([channels, multiplier, filters], [filters] if "bias" in w else None)
    return f"{'*'.join(map(str, k))}*{channels}*{multiplier} + {pointwise}"


def _embedding(layer: Any) -> Optional[str]:
    w = _weights(layer)
    return _dims(w["embeddings"]) if set(w) == {"embeddings"} else None


def _normalization(layer: Any) -> Optional[str]:
    """BatchNormalization gamma, beta, moving mean/variance; LayerNormalization gamma, beta."""
    shapes = [_shape(w) for w in layer.weights]
    if any(s != shapes[0] for s in shapes):
        return None
    return f"{len(shapes)}*{'*'.join(map(str, shapes[0])) or '1'}"


def _recurrent(layer: Any) -> Optional[str]:
    """gates*(in*units + units*units + biases*units); GRU reset_after has 2 bias vectors."""
    w = _weights(getattr(layer, "cell", layer))
    if "kernel" not in w or "recurrent_kernel" not in w or set(w) - {"kernel", "recurrent_kernel", "bias"}:
        return None
    fan_in, width = _shape(w["kernel"])
    units = _shape(w["recurrent_kernel"])[0]
    gates = width // units
    terms = [f"{fan_in}*{units}", f"{units}*{units}"]
    if "bias" in w:
        biases = _size(w["bias"]) // width
        terms.append(f"{biases}*{units}" if biases > 1 else str(units))
    inner = "+".join(terms)
    return f"{gates}*({inner})" if gates > 1 else inner


def _attention(layer: Any) -> Optional[str]:
    """Query, key, value (and gate) projections plus the output projection, each affine."""
    parts = [_affine(sub) for sub in sublayers(layer) if sub.weights]
    known = [part for part in parts if part is not None]
    return " + ".join(known) if known and len(known) == len(parts) else None


_RULES: Dict[str, Rule] = {
    "Dense": _affine,
    "EinsumDense": _affine,
    "BaseConv": _affine,
    "BaseConvTranspose": _conv_transpose,
    "BaseDepthwiseConv": _depthwise,
    "BaseSeparableConv": _separable,
    "Embedding": _embedding,
    "BatchNormalization": _normalization,
    "LayerNormalization": _normalization,
    "LSTM": _recurrent,
    "GRU": _recurrent,
    "SimpleRNN": _recurrent,
    "MultiHeadAttention": _attention,
}
