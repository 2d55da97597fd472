"""Plain data between the grader's checker and a learner's kernel, without pickle.

Both sides speak in frames over one socket:

    b"CKW1" | header length (8 bytes) | buffers length (8 bytes) | header (JSON) | buffers

The header is a JSON object; arrays and tensors travel as raw bytes in the buffers, named by
their index. Values are encoded as:

- None, bools, ints, floats (NaN and infinities included) and strings as themselves;
- everything else as a list whose first item is a tag: ["tuple", [...]], ["list", [...]],
  ["dict", [[key, value], ...]], ["set", [...]], ["nd", dtype, shape, buffer], ["tensor", dtype,
  shape, buffer, requires_grad], ["np", dtype, buffer] (a numpy scalar), ["size", [...]], ...;
- random generators (numpy's, torch's, Python's) as their state, so that a learner's function
  draws from the generator a check gives it, and the check's generator moves on as it would have;
- any other object of the learner's as ["ref", id, kind, type name, repr, ...]: a handle that
  the checker can call or ask about (see `remote`), never the object itself.

Decoding never runs code that came with the data: it only builds the types listed here, checks
every size against the bytes that arrived, and refuses anything else (`WireError`). The grader
decodes what a learner's kernel sends, so decoding is also bounded in what it costs, whatever the
message holds (a limit of L bytes, the message limit):

- before the header's JSON is parsed, its items are counted (commas and brackets): at 64 bytes
  each in the grader they must fit in L, so a header of a million empty lists is refused unparsed;
- every value decoded is charged what it will take in the grader: 64 bytes an item, a string's
  length, an array's or tensor's bytes, a `range` 48 bytes an element (what numpy takes to turn it
  into an array) - all against L, before anything is materialised;
- nesting is at most MAX_DEPTH levels, integers at most MAX_INT_BITS bits;
- a set, frozenset, dict, Counter, OrderedDict or defaultdict is built only if no more than
  MAX_SAME_HASH of its keys share a hash value: keys made to collide (k * (2**61 - 1)) would make
  building it quadratic, in C code that no time limit can interrupt;
- any failure while parsing or decoding (a ValueError, RecursionError, MemoryError, ...) is a
  WireError: the failure of that one request, never the grader's.
"""

from __future__ import annotations

import json
import math
import random
import socket
import struct
from collections import Counter, OrderedDict, defaultdict
from typing import Any, Callable

MAGIC = b"CKW1"
PREFIX = struct.Struct("<4sQQ")
MAX_DEPTH = 64  # nesting of lists/dicts/tuples a value may have
MAX_FRAME = 256 * 2**20  # no frame is larger than this, whatever the limits say
ITEM_BYTES = 64  # what one decoded item (a number, a list, a reference) is charged in the grader
RANGE_ITEM_BYTES = 48  # what one element of a range takes when numpy or torch turns it into an array
MAX_INT_BITS = 4096  # integers beyond +-2**4096 are refused (JSON itself stops at 4300 digits)
MAX_SAME_HASH = 16  # keys of one set or dict that may share a hash value
MAX_STATE_CHARS = 65536  # a numpy generator's state, as JSON text

TORCH_DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool",
)
NUMPY_KINDS = "biufcUS"  # bool, int, uint, float, complex, str, bytes (fixed width)
# defaultdict factories that can travel by name
FACTORIES = {"int": int, "float": float, "list": list, "set": set, "dict": dict, "str": str, "tuple": tuple}


class WireError(ValueError):
    """A value that cannot be sent, or data that is not a valid message."""


# --- frames -----------------------------------------------------------------------------------------


def pack(header: dict, buffers: list[bytes] = ()) -> bytes:
    header = dict(header, buffers=[len(b) for b in buffers])
    text = json.dumps(header, separators=(",", ":")).encode()
    total = sum(len(b) for b in buffers)
    if len(text) + total > MAX_FRAME:
        raise WireError(f"the message is too large ({(len(text) + total) / 2**20:.0f} MB)")
    return b"".join([PREFIX.pack(MAGIC, len(text), total), text, *buffers])


