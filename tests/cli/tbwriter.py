"""A stand-in for TensorBoard's writers, standard library only: TFRecord
framing with masked CRC32C around Event protobufs, encoded by hand, field by
field as the real writers serialize them (docs/tensorboard.md#the-bytes).

- `simple_value`: PyTorch's SummaryWriter.add_scalar (default), tensorboardX,
  hence the Hugging Face Trainer and Lightning's TensorBoardLogger:
  Value{tag=1, simple_value=2 (fixed32)}.
- `float_val`: PyTorch add_scalar(new_style=True): Value{tag=1, tensor=8
  {dtype=1: DT_FLOAT, float_val=5 packed}, metadata=9{plugin_data=1
  {plugin_name=1: "scalars"}}} (no tensor_shape: shape ()).
- `double_val`: PyTorch add_scalar(new_style=True, double_precision=True):
  the same with dtype DT_DOUBLE and double_val=6 packed.
- `tensor_content`: TensorFlow 2 / Keras tf.summary.scalar through the C++
  writer: tensor{dtype=1, tensor_shape=2 (present, empty), tensor_content=4
  (4 little-endian bytes)}, metadata{plugin_data{plugin_name "scalars"},
  data_class=4: DATA_CLASS_SCALAR}.
Proto3 leaves out fields at their default: Event.step 0 is not written.
"""

import struct
import time

_POLY = 0x82F63B78
_TABLE = []
for _b in range(256):
    _c = _b
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload):
    head = struct.pack("<Q", len(payload))
    return (head + struct.pack("<I", masked_crc(head)) + payload +
            struct.pack("<I", masked_crc(payload)))


# ---- protobuf wire ---------------------------------------------------------

def varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(num, wt):
    return varint(num << 3 | wt)


def f_varint(num, n):
    return key(num, 0) + varint(n)


def f_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return key(num, 2) + varint(len(data)) + data


def f_double(num, x):
    return key(num, 1) + struct.pack("<d", x)


def f_float(num, x):
    return key(num, 5) + struct.pack("<f", x)


DT_FLOAT, DT_DOUBLE, DT_STRING = 1, 2, 7


def scalars_metadata(data_class=False):
    md = f_bytes(1, f_bytes(1, "scalars"))
    if data_class:
        md += f_varint(4, 1)
    return md


def v_simple(tag, x):
    return f_bytes(1, tag) + f_float(2, x)


def v_float_val(tag, x):
    t = f_varint(1, DT_FLOAT) + f_bytes(5, struct.pack("<f", x))
    return f_bytes(1, tag) + f_bytes(8, t) + f_bytes(9, scalars_metadata())


def v_double_val(tag, x):
    t = f_varint(1, DT_DOUBLE) + f_bytes(6, struct.pack("<d", x))
    return f_bytes(1, tag) + f_bytes(8, t) + f_bytes(9, scalars_metadata())


def v_tensor_content(tag, x, double=False, metadata=True):
    t = (f_varint(1, DT_DOUBLE if double else DT_FLOAT) + f_bytes(2, b"") +
         f_bytes(4, struct.pack("<d" if double else "<f", x)))
    v = f_bytes(1, tag) + f_bytes(8, t)
    if metadata:
        v += f_bytes(9, scalars_metadata(data_class=True))
    return v


def v_tensor_shaped(tag, dims, values):
    """A float tensor of the given shape under the scalars plugin."""
    shape = b"".join(f_bytes(2, f_varint(1, d)) for d in dims)
    t = (f_varint(1, DT_FLOAT) + f_bytes(2, shape) +
         f_bytes(4, b"".join(struct.pack("<f", x) for x in values)))
    return f_bytes(1, tag) + f_bytes(8, t) + f_bytes(9, scalars_metadata())


def v_histogram(tag, values):
    """add_histogram: Value{tag, histo=5: HistogramProto}."""
    h = (f_double(1, min(values)) + f_double(2, max(values)) +
         f_double(3, float(len(values))) + f_double(4, sum(values)) +
         f_double(5, sum(x * x for x in values)) +
         f_bytes(6, b"".join(struct.pack("<d", x) for x in (0.0, 1.0))) +
         f_bytes(7, b"".join(struct.pack("<d", x) for x in (1.0, 2.0))))
    return f_bytes(1, tag) + f_bytes(5, h)


def v_image(tag, png=b"\x89PNG\r\n\x1a\n" + b"\x00" * 40):
    """add_image: Value{tag, image=4: Image{height=1, width=2, colorspace=3,
    encoded_image_string=4}}."""
    img = f_varint(1, 2) + f_varint(2, 2) + f_varint(3, 3) + f_bytes(4, png)
    return f_bytes(1, tag) + f_bytes(4, img)


def v_text(tag, text):
    """add_text: a DT_STRING tensor of shape [1] under the text plugin."""
    t = (f_varint(1, DT_STRING) + f_bytes(2, f_bytes(2, f_varint(1, 1))) +
         f_bytes(8, text))
    md = f_bytes(1, f_bytes(1, "text"))
    return f_bytes(1, "%s/text_summary" % tag) + f_bytes(8, t) + f_bytes(9, md)


def event(step, values, wall_time=None):
    wall = time.time() if wall_time is None else wall_time
    e = f_double(1, wall)
    if step:
        e += f_varint(2, step)
    if values:
        e += f_bytes(5, b"".join(f_bytes(1, v) for v in values))
    return e


def file_version_event(wall_time=None):
    wall = time.time() if wall_time is None else wall_time
    return f_double(1, wall) + f_bytes(3, "brain.Event:2")


def event_file_name(seq=0, host="host", pid=1234):
    """PyTorch's: events.out.tfevents.<time>.<host>.<pid>.<n>"""
    return "events.out.tfevents.%010d.%s.%d.%d" % (1700000000 + seq, host, pid, seq)


class Writer:
    """Appends records to one event file, flushing each (as the trainers'
    writers do at flush() and close())."""

    def __init__(self, path, wall_time=None):
        self.path = path
        self.f = open(path, "ab")
        self.write_payload(file_version_event(wall_time))

    def write_payload(self, payload):
        self.f.write(record(payload))
        self.f.flush()

    def scalar(self, tag, step, x, style="simple_value", wall_time=None):
        v = {"simple_value": v_simple, "float_val": v_float_val,
             "double_val": v_double_val, "tensor_content": v_tensor_content}[style](tag, x)
        self.write_payload(event(step, [v], wall_time))

    def values(self, step, values, wall_time=None):
        self.write_payload(event(step, values, wall_time))

    def close(self):
        self.f.close()


def f32(x):
    """x rounded to float32, as simple_value and float_val store it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]