def unpack_prefix(prefix: bytes, limit: int = MAX_FRAME) -> tuple[int, int]:
    magic, n_header, n_buffers = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise WireError("not a grader message")
    if n_header + n_buffers > min(limit, MAX_FRAME):
        raise WireError(
            f"the message is too large ({(n_header + n_buffers) / 2**20:.0f} MB; "
            f"the limit is {min(limit, MAX_FRAME) / 2**20:.0f} MB)"
        )
    return n_header, n_buffers


def unpack_body(body: bytes, n_header: int, limit: int = MAX_FRAME) -> tuple[dict, list[bytes]]:
    """The header and buffers of a frame's body; the header's parsed size is charged against `limit`
    (ITEM_BYTES per item, counted from its commas and brackets before parsing)."""
    items = body.count(b",", 0, n_header) + body.count(b"[", 0, n_header) + body.count(b"{", 0, n_header) + 1
    if items * ITEM_BYTES > min(limit, MAX_FRAME):
        raise WireError(
            f"the message holds too many items (about {items:,}; at most "
            f"{min(limit, MAX_FRAME) // ITEM_BYTES:,} fit in the grader's limit)"
        )
    try:
        header = json.loads(body[:n_header])
    except (ValueError, RecursionError, MemoryError) as err:  # JSONDecodeError, UnicodeDecodeError, huge ints
        raise WireError(f"a garbled message ({type(err).__name__}: {str(err)[:200]})") from None
    sizes = header.get("buffers") if isinstance(header, dict) else None
    if (
        not isinstance(sizes, list)
        or not all(type(n) is int and n >= 0 for n in sizes)
        or sum(sizes) != len(body) - n_header
    ):
        raise WireError("a garbled message (its buffers do not add up)")
    buffers, at = [], n_header
    for n in sizes:
        buffers.append(body[at : at + n])
        at += n
    return header, buffers


def send(sock: socket.socket, header: dict, buffers: list[bytes] = ()) -> None:
    sock.sendall(pack(header, buffers))


def recv_blocking(sock: socket.socket) -> tuple[dict, list[bytes]]:
    """One message, waiting as long as it takes (the kernel's side). EOFError when the peer is gone."""
    n_header, n_buffers = unpack_prefix(_recv_exact(sock, PREFIX.size))
    return unpack_body(_recv_exact(sock, n_header + n_buffers), n_header)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("the other side closed the connection")
        got += k
    return bytes(buf)


# --- values -------------------------------------------------------------------------------------------


class Encoder:
    """Turns a value into JSON-able data plus buffers.

    `make_ref(obj)` is called for objects that are not plain data; without it they are refused.
    Random generators found in the value are remembered in `generators` (to send their new state back).
    """

    def __init__(self, make_ref: Callable[[Any], list] | None = None, limit: int = MAX_FRAME):
        self.make_ref, self.limit = make_ref, limit
        self.buffers: list[bytes] = []
        self.size = 0
        self.generators: list[Any] = []  # random generators met, in order
        self.tensors: list[Any] = []  # tensors met, in order (the decoder meets them in the same order)

    def _buffer(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise WireError(
                f"the value is too large to pass between the learner's code and the checks "
                f"(over {self.limit / 2**20:.0f} MB)"
            )
        self.buffers.append(data)
        return len(self.buffers) - 1

    def encode(self, value: Any, depth: int = 0) -> Any:
        kind = type(value)
        if value is None or kind is bool or kind is str:
            return value
        if kind is int:
            return value
        if kind is float:
            return value if math.isfinite(value) else ["float", repr(value)]
        if depth > MAX_DEPTH:
            raise WireError(f"the value is nested more than {MAX_DEPTH} levels deep")
        d = depth + 1
        if kind is list:
            return ["list", [self.encode(v, d) for v in value]]
        if kind is tuple:
            return ["tuple", [self.encode(v, d) for v in value]]
        if kind is dict:
            return ["dict", [[self.encode(k, d), self.encode(v, d)] for k, v in value.items()]]
        np, torch = _numpy(), _torch()
        if torch is not None:
            if isinstance(value, torch.Tensor):
                return self._tensor(value, torch)
            if kind is torch.Size:
                return ["size", [int(n) for n in value]]
            if kind is torch.dtype:
                return ["dtype", str(value).replace("torch.", "")]
            if kind is torch.device:
                return ["device", str(value)]
            if kind is torch.Generator:
                self.generators.append(value)
                return ["tgen", str(value.device), self._buffer(value.get_state().numpy().tobytes())]
        if np is not None:
            if isinstance(value, np.ndarray):
                return self._array(value, np, d)
            if isinstance(value, np.generic):
                if value.dtype.kind not in NUMPY_KINDS:
                    return self._other(value)
                return ["np", value.dtype.str, self._buffer(value.tobytes())]
            if isinstance(value, np.random.Generator):
                self.generators.append(value)
                return ["npgen", json.dumps(value.bit_generator.state, default=_json_state)]
            if isinstance(value, np.random.RandomState):
                self.generators.append(value)
                name, keys, pos, has_gauss, cached = value.get_state()
                return [
                    "nprs",
                    name,
                    self._buffer(keys.astype("<u4").tobytes()),
                    int(pos),
                    int(has_gauss),
                    float(cached),
                ]
        if kind is random.Random:
            self.generators.append(value)
            version, state, gauss = value.getstate()
            return ["pyrandom", version, list(state), gauss]
        if value is Ellipsis:
            return ["ellipsis"]
        if kind is bytes:
            return ["bytes", self._buffer(value)]
        if kind is complex:
            return ["complex", repr(value.real), repr(value.imag)]
        if kind is set or kind is frozenset:
            return [kind.__name__, [self.encode(v, d) for v in value]]
        if kind is range:
            return ["range", value.start, value.stop, value.step]
        if kind is slice:
            return ["slice", self.encode(value.start, d), self.encode(value.stop, d), self.encode(value.step, d)]
        if kind is Counter or kind is OrderedDict:
            return [kind.__name__, [[self.encode(k, d), self.encode(v, d)] for k, v in value.items()]]
        if kind is defaultdict:
            factory = next((n for n, f in FACTORIES.items() if f is value.default_factory), None)
            return ["defaultdict", factory, [[self.encode(k, d), self.encode(v, d)] for k, v in value.items()]]
        # Subclasses of the plain types (a namedtuple, or an int that claims to equal everything)
        # travel as their plain value; the methods they add stay behind.
        if isinstance(value, tuple):
            return ["tuple", [self.encode(v, d) for v in tuple.__iter__(value)]]
        if isinstance(value, list):
            return ["list", [self.encode(v, d) for v in list.__iter__(value)]]
        if isinstance(value, dict):
            return ["dict", [[self.encode(k, d), self.encode(v, d)] for k, v in dict.items(value)]]
        if isinstance(value, (set, frozenset)):
            return ["frozenset" if isinstance(value, frozenset) else "set", [self.encode(v, d) for v in set(value)]]
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, int):
            return int.__int__(value)
        if isinstance(value, float):
            return self.encode(float.__float__(value), depth)
        if isinstance(value, str):
            return str.__str__(value)
        return self._other(value)

    def _other(self, value: Any) -> list:
        if self.make_ref is None:
            raise WireError(
                f"the grader can only pass plain data (numbers, strings, lists, tuples, dicts, numpy "
                f"arrays, tensors) to a learner's code, not {type(value).__name__}"
            )
        return self.make_ref(value)

    def _tensor(self, t, torch) -> list:
        if t.layout != torch.strided or t.is_quantized or getattr(t, "is_nested", False):
            return self._other(t)
        name = str(t.dtype).replace("torch.", "")
        if name not in TORCH_DTYPES:
            return self._other(t)
        requires_grad = bool(t.requires_grad)
        self.tensors.append(t)
        data = t.detach().cpu().resolve_conj().resolve_neg().contiguous()
        if name == "bfloat16":
            data = data.view(torch.int16)
        return ["tensor", name, list(t.shape), self._buffer(data.numpy().tobytes()), requires_grad]

    def _array(self, a, np, depth: int) -> list:
        if a.dtype.kind == "O":
            return ["ndobj", list(a.shape), [self.encode(v, depth) for v in a.ravel(order="C").tolist()]]
        if a.dtype.kind not in NUMPY_KINDS or a.dtype.fields is not None:
            return self._other(a)
        return ["nd", a.dtype.str, list(a.shape), self._buffer(np.ascontiguousarray(a).tobytes())]


def _json_state(value):
    """numpy's generator states hold numpy integers and arrays: as plain ints and lists."""
    np = _numpy()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.integer):
        return int(value)
    raise TypeError(type(value).__name__)


class Decoder:
    """Builds values from `encode`'s output. `resolve_ref(item)` turns a ["ref", ...] into an object.

    `limit` is what the decoded value may cost in this process, in bytes (see the module's notes)."""

    def __init__(
        self,
        buffers: list[bytes],
        resolve_ref: Callable[[list], Any] | None = None,
        grad: bool = True,
        limit: int = MAX_FRAME,
    ):
        self.buffers, self.resolve_ref = buffers, resolve_ref
        self.grad = grad  # False: tensors never require grad (the caller attaches them to a graph itself)
        self.generators: list[Any] = []
        self.tensors: list[Any] = []
        self.limit, self.spent = limit, 0

    def _charge(self, n_bytes: int, what: str = "the value") -> None:
        self.spent += n_bytes
        if self.spent > self.limit:
            raise WireError(
                f"{what} is too large to pass to the checks: it would take over "
                f"{self.limit / 2**20:.0f} MB in the grader"
            )

    def _buf(self, i: Any) -> bytes:
        if type(i) is not int or not 0 <= i < len(self.buffers):
            raise WireError("a garbled message (no such buffer)")
        return self.buffers[i]

    def decode(self, item: Any, depth: int = 0) -> Any:
        try:
            return self._value(item, depth)
        except WireError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, OverflowError, RuntimeError, MemoryError) as err:
            # RecursionError is a RuntimeError
            raise WireError(f"a garbled message ({type(err).__name__}: {str(err)[:200]})") from None

    def _value(self, item: Any, depth: int) -> Any:
        kind = type(item)
        if item is None or kind in (bool, float):
            self._charge(ITEM_BYTES)
            return item
        if kind is int:
            if item.bit_length() > MAX_INT_BITS:
                raise WireError(
                    f"an integer of {item.bit_length()} bits; at most {MAX_INT_BITS} bits can pass to the checks"
                )
            self._charge(ITEM_BYTES)
            return item
        if kind is str:
            self._charge(ITEM_BYTES + len(item))
            return item
        if kind is not list or not item or type(item[0]) is not str:
            raise WireError("a garbled message (unknown item)")
        if depth > MAX_DEPTH + 2:
            raise WireError("a garbled message (nested too deeply)")
        self._charge(ITEM_BYTES)
        tag, args, d = item[0], item[1:], depth + 1
        try:
            return self._decode(tag, args, d)
        except WireError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, OverflowError, RuntimeError, MemoryError) as err:
            raise WireError(f"a garbled message ({tag}: {type(err).__name__}: {str(err)[:200]})") from None

    def _items(self, items: Any, d: int) -> list:
        if type(items) is not list:
            raise WireError("a garbled message (expected a list)")
        self._charge(8 * len(items))
        return [self._value(v, d) for v in items]

    def _pairs(self, pairs: Any, d: int) -> list[tuple]:
        if type(pairs) is not list or not all(type(p) is list and len(p) == 2 for p in pairs):
            raise WireError("a garbled message (expected pairs)")
        self._charge(ITEM_BYTES * len(pairs))
        return [(self._value(k, d), self._value(v, d)) for k, v in pairs]

    def _keys(self, keys, what: str):
        """`keys` once it is known that building a hashed container of them costs no more than linear time."""
        if len(keys) > MAX_SAME_HASH:
            hashes = sorted(hash(k) for k in keys)  # TypeError for an unhashable key: a garbled message
            run = longest = 1
            for a, b in zip(hashes, hashes[1:], strict=False):
                run = run + 1 if a == b else 1
                longest = max(longest, run)
            if longest > MAX_SAME_HASH:
                raise WireError(
                    f"a {what} whose keys collide: {longest} of its {len(keys)} keys share one hash value "
                    f"(at most {MAX_SAME_HASH} may); building it would take the grader quadratic time"
                )
        return keys

    def _mapping(self, pairs: Any, d: int, what: str) -> list[tuple]:
        decoded = self._pairs(pairs, d)
        self._keys([k for k, _ in decoded], what)
        return decoded

    def _decode(self, tag: str, args: list, d: int) -> Any:
        if tag == "list":
            return self._items(args[0], d)
        if tag == "tuple":
            return tuple(self._items(args[0], d))
        if tag == "dict":
            return dict(self._mapping(args[0], d, "dict"))
        if tag == "float":
            if args[0] not in ("nan", "inf", "-inf"):
                raise WireError("a garbled message (float)")
            return float(args[0])
        if tag == "tensor":
            return self._tensor(*args)
        if tag == "nd":
            np = _require_numpy()
            dtype, shape, buf = _np_dtype(args[0]), _shape(args[1]), self._buf(args[2])
            if len(buf) != _count(shape) * dtype.itemsize:
                raise WireError("a garbled message (array size)")
            self._charge(len(buf), "an array")
            return np.frombuffer(buf, dtype=dtype).reshape(shape).copy()
        if tag == "ndobj":
            np = _require_numpy()
            shape = _shape(args[0])
            if type(args[1]) is not list or len(args[1]) != _count(shape):
                raise WireError("a garbled message (array size)")
            values = self._items(args[1], d)
            out = np.empty(len(values), dtype=object)
            out[:] = values if values else out[:]
            return out.reshape(shape)
        if tag == "np":
            np = _require_numpy()
            dtype, buf = _np_dtype(args[0]), self._buf(args[1])
            if len(buf) != dtype.itemsize:
                raise WireError("a garbled message (scalar size)")
            return np.frombuffer(buf, dtype=dtype)[0]
        if tag == "ref":
            if self.resolve_ref is None:
                raise WireError("a garbled message (a reference where none may be)")
            return self.resolve_ref(args)
        if tag == "ellipsis":
            return Ellipsis
        if tag == "bytes":
            self._charge(len(self._buf(args[0])), "a bytes value")
            return bytes(self._buf(args[0]))
        if tag == "complex":
            if not all(type(a) is str and len(a) < 64 for a in args[:2]):
                raise WireError("a garbled message (complex)")
            return complex(float(args[0]), float(args[1]))
        if tag in ("set", "frozenset"):
            values = self._keys(self._items(args[0], d), tag)
            return set(values) if tag == "set" else frozenset(values)
        if tag == "range":
            if len(args) != 3 or not all(type(a) is int and a.bit_length() <= 64 for a in args):
                raise WireError("a garbled message (range)")
            value = range(args[0], args[1], args[2])
            self._charge(RANGE_ITEM_BYTES * len(value), f"a range of {len(value):,} numbers")
            return value
        if tag == "slice":
            return slice(*(self._value(a, d) for a in args[:3]))
        if tag == "Counter":
            return Counter(dict(self._mapping(args[0], d, "Counter")))
        if tag == "OrderedDict":
            return OrderedDict(self._mapping(args[0], d, "OrderedDict"))
        if tag == "defaultdict":
            factory = FACTORIES.get(args[0]) if args[0] is not None else None
            return defaultdict(factory, self._mapping(args[1], d, "defaultdict"))
        if tag == "size":
            return _require_torch().Size(_shape(args[0]))
        if tag == "dtype":
            if args[0] not in TORCH_DTYPES:
                raise WireError("a garbled message (dtype)")
            return getattr(_require_torch(), args[0])
        if tag == "device":
            return _require_torch().device(str(args[0]))
        if tag == "tgen":
            torch = _require_torch()
            g = torch.Generator(device="cpu")
            self._charge(len(self._buf(args[1])), "a generator's state")
            g.set_state(torch.frombuffer(bytearray(self._buf(args[1])), dtype=torch.uint8))
            self.generators.append(g)
            return g
        if tag == "npgen":
            np = _require_numpy()
            if type(args[0]) is not str or len(args[0]) > MAX_STATE_CHARS:
                raise WireError("a garbled message (generator state)")
            state = json.loads(args[0])
            name = state.get("bit_generator") if isinstance(state, dict) else None
            if name not in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"):
                raise WireError("a garbled message (generator)")
            bit = getattr(np.random, name)()
            bit.state = state
            g = np.random.Generator(bit)
            self.generators.append(g)
            return g
        if tag == "nprs":
            np = _require_numpy()
            rs = np.random.RandomState()
            keys = np.frombuffer(self._buf(args[1]), dtype="<u4").copy()
            rs.set_state((str(args[0]), keys, int(args[2]), int(args[3]), float(args[4])))
            self.generators.append(rs)
            return rs
        if tag == "pyrandom":
            if type(args[1]) is not list or len(args[1]) > 1000:
                raise WireError("a garbled message (generator state)")
            r = random.Random()
            r.setstate((int(args[0]), tuple(int(x) for x in args[1]), None if args[2] is None else float(args[2])))
            self.generators.append(r)
            return r
        raise WireError(f"a garbled message (unknown type {tag!r})")

    def _tensor(self, dtype_name: Any, shape: Any, index: Any, requires_grad: Any):
        torch = _require_torch()
        if dtype_name not in TORCH_DTYPES:
            raise WireError("a garbled message (dtype)")
        dtype, shape, buf = getattr(torch, dtype_name), _shape(shape), self._buf(index)
        n = _count(shape)
        if len(buf) != n * torch.empty((), dtype=dtype).element_size():
            raise WireError("a garbled message (tensor size)")
        self._charge(len(buf), "a tensor")
        t = torch.empty(shape, dtype=dtype) if n == 0 else torch.frombuffer(bytearray(buf), dtype=dtype).reshape(shape)
        if self.grad and requires_grad is True and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        self.tensors.append(t)
        return t


def set_generator_state(target: Any, source: Any) -> None:
    """Make `target` continue where `source` (the same kind of generator, decoded) stopped."""
    np, torch = _numpy(), _torch()
    if torch is not None and isinstance(target, torch.Generator) and isinstance(source, torch.Generator):
        target.set_state(source.get_state())
    elif np is not None and isinstance(target, np.random.Generator) and isinstance(source, np.random.Generator):
        if type(target.bit_generator) is not type(source.bit_generator):
            raise WireError("a garbled message (generator kind)")
        target.bit_generator.state = source.bit_generator.state
    elif np is not None and isinstance(target, np.random.RandomState) and isinstance(source, np.random.RandomState):
        target.set_state(source.get_state())
    elif isinstance(target, random.Random) and isinstance(source, random.Random):
        target.setstate(source.getstate())
    else:
        raise WireError("a garbled message (generator kind)")


def _shape(value: Any) -> tuple[int, ...]:
    if type(value) is not list or len(value) > 64 or not all(type(n) is int and n >= 0 for n in value):
        raise WireError("a garbled message (shape)")
    return tuple(value)


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    if n > MAX_FRAME:
        raise WireError("a garbled message (shape too large)")
    return n


def _np_dtype(text: Any):
    np = _require_numpy()
    if (
        type(text) is not str
        or len(text) < 3
        or text[0] not in "<>|="
        or text[1] not in NUMPY_KINDS
        or not text[2:].isdigit()
    ):
        raise WireError("a garbled message (dtype)")
    return np.dtype(text)


def _numpy():
    import sys

    return sys.modules.get("numpy")


def _torch():
    import sys

    return sys.modules.get("torch")


def _require_numpy():
    import numpy

    return numpy


def _require_torch():
    import torch

    return torch
